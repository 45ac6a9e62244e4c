//! The fast path's firewall stage against the model and the evaluator:
//! an nftables ruleset loaded with `nft -f` in a scratch namespace, read
//! back (`nft -j`), compiled; random forwarded frames run through the
//! program and the model side by side. Every frame misses first, and the
//! key the program reports is the one the evaluator's FlowKey::of gives
//! for the packet etherparse reads from the frame; once the misses are
//! learned, every frame gets the evaluator's verdict, in the program and
//! the model alike, and the rule counters agree with the rules the
//! evaluator counted. A new generation makes every entry stale at once.

use linerate_dataplane::dataplane::Dataplane;
use linerate_dataplane::fw_cache::FwTable;
use linerate_dataplane::fw_maps::FwMaps;
use linerate_dataplane::layout::{
    FwMiss, Iface, Nexthop, IFACE_FIREWALL4, IFACE_FIREWALL6, IFACE_FORWARD4, IFACE_FORWARD6,
    NH_RESOLVED, NH_VALID,
};
use linerate_dataplane::model::Model;
use linerate_fib::{Fib, Shape};
use linerate_firewall::cache::{FlowKey, KeyOf};
use linerate_firewall::compile::{self, Compiled, FAMILY_COUNTERS};
use linerate_firewall::{judge, Packet, Verdict};
use linerate_testkit::plane::{program_verdict, XdpAction, MAC_IN, MAC_OUT};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

const RULESET: &str = r#"
table inet t {
    set allowed {
        type ipv4_addr . inet_service
        elements = { 198.18.0.1 . 80, 198.18.0.2 . 443 }
    }
    chain transit {
        type filter hook forward priority 0; policy accept;
        iifname "fwt0" tcp flags & (syn | ack) == syn counter jump syns
        ip saddr . tcp dport @allowed counter accept
        udp dport vmap { 53 : drop, 123 : accept, 5000-5100 : jump udps }
        icmp type echo-request counter drop
        icmpv6 type echo-request counter reject
        meta l4proto 47 counter drop
        ip6 daddr 2001:db8::/48 oifname "fwt1" counter drop
    }
    chain syns {
        tcp dport { 22, 8080 } counter drop
        counter return
    }
    chain udps {
        ip saddr 198.18.0.0/31 counter drop
    }
}
table ip u {
    chain post {
        type filter hook postrouting priority 10; policy drop;
        ip daddr 198.19.1.0/24 counter accept
        ip protocol tcp accept
        ip protocol udp udp dport 53 accept
        meta l4proto { icmp, 47 } accept
    }
}
"#;

fn ipv4_frame(src: [u8; 4], dst: [u8; 4], proto: u8, transport: &[u8]) -> Vec<u8> {
    let mut f = [MAC_IN, [2, 0, 0, 0, 0, 1]].concat();
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + transport.len()) as u16;
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&[0, 1, 0, 0, 64, proto, 0, 0]);
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let mut sum: u32 = ip
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(transport);
    pad(f)
}

/// Ethernet's minimum and a trailer the IP length does not cover, not
/// zero (as a sender may leave them): the key holds none of it.
fn pad(mut f: Vec<u8>) -> Vec<u8> {
    f.resize(f.len().max(60) + 4, 0xa5);
    f
}

fn ipv6_frame(src: u128, dst: u128, proto: u8, transport: &[u8]) -> Vec<u8> {
    let mut f = [MAC_IN, [2, 0, 0, 0, 0, 1]].concat();
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&(transport.len() as u16).to_be_bytes());
    f.extend_from_slice(&[proto, 64]);
    f.extend_from_slice(&src.to_be_bytes());
    f.extend_from_slice(&dst.to_be_bytes());
    f.extend_from_slice(transport);
    pad(f)
}

