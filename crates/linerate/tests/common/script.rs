//! A script of frames sent from both ends of a lab, with pauses and
//! conntrack commands between, and what arrived where: the stateful
//! differential tests run one through the kernel alone and through
//! linerate, and compare.
#![allow(dead_code)] // not every test binary uses all
use super::frames::{capture, collect, Seen};
use super::lab;
use linerate_host::netns::NetnsGuard;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The lab's MACs: the generator, the DUT's two sides, the receiver.
pub const GEN: [u8; 6] = [2, 0, 0, 0, 0, 1];
pub const DUT_IN: [u8; 6] = [2, 0, 0, 0, 0, 2];
pub const DUT_OUT: [u8; 6] = [2, 0, 0, 0, 0, 3];
pub const RECV: [u8; 6] = [2, 0, 0, 0, 0, 4];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Sent out of gen0 (the inside, dut0).
    Gen,
    /// Sent out of recv0 (the outside, dut1).
    Recv,
}

pub enum Step {
    Send(Side, Vec<u8>),
    Pause(Duration),
    /// `conntrack ARGS` in the DUT.
    Conntrack(Vec<String>),
}

pub fn pause(ms: u64) -> Step {
    Step::Pause(Duration::from_millis(ms))
}

/// The Ethernet header of a frame sent from `side`.
pub fn eth(side: Side) -> etherparse::PacketBuilderStep<etherparse::Ethernet2Header> {
    match side {
        Side::Gen => etherparse::PacketBuilder::ethernet2(GEN, DUT_IN),
        Side::Recv => etherparse::PacketBuilder::ethernet2(RECV, DUT_OUT),
    }
}

/// Runs `steps` through lab `lab`: what arrived where, by frame.
pub fn run(lab: &str, steps: Vec<Step>) -> Seen {
    let stop = Arc::new(AtomicBool::new(false));
    let at_recv = capture(format!("{lab}-recv"), "recv0", stop.clone());
    let at_gen = capture(format!("{lab}-gen"), "gen0", stop.clone());
    std::thread::sleep(Duration::from_millis(300));
    let socket = |role: &str, dev: &str| {
        let _in = NetnsGuard::enter(&format!("{lab}-{role}")).unwrap();
        linerate_traffic::afpacket::PacketSocket::open(linerate_bpf::loader::ifindex(dev).unwrap())
            .unwrap()
    };
    let (gen, recv) = (socket("gen", "gen0"), socket("recv", "recv0"));
    for step in steps {
        match step {
            Step::Send(side, f) => {
                let sock = if side == Side::Gen { &gen } else { &recv };
                let mut b = vec![f.clone()];
                sock.send_batch(&mut b, &[f.len()]).unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
            Step::Pause(d) => std::thread::sleep(d),
            Step::Conntrack(args) => {
                let o = Command::new("ip")
                    .args(["netns", "exec", &format!("{lab}-dut"), "conntrack"])
                    .args(&args)
                    .output()
                    .unwrap();
                assert!(
                    o.status.success(),
                    "conntrack {args:?}: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
            }
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::SeqCst);
    collect(at_recv, at_gen)
}

fn in_ns(lab: &str, role: &str, args: &[&str]) -> std::process::Output {
    Command::new("ip")
        .args(["netns", "exec", &format!("{lab}-{role}")])
        .args(args)
        .output()
        .unwrap()
}

/// Lab `lab` up, its ends sending no errors of their own about the
/// frames they cannot deliver (which ones they would send depends on
/// their rate limits' timing, not on the DUT), `ruleset` in the DUT and
/// TCP windows checked there or not (`liberal`).
pub fn set_up(lab: &'static str, ruleset: &str, liberal: bool) -> lab::Down {
    let down = lab::up(lab);
    let sysctl = format!(
        "net.netfilter.nf_conntrack_tcp_be_liberal={}",
        liberal as u8
    );
    // (The sysctl appears once conntrack is loaded: by the ruleset, below,
    // if not yet.)
    let liberal_set = in_ns(lab, "dut", &["sysctl", "-qw", &sysctl])
        .status
        .success();
    let quiet = std::env::temp_dir().join(format!("linerate-{lab}-ends.nft"));
    std::fs::write(
        &quiet,
        "table inet quiet {\n  chain out {\n    type filter hook output priority 0; policy accept;\n    icmp type destination-unreachable drop\n    icmpv6 type destination-unreachable drop\n  }\n}\n",
    )
    .unwrap();
    for role in ["gen", "recv"] {
        let o = in_ns(lab, role, &["nft", "-f", quiet.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let path = std::env::temp_dir().join(format!("linerate-{lab}.nft"));
    std::fs::write(&path, ruleset).unwrap();
    let o = in_ns(lab, "dut", &["nft", "-f", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    if !liberal_set {
        let o = in_ns(lab, "dut", &["sysctl", "-qw", &sysctl]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    down
}

/// The frames one of `a`, `b` saw and the other did not, as many times.
pub fn only(a: &Seen, b: &Seen) -> Vec<String> {
    a.iter()
        .filter(|(k, n)| b.get(*k) != Some(n))
        .map(|((dev, f), n)| format!("{dev} x{n}: {f:02x?}"))
        .collect()
}
