//! Policy rules (`ip rule`), enslaved interfaces and IPv6 switched off on
//! an interface, against the kernel:
//! in a scratch namespace, the main table routes 198.51.100.0/24 through
//! one gateway and table 100 through another. Each rule is added with
//! `ip rule`, reaches the mirror as the kernel notifies it, and then the
//! fast path's verdict on a frame arriving on m0 is checked against what
//! the kernel's own input route lookup (`ip route get ... iif m0`) does
//! with the same packet: the fast path may forward only through the
//! gateway the kernel routes through, by whichever table its rules took.
//! Needs root.
use linerate_host::cmd::ip;
use linerate_netlink::route::{self, Monitor};
use linerate_router::mirror;
use std::time::Duration;

use linerate_testkit::frames::frame_between;
use linerate_testkit::plane::{path, TestPlane, MAC_IN, MAC_OUT};

/// The mirror on the BPF program, with the model beside it (which must
/// agree on every frame).
type Mirror = mirror::Mirror<TestPlane>;

const MAC_GW: [u8; 6] = [2, 0, 0, 0, 0, 4];
const MAC_GW2: [u8; 6] = [2, 0, 0, 0, 0, 5];
const MAIN_GW: &str = "198.19.0.1";
const POLICY_GW: &str = "198.19.0.2";
const SRC4: &str = "198.18.0.1";
const DST4: &str = "198.51.100.9";
const SRC6: &str = "2001:db8:2::1";
const DST6: &str = "2001:db8:5::9";

fn mac(m: [u8; 6]) -> String {
    linerate_host::cmd::mac_text(&m)
}

/// Applies the kernel's notifications until a quiet 100 ms (waiting up
/// to 2 s for the first), then ends the grace period of what they freed,
/// as `linerate route` does 100 ms after a change.
fn follow(monitor: &mut Monitor, m: &mut Mirror) {
    let mut wait = Duration::from_secs(2);
    loop {
        let changes = monitor.wait(wait).unwrap();
        if changes.is_empty() {
            m.release_quarantine().unwrap();
            return;
        }
        linerate_router::follow::apply_notifications(m, &changes);
        wait = Duration::from_millis(100);
    }
}

/// The gateway the kernel routes `dst` from `src` arriving on `iif`
/// through, or None if it does not route it (a blackhole, no route).
fn kernel_gateway(ns: &str, iif: &str, src: &str, dst: &str) -> Option<String> {
    let family = if dst.contains(':') { "-6" } else { "-4" };
    let out = ip(
        Some(ns),
        &[family, "route", "get", dst, "from", src, "iif", iif],
    )
    .ok()?;
    let words: Vec<&str> = out.split_whitespace().collect();
    let via = words.iter().position(|w| *w == "via")?;
    words.get(via + 1).map(|s| s.to_string())
}

/// `ip -n NS ARGS`, which must succeed.
fn sh(ns: &str, args: &[&str]) -> String {
    ip(Some(ns), args).unwrap_or_else(|e| panic!("ip {}: {e:#}", args.join(" ")))
}

fn sysctl(ns: &str, setting: &str) {
    linerate_host::cmd::in_netns(ns, "sysctl", &["-qw", setting]).unwrap();
}