/// A random forwarded frame of the kinds the ruleset tells apart.
fn random_frame(rng: &mut impl Rng) -> Vec<u8> {
    let ipv6 = rng.gen_bool(0.4);
    let proto = match rng.gen_range(0..4) {
        0 => 6,
        1 => 17,
        2 if ipv6 => 58,
        2 => 1,
        _ => 47,
    };
    let ports = [22u16, 53, 80, 123, 443, 5050, 8080, 9999];
    let mut t: Vec<u8> = (0..24).map(|_| rng.gen()).collect();
    t[0..2].copy_from_slice(&ports[rng.gen_range(0..ports.len())].to_be_bytes());
    t[2..4].copy_from_slice(&ports[rng.gen_range(0..ports.len())].to_be_bytes());
    if proto == 1 || proto == 58 {
        t[0] = [0, 8, 128, 129][rng.gen_range(0..4)];
    }
    if rng.gen_bool(0.5) {
        t[13] = [0x02, 0x12, 0x10, 0x03][rng.gen_range(0..4)];
    }
    let len = [0usize, 1, 3, 4, 8, 13, 14, 20][rng.gen_range(0..8)];
    t.truncate(len);
    if ipv6 {
        let src = [
            0x2001_0002_0000_0000_0000_0000_0000_0001u128,
            0x2001_0002 << 96 | 2,
        ];
        let dst = [0x2001_0db8u128 << 96 | 5, 0x2001_0db8_0001u128 << 80 | 5];
        ipv6_frame(
            src[rng.gen_range(0..2)],
            dst[rng.gen_range(0..2)],
            proto,
            &t,
        )
    } else {
        let src = [[198, 18, 0, 1], [198, 18, 0, 2], [198, 18, 0, 3]];
        let dst = [[198, 19, 1, 5], [198, 19, 2, 5]];
        ipv4_frame(
            src[rng.gen_range(0..3)],
            dst[rng.gen_range(0..2)],
            proto,
            &t,
        )
    }
}

/// The packet the evaluator sees, read from the frame by etherparse (an
/// independent reading of the headers).
fn packet_of(f: &[u8], iif: u32, oif: u32, names: &BTreeMap<u32, String>) -> Packet {
    let name = |i: u32| names.get(&i).cloned().unwrap_or_default();
    let (ipv6, saddr, daddr, proto, payload) = if f[12] == 0x08 {
        let ip = etherparse::Ipv4Slice::from_slice(&f[14..]).unwrap();
        let h = ip.header();
        (
            false,
            u32::from(h.source_addr()) as u128,
            u32::from(h.destination_addr()) as u128,
            h.protocol().0,
            ip.payload().payload.to_vec(),
        )
    } else {
        let ip = etherparse::Ipv6Slice::from_slice(&f[14..]).unwrap();
        let h = ip.header();
        // etherparse takes a payload length of 0 for a jumbogram's (the
        // rest of the frame); without a hop-by-hop header the kernel takes
        // it for 0.
        let payload = ip.payload().payload;
        (
            true,
            u128::from(h.source_addr()),
            u128::from(h.destination_addr()),
            h.next_header().0,
            payload[..payload.len().min(h.payload_length() as usize)].to_vec(),
        )
    };
    Packet {
        ipv6,
        iif,
        iifname: name(iif),
        oif,
        oifname: name(oif),
        saddr,
        daddr,
        l4proto: proto,
        nexthdr: proto,
        later_fragment: false,
        transport: payload,
        ..Default::default()
    }
}

fn program_misses(maps: &FwMaps) -> Vec<FwMiss> {
    let mut got = Vec::new();
    {
        let mut b = libbpf_rs::RingBufferBuilder::new();
        b.add(maps.misses(), |d: &[u8]| {
            got.push(<FwMiss as linerate_bpf::layout::Pod>::from_bytes(d).expect("a fw_miss"));
            0
        })
        .unwrap();
        b.build().unwrap().consume().unwrap();
    }
    got
}

/// Checks that frame `f` got (`reason`) the evaluator's verdict under
/// `c`, and adds what the evaluator counted to `counts` (rule counter id:
/// packets, IP bytes as nftables counts them).
fn judged_as_the_evaluator(
    f: &[u8],
    reason: &str,
    c: &Compiled,
    (if0, if1): (u32, u32),
    names: &BTreeMap<u32, String>,
    counts: &mut BTreeMap<u16, (u64, u64)>,
) {
    let p = packet_of(f, if0, if1, names);
    let filter = &c.families[p.ipv6 as usize].as_ref().unwrap().filter;
    let j = judge(filter, &p);
    let want = match j.verdict {
        Verdict::Accept => "forwarded",
        Verdict::Drop => "drop_firewall",
        Verdict::Kernel => "pass_fw_kernel",
    };
    assert_eq!(reason, want, "{p:?}: {j:?}");
    if j.verdict != Verdict::Kernel {
        let offsets = linerate_firewall::cache::chain_offsets(filter);
        for (chain, rule) in &j.counted {
            let id = offsets[*chain] + rule + if p.ipv6 { FAMILY_COUNTERS } else { 0 };
            let e = counts.entry(id as u16).or_default();
            e.0 += 1;
            e.1 += (p.transport.len() + if p.ipv6 { 40 } else { 20 }) as u64;
        }
    }
}

