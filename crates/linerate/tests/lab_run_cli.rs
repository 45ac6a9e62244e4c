//! `linerate lab run` and `linerate search` end to end, with short trials:
//! the output directory holds what the report says, the raw files give
//! ministat's own comparison, bad scenarios are refused before any lab
//! exists, and no lab is left. Needs root.
use serde_json::Value;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

/// Runs push traffic through labs: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn linerate(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run linerate")
}

fn netns_list() -> String {
    let o = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8(o.stdout).unwrap()
}

/// `lab run SCENARIO --name NAME --out DIR/r --json` on `text` written to
/// DIR/s.toml.
fn run_scenario(name: &str, dir: &tempfile::TempDir, text: &str) -> Output {
    let scenario = dir.path().join("s.toml");
    std::fs::write(&scenario, text).unwrap();
    let out = dir.path().join("r");
    linerate(&[
        "lab",
        "run",
        scenario.to_str().unwrap(),
        "--name",
        name,
        "--out",
        out.to_str().unwrap(),
        "--json",
    ])
}

/// The share of a run's frames the fast path forwarded (its `fast_path`
/// counts by reason).
fn forwarded_share(fp: &Value) -> f64 {
    let all: u64 = fp
        .as_object()
        .unwrap()
        .values()
        .filter_map(Value::as_u64)
        .sum();
    fp["forwarded"].as_u64().unwrap_or(0) as f64 / all.max(1) as f64
}

