//! What the BPF probe benches share (`fw_cache`, `conntrack`): flow `i`'s
//! frame, and rounds of the sampled frames through several programs side by
//! side (BPF_PROG_TEST_RUN), each round's mean per program.
use anyhow::Result;
use linerate_bpf::test_run;
use serde::Serialize;
use std::os::fd::AsFd;

/// Flow `i`'s frame: IPv4 UDP 10.x.y.z:(1000 + i % 50000) ->
/// 198.19.0.1:53, 18 bytes of payload (a 60-byte frame).
pub fn udp_frame(i: u32) -> Vec<u8> {
    let mut f = Vec::new();
    let src = (10u32 << 24) | (i & 0x00ff_ffff);
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(src.to_be_bytes(), [198, 19, 0, 1], 64)
        .udp(1000 + (i % 50_000) as u16, 53)
        .write(&mut f, &[0u8; 18])
        .unwrap();
    f
}

/// What a program costs a frame: the median of the rounds, and each
/// round's mean.
#[derive(Debug, Serialize)]
pub struct ProgramCost {
    pub program: &'static str,
    pub ns_per_packet: f64,
    pub rounds_ns_per_packet: Vec<f64>,
}

/// `rounds` rounds: every frame through every program (`names[i]` is
/// `progs[i]`'s), `repeat` times each; per program, each round's mean
/// nanoseconds a frame and their median. `before_round` may stop it
/// (Ctrl-C).
pub fn rounds(
    names: &[&'static str],
    progs: &[libbpf_rs::Program<'_>],
    frames: &[Vec<u8>],
    repeat: u32,
    rounds: usize,
    mut before_round: impl FnMut() -> Result<()>,
) -> Result<Vec<ProgramCost>> {
    let mut out = vec![0u8; 256];
    let mut means = vec![Vec::new(); progs.len()];
    for _ in 0..rounds {
        before_round()?;
        let mut sums = vec![0f64; progs.len()];
        for f in frames {
            for (i, p) in progs.iter().enumerate() {
                sums[i] += test_run::run_xdp(p.as_fd(), f, &mut out, repeat)?.duration_ns as f64;
            }
        }
        for (i, s) in sums.iter().enumerate() {
            means[i].push(s / frames.len() as f64);
        }
    }
    Ok(names
        .iter()
        .zip(means)
        .map(|(program, r)| ProgramCost {
            program,
            ns_per_packet: crate::median(&r),
            rounds_ns_per_packet: r,
        })
        .collect())
}

/// A probe bench's programs, a line each: ns a packet, over the first
/// program (`base`), and the rounds.
pub fn lines(costs: &[ProgramCost], base: &str) -> String {
    let first = costs.first().map_or(0.0, |l| l.ns_per_packet);
    costs
        .iter()
        .map(|l| {
            format!(
                "  {:<12} {:7.1} ns/packet ({:+.1} ns over {base}; rounds {:?})\n",
                l.program,
                l.ns_per_packet,
                l.ns_per_packet - first,
                l.rounds_ns_per_packet
                    .iter()
                    .map(|v| (v * 10.0).round() / 10.0)
                    .collect::<Vec<_>>()
            )
        })
        .collect()
}
