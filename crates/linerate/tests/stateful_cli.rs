//! The stateful firewall with real connections (issue 24): UDP
//! conversations between sockets in a lab's generator and receiver
//! namespaces, through linerate's router in the DUT under a stateful
//! ruleset (established and related accepted, new only from the
//! generator's side). The echoes come back byte for byte; the kernel sees
//! each connection's beginning and the fast path carries the rest; the
//! kernel's entries live on while the fast path carries their packets
//! (their timeout, shortened here to 6 s, would run out otherwise) and
//! expire once the traffic stops; a connection deleted from the kernel's
//! table is not carried any more. Needs root.
use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::lab;

const LAB: &str = "lrt-ct";
/// Addresses beyond the lab's connected /24s, reached through gateway
/// routes: what the fast path forwards.
const CLIENT: &str = "198.18.1.1";
const SERVER: &str = "198.19.1.1";
const PORT: u16 = 7000;
/// nf_conntrack_udp_timeout_stream in the DUT for the test.
const STREAM_TIMEOUT: u64 = 6;

const RULESET: &str = "table inet stateful {
  chain forward {
    type filter hook forward priority 0; policy drop;
    ct state established,related accept
    ct state new iifname \"dut0\" accept
  }
}
";

fn ns(role: &str) -> String {
    format!("{LAB}-{role}")
}

