//! `linerate fib stats` and `linerate bench fib` through the command line:
//! a dump file's table, the JSON fields the issue names, bad input named.
use serde_json::Value;
use std::process::{Command, Output};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

fn linerate(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run linerate")
}

#[test]
fn stats_of_a_dump() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("routes.txt");
    std::fs::write(
        &path,
        "default via 192.0.2.1 dev eth0\n10.0.0.0/8 via 192.0.2.2 dev eth0\n10.1.2.128/25 7\n",
    )
    .unwrap();
    let o = linerate(&["fib", "stats", "--file", path.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["routes"], 3);
    assert_eq!(s["groups_in_use"], 1, "the /25 needs one group");
    assert_eq!(s["max_reads"], 2);
    assert_eq!(
        s["root_filled"],
        1 << 24,
        "the default route fills the root"
    );
}

#[test]
fn a_bad_dump_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.txt");
    std::fs::write(&path, "10.0.0.0/8 1\n10.0.0.0/40 2\n").unwrap();
    let o = linerate(&["fib", "stats", "--file", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.txt: line 2") && err.contains("prefix length"),
        "{err}"
    );
    let o = linerate(&["fib", "stats", "--file", "/nonexistent/routes"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--file"));
}

#[test]
fn bench_fib_json_has_the_named_fields() {
    for family in ["ipv4", "ipv6"] {
        let o = linerate(&[
            "bench",
            "fib",
            "--family",
            family,
            "--routes",
            "20000",
            "--keys",
            "20000",
            "--updates",
            "2000",
            "--repeat",
            "1",
            "--json",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["family"], family);
        assert_eq!(r["routes"], 20000);
        for f in [
            "build_seconds",
            "lookups_per_sec",
            "batch_lookups_per_sec",
            "updates_per_sec",
        ] {
            assert!(r[f].as_f64().unwrap() > 0.0, "{f}: {r}");
        }
        assert!(r["memory_bytes"].as_u64().unwrap() > 0);
        let peers: Vec<&str> = r["peers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(peers, ["prefix-trie", "poptrie"]);
    }
    // Fewer routes than changes: each route is withdrawn at most once.
    let o = linerate(&[
        "bench",
        "fib",
        "--routes",
        "500",
        "--keys",
        "500",
        "--updates",
        "5000",
        "--repeat",
        "1",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The fastpath benches check that their scratch namespace is gone, so
/// they run one at a time.
static SCRATCH: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn bench_fastpath_json_has_the_named_fields() {
    let _one = SCRATCH.lock().unwrap_or_else(|e| e.into_inner());
    let (o, left) = common::linerate_leaving_scratch(&[
        "bench", "fastpath", "--routes", "2000", "--keys", "200", "--repeat", "20", "--rounds",
        "3", "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let runs = r.as_array().unwrap();
    assert_eq!(runs.len(), 2, "one route and the full table");
    assert_eq!(runs[0]["routes"], 1);
    assert_eq!(runs[1]["routes"], 2000);
    for x in runs {
        assert_eq!(x["family"], "ipv4");
        assert_eq!(x["layout"], "24+8");
        assert!(x["ns_per_packet"].as_f64().unwrap() > 0.0, "{x}");
        assert_eq!(x["reference"]["name"], "bpf_fib_lookup");
        assert!(x["reference"]["ns_per_packet"].as_f64().unwrap() > 0.0);
        // One mean per round, for both programs, and the figure their median.
        for who in [x, &x["reference"]] {
            let mut rounds: Vec<f64> = who["rounds_ns_per_packet"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            assert_eq!(rounds.len(), 3, "{x}");
            rounds.sort_by(f64::total_cmp);
            assert_eq!(who["ns_per_packet"].as_f64().unwrap(), rounds[1], "{x}");
        }
        // Both programs forwarded nearly every destination.
        assert!(x["destinations"].as_u64().unwrap() > 190, "{x}");
    }
    assert!(!left, "the bench's scratch namespace was left behind");
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn bench_fastpath_ipv6_measures_both_layouts() {
    let _one = SCRATCH.lock().unwrap_or_else(|e| e.into_inner());
    let o = linerate(&[
        "bench", "fastpath", "--family", "ipv6", "--routes", "2000", "--keys", "200", "--repeat",
        "20", "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let runs = r.as_array().unwrap();
    let got: Vec<(String, u64)> = runs
        .iter()
        .map(|x| {
            (
                x["layout"].as_str().unwrap().to_string(),
                x["routes"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = [("24+8", 1), ("16+4", 1), ("24+8", 2000), ("16+4", 2000)]
        .iter()
        .map(|&(l, n)| (l.to_string(), n))
        .collect();
    assert_eq!(got, want);
    for x in runs {
        assert_eq!(x["family"], "ipv6");
        // Both programs forwarded nearly every destination, in each layout.
        assert!(x["destinations"].as_u64().unwrap() > 190, "{x}");
    }
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn bench_fastpath_vlan_measures_the_tag_and_the_hand_over() {
    let _one = SCRATCH.lock().unwrap_or_else(|e| e.into_inner());
    let o = linerate(&[
        "bench", "fastpath", "--vlan", "--routes", "2000", "--keys", "200", "--repeat", "20",
        "--rounds", "3", "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let full = &r.as_array().unwrap()[1];
    assert_eq!(full["routes"], 2000);
    assert_eq!(full["program"], "router, 802.1Q VLAN in and out");
    // The untagged frame, through `router` and through `router_vlan`,
    // round by round beside the tagged one.
    for (who, name) in [
        ("untagged", "linerate, untagged"),
        (
            "untagged_on_vlan_port",
            "linerate, untagged, on a port with VLAN devices",
        ),
    ] {
        assert_eq!(full[who]["name"], name, "{full}");
        let rounds = full[who]["rounds_ns_per_packet"].as_array().unwrap();
        assert_eq!(rounds.len(), 3, "{full}");
        assert!(rounds.iter().all(|x| x.as_f64().unwrap() > 0.0), "{full}");
    }
    assert!(full["destinations"].as_u64().unwrap() > 190, "{full}");
    // The multi-buffer program leaves tagged frames to the kernel, and
    // popping and pushing needs the tables of their own: refused before
    // anything is built.
    for (args, said) in [
        (vec!["--vlan", "--multibuf"], "--vlan with --multibuf"),
        (
            vec!["--vlan", "--vlan-pop-push"],
            "--vlan-pop-push: with --vlan and --walk-tables 1",
        ),
    ] {
        let o = linerate(&[&["bench", "fastpath"][..], &args].concat());
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(said), "{args:?}: {err}");
    }
    // Popped and pushed in turn: every destination forwarded (each
    // repetition takes the frame the last left, tagged then not).
    let o = linerate(&[
        "bench",
        "fastpath",
        "--vlan",
        "--vlan-pop-push",
        "--walk-tables",
        "1",
        "--routes",
        "2000",
        "--keys",
        "200",
        "--repeat",
        "20",
        "--rounds",
        "2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let full = &r.as_array().unwrap()[1];
    assert_eq!(
        full["program"],
        "router, 802.1Q VLAN popped and pushed in turn"
    );
    assert_eq!(
        full["untagged"]["rounds_ns_per_packet"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert!(full["destinations"].as_u64().unwrap() > 190, "{full}");
}
