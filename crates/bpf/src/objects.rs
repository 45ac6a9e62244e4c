//! The compiled BPF objects, one per program role.

/// Lab generator: run with `BPF_F_TEST_XDP_LIVE_FRAMES`, program `lab_gen`.
pub const GEN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/gen.bpf.o"));
/// Lab receiver: count and drop, program `lab_recv`.
pub const RECV: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/recv.bpf.o"));
/// Drop-only sink, program `lab_sink` (generator benchmark).
pub const SINK: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sink.bpf.o"));
/// FIB lookup probe, program `fib_probe` (the layout contract test).
pub const FIB_PROBE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fib_probe.bpf.o"));
/// The same with the compact IPv6 FIB layout.
pub const FIB_PROBE_FIB6_COMPACT: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/fib_probe_fib6_compact.bpf.o"));
/// The router's fast path, program `router`.
pub const ROUTER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/router.bpf.o"));
/// The same with the compact IPv6 FIB layout (`FIB6_COMPACT`).
pub const ROUTER_FIB6_COMPACT: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/router_fib6_compact.bpf.o"));
/// The bench's reference: bpf_fib_lookup + bpf_redirect, program `ref_fwd`.
pub const REF_FWD: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ref_fwd.bpf.o"));
/// The machine's XDP limit: fixed MACs, devmap redirect, program
/// `ref_redirect` (lab run's xdp-redirect DUT).
pub const REF_REDIRECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ref_redirect.bpf.o"));
/// XDP's own cost: every frame passed, program `ref_pass` (lab run's
/// xdp-pass DUT).
pub const REF_PASS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ref_pass.bpf.o"));
/// Verdict cache shapes, programs `fw_key_only`, `fw_lru`, `fw_direct`
/// (bench firewall-cache).
pub const FW_CACHE_PROBE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fw_cache_probe.bpf.o"));
/// What finding a connection costs: the conntrack kfuncs against a hash of
/// our own (bpf/probe/ct_probe.bpf.c, `linerate bench conntrack`).
pub const CT_PROBE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ct_probe.bpf.o"));
