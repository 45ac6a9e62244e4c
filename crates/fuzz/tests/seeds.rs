//! The netlink target's seeds: a scratch namespace given some of
//! everything the router reads (links of several kinds, a bridge and its
//! FDB, addresses, routes of every type, multipath and through nexthop
//! objects, neighbours, policy rules, a qdisc, an nftables ruleset), its
//! tables dumped as the kernel sends them, each dump a seed. Every dump
//! runs through the target's body (the kernel's own bytes never panic it,
//! and the mirror reads routes of them); with LINERATE_WRITE_SEEDS=1 they
//! are written to fuzz/corpus/netlink/. Needs root.
use linerate_netlink::socket::{raw_dump, raw_dump_on};

fn ip(ns: &str, args: &str) {
    let a: Vec<&str> = args.split_whitespace().collect();
    linerate_host::cmd::ip(Some(ns), &a).unwrap_or_else(|e| panic!("ip {args}: {e:#}"));
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_kernels_dumps_are_seeds() {
    let ns = format!("lrt-seeds-{}", std::process::id());
    linerate_host::cmd::ip(None, &["netns", "add", &ns]).unwrap();
    struct Del(String);
    impl Drop for Del {
        fn drop(&mut self) {
            let _ = linerate_host::cmd::ip(None, &["netns", "del", &self.0]);
        }
    }
    let _del = Del(ns.clone());
    for cmd in [
        "link add s0 type veth peer name s1",
        "link add br0 type bridge",
        "link add d0 type veth peer name d1",
        "link set s1 master br0",
        "link set s0 up",
        "link set s1 up",
        "link set br0 up",
        "link set d0 up",
        "addr add 192.0.2.1/24 dev s0",
        "addr add 2001:db8::1/64 dev s0 nodad",
        "addr add 198.51.100.1/24 dev br0",
        "route add 203.0.113.0/24 via 192.0.2.2",
        "route add 10.0.0.0/8 nexthop via 192.0.2.2 weight 1 nexthop via 192.0.2.3 weight 2",
        "route add blackhole 10.1.0.0/16",
        "route add unreachable 10.2.0.0/16",
        "route add prohibit 10.3.0.0/16",
        "route add throw 10.4.0.0/16 table 100",
        "route add 10.5.0.0/16 via 192.0.2.9 table 100 mtu 1400",
        "-6 route add 2001:db8:1::/48 via 2001:db8::2",
        "nexthop add id 1 via 192.0.2.2 dev s0",
        "nexthop add id 2 via 192.0.2.3 dev s0",
        "nexthop add id 10 group 1/2",
        "route add 10.6.0.0/16 nhid 10",
        "neigh add 192.0.2.2 lladdr 02:00:00:00:00:02 dev s0 nud permanent",
        "neigh add 192.0.2.3 lladdr 02:00:00:00:00:03 dev s0 nud stale",
        "-6 neigh add 2001:db8::2 lladdr 02:00:00:00:00:04 dev s0 nud reachable",
        "rule add pref 100 iif s0 lookup 100",
        "rule add pref 110 from 10.9.0.0/16 ipproto udp dport 53 lookup 100",
        "rule add pref 120 to 203.0.113.0/24 blackhole",
        "-6 rule add pref 100 from 2001:db8::/32 lookup 100",
    ] {
        ip(&ns, cmd);
    }
    linerate_host::cmd::in_netns(
        &ns,
        "bridge",
        &[
            "fdb",
            "add",
            "02:00:00:00:00:09",
            "dev",
            "s1",
            "master",
            "static",
        ],
    )
    .unwrap();
    linerate_host::cmd::in_netns(
        &ns,
        "tc",
        &[
            "qdisc", "add", "dev", "d0", "root", "tbf", "rate", "100kbit", "burst", "1600",
            "limit", "3000",
        ],
    )
    .unwrap();
    let rules = "table inet t {
  set s { type ipv4_addr; elements = { 10.0.0.1, 10.0.0.2 } }
  chain f { type filter hook forward priority 0; ct state established accept; ip saddr @s drop; iifname \"s0\" tcp dport 22 accept; }
  chain p { type nat hook postrouting priority 100; oifname \"s0\" masquerade; }
}
";
    let file = std::env::temp_dir().join(format!("lrt-seeds-{}.nft", std::process::id()));
    std::fs::write(&file, rules).unwrap();
    let r = linerate_host::cmd::in_netns(&ns, "nft", &["-f", &file.display().to_string()]);
    let _ = std::fs::remove_file(&file);
    r.unwrap();

    let _in = linerate_host::netns::NetnsGuard::enter(&ns).unwrap();
    // (kind, the request's body, a name): rtnetlink's dumps, then
    // nftables' chains and set elements over NETLINK_NETFILTER.
    let ifinfo = [0u8; 16];
    let rtmsg = [0u8; 12];
    let dumps: Vec<(&str, Vec<Vec<u8>>)> = vec![
        ("links", raw_dump(18, &ifinfo, "links").unwrap().unwrap()),
        (
            "addresses",
            raw_dump(22, &[0u8; 8], "addresses").unwrap().unwrap(),
        ),
        ("routes", raw_dump(26, &rtmsg, "routes").unwrap().unwrap()),
        (
            "neighbours",
            raw_dump(30, &[0u8; 12], "neighbours").unwrap().unwrap(),
        ),
        (
            "fdb",
            raw_dump(30, &[7u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], "fdb")
                .unwrap()
                .unwrap(),
        ),
        ("rules", raw_dump(34, &rtmsg, "rules").unwrap().unwrap()),
        (
            "qdiscs",
            raw_dump(38, &[0u8; 20], "qdiscs").unwrap().unwrap(),
        ),
        (
            "netconf",
            raw_dump(82, &[0u8; 4], "netconf").unwrap().unwrap(),
        ),
        (
            "nexthops",
            raw_dump(106, &[0u8; 8], "nexthops").unwrap().unwrap(),
        ),
        (
            "nft-chains",
            raw_dump_on(12, (10 << 8) | 4, &[1u8, 0, 0, 0], "chains")
                .unwrap()
                .unwrap(),
        ),
    ];
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/netlink");
    let write = std::env::var_os("LINERATE_WRITE_SEEDS").is_some();
    let mut changes = 0;
    for (name, msgs) in &dumps {
        assert!(!msgs.is_empty(), "{name}: the kernel dumped nothing");
        let buf: Vec<u8> = msgs.concat();
        changes += linerate_netlink::read_all::read_all(&buf).len();
        linerate_fuzz::netlink(&buf);
        if write {
            std::fs::create_dir_all(&out).unwrap();
            std::fs::write(out.join(format!("dump-{name}")), &buf).unwrap();
            // Each message alone too: a short input the fuzzer mutates well.
            for (i, m) in msgs.iter().enumerate().take(8) {
                std::fs::write(out.join(format!("{name}-{i}")), m).unwrap();
            }
        }
    }
    assert!(changes > 20, "the dumps decoded to {changes} changes");
}