struct Down(&'static str);
impl Drop for Down {
    fn drop(&mut self) {
        let _ = linerate(&["lab", "down", "--name", self.0]);
    }
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn lab_run_writes_raw_files_report_plots_and_removes_its_lab() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "lrt-runner";
    let _down = Down(name);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("res");
    let o = linerate(&[
        "lab",
        "run",
        "--name",
        name,
        "--repeat",
        "3",
        "-t",
        "1",
        "--duts",
        "linux,linux-nft-stateless",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(!netns_list().contains(name), "the lab was left behind");

    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let results = r["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for (x, dut) in results.iter().zip(["linux", "linux-nft-stateless"]) {
        assert_eq!(x["dut"], dut);
        assert_eq!(x["profile"], "ipv4-60");
        let runs: Vec<f64> = x["runs_mpps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(runs.len(), 3);
        assert!(runs.iter().all(|&v| v > 0.01), "{runs:?}");
        // The raw file holds the same runs, in pps, one a line.
        let raw = std::fs::read_to_string(out.join(format!("{dut}.ipv4-60.pps"))).unwrap();
        let pps: Vec<f64> = raw.lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(pps.iter().map(|p| p / 1e6).collect::<Vec<_>>(), runs);
        let mut sorted = runs.clone();
        sorted.sort_by(f64::total_cmp);
        assert_eq!(x["median_mpps"].as_f64().unwrap(), sorted[1]);
    }
    let c = &r["comparisons"][0];
    assert_eq!(
        (c["dut"].as_str(), c["baseline"].as_str()),
        (Some("linux-nft-stateless"), Some("linux"))
    );
    assert!(
        c["difference_percent"].is_f64() && c["ci_percent"].is_f64() && c["proven"].is_boolean()
    );

    // The runs in the order they ran: the round's order changes each round,
    // so neither configuration always goes first (crates/labrun/src/order.rs).
    let ran: Vec<(String, u64)> = r["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["dut"].as_str().unwrap().to_string(),
                x["repeat"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = [
        ("linux", 1),
        ("linux-nft-stateless", 1),
        ("linux-nft-stateless", 2),
        ("linux", 2),
        ("linux", 3),
        ("linux-nft-stateless", 3),
    ]
    .iter()
    .map(|(d, k)| (d.to_string(), *k))
    .collect();
    assert_eq!(ran, want);

    // Every run was against an overloaded kernel: offered more than forwarded.
    // The counting receiver reports no sequence or latency.
    for run in r["runs"].as_array().unwrap() {
        assert!(
            run["sequence"].is_null() && run["latency_ns"].is_null(),
            "{run}"
        );
        assert!(
            run["offered_pps"].as_f64() > run["received_pps"].as_f64(),
            "{run}"
        );
        let log = std::fs::read_to_string(out.join(run["log"].as_str().unwrap())).unwrap();
        assert!(
            // pkt-gen's lines: "<n> Kpps (...)" or "<n> Mpps (...)".
            log.contains("pps (") && log.contains(" usec)") && log.contains("# offered "),
            "{log}"
        );
    }

    // ministat on the raw files prints what the report shows.
    let m = linerate(&[
        "ministat",
        out.join("linux.ipv4-60.pps").to_str().unwrap(),
        out.join("linux-nft-stateless.ipv4-60.pps")
            .to_str()
            .unwrap(),
    ]);
    let ministat = String::from_utf8(m.stdout).unwrap();
    let body = |s: &str| s.lines().skip(2).map(str::to_string).collect::<Vec<_>>();
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    let shown = report.split("```\n").nth(1).unwrap();
    assert_eq!(
        body(shown),
        body(&ministat),
        "report:\n{shown}\nministat:\n{ministat}"
    );
    assert!(stderr.contains("Student's t") || stderr.contains("No difference proven"));

    let png = std::fs::read(out.join("plot.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let svg = std::fs::read_to_string(out.join("plot.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("linux-nft-stateless") && svg.contains("ipv4-60"));

    // The same directory again: refused, nothing overwritten.
    let again = linerate(&[
        "lab",
        "run",
        "--name",
        name,
        "-t",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("holds the results of another run"));
}

/// `--profile`: the DUT's core recorded during the runs; per
/// configuration a flame graph (a valid SVG, naming the functions an XDP
/// forwarder runs through on a veth: the program's JIT symbol, veth's
/// NAPI receive) and its hottest functions in the report.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_profiled_run_draws_where_the_dut_core_goes() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "lrt-runner-prof";
    let _down = Down(name);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let o = linerate(&[
        "lab",
        "run",
        "--name",
        name,
        "--repeat",
        "1",
        "-t",
        "2",
        "--duts",
        "linerate",
        "--profile",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = &r["profiles_cpu"][0];
    assert_eq!(p["dut"], "linerate");
    // About 2 s at 999 samples a second, the core busy forwarding.
    assert!(p["samples"].as_u64().unwrap() > 500, "{p}");
    let top: Vec<&str> = p["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["function"].as_str().unwrap())
        .collect();
    assert!(
        top.iter()
            .any(|f| f.starts_with("bpf_prog_") && f.ends_with("_router")),
        "{top:?}"
    );
    assert!(top.iter().any(|f| f.starts_with("veth_")), "{top:?}");
    let svg = std::fs::read_to_string(out.join("flame-linerate.svg")).unwrap();
    assert!(
        svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"),
        "not an SVG"
    );
    assert!(
        svg.contains("veth_xdp_rcv") && svg.contains("_router"),
        "{}",
        &svg[..500]
    );
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("## Where the DUT's core goes") && report.contains("flame-linerate.svg")
    );
    // The program's own time a frame, from the kernel's statistics.
    let ns = p["xdp_ns_per_frame"].as_f64().unwrap();
    assert!(ns > 1.0 && ns < 10_000.0, "{p}");
    assert!(report.contains("ns a frame"), "{report}");
    // Where in the program: its samples by source line, from the JIT's
    // line info, every one in the router's own files, and the line that
    // reads the frame's first byte among them (every frame runs it).
    // Its samples are the flame graph's samples of the router's symbol
    // (two readings of the same recording).
    let lines = p["program_lines"].as_array().unwrap();
    let in_program = p["program_samples"].as_u64().unwrap();
    let router_self = p["top"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["function"].as_str().unwrap().ends_with("_router"))
        .unwrap()["self_share"]
        .as_f64()
        .unwrap()
        * p["samples"].as_f64().unwrap();
    assert!((in_program as f64 - router_self).abs() <= 1.0, "{p}");
    assert!(!lines.is_empty(), "{p}");
    let counts: Vec<u64> = lines
        .iter()
        .map(|l| l["samples"].as_u64().unwrap())
        .collect();
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
    for l in lines {
        let loc = l["location"].as_str().unwrap();
        assert!(loc.contains(".bpf.c:") || loc.contains(".h:"), "{l}");
    }
    assert!(
        report.contains("Its XDP program by source line"),
        "{report}"
    );
    // No perf left running, no perf.data left behind.
    assert!(!std::fs::read_dir(&out).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .ends_with(".perf.data")));
}

/// `--profile` killed mid-run (kill -9): nothing is left on. The BPF
/// run-time statistics are turned on through BPF_ENABLE_STATS, whose fd the
/// kernel closes with the process (and the machine-wide sysctl
/// `kernel.bpf_stats_enabled` is never written: it reads 0 throughout), and
/// its perf dies with it.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_killed_profiled_run_leaves_no_statistics_on_and_no_perf() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "lrt-runner-kill";
    let _down = Down(name);
    let dir = tempfile::tempdir().unwrap();
    let sysctl = || std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").unwrap();
    assert_eq!(sysctl().trim(), "0", "BPF statistics on before the test");
    let mut run = Command::new(BIN)
        .args(["lab", "run", "--name", name, "--repeat", "3", "-t", "5"])
        .args(["--duts", "linerate", "--profile", "--out"])
        .arg(dir.path().join("r"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let perf_running = || {
        Command::new("pgrep")
            .args(["-f", "perf record -e cpu-clock"])
            .output()
            .unwrap()
            .status
            .success()
    };
    let t = std::time::Instant::now();
    while !perf_running() {
        assert!(t.elapsed().as_secs() < 30, "never profiling");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(sysctl().trim(), "0", "the sysctl was written");
    run.kill().unwrap();
    run.wait().unwrap();
    // kill -9 leaves the in-process router's records behind (a reader
    // finds their pid gone): the test's to remove.
    for suffix in ["json", "firewall.json", "handover"] {
        let _ = std::fs::remove_file(format!("/run/linerate/routers/{name}-dut.{suffix}"));
    }
    let t = std::time::Instant::now();
    while perf_running() {
        assert!(t.elapsed().as_secs() < 5, "perf left recording");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(sysctl().trim(), "0");
}

/// The machine's XDP limit as a DUT (xdp-redirect): it forwards the lab's
/// frames (the receiver gets them, so the MACs and the egress are right),
/// and the report gives each other configuration's rate over its rate in
/// the same round, as the runs' own values say.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_xdp_limit_forwards_and_each_configuration_is_given_against_it() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "lrt-runner-ref";
    let _down = Down(name);
    let dir = tempfile::tempdir().unwrap();
    let o = run_scenario(
        name,
        &dir,
        "repeat = 2\nduts = [\"linux\", \"xdp-redirect\"]\n[measure]\nseconds = 1\n",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["limit"], "xdp-redirect");
    let value = |dut: &str, round: u64| {
        r["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["dut"] == dut && x["repeat"] == round)
            .unwrap()["value_pps"]
            .as_f64()
            .unwrap()
    };
    for round in 1..=2 {
        assert!(value("xdp-redirect", round) > 10_000.0, "{r}");
    }
    let against = r["against_limit"].as_array().unwrap();
    assert_eq!(against.len(), 1, "{r}");
    assert_eq!(against[0]["dut"], "linux");
    let ratios: Vec<f64> = against[0]["ratios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    // The same division as the runner's, up to the last bit serde_json's
    // float parsing may differ by (it is not correctly rounded by default).
    let expected = [1, 2].map(|round| value("linux", round) / value("xdp-redirect", round));
    assert_eq!(ratios.len(), 2, "{r}");
    // Two rounds are too few for a 95% interval of their median.
    assert!(against[0]["median_interval"].is_null(), "{r}");
    for (got, want) in ratios.iter().zip(expected) {
        assert!(
            (got - want).abs() <= want.abs() * 1e-12,
            "{ratios:?} {expected:?}"
        );
    }
    let report = std::fs::read_to_string(dir.path().join("r/report.md")).unwrap();
    assert!(
        report.contains("## Against the machine's XDP limit"),
        "{report}"
    );
    assert!(report.contains("| linux | ipv4-60 |"), "{report}");
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn linerate_and_conntrack_duts_forward_and_a_single_run_has_no_comparison() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "lrt-runner2";
    let _down = Down(name);
    let dir = tempfile::tempdir().unwrap();
    // The full receiver: every run also reports sequence and latency.
    let o = run_scenario(
        name,
        &dir,
        "repeat = 1\nduts = [\"linux-conntrack\", \"linerate\"]\nprofiles = [\"ipv6-imix\"]\n[measure]\nseconds = 1\nreceiver = \"full\"\n",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    for x in r["results"].as_array().unwrap() {
        assert!(x["median_mpps"].as_f64().unwrap() > 0.01, "{x}");
    }
    for run in r["runs"].as_array().unwrap() {
        let received = run["received_pps"].as_f64().unwrap();
        assert!(
            run["latency_ns"]["count"].as_u64().unwrap() as f64 > received * 0.5,
            "{run}"
        );
        assert!(run["sequence"]["lost"].is_u64(), "{run}");
    }
    assert_eq!(r["comparisons"].as_array().unwrap().len(), 0);
    // The DUT's settings with each configuration running: linerate's XDP
    // program attached natively, none for the kernel.
    let settings = r["settings"].as_array().unwrap();
    for (dut, mode) in [("linux-conntrack", "none"), ("linerate", "native")] {
        let s = settings.iter().find(|s| s["dut"] == dut).unwrap();
        let f = s["findings"]
            .as_array()
            .unwrap_or_else(|| panic!("{s}"))
            .iter()
            .find(|f| f["scope"] == "dut0" && f["check"] == "XDP mode")
            .unwrap();
        assert_eq!(f["current"], mode, "{f}");
    }
    let report = std::fs::read_to_string(dir.path().join("r/report.md")).unwrap();
    assert!(report.contains("No ministat comparison"));
    assert!(
        report.contains("| dut0 | XDP mode | none (report) | native |"),
        "{report}"
    );
    assert!(!netns_list().contains(name));
}

/// A two-queue lab: a configuration on two queues gets frames on both
/// (the generator sends from two CPUs), one on a single queue only on its
/// first, and the kernel's per-queue counts lie between what came out and
/// what was offered. The configurations alternate, so the lab goes from
/// two queues to one and back with linerate attached in between.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_multi_queue_lab_spreads_the_flows_and_reports_each_queue() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "lrt-runner-mq";
    let _down = Down(name);
    let dir = tempfile::tempdir().unwrap();
    let o = run_scenario(
        name,
        &dir,
        "repeat = 2\nduts = [\"linerate-2q\", \"linux-1q\"]\n[measure]\nseconds = 1\n[lab]\nqueues = 2\n\
         [dut.linerate-2q]\nforwarder = \"linerate\"\n[dut.linux-1q]\nforwarder = \"linux\"\nqueues = 1\n",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "{r}");
    for run in runs {
        let frames: Vec<u64> = run["queue_frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        let two = run["dut"] == "linerate-2q";
        assert_eq!(frames.len(), if two { 2 } else { 1 }, "{run}");
        assert_eq!(
            run["gen_cpus"].as_array().unwrap().len(),
            frames.len(),
            "{run}"
        );
        let total: u64 = frames.iter().sum();
        let secs = run["overload_seconds"].as_f64().unwrap();
        let offered = run["offered_pps"].as_f64().unwrap() * secs;
        let received = run["received_pps"].as_f64().unwrap() * secs;
        // In: at least what came out, at most what was offered (a few
        // neighbour frames aside).
        assert!(total as f64 >= received * 0.999, "{run}");
        assert!(total as f64 <= offered + 100.0, "{run}");
        if two {
            // Both generator CPUs send as fast as they can: neither queue
            // starves.
            assert!(
                frames.iter().all(|f| *f as f64 > total as f64 * 0.2),
                "{run}"
            );
        }
    }
    let report = std::fs::read_to_string(dir.path().join("r/report.md")).unwrap();
    assert!(report.contains("## Receive queues"), "{report}");
    assert!(
        report.contains("| linerate-2q | ipv4-60 | 1 | [0, 1] | Q0 "),
        "{report}"
    );
    assert!(!netns_list().contains(name));
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn bad_scenarios_are_refused_before_any_lab_exists() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("duts = [\"linux\"]\nrepeats = 3\n", ":2: unknown field `repeats`"),
        ("duts = [\"linux\", \"vpp\"]\n", ":1: duts: unknown DUT configuration \"vpp\""),
        (
            "duts = [\"broken\"]\n[dut.broken]\nforwarder = \"linux\"\nnft = \"table inet x { chain y { nonsense } }\"\n",
            ":2: dut.broken: nft ruleset: line 1:",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("s{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let name = format!("lrt-bad{i}");
        let o = linerate(&[
            "lab",
            "run",
            path.to_str().unwrap(),
            "--name",
            &name,
            "--out",
            dir.path().join(format!("o{i}")).to_str().unwrap(),
        ]);
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success());
        assert!(e.contains(&format!("s{i}.toml{want}")), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(!netns_list().contains(&name));
        assert!(
            !dir.path().join(format!("o{i}")).exists(),
            "output made for a bad scenario"
        );
    }
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn equilibrium_search_through_a_lab() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "lrt-search";
    let _down = Down(name);
    assert!(linerate(&["lab", "up", "--name", name]).status.success());
    let o = linerate(&[
        "search",
        "--method",
        "equilibrium",
        "--lab",
        name,
        "-t",
        "0.5",
        "--tolerance",
        "0.1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let max = r["max_rate_pps"].as_f64().unwrap();
    let est = r["result"]["estimate_pps"].as_f64().unwrap();
    let trials = r["trials"].as_array().unwrap();
    assert!(trials.len() >= 2, "{r}");
    assert!(est > 0.0 && est <= max, "{r}");
    // The estimate is the last trial's forwarding rate.
    let last = trials.last().unwrap();
    let fwd = last["received"].as_f64().unwrap() / last["seconds"].as_f64().unwrap();
    assert!((fwd - est).abs() < 1.0, "{fwd} vs {est}");
    // Loads follow BSDRP's rule: the first is half the maximum.
    assert!((trials[0]["requested_pps"].as_f64().unwrap() - max / 2.0).abs() < 1.0);

    // Text mode ends with BSDRP's line.
    let o = linerate(&[
        "search",
        "--method",
        "equilibrium",
        "--lab",
        name,
        "-t",
        "0.5",
        "--tolerance",
        "0.2",
        "--max-rate",
        "1M",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.lines().any(
            |l| l.starts_with("Estimated Equilibrium Ethernet throughput= ")
                && l.ends_with(" Kpps)")
        ),
        "{text}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn one_trial_at_a_fixed_rate_through_a_lab() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Refused before anything is measured.
    for (args, flag) in [
        (vec!["-R", "0"], "-R:"),
        (vec!["-R", "fast"], "-R"),
        (vec!["-R", "10k", "-t", "0"], "-t:"),
        (vec!["-R", "10k", "-l", "59"], "-l:"),
    ] {
        let mut all = vec!["trial", "--lab", "lrt-no-such-lab"];
        all.extend(&args);
        let o = linerate(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(flag), "{args:?}: {err}");
    }
    let name = "lrt-trial";
    let _down = Down(name);
    assert!(linerate(&["lab", "up", "--name", name]).status.success());
    // 20 kpps for a second through the kernel: the generator offers it
    // (valid), and what comes out is counted against what went in.
    let o = linerate(&["trial", "--lab", name, "-R", "20k", "-t", "1", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let offered = r["offered"].as_f64().unwrap();
    let received = r["received"].as_f64().unwrap();
    let seconds = r["seconds"].as_f64().unwrap();
    assert_eq!(r["valid"], true, "{r}");
    assert!((offered / seconds / 20_000.0 - 1.0).abs() < 0.02, "{r}");
    assert!(received > 0.5 * offered && received <= offered, "{r}");
    let loss = r["loss_ratio"].as_f64().unwrap();
    assert!((loss - (offered - received) / offered).abs() < 1e-9, "{r}");
    // Text mode: one line.
    let o = linerate(&["trial", "--lab", name, "-R", "20k", "-t", "0.5"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with("20 Kpps for ") && text.contains("loss "),
        "{text}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn ctrl_c_stops_the_run_removes_the_lab_and_keeps_finished_runs() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "lrt-runner-int";
    let _down = Down(name);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let child = Command::new(BIN)
        .args([
            "lab",
            "run",
            "--name",
            name,
            "--repeat",
            "20",
            "-t",
            "1",
            "--duts",
            "linux",
            "--out",
            out.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Past the lab's set-up and a few runs, then Ctrl-C.
    std::thread::sleep(std::time::Duration::from_secs(7));
    // SAFETY: sending a signal to our child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{stderr}");
    assert!(
        stderr.contains("interrupted: partial results in"),
        "{stderr}"
    );
    assert!(!netns_list().contains(name), "the lab was left behind");
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(r["interrupted"], true);
    let runs = r["runs"].as_array().unwrap().len();
    assert!((1..20).contains(&runs), "{runs} runs");
    let raw = std::fs::read_to_string(out.join("linux.ipv4-60.pps")).unwrap();
    assert_eq!(raw.lines().count(), runs);
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn spread_destinations_through_generated_tables_are_forwarded() {
    // Generated routes plus a default route in the DUT's kernel: frames to
    // random destinations over 1/8-126/8 all reach the receiver, through
    // the kernel and through linerate's mirror of the same table.
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "lrt-runner-spread";
    let _down = Down(name);
    let dir = tempfile::tempdir().unwrap();
    let o = run_scenario(
        name,
        &dir,
        "repeat = 1\nduts = [\"k\", \"lr\"]\nprofiles = [\"ipv4-60-spread\"]\n[measure]\nseconds = 1\n\
         [dut.k]\nforwarder = \"linux\"\nroutes = 5000\n[dut.lr]\nforwarder = \"linerate\"\nroutes = 5000\n",
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("DUT kernel: 5001 generated IPv4"),
        "{stderr}"
    );
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    for x in r["results"].as_array().unwrap() {
        assert!(x["median_mpps"].as_f64().unwrap() > 0.05, "{x}");
    }
    assert!(!netns_list().contains(name));
}

/// A stateful DUT configuration: the profile's flows made connections by
/// traffic the receiver answers before the run (the log says so, and how
/// many the DUT's table held: every one, assured), the kernel's conntrack
/// limits set for the run and put back, and the DUT's table flushed after.
/// The kernel alone as well as linerate: the answers must reach a DUT with
/// no XDP program on its outgoing interface (they did not, once).
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_stateful_dut_has_its_flows_established_before_its_run() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "lrt-runst";
    let _down = Down(name);
    let max_before = std::fs::read_to_string("/proc/sys/net/netfilter/nf_conntrack_max").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let o = run_scenario(
        name,
        &dir,
        "name = \"stateful\"\nrepeat = 1\nduts = [\"linux-nft-stateful\", \"linerate-nft-stateful\"]\nprofiles = [\"small\"]\n\
         [measure]\nmethod = \"overload\"\nseconds = 1\n\
         [profile.small]\nfamily = \"ipv4\"\nlen = \"60\"\n\
         src = \"198.18.10.1:2000-198.18.10.10\"\ndst = \"198.19.10.1:2000-198.19.10.50\"\n",
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert_eq!(
        stderr.matches("conntrack holds 500, 500 assured").count(),
        2,
        "{stderr}"
    );
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    for run in r["runs"].as_array().unwrap() {
        let log = std::fs::read_to_string(dir.path().join("r").join(run["log"].as_str().unwrap()))
            .unwrap();
        // A second pass assures what the first made and answered.
        let passes = log.matches("# establishing the flows: pass").count();
        assert!((2..=8).contains(&passes), "{log}");
        assert!(log.contains("# established 500 flows"), "{log}");
        assert!(run["received_pps"].as_f64().unwrap() > 10_000.0, "{run}");
    }
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/netfilter/nf_conntrack_max").unwrap(),
        max_before,
        "the conntrack limit was not put back"
    );
    assert!(!netns_list().contains(name), "the lab was left behind");
}

/// A TCP profile through DUTs whose conntrack checks windows (the
/// kernel's default): each flow a connection opened first (a SYN to each,
/// the receiver's SYN|ACK, the first data segment), every one established
/// and assured, then the runs' data segments, in sequence and in window,
/// forwarded by the kernel alone and carried by linerate (`carry_tcp`).
/// The kernel is the oracle: its ruleset drops whatever its conntrack
/// finds invalid (a wrong sequence or acknowledgement number, a
/// checksum), so segments that arrive were judged valid.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn tcp_connections_are_opened_and_their_data_passes_window_checks() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "lrt-runtcp";
    let _down = Down(name);
    let dir = tempfile::tempdir().unwrap();
    let strict = linerate_firewall::seeds::stateful_strict("dut0");
    let o = run_scenario(
        name,
        &dir,
        &format!(
            "name = \"tcp\"\nrepeat = 1\nduts = [\"linux-nft-stateful-strict\", \"lr-tcp\"]\nprofiles = [\"tcp\", \"tcp6\"]\n\
             [measure]\nmethod = \"overload\"\nseconds = 1\n\
             [dut.lr-tcp]\nforwarder = \"linerate\"\nestablish = true\ncarry_tcp = true\nnft = '''{strict}'''\n\
             [profile.tcp]\nfamily = \"ipv4\"\nlen = \"60\"\nproto = \"tcp\"\n\
             src = \"198.18.10.1-198.18.10.10:2000-2004\"\ndst = \"198.19.10.1:80-198.19.10.10\"\n\
             [profile.tcp6]\nfamily = \"ipv6\"\nlen = \"100\"\nproto = \"tcp\"\n\
             src = \"[2001:2:0:10::1-2001:2:0:10::a]:2000-2004\"\ndst = \"[2001:2:0:8010::1-2001:2:0:8010::a]:80\"\n"
        ),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert_eq!(
        stderr.matches("conntrack holds 500, 500 assured").count(),
        4,
        "{stderr}"
    );
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    for run in r["runs"].as_array().unwrap() {
        let log = std::fs::read_to_string(dir.path().join("r").join(run["log"].as_str().unwrap()))
            .unwrap();
        assert!(
            log.contains("# establishing the connections: pass 1, syn"),
            "{log}"
        );
        assert!(log.contains("# established 500 flows in 1 passes"), "{log}");
        assert!(run["received_pps"].as_f64().unwrap() > 10_000.0, "{run}");
    }
    assert!(!netns_list().contains(name), "the lab was left behind");
}

/// Churn through the kernel checking windows: short connections one after
/// the other (SYN, two data segments, FIN, the last ACK), new ones only
/// from dut0, and an RFC 2544 search that finds no loss at its highest
/// load: every segment of every connection was valid to the kernel's
/// conntrack (its ruleset drops the invalid), the FIN and last ACK too.
/// The same through linerate carrying established connections. 3 kpps: a
/// stall of the DUT's core would have to last 85 ms to fill a veth ring.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn churned_connections_pass_the_kernels_window_checks_without_loss() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "lrt-runchurn";
    let _down = Down(name);
    let dir = tempfile::tempdir().unwrap();
    let strict = linerate_firewall::seeds::stateful_strict("dut0");
    let o = run_scenario(
        name,
        &dir,
        &format!(
            "name = \"churn\"\nrepeat = 1\nduts = [\"linux-nft-stateful-strict\", \"lr-tcp\"]\nprofiles = [\"churn\"]\n\
             [measure]\nmethod = \"rfc2544\"\nseconds = 2\nmax_rate = \"3k\"\n\
             [dut.lr-tcp]\nforwarder = \"linerate\"\nestablish = true\ncarry_tcp = true\nnft = '''{strict}'''\n\
             [profile.churn]\nfamily = \"ipv4\"\nlen = \"100\"\nproto = \"tcp\"\nchurn = 2\n\
             src = \"198.18.10.1-198.18.10.10:2000-2999\"\ndst = \"198.19.10.1:80\"\n"
        ),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{r}");
    for run in runs {
        let log = std::fs::read_to_string(dir.path().join("r").join(run["log"].as_str().unwrap()))
            .unwrap();
        assert!(!log.contains("# establishing"), "{log}");
        assert!(log.contains("# churn: the runs open and close their own connections"));
        // The search's highest load, 3k frames a second (600 new
        // connections a second), without loss.
        let pps = run["value_pps"].as_f64().unwrap();
        assert!((2_970.0..=3_030.0).contains(&pps), "{run}");
        for t in run["trials"].as_array().unwrap() {
            assert_eq!(t["loss_ratio"].as_f64(), Some(0.0), "{t}");
        }
    }
    assert!(!netns_list().contains(name), "the lab was left behind");
}

/// A traffic mix through the kernel and linerate under overload, as an
/// edge carries one: long TCP connections (weight 4), UDP conversations
/// (weight 1), and short TCP connections at a rate of their own. Each
/// long-lived part is established before the runs, part after part, the
/// DUT's conntrack counting each part's own; the runs send all three
/// frame by frame. linerate carries the established connections and
/// finds no frame malformed: a frame leaves with the generator's length
/// whatever a recycled page last held (the receiver's answers to the
/// short connections, trimmed to their headers, come back as pages).
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_traffic_mix_is_established_part_by_part_and_sent_together() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "lrt-runmix";
    let _down = Down(name);
    let dir = tempfile::tempdir().unwrap();
    let strict = linerate_firewall::seeds::stateful_strict("dut0");
    let o = run_scenario(
        name,
        &dir,
        &format!(
            "name = \"mix\"\nrepeat = 1\nduts = [\"linux-nft-stateful-strict\", \"lr-tcp\"]\nprofiles = [\"edge\"]\n\
             [measure]\nmethod = \"overload\"\nseconds = 2\n\
             [dut.lr-tcp]\nforwarder = \"linerate\"\nestablish = true\ncarry_tcp = true\nnft = '''{strict}'''\n\
             [profile.edge]\nfamily = \"ipv4\"\nlen = \"60\"\nproto = \"tcp\"\nweight = 4\n\
             src = \"198.18.10.1-198.18.10.10:2000-2019\"\ndst = \"198.19.10.1:443\"\n\
             [[profile.edge.mix]]\nfamily = \"ipv4\"\nlen = \"60\"\n\
             src = \"198.18.11.1-198.18.11.5:3000-3009\"\ndst = \"198.19.11.1:53\"\n\
             [[profile.edge.mix]]\nfamily = \"ipv4\"\nlen = \"60\"\nproto = \"tcp\"\nchurn = 2\nrate = \"2k\"\n\
             src = \"198.18.12.1-198.18.12.10:1024-60999\"\ndst = \"198.19.12.1:80\"\n"
        ),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    // Each DUT: the 200 connections, then the 50 conversations, each
    // counted apart.
    for part in [
        "part 1: 200 flows established",
        "part 2: 50 flows established",
    ] {
        assert_eq!(stderr.matches(part).count(), 2, "{part}: {stderr}");
    }
    assert_eq!(stderr.matches(", 50 assured").count(), 2, "{stderr}");
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    for run in r["runs"].as_array().unwrap() {
        let log = std::fs::read_to_string(dir.path().join("r").join(run["log"].as_str().unwrap()))
            .unwrap();
        assert!(
            log.contains("# part 3: churn: the runs open and close their own connections"),
            "{log}"
        );
        assert!(run["received_pps"].as_f64().unwrap() > 10_000.0, "{run}");
        if run["dut"] == "lr-tcp" {
            let fp = &run["fast_path"];
            assert!(forwarded_share(fp) > 0.9, "{fp}");
            assert_eq!(fp["drop_malformed"].as_u64().unwrap_or(0), 0, "{fp}");
        }
    }
    assert!(!netns_list().contains(name), "the lab was left behind");
}

/// A lab with a second generator port: a mix's part sent by it comes in by
/// dut2, and each tenant's table is chosen by the port its frames came in
/// by (`ip rule ... iif`). Each table routes only its tenant's
/// destinations and main blackholes them all, so a frame that came in by
/// the wrong port, or was routed by the wrong table, is lost: the kernel
/// and linerate carry all of both parts' fixed rates, linerate in its fast
/// path.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_second_port_carries_a_tenant_chosen_by_its_interface() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "lrt-ports";
    let _down = Down(name);
    let dir = tempfile::tempdir().unwrap();
    let setup = "setup = [\"ip route add 198.19.10.0/24 via 198.19.0.1 dev dut1 table 100\", \
                 \"ip route add 198.19.20.0/24 via 198.19.0.1 dev dut1 table 200\", \
                 \"ip route replace blackhole 198.19.0.0/16\", \
                 \"ip rule add pref 100 iif dut0 lookup 100\", \"ip rule add pref 101 iif dut2 lookup 200\"]\n\
                 teardown = [\"ip rule del pref 100; ip rule del pref 101\", \
                 \"ip route replace 198.19.0.0/16 via 198.19.0.1\", \
                 \"ip route flush table 100; ip route flush table 200\"]\n";
    let o = run_scenario(
        name,
        &dir,
        &format!(
            "name = \"ports\"\nrepeat = 1\nduts = [\"linux-ports\", \"linerate-ports\"]\nprofiles = [\"tenants\"]\n\
             [lab]\ngen_ports = 2\n[measure]\nmethod = \"overload\"\nseconds = 2\n\
             [dut.linux-ports]\nforwarder = \"linux\"\n{setup}\
             [dut.linerate-ports]\nforwarder = \"linerate\"\n{setup}\
             [profile.tenants]\nfamily = \"ipv4\"\nlen = \"60\"\nrate = \"20k\"\n\
             src = \"198.18.10.1:2000-198.18.10.20\"\ndst = \"198.19.10.1:2000-198.19.10.50\"\n\
             [[profile.tenants.mix]]\nfamily = \"ipv4\"\nlen = \"60\"\nrate = \"20k\"\nport = 2\n\
             src = \"198.18.10.1:2000-198.18.10.20\"\ndst = \"198.19.20.1:2000-198.19.20.50\"\n"
        ),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for run in runs {
        // Both parts' 20k a second, not one.
        let received = run["received_pps"].as_f64().unwrap();
        assert!(received > 39_000.0 && received < 41_000.0, "{run}");
        if run["dut"] == "linerate-ports" {
            let fp = &run["fast_path"];
            assert!(forwarded_share(fp) > 0.99, "{fp}");
        }
    }
    assert!(!netns_list().contains(name), "the lab was left behind");
}

/// The probes from the second generator port: the DUT's address on that
/// port answers every ping, and the BGP session through the DUT, between
/// the port's address and the receiver's, is established before the run
/// and stays so through it, under the generator's traffic on the first
/// port.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_probes_run_from_the_second_port() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = "lrt-probes2";
    let _down = Down(name);
    let dir = tempfile::tempdir().unwrap();
    let o = run_scenario(
        name,
        &dir,
        "repeat = 1\nduts = [\"linerate\"]\nprofiles = [\"paced\"]\n[lab]\ngen_ports = 2\n\
         [measure]\nseconds = 3\nprobes = true\n\
         [profile.paced]\nfamily = \"ipv4\"\nlen = \"60\"\nrate = \"100k\"\n",
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = &r["runs"][0]["probes"];
    let sent = p["pings_sent"].as_u64().unwrap();
    assert!(sent >= 20, "{p}");
    assert_eq!(p["pings_answered"], sent, "{p}");
    assert_eq!(p["bgp_up"], true, "{p}");
    assert_eq!(p["from"], "198.18.128.1", "{p}");
    assert!(!netns_list().contains(name), "the lab was left behind");
}