fn run(ns: &str, args: &[&str]) -> String {
    let o = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?} in {ns}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The DUT's conntrack entries of the test's connections (`conntrack -L`
/// lines, one per connection).
fn entries() -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns("dut"), "conntrack", "-L", "-p", "udp"])
        .args(["--dport", &PORT.to_string()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// A conntrack line's seconds left.
fn timeout_of(line: &str) -> u64 {
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// The router's counters for `reason`, over its interfaces.
fn counted(reason: &str) -> u64 {
    let (rec, map) = linerate_router::stats::open(&ns("dut")).unwrap();
    rec.interfaces
        .iter()
        .map(|(_, i)| {
            linerate_router::stats::read(&map, *i)
                .unwrap()
                .packets_of(reason)
        })
        .sum()
}

fn wait_for_firewall() {
    let t = Instant::now();
    loop {
        if let Ok(Some(r)) = linerate_router::stats::read_firewall(&ns("dut")) {
            if r.judged[0].len() == 1 && r.judged[1].len() == 1 {
                return;
            }
            assert!(
                r.refused.iter().all(Option::is_none),
                "the router refused the ruleset: {:?}",
                r.refused
            );
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the router's firewall did not take the ruleset"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The echo server in the receiver's namespace: every datagram back to
/// its sender, and what `push` hands it to whom it says (unasked), until
/// `stop`.
fn echo_server(
    stop: Arc<AtomicBool>,
    push: std::sync::mpsc::Receiver<(SocketAddr, Vec<u8>)>,
) -> std::thread::JoinHandle<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let _in = linerate_host::netns::NetnsGuard::enter(&ns("recv")).unwrap();
        let s = UdpSocket::bind((SERVER, PORT)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        tx.send(()).unwrap();
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((n, from)) = s.recv_from(&mut buf) {
                s.send_to(&buf[..n], from).unwrap();
            }
            while let Ok((to, what)) = push.try_recv() {
                s.send_to(&what, to).unwrap();
            }
        }
    });
    rx.recv().unwrap();
    t
}

/// A datagram's bytes: who sends it, its number, and a pattern of its
/// own, 64 to 1400 bytes.
fn payload(sock: usize, seq: u32) -> Vec<u8> {
    let len = 64 + (seq as usize * 97 + sock * 31) % 1337;
    let mut p: Vec<u8> = (0..len)
        .map(|i| (i as u32 * 7 + seq * 13 + sock as u32) as u8)
        .collect();
    p[..4].copy_from_slice(&(sock as u32).to_be_bytes());
    p[4..8].copy_from_slice(&seq.to_be_bytes());
    p
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn udp_connections_are_carried_once_established_and_the_kernels_entries_kept() {
    let _down = lab::up(LAB);
    run(
        &ns("gen"),
        &["ip", "addr", "add", &format!("{CLIENT}/32"), "dev", "lo"],
    );
    run(
        &ns("recv"),
        &["ip", "addr", "add", &format!("{SERVER}/32"), "dev", "lo"],
    );
    // Checksums complete on the wire, as a NIC sends them: a veth hands
    // a local socket's datagram on with its checksum partial (the
    // pseudo-header's sum), which the kernel's conntrack takes as good
    // (CHECKSUM_PARTIAL) but XDP cannot tell from a wrong one, and passes
    // (pass_ct_invalid).
    run(&ns("gen"), &["ethtool", "-K", "gen0", "tx", "off"]);
    run(&ns("recv"), &["ethtool", "-K", "recv0", "tx", "off"]);
    let path = std::env::temp_dir().join("linerate-stateful-cli.nft");
    std::fs::write(&path, RULESET).unwrap();
    run(&ns("dut"), &["nft", "-f", path.to_str().unwrap()]);
    // (The ruleset's ct expressions load conntrack in the namespace.)
    run(
        &ns("dut"),
        &[
            "sysctl",
            "-qw",
            &format!("net.netfilter.nf_conntrack_udp_timeout_stream={STREAM_TIMEOUT}"),
        ],
    );
    let _router = lab::start_router(LAB);
    wait_for_firewall();

    let stop = Arc::new(AtomicBool::new(false));
    let (push, pushed) = std::sync::mpsc::channel();
    let server = echo_server(stop.clone(), pushed);
    // Client sockets in the generator's namespace; the last one stays
    // quiet after its first exchanges (for the deletion below).
    let socks: Vec<UdpSocket> = {
        let _in = linerate_host::netns::NetnsGuard::enter(&ns("gen")).unwrap();
        (0..8)
            .map(|_| {
                let s = UdpSocket::bind((CLIENT, 0)).unwrap();
                s.connect((SERVER, PORT)).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(500)))
                    .unwrap();
                s
            })
            .collect()
    };
    let quiet = socks.len() - 1;
    let exchange = |i: usize, seq: u32| {
        let p = payload(i, seq);
        socks[i].send(&p).unwrap();
        let mut buf = [0u8; 2048];
        let n = socks[i]
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("socket {i}, datagram {seq}: no echo ({e})"));
        assert_eq!(
            &buf[..n],
            &p[..],
            "socket {i}, datagram {seq}: echoed wrong"
        );
    };
    let (none0, young0, fwd0) = (
        counted("pass_ct_none"),
        counted("pass_ct_young"),
        counted("forwarded"),
    );
    // Twice the stream timeout: without the fast path's refreshes, the
    // kernel's entries would expire half way.
    let start = Instant::now();
    let mut seq = 0u32;
    let mut checked_alive = false;
    while start.elapsed() < Duration::from_secs(2 * STREAM_TIMEOUT) {
        for i in 0..socks.len() {
            if i != quiet || start.elapsed() < Duration::from_secs(3) {
                exchange(i, seq);
            }
        }
        seq += 1;
        // Past the stream timeout from the start, and 1.5 s past the
        // quiet connection's: the active ones' entries are there, the
        // quiet one's is gone.
        if !checked_alive && start.elapsed() > Duration::from_secs_f64(STREAM_TIMEOUT as f64 + 4.5)
        {
            let e = entries();
            assert_eq!(e.len(), socks.len() - 1, "{e:#?}");
            let quiet_port = format!("sport={} ", socks[quiet].local_addr().unwrap().port());
            for line in &e {
                assert!(line.contains("[ASSURED]"), "{line}");
                assert!(!line.contains(&quiet_port), "{line}");
            }
            checked_alive = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(checked_alive);
    let carried = counted("forwarded") - fwd0;
    let (none, young) = (
        counted("pass_ct_none") - none0,
        counted("pass_ct_young") - young0,
    );
    let total = 2 * seq as u64 * (socks.len() as u64 - 1);
    eprintln!(
        "{total} datagrams both ways: carried {carried}, to the kernel for no entry {none}, for a young one {young}"
    );
    // Each connection's first datagram finds no entry; the first two
    // seconds' go to the kernel (not assured yet); the rest is carried.
    assert!(none >= socks.len() as u64, "{none}");
    assert!(young > 0, "{young}");
    assert!(carried * 10 >= total * 7, "carried {carried} of {total}");

    // A datagram the server sends unasked to an established connection's
    // client (its reply direction) arrives; once the connection's entry
    // is deleted from the kernel's table, it is a new connection from the
    // receiver's side, which the ruleset drops: the fast path, which
    // carried the connection, must not carry it any more.
    let unasked = |i: usize| -> bool {
        let what = payload(99, i as u32);
        push.send((socks[i].local_addr().unwrap(), what.clone()))
            .unwrap();
        let mut buf = [0u8; 2048];
        match socks[i].recv(&mut buf) {
            Ok(n) => {
                assert_eq!(&buf[..n], &what[..]);
                true
            }
            Err(_) => false,
        }
    };
    assert!(
        unasked(1),
        "an established connection's reply did not arrive"
    );
    let port0 = socks[0].local_addr().unwrap().port().to_string();
    run(
        &ns("dut"),
        &["conntrack", "-D", "-p", "udp", "--orig-port-src", &port0],
    );
    std::thread::sleep(Duration::from_millis(100));
    let dropped0 = counted("pass_ct_none");
    assert!(
        !unasked(0),
        "a deleted connection's reply was forwarded 100 ms after the deletion"
    );
    assert!(
        counted("pass_ct_none") > dropped0,
        "the fast path did not look the deleted connection up again"
    );
    assert!(unasked(1), "the other connections go on");

    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    // Once the traffic stops the entries run out on the kernel's
    // schedule: the stream timeout from the last packet, give or take a
    // sweep.
    let stopped = Instant::now();
    loop {
        let e = entries();
        if e.is_empty() {
            break;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(STREAM_TIMEOUT + 5),
            "entries left {:?} after the traffic stopped: {e:#?}",
            stopped.elapsed()
        );
        for line in &e {
            assert!(timeout_of(line) <= STREAM_TIMEOUT, "{line}");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let gone = stopped.elapsed();
    eprintln!("the kernel's entries expired {gone:?} after the traffic stopped");
    assert!(
        gone >= Duration::from_secs(STREAM_TIMEOUT - 2),
        "expired after {gone:?}, before their timeout"
    );
}