/// A router in a scratch namespace (m0 in, m1 out, both families
/// forwarded): main routes 198.51.100.0/24 and 2001:db8:5::/48 through
/// MAC_GW's gateways, table 100 through MAC_GW2's; the mirror loaded from
/// a dump, with the monitor opened before it.
fn router(tag: &str) -> (linerate_testkit::plane::ScratchPair, Mirror, Monitor) {
    let (pair, fp) = linerate_testkit::plane::scratch_pair(tag, "m");
    let ns = pair.ns.as_str();
    sysctl(ns, "net.ipv4.ip_forward=1");
    sysctl(ns, "net.ipv6.conf.all.forwarding=1");
    sysctl(ns, "net.ipv6.conf.default.disable_ipv6=0");
    for (dev, m) in [("m0", MAC_IN), ("m1", MAC_OUT)] {
        sysctl(ns, &format!("net.ipv6.conf.{dev}.disable_ipv6=0"));
        sh(ns, &["link", "set", "dev", dev, "address", &mac(m)]);
    }
    sh(ns, &["addr", "add", "198.18.0.254/24", "dev", "m0"]);
    sh(ns, &["addr", "add", "198.19.0.254/24", "dev", "m1"]);
    sh(
        ns,
        &["addr", "add", "2001:db8:2::fe/64", "dev", "m0", "nodad"],
    );
    sh(
        ns,
        &["addr", "add", "2001:db8:1::fe/64", "dev", "m1", "nodad"],
    );
    for (gw, m, table) in [
        (MAIN_GW, MAC_GW, "main"),
        (POLICY_GW, MAC_GW2, "100"),
        ("2001:db8:1::1", MAC_GW, "main"),
        ("2001:db8:1::2", MAC_GW2, "100"),
    ] {
        let net = if gw.contains(':') {
            "2001:db8:5::/48"
        } else {
            "198.51.100.0/24"
        };
        sh(
            ns,
            &["route", "add", net, "via", gw, "dev", "m1", "table", table],
        );
        let mac = mac(m);
        sh(
            ns,
            &[
                "neigh",
                "add",
                gw,
                "lladdr",
                &mac,
                "dev",
                "m1",
                "nud",
                "permanent",
            ],
        );
    }
    let monitor = Monitor::open().unwrap();
    let (if0, if1) = (pair.if0, pair.if1);
    let mut m = Mirror::new(TestPlane::twin(fp, if0, if1)).unwrap();
    m.resync(&route::dump_all().unwrap()).unwrap();
    m.add_ingress(pair.if0).unwrap();
    m.add_ingress(pair.if1).unwrap();
    (pair, m, monitor)
}

