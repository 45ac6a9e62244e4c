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
/// through (a UDP packet from port 1 to port 2, as frame_between's), or
/// None if it does not route it (a blackhole, no route).
fn kernel_gateway(ns: &str, iif: &str, src: &str, dst: &str) -> Option<String> {
    let family = if dst.contains(':') { "-6" } else { "-4" };
    let out = ip(
        Some(ns),
        &[
            family, "route", "get", dst, "from", src, "iif", iif, "ipproto", "udp", "sport", "1",
            "dport", "2",
        ],
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
                // A blackhole rule took it: the kernel routes it nowhere.
                Err("drop_blackhole") => assert_eq!(kernel, None, "{what}: {dst}"),
                // A rule the fast path leaves to the kernel took it, or
                // every table it holds misses: the kernel walks on.
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
    // kernel routes IPv4 by main with it)
    let cases: &[(&str, bool, bool)] = &[
        ("from 198.18.0.0/16 lookup 100", true, false),
        ("from 10.0.0.0/8 lookup 100", true, true),
        ("not from 10.0.0.0/8 lookup 100", true, false),
        ("to 198.51.100.0/25 lookup 100", true, false),
        ("iif m0 lookup 100", true, false),
        ("iif m1 lookup 100", true, true),
        ("iif lo lookup 100", true, true),
        ("fwmark 1 lookup 100", true, true),
        ("not fwmark 0xca6c lookup 100", true, false),
        ("fwmark 0/1 lookup 100", true, false),
        ("oif m1 lookup 100", true, true),
        ("uidrange 1000-2000 lookup 100", true, true),
        ("uidrange 0-0 lookup 100", true, false),
        ("ipproto udp lookup 100", true, false),
        ("ipproto tcp lookup 100", true, true),
        ("dport 1000-2000 lookup 100", true, true),
        ("sport 1 lookup 100", true, false),
        ("tos 0x10 lookup 100", true, true),
        ("unreachable", false, false),
        ("prohibit", false, false),
        ("iif m1 prohibit", true, true),
        ("goto 32766", true, true),
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
    assert_eq!(check(&m, "an IPv6 rule"), (true, true));
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

    // A port of a bridge that is down (the port disabled) passes: the
    // bridge drops what arrives there.
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

/// One family's side of the random walk below: its addresses (IPv4's,
/// or IPv6's: each IPv4 address in the low 32 bits of 2001:db8:ffff::/96,
/// a prefix of L bits as one of 96 + L), gateways and routes.
struct Side {
    ipv6: bool,
}

impl Side {
    fn addr(&self, v4: [u8; 4]) -> std::net::IpAddr {
        let a = std::net::Ipv4Addr::from(v4);
        if self.ipv6 {
            let w = 0x2001_0db8_ffff_u128 << 80 | u32::from(a) as u128;
            std::net::Ipv6Addr::from(w).into()
        } else {
            a.into()
        }
    }

    /// `198.51.0.0/16` as this family has it.
    fn prefix(&self, p: &str) -> String {
        let (a, len) = p.split_once('/').unwrap();
        let a: std::net::Ipv4Addr = a.parse().unwrap();
        let len: u8 = len.parse().unwrap();
        let extra = if self.ipv6 { 96 } else { 0 };
        format!("{}/{}", self.addr(a.octets()), len + extra)
    }

    /// Gateway `i` (0, 1 on m1; 2 on m0).
    fn gw(&self, i: usize) -> &'static str {
        match (self.ipv6, i) {
            (false, 0) => "198.19.0.3",
            (false, 1) => "198.19.0.4",
            (false, _) => "198.18.0.9",
            (true, 0) => "2001:db8:1::3",
            (true, 1) => "2001:db8:1::4",
            (true, _) => "2001:db8:2::9",
        }
    }

    /// A rule or route text with `P(198.51.0.0/16)` prefixes, `G0`-`G2`
    /// gateways and `S(n)` suppressor lengths in this family's terms.
    fn text(&self, t: &str) -> String {
        let mut out = String::new();
        for w in t.split(' ') {
            let w = if let Some(p) = w.strip_prefix("P(").and_then(|w| w.strip_suffix(')')) {
                self.prefix(p)
            } else if let Some(n) = w.strip_prefix("S(").and_then(|w| w.strip_suffix(')')) {
                let n: u8 = n.parse().unwrap();
                let extra = if self.ipv6 && n > 0 { 96 } else { 0 };
                (n + extra).to_string()
            } else if let Some(i) = w.strip_prefix('G') {
                self.gw(i.parse().unwrap()).to_string()
            } else {
                w.to_string()
            };
            out.push_str(&w);
            out.push(' ');
        }
        out.trim_end().to_string()
    }
}

/// The fast path's verdicts against the kernel's own rule walk, packet by
/// packet, both families: random rule sets (ten rules each, drawn from
/// interfaces, `not`, sources, destinations, tos, protocols, ports,
/// marks, uid ranges, suppressors by length and by interface group (m1
/// in the group every other set), goto (to a rule, or to a priority no
/// rule has), nop, blackhole, unreachable and prohibit rules) over four
/// tables holding overlapping prefixes, throw, blackhole, unreachable and
/// prohibit routes; random packets (either interface, sources,
/// destinations, the router's own address, tos or traffic class, UDP or
/// TCP and ports), with IPv4's reverse path filtering off, strict and
/// loose in turn. The oracle is the kernel's input route lookup of the
/// same packet (RTM_GETROUTE with its input interface, source, tos,
/// protocol and ports: `ip route get`, which routes it as received, the
/// rules walked). Every packet
/// the fast path forwards, the kernel forwards to the same gateway; every
/// one it drops, the kernel's walk blackholes; the rest the kernel
/// decides. How many the kernel forwards that the fast path left to it,
/// and why, is reported, and must stay few.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn random_rules_and_packets_are_routed_as_the_kernel_walks_them() {
    random_rules_and_packets("rdiff", [None, None], 10);
}

/// The same, m0 and m1 ports of bridges br0 and br1 (forwarding, each
/// with its port's MAC and addresses, the gateways' MACs in their FDBs):
/// what arrives on a port for its bridge's MAC is routed as arriving on
/// the bridge, and what is routed out of a bridge leaves by the port its
/// FDB holds the next hop's MAC behind, by the kernel and by the fast path
/// (the rules' iif, the reverse path, the same-interface check), which
/// must agree packet by packet.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn random_rules_and_packets_through_bridges_are_routed_as_the_kernel_walks_them() {
    random_rules_and_packets("rbdiff", [Some("br0"), Some("br1")], 4);
}

