//! `linerate imix` and `linerate ministat` through the command line.
use serde_json::Value;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

fn run(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(BIN).args(args).output().unwrap();
    (
        o.status.code().unwrap(),
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

#[test]
fn imix_json_follows_the_guides_formulas() {
    let (rc, out, _) = run(&["imix", "--pps", "7000000", "--json"]);
    assert_eq!(rc, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["pps"], 7e6);
    // 7 Mpps * 4084/12 bytes * 8 and * 4252/12 * 8.
    assert!((v["ip_bps"].as_f64().unwrap() - 7e6 * 4084.0 / 12.0 * 8.0).abs() < 1.0);
    assert!((v["ethernet_bps"].as_f64().unwrap() - 7e6 * 4252.0 / 12.0 * 8.0).abs() < 1.0);

    let (_, out, _) = run(&["imix", "--bps", "10G", "--layer", "ip", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!((v["ip_bps"].as_f64().unwrap() - 10e9).abs() < 1.0);

    let (_, out, _) = run(&["imix", "--line-rate", "1G", "--size", "64", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        format!("{:.3}", v["line_rate_pps"].as_f64().unwrap() / 1e6),
        "1.488"
    );
}

#[test]
fn imix_bad_input_names_the_option() {
    for (args, field) in [
        (vec!["imix", "--bps", "fast"], "--bps"),
        (vec!["imix", "--pps", "-3"], "--pps"),
        (vec!["imix", "--line-rate", "10G", "--size", "10"], "--size"),
    ] {
        let (rc, _, err) = run(&args);
        assert_ne!(rc, 0);
        assert!(err.contains(field), "{args:?}: {err}");
    }
    let (rc, _, _) = run(&["imix"]);
    assert_ne!(rc, 0, "one of --pps, --bps, --line-rate is required");
}

#[test]
fn ministat_subcommand_reads_stdin_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    std::fs::write(&a, "1\n2\n3\n").unwrap();
    let (rc, out, _) = run(&["ministat", "-n", a.to_str().unwrap()]);
    assert_eq!(rc, 0);
    assert_eq!(
        out,
        format!(
            "x {}\n    N           Min           Max        Median           Avg        Stddev\n\
             x   3             1             3             2             2             1\n",
            a.display()
        )
    );
    let (rc, _, err) = run(&["ministat", "-c", "97", a.to_str().unwrap()]);
    assert_eq!(rc, 2);
    assert!(err.starts_with("No support for confidence level\n"));
}
