//! `linerate queues` on a lab of two-queue veths: a veth takes a
//! frame on the receive queue of the CPU that sent it, so the generator
//! pinned to CPU 0, then to CPU 1, puts its frames on dut0's queue 0, then
//! queue 1; the fast path's per-queue counts say so, and they add up to
//! what its counters by reason saw on the interface (two maps, counted
//! apart). Then without the router: the kernel's own per-queue counters
//! (veth's, by NAPI) say the same. Needs root.
use serde_json::Value;
use std::process::{Command, Stdio};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");
const LAB: &str = "lrt-queues";

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn frames_are_counted_on_the_queue_they_came_in_on() {
    let _down = common::lab::Down(LAB);
    let up = Command::new(BIN)
        .args(["lab", "up", "--name", LAB, "--queues", "2"])
        .output()
        .unwrap();
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let dut = format!("{LAB}-dut");
    // The fast path's counters.
    let router = common::lab::start_router(LAB);
    let (r, stats, sent) = watch_while_sending(&dut, true);
    let dut0 = &r["interfaces"][0];
    assert_eq!(
        (&dut0["interface"], &dut0["source"]),
        (&"dut0".into(), &"linerate".into()),
        "{r}"
    );
    let q = queues(dut0);
    // The generator's frames dut0 took, and perhaps a neighbour's few.
    let on = |q: u64, sent: u64| (sent..sent + 10).contains(&q);
    assert!(on(q[0], sent[0]) && on(q[1], sent[1]), "{r} {sent:?}");
    assert_eq!(q[0] + q[1], dut0["seen"].as_u64().unwrap(), "{r}");
    assert!(
        dut0["forwarded"].as_u64().unwrap() >= sent[0] + sent[1],
        "{r}"
    );
    // `linerate stats --queues` splits the same window's frames alike.
    let stats = stats.unwrap();
    let s0 = &stats["interfaces"][0];
    assert_eq!(s0["interface"], "dut0", "{stats}");
    let sq = queues(s0);
    assert!(on(sq[0], sent[0]) && on(sq[1], sent[1]), "{stats} {sent:?}");
    drop(router);
    // No router: the kernel forwards, and its own per-queue statistics
    // (veth's, counted by NAPI) are read. What dut0 took in, dut1 sent.
    let (r, _, sent) = watch_while_sending(&dut, false);
    let (dut0, dut1) = (&r["interfaces"][0], &r["interfaces"][1]);
    assert_eq!(dut0["source"], "kernel", "{r}");
    let q = queues(dut0);
    let on = |q: u64, sent: u64| (sent..sent + 10).contains(&q);
    assert!(on(q[0], sent[0]) && on(q[1], sent[1]), "{r} {sent:?}");
    assert_eq!(q[0] + q[1], dut0["seen"].as_u64().unwrap(), "{r}");
    assert!(dut1["sent"].as_u64().unwrap() >= sent[0] + sent[1], "{r}");
    // An interface without per-queue counters: said, naming it.
    let o = Command::new(BIN)
        .args(["queues", "--netns", &dut, "-i", "lo", "-t", "1"])
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("lo: the driver has no statistics of its own"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `linerate queues` on dut0 and dut1 for 5 s (and `linerate stats
/// --queues` with `with_stats`), while the generator sends 20,000 frames
/// from CPU 0 and then 30,000 from CPU 1; also what dut0's ring took of
/// each (the generator's sent: a DUT stalled long enough refuses a few).
fn watch_while_sending(dut: &str, with_stats: bool) -> (Value, Option<Value>, [u64; 2]) {
    let stats = with_stats
        .then(|| common::window(&["stats", "--netns", dut, "--queues", "-t", "5", "--json"]));
    let queues = common::window(&[
        "queues",
        "--netns",
        dut,
        "-i",
        "dut0,dut1",
        "-t",
        "5",
        "--json",
    ]);
    let mut sent = [0; 2];
    for (k, (cpu, n)) in [("0", 20_000u64), ("1", 30_000)].into_iter().enumerate() {
        let g = Command::new(BIN)
            .args(["gen", "--netns", &format!("{LAB}-gen"), "-i", "gen0"])
            .args(["-n", &n.to_string(), "-R", "20k", "--cpu", cpu, "--json"])
            .output()
            .unwrap();
        assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
        let g: Value = serde_json::from_slice(&g.stdout).unwrap();
        sent[k] = g["sent_packets"].as_u64().unwrap();
        assert_eq!(sent[k] + g["xmit_errors"].as_u64().unwrap(), n, "{g}");
        assert!(sent[k] > n * 99 / 100, "{g}");
    }
    let json = |c: std::process::Child| -> Value {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    (json(queues), stats.map(json), sent)
}

fn queues(v: &Value) -> Vec<u64> {
    let q: Vec<u64> = v["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(q.len(), 2, "{v}");
    q
}
