//! Ruleset changes under traffic, with linerate's router in a lab DUT.
//!
//! No frame is judged by a mix of two rulesets: two rulesets each drop
//! UDP ports 9 and 10, one at prerouting and the other at forward, the
//! other way round in the second; they replace each other (one `nft -f`
//! transaction each) while frames to ports 9, 10 and 11 flow. A frame
//! judged by one ruleset's prerouting chain and the other's forward chain
//! would pass; none may, while port 11's arrive.
//!
//! How long a change takes to reach the fast path: frames to port 12 flow
//! through a ruleset that accepts them, and a rule (then a set element,
//! then an interval of an interval set) that drops them is added; every
//! frame sent after `nft` returned (the kernel has the change) and still
//! delivered was forwarded by the old verdict. Their span is the delay,
//! printed, and bounded. Rules, set elements and intervals are applied
//! from the notifications, without reading the ruleset again.

mod common;

use linerate_host::netns::NetnsGuard;
use linerate_traffic::afpacket::PacketSocket;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LAB: &str = "lrt-fwc";
const GEN: [u8; 6] = [2, 0, 0, 0, 0, 1];
const DUT_IN: [u8; 6] = [2, 0, 0, 0, 0, 2];
/// Between frames: ~25k frames a second.
const GAP: Duration = Duration::from_micros(40);

fn nft(args: &[&str]) {
    let out = common::lab::dut_nft(LAB, args);
    assert!(
        out.status.success(),
        "nft {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn nft_file(text: &str) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), text).unwrap();
    nft(&["-f", &file.path().display().to_string()]);
}

/// A UDP frame to `port`, tagged with `seq` in its last four bytes.
fn frame(port: u16, seq: u32) -> Vec<u8> {
    let mut f = Vec::new();
    etherparse::PacketBuilder::ethernet2(GEN, DUT_IN)
        .ipv4([198, 18, 0, 1], [198, 19, 0, 1], 64)
        .udp(4000, port)
        .write(&mut f, &seq.to_be_bytes().repeat(4))
        .unwrap();
    f
}

fn tag(f: &[u8]) -> Option<(u16, u32)> {
    if f.len() < 42 || f[12..14] != [0x08, 0x00] || f[23] != 17 {
        return None;
    }
    let port = u16::from_be_bytes([f[36], f[37]]);
    let seq = u32::from_be_bytes(f[f.len() - 4..].try_into().ok()?);
    Some((port, seq))
}

/// Sends frames to `ports` in turn, tagged 0, 1, 2, ..., until `stop`;
/// `sent` holds the next tag.
fn sender(
    ports: Vec<u16>,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU32>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let _in = NetnsGuard::enter(&format!("{LAB}-gen")).unwrap();
        let sock = PacketSocket::open(linerate_bpf::loader::ifindex("gen0").unwrap()).unwrap();
        let mut seq = 0u32;
        while !stop.load(Ordering::SeqCst) {
            let f = frame(ports[seq as usize % ports.len()], seq);
            let mut b = vec![f.clone()];
            sock.send_batch(&mut b, &[f.len()]).unwrap();
            seq += 1;
            sent.store(seq, Ordering::SeqCst);
            let until = Instant::now() + GAP;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
    })
}

/// The tags that arrived at the receiver, by port.
fn arrived(frames: Vec<Vec<u8>>) -> Vec<(u16, u32)> {
    frames.iter().filter_map(|f| tag(f)).collect()
}

fn fast_path_judged() -> u64 {
    let record = format!("{LAB}-dut");
    let (rec, map) = linerate_dataplane::record::open(&record).unwrap();
    rec.interfaces
        .iter()
        .map(|(_, i)| {
            let c = linerate_dataplane::record::read(&map, *i).unwrap();
            c.packets_of("forwarded") + c.packets_of("drop_firewall")
        })
        .sum()
}

/// The router's firewall record as it is now (brought up to date every
/// 200 ms).
fn record() -> linerate_dataplane::record::FirewallRecord {
    std::thread::sleep(Duration::from_millis(300));
    linerate_dataplane::record::read_firewall(&format!("{LAB}-dut"))
        .unwrap()
        .expect("the router's firewall record")
}

