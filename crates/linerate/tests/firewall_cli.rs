//! `linerate firewall` on a namespace's ruleset: the rule that keeps both
//! families of an inet table in the kernel is named by its handle; once
//! it is deleted, the chains are listed in the kernel's order. Needs root.
use serde_json::Value;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");
const NS: &str = "lrt-fwcli";

struct Gone;
impl Drop for Gone {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", NS]).output();
    }
}

fn firewall() -> Value {
    let o = Command::new(BIN)
        .args(["firewall", "--netns", NS, "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_rule_that_keeps_a_family_in_the_kernel_is_named() {
    let _gone = Gone;
    assert!(Command::new("ip")
        .args(["netns", "add", NS])
        .status()
        .unwrap()
        .success());
    let rules = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../firewall/tests/data/sample-with-ct.nft"
    );
    let nft = |args: &[&str]| {
        let o = Command::new("ip")
            .args(["netns", "exec", NS, "nft"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "nft {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    nft(&["-f", rules]);
    nft(&[
        "add",
        "rule",
        "inet",
        "filter",
        "forward_filter",
        "ct",
        "mark",
        "1",
        "accept",
    ]);
    let v = firewall();
    let mut handles = Vec::new();
    for family in ["ipv4", "ipv6"] {
        assert_eq!(v[family]["read"], false, "{v}");
        let r = &v[family]["reasons"][0];
        assert_eq!(
            (r["table"].as_str(), r["chain"].as_str()),
            (Some("inet filter"), Some("forward_filter")),
            "{v}"
        );
        assert!(
            r["why"]
                .as_str()
                .unwrap()
                .starts_with("ct mark is not compiled"),
            "{v}"
        );
        handles.push(r["handle"].as_u64().unwrap());
    }
    assert_eq!(handles[0], handles[1], "{v}");
    let handle = handles[0].to_string();
    nft(&[
        "delete",
        "rule",
        "inet",
        "filter",
        "forward_filter",
        "handle",
        &handle,
    ]);
    let v = firewall();
    let order: Vec<(&str, &str, i64)> = v["ipv4"]["base_chains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["hook"].as_str().unwrap(),
                b["chain"].as_str().unwrap(),
                b["priority"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            ("prerouting", "pre", -150),
            ("forward", "forward_filter", 0)
        ],
        "{v}"
    );
    assert_eq!(v["ipv6"]["base_chains"].as_array().unwrap().len(), 1, "{v}");
    // With `ct state established accept` (read: the stateful firewall).
    assert_eq!(v["ipv4"]["rules"], 15, "{v}");

    let bad = Command::new(BIN)
        .args(["firewall", "--netns", "lrt-no-such-ns"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--netns lrt-no-such-ns"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

/// `bench firewall-cache` runs every shape on flows that all hit (it
/// refuses to measure otherwise) and reports each; bad arguments are
/// named. How fast is the bench's to measure, not this test's.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_cache_bench_measures_every_shape_on_hits() {
    let o = Command::new(BIN)
        .args([
            "bench",
            "firewall-cache",
            "--flows",
            "300",
            "--samples",
            "50",
            "--repeat",
            "2",
            "--rounds",
            "1",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let shapes: Vec<&str> = v["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["program"].as_str().unwrap())
        .collect();
    assert_eq!(shapes, ["fw_key_only", "fw_lru", "fw_direct"], "{v}");
    assert!(v["samples"].as_u64().unwrap() > 0, "{v}");
    for s in v["shapes"].as_array().unwrap() {
        assert!(s["ns_per_packet"].as_f64().unwrap() > 0.0, "{v}");
    }
    let bad = Command::new(BIN)
        .args([
            "bench",
            "firewall-cache",
            "--flows",
            "10",
            "--samples",
            "20",
        ])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--samples"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

/// `bench conntrack` finds every sampled flow established in the kernel's
/// table and in its own hash (it refuses to measure otherwise), measures
/// each program at each state count, raises the kernel's conntrack limit
/// and hash size for a count above them and puts them back, and leaves no
/// namespace. Bad arguments are named.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_conntrack_bench_finds_every_flow_and_puts_the_limits_back() {
    let read = |p: &str| std::fs::read_to_string(p).unwrap().trim().to_string();
    let limits = || {
        (
            read("/proc/sys/net/netfilter/nf_conntrack_max"),
            read("/sys/module/nf_conntrack/parameters/hashsize"),
        )
    };
    let before = limits();
    let above: u64 = before
        .0
        .parse::<u64>()
        .unwrap()
        .max(before.1.parse().unwrap())
        + 1000;
    let states = format!("500,{above}");
    let o = Command::new(BIN)
        .args(["bench", "conntrack", "--states", &states])
        .args([
            "--samples",
            "50",
            "--repeat",
            "2",
            "--rounds",
            "1",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(limits(), before, "the kernel's limits put back");
    assert!(v["nf_conntrack_max"].as_u64().unwrap() > above, "{v}");
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(
        runs.iter()
            .map(|r| r["states"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [500, above]
    );
    for r in runs {
        let programs: Vec<&str> = r["lookups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["program"].as_str().unwrap())
            .collect();
        assert_eq!(
            programs,
            ["tuple_only", "ct_lookup", "ct_refresh", "own_hash"],
            "{v}"
        );
        assert_eq!(r["samples"], 50, "{v}");
    }
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&ns.stdout).contains("lrt-ctbench"));
    let bad = Command::new(BIN)
        .args(["bench", "conntrack", "--states", "100", "--samples", "200"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--samples"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

/// `bench firewall --states`: the stateful ruleset with its connections
/// in the kernel's table and carried by the fast path (it refuses to
/// measure a frame the fast path does not forward), beside the fast path
/// without a firewall; a state count past the bench's limit is named.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_firewall_bench_measures_the_stateful_ruleset() {
    let o = Command::new(BIN)
        .args([
            "bench",
            "firewall",
            "--rules",
            "0",
            "--set-size",
            "0",
            "--states",
            "300",
            "--flows",
            "100",
            "--repeat",
            "2",
            "--rounds",
            "1",
            "--elements",
            "0",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &v["cases"][0];
    assert_eq!(c["name"], "states-300", "{v}");
    assert_eq!(c["states"], 300, "{v}");
    assert!(c["ns_per_packet"].as_f64().unwrap() > 0.0, "{v}");
    assert!(c["baseline_ns_per_packet"].as_f64().unwrap() > 0.0, "{v}");
    let bad = Command::new(BIN)
        .args(["bench", "firewall", "--states", "3000000"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--states"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}