/// The IPv4 and IPv6 frames the tests send in on m0, to main's prefixes.
fn frames() -> (Vec<u8>, Vec<u8>) {
    let v4 = frame_between(SRC4.parse().unwrap(), DST4.parse().unwrap());
    let v6 = frame_between(SRC6.parse().unwrap(), DST6.parse().unwrap());
    (v4, v6)
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_fast_path_routes_as_the_kernels_rules_do() {
    let (pair, mut m, mut monitor) = router("policy");
    let (m0, ns) = (pair.if0, pair.ns.clone());
    let sh = |args: &[&str]| sh(&ns, args);
    let sysctl = |k: &str| sysctl(&ns, k);

    let (src4, dst4, src6, dst6) = (SRC4, DST4, SRC6, DST6);
    let (v4, v6) = frames();
    // The fast path's verdict on the IPv4 and IPv6 frame, each checked
    // against the kernel: forwarded only to the gateway the kernel routes
    // it through (main's, or table 100's).
    let gateway_mac = |gw: Option<&str>| match gw {
        Some(MAIN_GW) | Some("2001:db8:1::1") => Some(MAC_GW),
        Some(POLICY_GW) | Some("2001:db8:1::2") => Some(MAC_GW2),
        _ => None,
    };
    let check = |m: &Mirror, what: &str| -> (bool, bool) {
        let mut fast = [false; 2];
        for (i, (f, src, dst)) in [(&v4, src4, dst4), (&v6, src6, dst6)]
            .into_iter()
            .enumerate()
        {
            let kernel = kernel_gateway(&ns, "m0", src, dst);
            match path(m, m0, f) {
                Ok(to) => {
                    assert_eq!(
                        Some(to),
                        gateway_mac(kernel.as_deref()),
                        "{what}: the fast path forwards {dst} to {to:x?}, the kernel through {kernel:?}"
                    );
                    fast[i] = true;
                }
                // The walk ends before any table, or every table it
                // holds misses: the kernel walks on.
                Err(reason) => assert!(
                    matches!(reason, "pass_policy" | "pass_no_route"),
                    "{what}: {dst}: {reason}"
                ),
            }
        }
        (fast[0], fast[1])
    };
    assert_eq!(check(&m, "the default rules"), (true, true));

    // (the rule, whether the fast path forwards IPv4 with it, whether the
    // kernel routes IPv4 by main with it: where the fast path's walk
    // cannot tell, it passes, whatever table the kernel takes)
    let cases: &[(&str, bool, bool)] = &[
        ("from 198.18.0.0/16 lookup 100", false, false),
        ("from 10.0.0.0/8 lookup 100", false, true),
        ("iif m0 lookup 100", true, false),
        ("iif m1 lookup 100", true, true),
        ("iif lo lookup 100", true, true),
        ("fwmark 1 lookup 100", true, true),
        ("not fwmark 0xca6c lookup 100", true, false),
        ("fwmark 0/1 lookup 100", true, false),
        ("oif m1 lookup 100", true, true),
        ("uidrange 1000-2000 lookup 100", true, true),
        ("uidrange 0-0 lookup 100", true, false),
        ("ipproto udp lookup 100", false, false),
        ("tos 0x10 lookup 100", false, true),
        ("nop", true, true),
        ("lookup main suppress_prefixlength 0", true, true),
        ("lookup main suppress_prefixlength 24", true, true),
        ("blackhole", false, false),
        ("lookup 100", true, false),
        ("lookup default", true, true),
    ];
    for &(rule, fast, by_main) in cases {
        let args: Vec<&str> = ["rule", "add", "pref", "100"]
            .into_iter()
            .chain(rule.split(' '))
            .collect();
        sh(&args);
        follow(&mut monitor, &mut m);
        assert_eq!(check(&m, rule), (fast, true), "{rule}");
        assert_eq!(
            kernel_gateway(&ns, "m0", src4, dst4).as_deref() == Some(MAIN_GW),
            by_main,
            "{rule}: the kernel's route"
        );
        let mut del = args.clone();
        del[1] = "del";
        sh(&del);
        follow(&mut monitor, &mut m);
        assert_eq!(check(&m, &format!("{rule}, deleted")), (true, true));
    }

    // Main's own rule gone: the kernel routes nothing by main.
    sh(&["rule", "del", "pref", "32766"]);
    follow(&mut monitor, &mut m);
    assert_eq!(check(&m, "main's rule deleted"), (false, true));
    sh(&["rule", "add", "pref", "32766", "lookup", "main"]);
    follow(&mut monitor, &mut m);
    assert_eq!(check(&m, "main's rule back"), (true, true));

    // IPv6 rules are IPv6's.
    sh(&[
        "-6",
        "rule",
        "add",
        "pref",
        "100",
        "from",
        "2001:db8:2::/48",
        "lookup",
        "100",
    ]);
    follow(&mut monitor, &mut m);
    assert_eq!(check(&m, "an IPv6 rule"), (true, false));
    assert_eq!(
        kernel_gateway(&ns, "m0", src6, dst6).as_deref(),
        Some("2001:db8:1::2")
    );

    // A resync (lost notifications) finds the rules as the kernel has
    // them: the IPv6 rule is gone, an IPv4 one is there.
    sh(&["-6", "rule", "del", "pref", "100"]);
    sh(&["rule", "add", "pref", "100", "iif", "m0", "lookup", "100"]);
    m.resync(&route::dump_all().unwrap()).unwrap();
    assert_eq!(check(&m, "after a resync"), (true, true));
    assert_eq!(
        path(&m, m0, &v4),
        Ok(MAC_GW2),
        "table 100's, after a resync"
    );
    sh(&["rule", "del", "pref", "100"]);
    follow(&mut monitor, &mut m);

    // A rule naming the interface follows its name.
    sh(&["rule", "add", "pref", "100", "iif", "in0", "lookup", "100"]);
    follow(&mut monitor, &mut m);
    assert_eq!(check(&m, "iif in0, m0 not renamed yet"), (true, true));
    sh(&["link", "set", "dev", "m0", "down"]);
    sh(&["link", "set", "dev", "m0", "name", "in0"]);
    sh(&["link", "set", "dev", "in0", "up"]);
    follow(&mut monitor, &mut m);
    assert_eq!(
        kernel_gateway(&ns, "in0", src4, dst4).as_deref(),
        Some(POLICY_GW)
    );
    assert_eq!(path(&m, m0, &v4), Ok(MAC_GW2), "m0 renamed in0: table 100");
    sh(&["link", "set", "dev", "in0", "down"]);
    sh(&["link", "set", "dev", "in0", "name", "m0"]);
    sh(&["link", "set", "dev", "m0", "up"]);
    sh(&["rule", "del", "pref", "100"]);
    follow(&mut monitor, &mut m);
    assert_eq!(check(&m, "m0 again, rule deleted"), (true, true));

    // An enslaved interface (here a bridge's port) is routed, if at all,
    // as its master: its frames pass.
    sh(&["link", "add", "br-lrt", "type", "bridge"]);
    sh(&["link", "set", "dev", "m0", "master", "br-lrt"]);
    follow(&mut monitor, &mut m);
    assert_eq!(check(&m, "m0 a bridge port"), (false, false));
    sh(&["link", "set", "dev", "m0", "nomaster"]);
    follow(&mut monitor, &mut m);
    assert_eq!(check(&m, "m0 out of the bridge"), (true, true));
    sh(&["link", "del", "br-lrt"]);

    // IPv6 switched off on m0 (disable_ipv6, or an MTU below 1280, which
    // takes its IPv6 configuration away): the kernel drops IPv6 arriving
    // there (ipv6_rcv), so the fast path passes it; IPv4 goes on. Nothing
    // is notified but the effects (m0's addresses going): the router reads
    // the switch after notifications.
    let switched = |m: &mut Mirror, monitor: &mut Monitor| {
        follow(monitor, m);
        linerate_router::follow::follow_ipv6_switches(m);
        (path(m, m0, &v4), path(m, m0, &v6))
    };
    let (fwd, off) = (Ok(MAC_GW), Err("pass_not_forwarding"));
    sysctl("net.ipv6.conf.m0.disable_ipv6=1");
    assert_eq!(switched(&mut m, &mut monitor), (fwd, off), "disable_ipv6");
    sysctl("net.ipv6.conf.m0.disable_ipv6=0");
    assert_eq!(switched(&mut m, &mut monitor), (fwd, fwd), "enabled again");
    sh(&["link", "set", "dev", "m0", "mtu", "1200"]);
    assert_eq!(switched(&mut m, &mut monitor), (fwd, off), "MTU 1200");
    sh(&["link", "set", "dev", "m0", "mtu", "1500"]);
    assert_eq!(switched(&mut m, &mut monitor), (fwd, fwd), "MTU 1500");
    drop(m);
}

/// Netfilter hooks on the forwarding path (nftables base chains at
/// prerouting, forward, postrouting or a device's ingress; legacy iptables
/// tables) make their family the kernel's: XDP runs before them, and a
/// frame it forwarded would skip the firewall, NAT and conntrack.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn what_netfilter_sees_is_forwarded_by_the_kernel() {
    let (pair, mut m, mut monitor) = router("netfilter");
    let (m0, ns) = (pair.if0, pair.ns.clone());
    let nft = |args: &[&str]| {
        linerate_host::cmd::in_netns(&ns, "nft", args)
            .unwrap_or_else(|e| panic!("nft {}: {e:#}", args.join(" ")))
    };
    let (v4, v6) = frames();
    let verdicts = |m: &mut Mirror, monitor: &mut Monitor| {
        follow(monitor, m);
        (path(m, m0, &v4), path(m, m0, &v6))
    };
    let (fwd, nf) = (Ok(MAC_GW), Err("pass_netfilter"));
    let mut check = |what: &str, want| {
        assert_eq!(verdicts(&mut m, &mut monitor), want, "{what}");
    };
    check("nothing hooked", (fwd, fwd));
    nft(&["add", "table", "inet", "t"]);
    nft(&[
        "add",
        "chain",
        "inet",
        "t",
        "in",
        "{ type filter hook input priority 0; }",
    ]);
    check("an input chain sees no transit packet", (fwd, fwd));
    nft(&[
        "add",
        "chain",
        "inet",
        "t",
        "fw",
        "{ type filter hook forward priority 0; }",
    ]);
    check("an inet forward chain", (nf, nf));
    nft(&["delete", "chain", "inet", "t", "fw"]);
    check("the forward chain deleted", (fwd, fwd));
    nft(&["add", "table", "ip6", "t6"]);
    nft(&[
        "add",
        "chain",
        "ip6",
        "t6",
        "pre",
        "{ type filter hook prerouting priority 0; }",
    ]);
    check("an ip6 prerouting chain", (fwd, nf));
    nft(&["delete", "table", "ip6", "t6"]);
    nft(&["add", "table", "ip", "nat"]);
    nft(&[
        "add",
        "chain",
        "ip",
        "nat",
        "post",
        "{ type nat hook postrouting priority 100; }",
    ]);
    nft(&[
        "add",
        "rule",
        "ip",
        "nat",
        "post",
        "oifname",
        "m1",
        "masquerade",
    ]);
    check("masquerade", (nf, fwd));
    nft(&["delete", "table", "ip", "nat"]);
    nft(&["add", "table", "netdev", "n"]);
    nft(&[
        "add",
        "chain",
        "netdev",
        "n",
        "ing",
        "{ type filter hook ingress device m0 priority 0; }",
    ]);
    check("a netdev ingress chain", (nf, nf));
    nft(&["delete", "table", "netdev", "n"]);
    nft(&["delete", "table", "inet", "t"]);
    check("all deleted", (fwd, fwd));

    // A legacy iptables table: nothing is notified; linerate route reads
    // them once a second.
    linerate_host::cmd::in_netns(&ns, "iptables-legacy", &["-t", "nat", "-L", "-n"]).unwrap();
    linerate_router::follow::follow_netfilter(&mut m);
    assert_eq!(
        (path(&m, m0, &v4), path(&m, m0, &v6)),
        (nf, fwd),
        "iptables-legacy nat"
    );
    assert_eq!(m.netfilter().ipv4, vec!["iptables table nat".to_string()]);
    drop(m);
}