fn wait_for_firewall(chains: usize) {
    let record = format!("{LAB}-dut");
    let t = Instant::now();
    loop {
        if let Ok(Some(r)) = linerate_dataplane::record::read_firewall(&record) {
            if r.judged[0].len() == chains {
                return;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the router's firewall did not take the ruleset"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

const CROSSED: [&str; 2] = [
    "table inet c {\n chain pre { type filter hook prerouting priority 0; policy accept; udp dport 9 drop; }\n chain transit { type filter hook forward priority 0; policy accept; udp dport 10 drop; }\n}\n",
    "table inet c {\n chain pre { type filter hook prerouting priority 0; policy accept; udp dport 10 drop; }\n chain transit { type filter hook forward priority 0; policy accept; udp dport 9 drop; }\n}\n",
];

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn changes_under_traffic_are_atomic_and_reach_the_fast_path_at_once() {
    let _down = common::lab::up(LAB);
    nft_file(CROSSED[0]);
    let _router = common::lab::start_router(LAB);
    wait_for_firewall(2);

    // Atomic: the crossed rulesets replace each other under traffic.
    let stop = Arc::new(AtomicBool::new(false));
    let capture = common::frames::capture(format!("{LAB}-recv"), "recv0", stop.clone());
    std::thread::sleep(Duration::from_millis(200));
    let judged_before = fast_path_judged();
    let (halt, sent) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU32::new(0)),
    );
    let tx = sender(vec![9, 10, 11], halt.clone(), sent.clone());
    for i in 1..=20 {
        std::thread::sleep(Duration::from_millis(100));
        nft_file(&format!(
            "flush table inet c\ndelete table inet c\n{}",
            CROSSED[i % 2]
        ));
    }
    std::thread::sleep(Duration::from_millis(100));
    halt.store(true, Ordering::SeqCst);
    tx.join().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::SeqCst);
    let got = arrived(capture.join().unwrap());
    let total = sent.load(Ordering::SeqCst);
    let leaked: Vec<_> = got.iter().filter(|(p, _)| *p == 9 || *p == 10).collect();
    let passed = got.iter().filter(|(p, _)| *p == 11).count() as u32;
    let judged = fast_path_judged() - judged_before;
    eprintln!("20 replacements under {total} frames: port 11 delivered {passed} of {}, ports 9 and 10 {}; the fast path judged {judged}", total / 3, leaked.len());
    assert!(
        leaked.is_empty(),
        "frames judged by a mix of two rulesets: {leaked:?}"
    );
    assert!(
        passed * 10 >= total / 3 * 9,
        "port 11: {passed} of {}",
        total / 3
    );
    assert!(
        judged * 2 >= total as u64,
        "the fast path judged {judged} of {total}"
    );

    // The delay: a rule, then a set element, that drops port 12.
    nft_file("flush table inet c\ndelete table inet c\ntable inet c {\n set blocked { type inet_service; }\n set ranges { type inet_service; flags interval; }\n chain transit { type filter hook forward priority 0; policy accept; udp dport 13 accept; }\n}\n");
    wait_for_firewall(1);
    let mut delays = Vec::new();
    for (what, add, undo) in [
        (
            "a rule",
            "add rule inet c transit udp dport 12 drop",
            "flush chain inet c transit",
        ),
        (
            "a set element",
            "add element inet c blocked { 12 }",
            "delete element inet c blocked { 12 }",
        ),
        (
            "an interval",
            "add element inet c ranges { 12-14 }",
            "delete element inet c ranges { 12-14 }",
        ),
    ] {
        let set = match what {
            "a set element" => Some("@blocked"),
            "an interval" => Some("@ranges"),
            _ => None,
        };
        if let Some(set) = set {
            nft(&[
                "add", "rule", "inet", "c", "transit", "udp", "dport", set, "drop",
            ]);
            wait_for_firewall(1);
        }
        let before = record();
        for _ in 0..5 {
            let stop = Arc::new(AtomicBool::new(false));
            let capture = common::frames::capture(format!("{LAB}-recv"), "recv0", stop.clone());
            std::thread::sleep(Duration::from_millis(200));
            let (halt, sent) = (
                Arc::new(AtomicBool::new(false)),
                Arc::new(AtomicU32::new(0)),
            );
            let tx = sender(vec![12], halt.clone(), sent.clone());
            // Learned by now: the fast path forwards port 12.
            std::thread::sleep(Duration::from_millis(300));
            let args: Vec<&str> = add.split(' ').collect();
            nft(&args);
            let committed = sent.load(Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(300));
            halt.store(true, Ordering::SeqCst);
            tx.join().unwrap();
            std::thread::sleep(Duration::from_millis(200));
            stop.store(true, Ordering::SeqCst);
            let got = arrived(capture.join().unwrap());
            let seqs: BTreeSet<u32> = got
                .iter()
                .filter(|(p, _)| *p == 12)
                .map(|(_, s)| *s)
                .collect();
            assert!(
                seqs.len() as u32 * 2 >= committed,
                "port 12 flowed before the change: {} of {committed}",
                seqs.len()
            );
            let stale = seqs.range(committed..).count() as u32;
            let last = seqs
                .range(committed..)
                .next_back()
                .map_or(0, |s| s - committed + 1);
            let delay = last as f64 * GAP.as_secs_f64() * 1e3;
            eprintln!("{what}: {stale} frames sent after nft returned were forwarded, the last {last} frames after it (~{delay:.2} ms)");
            delays.push(delay);
            assert!(last < Duration::from_millis(100).as_micros() as u32 / GAP.as_micros() as u32, "{what}: the old verdict held {last} frames (~{delay:.1} ms) after the kernel had the change");
            let undo: Vec<&str> = undo.split(' ').collect();
            nft(&undo);
            if what == "a rule" {
                nft(&[
                    "add", "rule", "inet", "c", "transit", "udp", "dport", "13", "accept",
                ]);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let after = record();
        if what == "a set element" {
            // Applied from the notifications, in place: no read.
            assert_eq!(
                (
                    after.reads,
                    after.elements_changed - before.elements_changed
                ),
                (before.reads, 10),
                "{what}"
            );
            assert!(
                after.elements_busy_us > before.elements_busy_us,
                "{what}: the thread's own time on them is counted"
            );
        } else if what == "an interval" {
            // The kernel's boundaries (a start and an end one past it,
            // each added and deleted), in place: no read.
            assert_eq!(after.reads, before.reads, "{what}");
            assert!(
                after.elements_changed - before.elements_changed >= 20,
                "{what}: {} boundaries changed",
                after.elements_changed - before.elements_changed
            );
        } else {
            // Rules added and flushed, in place too: nf_tables' notifications
            // say where, `nft monitor` prints them.
            assert_eq!(after.reads, before.reads, "{what}");
            assert!(
                after.rules_changed - before.rules_changed >= 15,
                "{what}: {} rules changed",
                after.rules_changed - before.rules_changed
            );
        }
    }
    delays.sort_by(f64::total_cmp);
    eprintln!("delays from nft's return to the fast path's new verdict (ms): {delays:.2?}");
}
