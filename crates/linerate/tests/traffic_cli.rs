//! The generator's and receiver's command line: bad arguments are refused
//! with the option's name and nothing is sent; `bench gen` counts every
//! frame the wire took, paces, and leaves no namespace. Needs root.
use serde_json::Value;
use std::process::{Command, Output};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

fn linerate(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run linerate")
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn bad_generator_arguments_name_the_option() {
    for (args, field) in [
        (vec!["-R", "0"], "-R"),
        (vec!["-R", "fast"], "-R"),
        (vec!["-p", "999"], "-p"),
        (vec!["--cpu", "999"], "--cpu"),
        (vec!["-l", "59"], "-l"),
        (vec!["-l", "sixty"], "-l"),
        (vec!["-6", "-s", "198.18.0.1"], "-6"),
        (vec!["-s", "198.18.0.9-198.18.0.1"], "-s"),
        (vec!["-d", "2001::1"], "same family"),
        (vec!["-n", "0"], "-n"),
        (vec!["-t", "0"], "-t"),
        (vec!["-D", "02:00:00:00:00"], "-D"),
    ] {
        let mut all = vec!["gen", "-i", "lo"];
        if args[0] != "-t" {
            all.extend(["-t", "1"]);
        }
        all.extend(&args);
        let o = linerate(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(field), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    let o = linerate(&["gen", "-i", "no-such-if0", "-t", "1"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("no-such-if0"));
    let o = linerate(&["gen", "-i", "lo"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("-t SECONDS or -n COUNT"));
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn bench_gen_counts_every_frame_paces_and_cleans_up() {
    let (o, left) = common::linerate_leaving_scratch(&[
        "bench",
        "gen",
        "--repeat",
        "1",
        "-t",
        "1",
        "--rate-fractions",
        "0.5",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let xdp = r["xdp_pps"]["median"].as_f64().unwrap();
    let afp = r["afpacket_pps"]["median"].as_f64().unwrap();
    assert!(xdp > 0.0 && afp > 0.0, "{r}");
    // Pacing works: at half the maximum the generator builds half the
    // maximum (without pacing it would build the maximum). What the peer
    // took may be less when it stalls; that is the bench's to report.
    let rc = &r["rate_control"][0];
    let (built, rate) = (
        rc["offered_pps"].as_f64().unwrap(),
        rc["rate_pps"].as_f64().unwrap(),
    );
    assert!((built - rate).abs() / rate < 0.02, "{rc}");
    // The receiver counts every frame the wire took (a few frames of the
    // kernel's own may be in the interface's counter).
    for rc in ["receiver", "receiver_count"] {
        let counted = r[rc]["counted_ratio_min"].as_f64().unwrap();
        assert!((0.999..=1.0).contains(&counted), "{}", r[rc]);
    }
    // The frames receiver counts everything that arrives: the generator's
    // frames and the sending veth's own chatter, which its TX counter (the
    // generator's "sent") holds too.
    let counted = r["receiver_frames"]["counted_ratio_min"].as_f64().unwrap();
    assert!(
        (0.999..=1.001).contains(&counted),
        "{}",
        r["receiver_frames"]
    );
    // Each receiver was measured against the drop sink in its own round.
    for rc in ["receiver", "receiver_count", "receiver_frames"] {
        assert!(
            r[rc]["of_drop_sink"]["median"].as_f64().unwrap() > 0.0,
            "{}",
            r[rc]
        );
    }
    assert!(!left, "the bench's scratch namespace was left behind");
}

/// Removes the test's namespace however the test ends.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// A second short of `-R` is told apart: with the generator at full speed
/// throughout (a rate above what the machine gives: the program never
/// held a frame back), the summary says so; a rate it can offer gets no
/// such warning.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn gen_says_which_seconds_fell_short_at_full_speed() {
    let ns = Netns(format!("lrt-short-{}", std::process::id()));
    let ip = |args: &[&str]| {
        let s = Command::new("ip").args(args).status().unwrap();
        assert!(s.success(), "ip {}", args.join(" "));
    };
    ip(&["netns", "add", &ns.0]);
    ip(&[
        "-n", &ns.0, "link", "add", "s0", "type", "veth", "peer", "name", "s1",
    ]);
    for d in ["s0", "s1"] {
        ip(&["-n", &ns.0, "link", "set", "dev", d, "up"]);
    }
    let gen = |rate: &str| -> Value {
        let o = linerate(&[
            "gen", "--netns", &ns.0, "-i", "s0", "-t", "2", "-R", rate, "--cpu", "0", "--json",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let warned = |r: &Value, what: &str| {
        r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains(what))
    };
    let r = gen("1000M");
    assert!(
        warned(
            &r,
            "2 of 2 seconds more than 1% below -R: 2 at full speed throughout"
        ),
        "{r}"
    );
    let r = gen("10k");
    assert!(!warned(&r, "below -R"), "{r}");
}