/// tc on the forwarding path (filters on the ingress, a configured qdisc
/// or filters on the egress, tcx programs) makes what passes there the
/// kernel's: XDP runs before tc ingress, and a frame it redirects skips
/// the egress qdisc and tc egress.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn what_tc_acts_on_is_forwarded_by_the_kernel() {
    let (pair, mut m, mut monitor) = router("tc");
    let (m0, ns) = (pair.if0, pair.ns.clone());
    let tc = |args: &str| {
        let args: Vec<&str> = args.split_whitespace().collect();
        linerate_host::cmd::in_netns(&ns, "tc", &args)
            .unwrap_or_else(|e| panic!("tc {}: {e:#}", args.join(" ")))
    };
    let (v4, v6) = frames();
    let (fwd, tcv) = (Ok(MAC_GW), Err("pass_tc"));
    let mut check = |what: &str, want| {
        follow(&mut monitor, &mut m);
        assert_eq!((path(&m, m0, &v4), path(&m, m0, &v6)), want, "{what}");
    };
    check("the kernel's own qdiscs", (fwd, fwd));
    tc("qdisc add dev m0 clsact");
    check("clsact without filters", (fwd, fwd));
    tc("filter add dev m0 ingress u32 match u32 0 0");
    check("an ingress filter", (tcv, tcv));
    tc("filter del dev m0 ingress");
    check("the ingress filter deleted", (fwd, fwd));
    tc("filter add dev m0 egress u32 match u32 0 0");
    check("an egress filter on the ingress interface", (fwd, fwd));
    tc("qdisc del dev m0 clsact");
    tc("qdisc add dev m1 clsact");
    tc("filter add dev m1 egress u32 match u32 0 0");
    check("an egress filter on the egress interface", (tcv, tcv));
    tc("qdisc del dev m1 clsact");
    check("clsact deleted", (fwd, fwd));
    tc("qdisc add dev m1 root tbf rate 1mbit burst 32kbit latency 400ms");
    check("a shaper on the egress", (tcv, tcv));
    tc("qdisc del dev m1 root");
    check("the shaper deleted: the kernel's noqueue again", (fwd, fwd));
    tc("qdisc add dev m0 root handle 1: htb");
    check("a qdisc on the ingress interface's egress", (fwd, fwd));
    tc("qdisc add dev m0 ingress");
    tc("filter add dev m0 parent ffff: u32 match u32 0 0");
    check("a filter under the ingress qdisc", (tcv, tcv));
    tc("qdisc del dev m0 ingress");
    tc("qdisc del dev m0 root");
    check("all deleted", (fwd, fwd));

    // A tcx program: nothing is notified; linerate route reads them once
    // a second.
    let link = tcx_program(m0);
    linerate_router::follow::follow_tc(&mut m);
    assert_eq!(
        (path(&m, m0, &v4), path(&m, m0, &v6)),
        (tcv, tcv),
        "a tcx program on ingress"
    );
    assert_eq!(
        m.tc()[&m0].ingress,
        vec!["1 tcx program(s) on ingress".to_string()]
    );
    // SAFETY: the link's fd, closed once: the program detaches.
    unsafe { libc::close(link) };
    linerate_router::follow::follow_tc(&mut m);
    assert_eq!(
        (path(&m, m0, &v4), path(&m, m0, &v6)),
        (fwd, fwd),
        "the tcx program detached"
    );
    drop(m);
}