/// Ten rule sets a family (`sets` of them) and 5,000 packets each, m0
/// and m1 routed as the bridges `bridges` names (each its port).
fn random_rules_and_packets(tag: &str, bridges: [Option<&str>; 2], sets: u32) {
    use linerate_bpf::test_run::XdpAction;
    use linerate_netlink::route_get::{Answer, Query, RouteGet};
    use rand::{Rng, SeedableRng};
    const RTN_UNICAST: u8 = 1;
    const RTN_LOCAL: u8 = 2;
    use std::collections::BTreeMap;
    let (pair, mut m, mut monitor) = router(tag);
    let (m0, m1, ns) = (pair.if0, pair.if1, pair.ns.clone());
    let sh = |args: &[&str]| sh(&ns, args);
    // Each side as the kernel routes it: the port, or the bridge it is a
    // port of, which takes its MAC, addresses and routes.
    let sides_l3: Vec<(String, u32)> = [
        ("m0", m0, MAC_IN, ["198.18.0.254/24", "2001:db8:2::fe/64"]),
        ("m1", m1, MAC_OUT, ["198.19.0.254/24", "2001:db8:1::fe/64"]),
    ]
    .into_iter()
    .zip(bridges)
    .map(|((port, index, mc, addrs), bridge)| {
        let Some(b) = bridge else {
            return (port.to_string(), index);
        };
        sh(&["link", "add", b, "type", "bridge"]);
        sh(&["link", "set", "dev", b, "address", &mac(mc)]);
        sh(&["link", "set", "dev", port, "master", b]);
        for a in addrs {
            sh(&["addr", "del", a, "dev", port]);
            sh(&["addr", "add", a, "dev", b, "nodad"]);
        }
        sysctl(&ns, &format!("net.ipv6.conf.{b}.forwarding=1"));
        sh(&["link", "set", "dev", b, "up"]);
        (b.to_string(), linerate_bpf::loader::ifindex(b).unwrap())
    })
    .collect();
    let (side0, iif0) = (sides_l3[0].0.clone(), sides_l3[0].1);
    let (side1, iif1) = (sides_l3[1].0.clone(), sides_l3[1].1);
    // A text's ports as the kernel routes them.
    let on0 = |t: String| {
        t.replace("dev m0", &format!("dev {side0}"))
            .replace("iif m0", &format!("iif {side0}"))
            .replace("dev m1", &format!("dev {side1}"))
            .replace("iif m1", &format!("iif {side1}"))
    };
    // router()'s gateways on m1, and the ones below, where a bridge
    // holds m1: its routes, neighbours and FDB entries.
    if bridges[1].is_some() {
        for (gw, mc, net, table) in [
            (MAIN_GW, MAC_GW, "198.51.100.0/24", "main"),
            (POLICY_GW, MAC_GW2, "198.51.100.0/24", "100"),
            ("2001:db8:1::1", MAC_GW, "2001:db8:5::/48", "main"),
            ("2001:db8:1::2", MAC_GW2, "2001:db8:5::/48", "100"),
        ] {
            let mc = mac(mc);
            let nud = ["nud", "permanent"];
            sh(&[
                &["neigh", "replace", gw, "lladdr", &mc, "dev", &side1][..],
                &nud,
            ]
            .concat());
            sh(&[
                "route", "replace", net, "via", gw, "dev", &side1, "table", table,
            ]);
        }
    }
    for (i, mc) in [
        MAC_GW,
        MAC_GW2,
        [2, 0, 0, 0, 0, 6],
        [2, 0, 0, 0, 0, 7],
        [2, 0, 0, 0, 0, 8],
    ]
    .into_iter()
    .enumerate()
    {
        let (port, bridge) = if i == 4 {
            ("m0", bridges[0])
        } else {
            ("m1", bridges[1])
        };
        if bridge.is_some() {
            let args = ["fdb", "add", &mac(mc), "dev", port, "master", "static"];
            linerate_host::cmd::in_netns(&ns, "bridge", &args).unwrap();
        }
    }
    // The frames' sender, on either side, as a bridge holds it once it
    // has heard from it (an unknown sender's frames are the kernel's, to
    // learn from).
    for (port, bridge) in [("m0", bridges[0]), ("m1", bridges[1])] {
        if bridge.is_some() {
            let args = [
                "fdb",
                "add",
                "02:00:00:00:00:01",
                "dev",
                port,
                "master",
                "static",
            ];
            linerate_host::cmd::in_netns(&ns, "bridge", &args).unwrap();
        }
    }
    let sides = [Side { ipv6: false }, Side { ipv6: true }];
    const GW_MACS: [[u8; 6]; 3] = [[2, 0, 0, 0, 0, 6], [2, 0, 0, 0, 0, 7], [2, 0, 0, 0, 0, 8]];
    const ROUTES: [&str; 14] = [
        "P(198.51.0.0/16) via G0 dev m1 table 100",
        "P(198.51.100.0/25) via G1 dev m1 table 101",
        "throw P(198.51.100.128/25) table 101",
        "blackhole P(198.51.101.0/24) table 101",
        "P(10.0.0.0/8) via G2 dev m0 table 101",
        "unreachable P(198.51.100.64/26) table 102",
        "P(198.51.100.0/24) via G0 dev m1 table 102",
        "default via G1 dev m1 table 102",
        "P(198.51.0.0/16) via G1 dev m1",
        "P(10.0.0.0/8) via G2 dev m0",
        "prohibit P(198.51.102.0/24)",
        // The sources', for reverse path filtering: back through m0 by
        // main, through m1 by table 101, through m0 by table 100.
        "P(198.18.0.0/16) via G2 dev m0",
        "P(198.18.0.0/17) via G1 dev m1 table 101",
        "P(198.18.128.0/17) via G2 dev m0 table 100",
    ];
    for side in &sides {
        let fam = if side.ipv6 { "-6" } else { "-4" };
        for (i, mc) in GW_MACS.iter().enumerate() {
            let dev = if i == 2 {
                side0.as_str()
            } else {
                side1.as_str()
            };
            let (gw, mc) = (side.gw(i), mac(*mc));
            sh(&[
                fam,
                "neigh",
                "add",
                gw,
                "lladdr",
                &mc,
                "dev",
                dev,
                "nud",
                "permanent",
            ]);
        }
        for r in ROUTES {
            let t = on0(side.text(r));
            let args: Vec<&str> = [fam, "route", "add"]
                .into_iter()
                .chain(t.split(' '))
                .collect();
            sh(&args);
        }
    }
    follow(&mut monitor, &mut m);
    // The gateways' MACs, by address (router()'s too).
    let mut macs: BTreeMap<std::net::IpAddr, [u8; 6]> = sides
        .iter()
        .flat_map(|side| (0..3).map(move |i| (side.gw(i).parse().unwrap(), GW_MACS[i])))
        .collect();
    for (gw, mc) in [
        (MAIN_GW, MAC_GW),
        (POLICY_GW, MAC_GW2),
        ("2001:db8:1::1", MAC_GW),
        ("2001:db8:1::2", MAC_GW2),
    ] {
        macs.insert(gw.parse().unwrap(), mc);
    }
    let mut oracle = RouteGet::open().unwrap();
    const TEMPLATES: [&str; 27] = [
        "iif m0 lookup 100",
        "iif m1 lookup 101",
        "lookup 102",
        "not iif m0 lookup 101",
        "from P(198.18.0.0/17) lookup 101",
        "not from P(198.18.0.0/17) lookup 100",
        "to P(198.51.100.0/25) lookup 102",
        "tos 0x10 lookup 100",
        "tos 0x08 lookup 102",
        "ipproto tcp lookup 101",
        "ipproto udp dport 53 lookup 100",
        "sport 1000-2000 lookup 102",
        "dport 80 lookup 102",
        "lookup main suppress_prefixlength 0",
        "lookup 100 suppress_prefixlength S(16)",
        "lookup main suppress_ifgroup 7",
        "lookup 100 suppress_ifgroup 7",
        "iif m1 unreachable",
        "from P(198.18.128.0/17) prohibit",
        "from P(10.0.0.0/8) blackhole",
        "to P(198.51.101.0/24) blackhole",
        "fwmark 1 lookup 102",
        "not fwmark 1 lookup 100",
        "iif lo lookup 102",
        "nop",
        "uidrange 0-0 lookup 101",
        "GOTO",
    ];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let mut tally: BTreeMap<String, u64> = BTreeMap::new();
    let mut count = |what: String| *tally.entry(what).or_default() += 1;
    let (mut sent, mut kernel_forwarded, mut fast_forwarded) = (0u64, 0u64, 0u64);
    for set in 0..sets {
        // IPv4's reverse path filtering: off, strict, loose in turn.
        let rp = set % 3;
        sysctl(&ns, &format!("net.ipv4.conf.all.rp_filter={rp}"));
        // m1 in and out of the group the suppressors name.
        let group = if set % 2 == 0 { "7" } else { "0" };
        sh(&["link", "set", "dev", "m1", "group", group]);
        for side in &sides {
            let fam = if side.ipv6 { "-6" } else { "-4" };
            let mut prios: Vec<u32> = (0..10).map(|_| rng.gen_range(10..300)).collect();
            prios.sort();
            prios.dedup();
            let mut added = Vec::new();
            for (i, &p) in prios.iter().enumerate() {
                let t = TEMPLATES[rng.gen_range(0..TEMPLATES.len())];
                let text = if t == "GOTO" {
                    // To a later rule of the set, main's, or a priority
                    // no rule has (the kernel goes on past it).
                    let to = match rng.gen_range(0..4) {
                        0 => 32766,
                        1 => p + 1 + rng.gen_range(0..5) * 1000,
                        _ => prios
                            .get(i + 1 + rng.gen_range(0..3))
                            .copied()
                            .unwrap_or(32766),
                    };
                    on0(format!("iif m0 goto {to}"))
                } else {
                    on0(side.text(t))
                };
                let pref = p.to_string();
                let args: Vec<&str> = [fam, "rule", "add", "pref", pref.as_str()]
                    .into_iter()
                    .chain(text.split(' '))
                    .collect();
                sh(&args);
                added.push((pref, text));
            }
            follow(&mut monitor, &mut m);
            for _ in 0..5_000 {
                let from_m1 = rng.gen_bool(0.5);
                let ingress = if from_m1 { m1 } else { m0 };
                let src: [u8; 4] = match rng.gen_range(0..3) {
                    0 => [198, 18, rng.gen_range(0..128), rng.gen()],
                    1 => [198, 18, rng.gen_range(128..=255), rng.gen()],
                    _ => [10, 1, 2, rng.gen()],
                };
                // (From m1, mostly back towards m0's side: out of m1 it
                // would leave where it came in, which the fast path
                // passes.)
                let toward_m0 = from_m1 && rng.gen_bool(0.7);
                let dst: [u8; 4] = match rng.gen_range(0..6) {
                    _ if toward_m0 => [10, 9, rng.gen(), rng.gen()],
                    0 => [198, 51, 100, rng.gen()],
                    1 => [198, 51, 101, rng.gen()],
                    2 => [198, 51, 102, rng.gen()],
                    3 => [198, 51, rng.gen_range(0..100), rng.gen()],
                    4 if rng.gen_bool(0.1) => [198, 18, 0, 254],
                    _ => [203, 0, 113, rng.gen()],
                };
                let ports = [53u16, 80, 443, 1234, 1500];
                let (sport, dport) = (ports[rng.gen_range(0..5)], ports[rng.gen_range(0..5)]);
                let mac_to = if from_m1 { MAC_OUT } else { MAC_IN };
                let eth = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], mac_to);
                let b = match (side.addr(src), side.addr(dst)) {
                    (std::net::IpAddr::V6(s), std::net::IpAddr::V6(d)) => {
                        eth.ipv6(s.octets(), d.octets(), 64)
                    }
                    _ => eth.ipv4(src, dst, 64),
                };
                let mut f = Vec::new();
                if rng.gen_bool(0.5) {
                    b.udp(sport, dport).write(&mut f, &[0u8; 18]).unwrap();
                } else {
                    b.tcp(sport, dport, 1, 1000)
                        .ack(1)
                        .write(&mut f, &[0u8; 6])
                        .unwrap();
                }
                let tos = [0u8, 0x10, 0x08, 0x14, 0xb8][rng.gen_range(0..5)];
                if side.ipv6 {
                    f[14] = 0x60 | tos >> 4;
                    f[15] = (tos & 0x0f) << 4 | (f[15] & 0x0f);
                } else {
                    f[15] = tos;
                    ipv4_checksum(&mut f[14..34]);
                }
                sent += 1;
                let kernel = oracle
                    .get(&Query {
                        src: side.addr(src),
                        dst: side.addr(dst),
                        iif: if from_m1 { iif1 } else { iif0 },
                        tos,
                        proto: f[if side.ipv6 { 20 } else { 23 }],
                        sport,
                        dport,
                    })
                    .unwrap();
                let what = format!(
                    "set {set} (rp_filter {rp}), rules {added:?}: {} -> {} from {}, tos {tos:#x}, ports {sport}-{dport}: the kernel's {kernel:?}",
                    side.addr(src),
                    side.addr(dst),
                    if from_m1 { "m1" } else { "m0" },
                );
                let kernel_to = match kernel {
                    Answer::Route {
                        kind: RTN_UNICAST,
                        gateway: Some(gw),
                        ..
                    } => Some(macs[&gw]),
                    _ => None,
                };
                if kernel_to.is_some() {
                    kernel_forwarded += 1;
                }
                match linerate_testkit::plane::verdict(&m, ingress, &f) {
                    (XdpAction::Redirect, _, to) => {
                        fast_forwarded += 1;
                        assert_eq!(kernel_to, Some(to), "{what}");
                        let rp = if side.ipv6 {
                            "IPv6".into()
                        } else {
                            format!("rp_filter {rp}")
                        };
                        count(format!("forwarded, as the kernel ({rp})"));
                    }
                    (XdpAction::Drop, reason, _) => {
                        assert_eq!(reason, "drop_blackhole", "{what}");
                        assert_eq!(kernel, Answer::Refused(libc::EINVAL), "{what}");
                        count("dropped by a blackhole rule, as the kernel".into());
                    }
                    (_, reason, _) => {
                        let kernels = match kernel {
                            _ if kernel_to.is_some() => "forwards",
                            Answer::Refused(libc::EINVAL) => {
                                "refuses with EINVAL (a blackhole, a source refused)"
                            }
                            Answer::Refused(_) => "refuses (unreachable, prohibit, no route)",
                            Answer::Route {
                                kind: RTN_LOCAL, ..
                            } => "delivers it locally",
                            _ => "does not forward it through a gateway",
                        };
                        count(format!("{reason}: the kernel {kernels}"));
                    }
                }
            }
            for (pref, _) in &added {
                sh(&[fam, "rule", "del", "pref", pref]);
            }
            follow(&mut monitor, &mut m);
        }
    }
    eprintln!("{sent} random packets, {kernel_forwarded} forwarded by the kernel's walk, {fast_forwarded} by the fast path:");
    for (what, n) in &tally {
        eprintln!("  {n:>6}  {what}");
    }
    assert!(sent >= sets as u64 * 10_000, "{sent}");
    // What the kernel forwards, the fast path forwards, but for next hops
    // it leaves to the kernel anyway (out where it came in).
    let left: u64 = tally
        .iter()
        .filter(|(w, _)| w.ends_with("the kernel forwards") && !w.starts_with("pass_same_if"))
        .map(|(_, n)| n)
        .sum();
    assert!(
        left * 100 < kernel_forwarded,
        "{left} of {kernel_forwarded} left to the kernel"
    );
}