/// Loads nftables text `text` into namespace `ns` with `nft -f` (through
/// a file of its own, `tag` naming it).
fn nft_file(ns: &str, tag: &str, text: &str) {
    let path = std::env::temp_dir().join(format!("lrt-{tag}-{}.nft", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let loaded = linerate_host::cmd::in_netns(ns, "nft", &["-f", path.to_str().unwrap()]);
    std::fs::remove_file(&path).unwrap();
    loaded.unwrap();
}

/// The program and a model beside it, routing the IPv4 and IPv6
/// prefixes given out of `if1` (one resolved next hop), frames arriving
/// on `if0`; interface flags `flags` on both.
fn routed(
    fp: &linerate_dataplane::fastpath::FastPath,
    (if0, if1): (u32, u32),
    flags: u16,
    (p4, l4): (u32, u8),
    (p6, l6): (u128, u8),
) -> Model {
    let mut model = Model::new(Default::default());
    let nh = Nexthop {
        ifindex: if1,
        mtu: 1500,
        flags: NH_VALID | NH_RESOLVED,
        used: 0,
        dmac: [2, 0, 0, 0, 0, 4],
        smac: MAC_OUT,
        l3: 0,
        tag: [0; 4],
    };
    let mut f4: Fib<u32> = Fib::new(Shape::IPV4);
    let w4 = f4.insert(p4, l4, 1).unwrap();
    let mut f6: Fib<u128> = Fib::new(Shape::IPV6);
    let w6 = f6.insert(p6, l6, 1).unwrap();
    fp.add_interface(if0, MAC_IN, flags).unwrap();
    fp.add_interface(if1, MAC_OUT, flags).unwrap();
    fp.set_nexthop(1, &nh).unwrap();
    fp.load_fib(&f4).unwrap();
    fp.load_fib(&f6).unwrap();
    model
        .set_interface(&Iface::new(if0, MAC_IN, flags), true)
        .unwrap();
    model
        .set_interface(&Iface::new(if1, MAC_OUT, flags), true)
        .unwrap();
    model.set_nexthop(1, &nh).unwrap();
    model.apply_fib(0, &f4, &w4).unwrap();
    model.apply_fib(0, &f6, &w6).unwrap();
    model
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_program_judges_by_the_cache_as_the_model_and_the_evaluator() {
    let (pair, fp) = linerate_testkit::plane::scratch_pair("fw", "fwt");
    let (if0, if1) = (pair.if0, pair.if1);
    let names = BTreeMap::from([(if0, "fwt0".to_string()), (if1, "fwt1".to_string())]);
    nft_file(&pair.ns, "fw", RULESET);
    let ruleset = linerate_firewall::read_current().unwrap();
    let (c, why) = Compiled::new(1, &ruleset, names.clone(), false);
    assert_eq!(why, [None, None]);
    // First the verdict cache alone: every key learned through the
    // control plane.
    let c = c.without_classifiers();

    // The program and the model: one route a family, out through fwt1.
    let flags = IFACE_FORWARD4 | IFACE_FORWARD6 | IFACE_FIREWALL4 | IFACE_FIREWALL6;
    let mut model = routed(
        &fp,
        (if0, if1),
        flags,
        (0xc613_0000, 16),
        (0x2001_0db8u128 << 96, 32),
    );
    let mut maps = fp.fw_maps().unwrap();
    compile::publish(&mut maps, &c);
    compile::publish(model.fw_mut(), &c);

    let mut rng = rand::rngs::StdRng::seed_from_u64(23);
    let frames: Vec<Vec<u8>> = (0..400).map(|_| random_frame(&mut rng)).collect();
    let run = |f: &[u8], model: &Model| {
        let (action, reason, out) = program_verdict(&fp, if0, f);
        let m = model.run(f, if0);
        assert_eq!(
            (action, reason),
            (m.action, m.reason),
            "program and model on {f:02x?}"
        );
        if action == XdpAction::Redirect {
            assert_eq!(out, m.frame);
        }
        reason
    };

    // Nothing learned: every frame misses, and is reported with the key
    // the evaluator's FlowKey::of gives.
    for f in &frames {
        assert_eq!(run(f, &model), "pass_fw_miss");
    }
    let misses = program_misses(&maps);
    assert_eq!(misses, model.fw().take_misses());
    assert_eq!(misses.len(), frames.len());
    for (m, f) in misses.iter().zip(&frames) {
        let p = packet_of(f, if0, if1, &names);
        let reads = &c.families[p.ipv6 as usize].as_ref().unwrap().reads;
        assert_eq!(m.key.flow, FlowKey::of(&p, reads), "the key of {p:?}");
        assert_eq!(m.generation, 1);
    }

    // Learned: the evaluator's verdicts, and its counters.
    let mut learned = 0;
    for (i, m) in misses.iter().enumerate() {
        let a = compile::learn(&mut maps, &c, &m.key.flow, i % 2 == 1);
        let b = compile::learn(model.fw_mut(), &c, &m.key.flow, i % 2 == 1);
        assert_eq!(a, b);
        learned += a.is_some() as usize;
    }
    assert!(
        learned > 40 && learned < frames.len(),
        "{learned} distinct keys"
    );
    let mut want_counts: BTreeMap<u16, (u64, u64)> = BTreeMap::new();
    let mut seen = BTreeMap::new();
    for f in &frames {
        let reason = run(f, &model);
        *seen.entry(reason).or_insert(0) += 1;
        judged_as_the_evaluator(f, reason, &c, (if0, if1), &names, &mut want_counts);
    }
    assert!(seen.len() == 3, "every verdict seen: {seen:?}");
    for (id, (packets, bytes)) in &want_counts {
        let got = maps.counter(*id).unwrap();
        assert_eq!(
            (got.packets, got.bytes),
            (*packets, *bytes),
            "rule counter {id}"
        );
        assert_eq!(model.fw().counter(*id), got);
    }
    assert!(model.fw().take_misses().is_empty());
    assert!(program_misses(&maps).is_empty());

    // A new generation: every entry stale at once.
    let (c2, _) = Compiled::new(2, &ruleset, names.clone(), false);
    let c2 = c2.without_classifiers();
    compile::publish(&mut maps, &c2);
    compile::publish(model.fw_mut(), &c2);
    for f in &frames {
        assert_eq!(run(f, &model), "pass_fw_miss");
    }
    assert_eq!(program_misses(&maps).len(), frames.len());
    assert_eq!(model.fw().take_misses().len(), frames.len());
    assert_eq!(maps.slot(0).seq % 2, 0);

    // With the classifiers: nothing misses; every frame, the first of its
    // key too, gets the evaluator's verdict and counts where it counted,
    // in the program and the model alike.
    let (c3, _) = Compiled::new(3, &ruleset, names.clone(), false);
    for f in c3.families.iter().flatten() {
        assert!(
            f.classifier.is_ok(),
            "classified: {:?}",
            f.classifier.as_ref().err()
        );
    }
    compile::publish(&mut maps, &c3);
    compile::publish(model.fw_mut(), &c3);
    let before: BTreeMap<u16, (u64, u64)> = want_counts
        .keys()
        .map(|id| {
            let n = maps.counter(*id).unwrap();
            (*id, (n.packets, n.bytes))
        })
        .collect();
    let mut counted: BTreeMap<u16, (u64, u64)> = BTreeMap::new();
    let mut seen = BTreeMap::new();
    for _ in 0..2 {
        for f in &frames {
            let reason = run(f, &model);
            *seen.entry(reason).or_insert(0) += 1;
            judged_as_the_evaluator(f, reason, &c3, (if0, if1), &names, &mut counted);
        }
    }
    assert!(seen.len() == 3, "every verdict seen: {seen:?}");
    assert!(
        program_misses(&maps).is_empty(),
        "the classifier judged every key"
    );
    assert!(model.fw().take_misses().is_empty());
    for (id, (packets, bytes)) in &counted {
        let got = maps.counter(*id).unwrap();
        let (p0, b0) = before.get(id).copied().unwrap_or_default();
        assert_eq!(
            (got.packets - p0, got.bytes - b0),
            (*packets, *bytes),
            "rule counter {id} under the classifier"
        );
    }

    // The classifiers gone (as when a set passes their room): the keys
    // the program cached under generation 3 are judged again by the
    // evaluator and carried into 4 as it is published; a frame whose key
    // was carried hits at once, in the program as in the model, with the
    // evaluator's verdict, and only the others miss.
    let (c4, _) = Compiled::new(4, &ruleset, names.clone(), false);
    let c4 = c4.without_classifiers();
    let budget = std::time::Duration::from_secs(30);
    let carried = linerate_firewall::carry::carried(&maps, 3, &c4, budget);
    let in_model = linerate_firewall::carry::carried(model.fw(), 3, &c4, budget);
    assert_eq!(carried.writes, in_model.writes);
    assert_eq!(
        (carried.kept, carried.left),
        (0, 0),
        "read whole: judged again"
    );
    assert!(carried.writes.len() > 40, "{carried:?}");
    compile::publish_carrying(&mut maps, &c4, &carried.writes);
    compile::publish_carrying(model.fw_mut(), &c4, &in_model.writes);
    let keys: Vec<FlowKey> = carried.writes.iter().map(|(_, s)| s.key.flow).collect();
    let mut missed = 0;
    for f in &frames {
        let reason = run(f, &model);
        let p = packet_of(f, if0, if1, &names);
        let reads = &c4.families[p.ipv6 as usize].as_ref().unwrap().reads;
        let carried = keys.contains(&FlowKey::of(&p, reads));
        if reason == "pass_fw_miss" {
            assert!(!carried, "{p:?}: carried, and missed");
            missed += 1;
            continue;
        }
        judged_as_the_evaluator(f, reason, &c4, (if0, if1), &names, &mut BTreeMap::new());
    }
    assert_eq!(program_misses(&maps).len(), missed);
    assert!(
        missed < frames.len() / 4,
        "{missed} of {} missed",
        frames.len()
    );
    drop(fp);
    drop(pair);
}

/// The sets' elements read over netlink (what `linerate route` reads) are
/// those nft prints in its JSON: plain, interval, concatenated and
/// concatenated-range sets, a verdict map with jumps, interface indexes.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn set_elements_read_over_netlink_are_the_ones_nft_prints() {
    let (pair, fp) = linerate_testkit::plane::scratch_pair("fwsets", "fws");
    let ruleset = r#"
table inet t {
    set s4 { type ipv4_addr; elements = { 10.0.0.1, 10.0.0.2, 192.0.2.77 } }
    set s6 { type ipv6_addr; elements = { 2001:db8::1, 2001:db8::2:1 } }
    set iv { type ipv4_addr; flags interval; elements = { 0.0.0.0/8, 10.0.0.0/24, 10.1.0.5, 240.0.0.0-255.255.255.255 } }
    set ports { type inet_service; flags interval; elements = { 22, 1000-2000, 65000-65535 } }
    set cc { type ipv4_addr . inet_service; elements = { 10.0.0.1 . 80, 10.0.0.2 . 443 } }
    set ccr { type ipv4_addr . inet_service; flags interval; elements = { 10.0.0.0/24 . 80-90, 10.9.0.1 . 22 } }
    set ifs { type iface_index; elements = { "fws0", "fws1" } }
    map m { type inet_service : verdict; elements = { 80 : accept, 81 : jump c, 82 : drop, 83 : goto c } }
    chain c { counter; }
    chain f {
        type filter hook forward priority 0;
        ip saddr @s4 accept
        ip6 saddr @s6 accept
        ip daddr @iv drop
        tcp dport @ports drop
        ip saddr . tcp dport @cc drop
        ip saddr . tcp dport @ccr drop
        meta iif @ifs accept
        tcp dport vmap @m
    }
}
"#;
    nft_file(&pair.ns, "fwsets", ruleset);
    let from_json = linerate_firewall::read_current().unwrap();
    let from_netlink = linerate_firewall::read::read_current_with(&|t, s| {
        linerate_netlink::nft_elements::dump(t, s)
    })
    .unwrap();
    for ipv6 in [false, true] {
        let (a, b) = (
            from_json.family(ipv6).as_ref().unwrap(),
            from_netlink.family(ipv6).as_ref().unwrap(),
        );
        assert_eq!(a.sets.len(), 8, "every set read");
        // The same elements, in whichever order.
        let sorted = |f: &linerate_firewall::ruleset::Filter| {
            let mut f = f.clone();
            for s in &mut f.sets {
                let e = &mut s.elements;
                let mut both: Vec<_> = e
                    .keys
                    .iter()
                    .cloned()
                    .zip(
                        e.verdicts
                            .iter()
                            .cloned()
                            .map(Some)
                            .chain(std::iter::repeat(None)),
                    )
                    .collect();
                both.sort_by(|x, y| format!("{x:?}").cmp(&format!("{y:?}")));
                e.keys = both.iter().map(|b| b.0.clone()).collect();
                e.verdicts = both.iter().filter_map(|b| b.1.clone()).collect();
                e.reindex();
            }
            f
        };
        assert_eq!(sorted(a), sorted(b));
    }
    drop(fp);
    drop(pair);
}

/// A long access list whose first rule tests no address (so every
/// address row has a bit in the first word, and the rows' first and last
/// words narrow nothing): the walk reads only the words every row's
/// summary has, and judges each key in the program as the evaluator
/// judges its packet, deep rules, the accept and the policy alike.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_long_access_list_is_judged_in_the_program_as_the_evaluator_judges() {
    let (pair, fp) = linerate_testkit::plane::scratch_pair("fwacl", "fwa");
    let (if0, if1) = (pair.if0, pair.if1);
    let names = BTreeMap::from([(if0, "fwa0".to_string()), (if1, "fwa1".to_string())]);
    let rules = 700u32;
    let mut text = String::from(
        "table ip acl {\n chain f {\n  type filter hook forward priority 0; policy drop;\n  ip saddr 10.99.0.0/16 counter drop\n",
    );
    for i in 0..rules {
        let counter = if i % 7 == 0 { "counter " } else { "" };
        text.push_str(&format!(
            "  ip daddr 10.{}.{}.0/24 udp dport {} {counter}drop\n",
            i >> 8,
            i & 0xff,
            1000 + i
        ));
    }
    text.push_str("  ip daddr 198.19.0.0/16 counter accept\n }\n}\n");
    nft_file(&pair.ns, "fwacl", &text);
    let ruleset = linerate_firewall::read_current().unwrap();
    let (c, why) = Compiled::new(1, &ruleset, names.clone(), false);
    assert_eq!(why, [None, None]);
    let t = c.families[0].as_ref().unwrap().classifier.as_ref().unwrap();
    assert!(t.words >= 11, "{} words", t.words);

    let flags = IFACE_FORWARD4 | IFACE_FIREWALL4;
    let mut model = routed(&fp, (if0, if1), flags, (0, 0), (0x2001_0db8u128 << 96, 32));
    let mut maps = fp.fw_maps().unwrap();
    compile::publish(&mut maps, &c);
    compile::publish(model.fw_mut(), &c);

    let mut rng = rand::rngs::StdRng::seed_from_u64(29);
    let mut seen = BTreeMap::new();
    let mut counted = BTreeMap::new();
    for _ in 0..1500 {
        let i = rng.gen_range(0..rules);
        let dst = match rng.gen_range(0..4) {
            0 | 1 => [10, (i >> 8) as u8, (i & 0xff) as u8, rng.gen()],
            2 => [198, 19, rng.gen(), rng.gen()],
            _ => [rng.gen_range(11..200), rng.gen(), rng.gen(), rng.gen()],
        };
        let src = if rng.gen_bool(0.1) {
            [10, 99, rng.gen(), rng.gen()]
        } else {
            [198, 18, rng.gen(), rng.gen()]
        };
        let dport = if rng.gen_bool(0.5) {
            1000 + i as u16
        } else {
            rng.gen_range(1000..1000 + rules as u16)
        };
        let mut udp = vec![0u8; 8];
        udp[0..2].copy_from_slice(&4000u16.to_be_bytes());
        udp[2..4].copy_from_slice(&dport.to_be_bytes());
        udp[4..6].copy_from_slice(&8u16.to_be_bytes());
        let f = ipv4_frame(src, dst, 17, &udp);
        let (action, reason, _) = program_verdict(&fp, if0, &f);
        let m = model.run(&f, if0);
        assert_eq!(
            (action, reason),
            (m.action, m.reason),
            "program and model on {f:02x?}"
        );
        judged_as_the_evaluator(&f, reason, &c, (if0, if1), &names, &mut counted);
        *seen.entry(reason).or_insert(0) += 1;
    }
    assert!(
        program_misses(&maps).is_empty(),
        "the classifier judged every key"
    );
    assert_eq!(seen.len(), 2, "accepted and dropped both: {seen:?}");
    for (id, (packets, bytes)) in &counted {
        let got = maps.counter(*id).unwrap();
        assert_eq!(
            (got.packets, got.bytes),
            (*packets, *bytes),
            "rule counter {id}"
        );
    }
    drop(fp);
    drop(pair);
}

/// The classifier's walk meets at most `FWC_MAX_STEPS` (32) terms: a key
/// that meets 32 is judged in the program, one that meets 33 is the
/// kernel's (`pass_fw_kernel`), in the program and the model alike, and
/// the kernel gives it the verdict. Each jump to `sub` is one term met by
/// the frame sent (its `return`; a chain's end is no term: the chain is
/// laid out in place); the counted accept after the jumps two more.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_walk_past_its_steps_is_the_kernels_in_the_program_and_the_model() {
    let (pair, fp) = linerate_testkit::plane::scratch_pair("fwdeep", "fwd");
    let (if0, if1) = (pair.if0, pair.if1);
    let names = BTreeMap::from([(if0, "fwd0".to_string()), (if1, "fwd1".to_string())]);
    let flags = IFACE_FORWARD4 | IFACE_FIREWALL4;
    let mut model = routed(&fp, (if0, if1), flags, (0, 0), (0x2001_0db8u128 << 96, 32));
    let mut maps = fp.fw_maps().unwrap();
    let mut udp = vec![0u8; 8];
    udp[0..2].copy_from_slice(&4000u16.to_be_bytes());
    udp[2..4].copy_from_slice(&7000u16.to_be_bytes());
    udp[4..6].copy_from_slice(&8u16.to_be_bytes());
    for (generation, jumps, want) in [(1, 30, "forwarded"), (2, 31, "pass_fw_kernel")] {
        let mut text = String::from(
            "flush ruleset\ntable ip deep {\n chain sub {\n  ip saddr 198.18.0.0/16 return\n  udp dport 7001 drop\n }\n chain f {\n  type filter hook forward priority 0; policy drop;\n",
        );
        for _ in 0..jumps {
            text.push_str("  udp dport 7000-7099 jump sub\n");
        }
        text.push_str("  ip daddr 198.19.0.0/16 counter accept\n }\n}\n");
        nft_file(&pair.ns, "fwdeep", &text);
        let ruleset = linerate_firewall::read_current().unwrap();
        let (c, why) = Compiled::new(generation, &ruleset, names.clone(), false);
        assert_eq!(why, [None, None]);
        assert!(c.families[0].as_ref().unwrap().classifier.is_ok());
        compile::publish(&mut maps, &c);
        compile::publish(model.fw_mut(), &c);
        let f = ipv4_frame([198, 18, 0, 1], [198, 19, 0, 1], 17, &udp);
        // Twice: judged by the classifier, then by the cache it filled.
        for _ in 0..2 {
            let (action, reason, _) = program_verdict(&fp, if0, &f);
            let m = model.run(&f, if0);
            assert_eq!((action, reason), (m.action, m.reason), "{jumps} jumps");
            assert_eq!(reason, want, "{jumps} jumps");
        }
        // Either way the kernel's verdict is the evaluator's: accepted.
        let p = packet_of(&f, if0, if1, &names);
        let filter = &c.families[0].as_ref().unwrap().filter;
        assert_eq!(judge(filter, &p).verdict, Verdict::Accept);
        assert!(
            program_misses(&maps).is_empty(),
            "the classifier judged the key ({jumps} jumps)"
        );
    }
    drop(fp);
    drop(pair);
}