/// Attaches a tcx program (`return TCX_NEXT`) to the ingress of
/// `ifindex`; returns its link's fd.
fn tcx_program(ifindex: u32) -> i32 {
    // r0 = -1 (TCX_NEXT); exit.
    let insns: [u64; 2] = [0xffff_ffff_0000_00b7, 0x95];
    // SAFETY: two valid instructions, in the layout of struct bpf_insn.
    let prog = unsafe {
        libbpf_sys::bpf_prog_load(
            libbpf_sys::BPF_PROG_TYPE_SCHED_CLS,
            std::ptr::null(),
            c"GPL".as_ptr(),
            insns.as_ptr() as *const libbpf_sys::bpf_insn,
            2,
            std::ptr::null_mut(),
        )
    };
    assert!(prog >= 0, "bpf_prog_load: {prog}");
    // SAFETY: a program fd; no options.
    let link = unsafe {
        libbpf_sys::bpf_link_create(
            prog,
            ifindex as i32,
            libbpf_sys::BPF_TCX_INGRESS,
            std::ptr::null(),
        )
    };
    assert!(link >= 0, "bpf_link_create tcx ingress: {link}");
    // SAFETY: the link holds the program.
    unsafe { libc::close(prog) };
    link
}

/// The IPv4 header checksum of `h` (its checksum field zeroed first).
fn ipv4_checksum(h: &mut [u8]) {
    h[10] = 0;
    h[11] = 0;
    let mut sum: u32 = h
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

/// The fast path's routes against the kernel's own rule walk, packet by
/// packet: random rule sets (ten rules each, drawn from interfaces,
/// `not`, sources, destinations, tos, protocols, ports, marks, uid ranges,
/// suppressors, goto, nop, blackhole and unreachable rules) over four
/// tables holding overlapping prefixes, throw, blackhole, unreachable and
/// prohibit routes; random IPv4 packets (either interface, sources,
/// destinations, tos, UDP or TCP and ports). Every packet the fast path
/// forwards, the kernel's `bpf_fib_lookup` with the same fields (its
/// rules walked as for a received packet: the XDP samples' forwarder,
/// bpf/ref/ref_fwd.bpf.c) forwards to the same gateway.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn random_rules_and_packets_are_routed_as_the_kernel_walks_them() {
    use rand::{Rng, SeedableRng};
    let (pair, mut m, mut monitor) = router("rdiff");
    let (m0, m1, ns) = (pair.if0, pair.if1, pair.ns.clone());
    let sh = |args: &[&str]| sh(&ns, args);
    const GWS: [(&str, [u8; 6], &str); 3] = [
        ("198.19.0.3", [2, 0, 0, 0, 0, 6], "m1"),
        ("198.19.0.4", [2, 0, 0, 0, 0, 7], "m1"),
        ("198.18.0.9", [2, 0, 0, 0, 0, 8], "m0"),
    ];
    for (gw, mc, dev) in GWS {
        sh(&[
            "neigh",
            "add",
            gw,
            "lladdr",
            &mac(mc),
            "dev",
            dev,
            "nud",
            "permanent",
        ]);
    }
    for route in [
        "198.51.0.0/16 via 198.19.0.3 dev m1 table 100",
        "198.51.100.0/25 via 198.19.0.4 dev m1 table 101",
        "throw 198.51.100.128/25 table 101",
        "blackhole 198.51.101.0/24 table 101",
        "10.0.0.0/8 via 198.18.0.9 dev m0 table 101",
        "unreachable 198.51.100.64/26 table 102",
        "198.51.100.0/24 via 198.19.0.3 dev m1 table 102",
        "default via 198.19.0.4 dev m1 table 102",
        "198.51.0.0/16 via 198.19.0.4 dev m1",
        "10.0.0.0/8 via 198.18.0.9 dev m0",
        "prohibit 198.51.102.0/24",
    ] {
        let args: Vec<&str> = ["route", "add"]
            .into_iter()
            .chain(route.split(' '))
            .collect();
        sh(&args);
    }
    follow(&mut monitor, &mut m);
    let reference =
        linerate_bpf::loader::load(linerate_bpf::objects::REF_FWD, "reference").unwrap();
    let ref_prog = linerate_bpf::loader::prog(&reference, "ref_fwd").unwrap();
    let kernel = |f: &[u8], ingress: u32| -> Option<[u8; 6]> {
        use std::os::fd::AsFd;
        let mut out = vec![0u8; f.len() + 256];
        let r = linerate_bpf::test_run::run_xdp_on(ref_prog.as_fd(), f, &mut out, 1, Some(ingress))
            .unwrap();
        (r.verdict == linerate_bpf::test_run::XdpAction::Redirect)
            .then(|| out[0..6].try_into().unwrap())
    };
    let templates = [
        "iif m0 lookup 100",
        "iif m1 lookup 101",
        "lookup 102",
        "not iif m0 lookup 101",
        "from 198.18.0.0/17 lookup 101",
        "to 198.51.100.0/25 lookup 102",
        "tos 0x10 lookup 100",
        "ipproto tcp lookup 101",
        "dport 80 lookup 102",
        "lookup main suppress_prefixlength 0",
        "lookup 100 suppress_prefixlength 16",
        "iif m1 unreachable",
        "from 10.0.0.0/8 blackhole",
        "fwmark 1 lookup 102",
        "not fwmark 1 lookup 100",
        "iif lo lookup 102",
        "nop",
        "uidrange 0-0 lookup 101",
        "GOTO",
    ];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let (mut sent, mut forwarded) = (0u64, 0u64);
    for set in 0..10 {
        let mut prios: Vec<u32> = (0..10).map(|_| rng.gen_range(10..300)).collect();
        prios.sort();
        prios.dedup();
        let mut added = Vec::new();
        for (i, &p) in prios.iter().enumerate() {
            let t = templates[rng.gen_range(0..templates.len())];
            let text = if t == "GOTO" {
                // To a later rule of the set, or main's.
                let to = prios
                    .get(i + 1 + rng.gen_range(0..3))
                    .copied()
                    .unwrap_or(32766);
                format!("iif m0 goto {to}")
            } else {
                t.to_string()
            };
            let pref = p.to_string();
            let args: Vec<&str> = ["rule", "add", "pref", pref.as_str()]
                .into_iter()
                .chain(text.split(' '))
                .collect();
            sh(&args);
            added.push((pref, text));
        }
        follow(&mut monitor, &mut m);
        for _ in 0..10_000 {
            let from_m1 = rng.gen_bool(0.5);
            let ingress = if from_m1 { m1 } else { m0 };
            let src: [u8; 4] = match rng.gen_range(0..3) {
                0 => [198, 18, rng.gen_range(0..128), rng.gen()],
                1 => [198, 18, rng.gen_range(128..=255), rng.gen()],
                _ => [10, 1, 2, rng.gen()],
            };
            // (From m1, mostly back towards m0's side: out of m1 it would
            // leave where it came in, which the fast path passes.)
            let toward_m0 = from_m1 && rng.gen_bool(0.7);
            let dst: [u8; 4] = match rng.gen_range(0..5) {
                _ if toward_m0 => [10, 9, rng.gen(), rng.gen()],
                0 => [198, 51, 100, rng.gen()],
                1 => [198, 51, 101, rng.gen()],
                2 => [198, 51, 102, rng.gen()],
                3 => [198, 51, rng.gen_range(0..100), rng.gen()],
                _ => [203, 0, 113, rng.gen()],
            };
            let ports = [53u16, 80, 443, 1234];
            let (sport, dport) = (ports[rng.gen_range(0..4)], ports[rng.gen_range(0..4)]);
            let b = etherparse::PacketBuilder::ethernet2(
                [2, 0, 0, 0, 0, 1],
                if from_m1 { MAC_OUT } else { MAC_IN },
            )
            .ipv4(src, dst, 64);
            let mut f = Vec::new();
            if rng.gen_bool(0.5) {
                b.udp(sport, dport).write(&mut f, &[0u8; 18]).unwrap();
            } else {
                b.tcp(sport, dport, 1, 1000)
                    .ack(1)
                    .write(&mut f, &[0u8; 6])
                    .unwrap();
            }
            f[15] = [0u8, 0x10, 0x08][rng.gen_range(0..3)];
            ipv4_checksum(&mut f[14..34]);
            sent += 1;
            if let Ok(to) = path(&m, ingress, &f) {
                forwarded += 1;
                assert_eq!(
                    kernel(&f, ingress),
                    Some(to),
                    "set {set}, rules {added:?}: {src:?} -> {dst:?} from {}, tos {:#x}, ports {sport}-{dport}",
                    if from_m1 { "m1" } else { "m0" },
                    f[15]
                );
            }
        }
        for (pref, _) in &added {
            sh(&["rule", "del", "pref", pref]);
        }
        follow(&mut monitor, &mut m);
    }
    eprintln!("{forwarded} of {sent} random packets forwarded by the fast path, each as the kernel routes it");
    assert!(forwarded * 5 > sent, "{forwarded} of {sent}");
}
