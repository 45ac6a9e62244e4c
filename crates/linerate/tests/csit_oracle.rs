//! FD.io CSIT's MLRsearch (PyPI MLRsearch 1.2.1, in the venv
//! scripts/setup.sh makes) as the oracle of linerate's: both search the
//! same replayable simulated DUTs (`linerate trial --sim`) for NDR and PDR
//! with the same goals (loss ratios 0 and 0.005, exceed ratio 0, width
//! 0.005, trials 1 to 4 s, duration sum 4 s), and their results must agree
//! within the width, on every seed.
use linerate_search::sim::SimDut;
use linerate_search::{mlr, Trials};
use serde_json::Value;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

fn venv_python() -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.join(".venv-csit/bin/python")
}

fn csit(seed: u64, cap: f64, noise: f64, spurious: f64, max: f64) -> Value {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/csit-mlrsearch.py");
    let o = Command::new(venv_python())
        .arg(script)
        .args(["--linerate", BIN, "--seed", &seed.to_string()])
        .args([
            "--capacity",
            &cap.to_string(),
            "--noise",
            &noise.to_string(),
        ])
        .args(["--spurious", &spurious.to_string()])
        .args([
            "--min-load",
            &(max / 1000.0).to_string(),
            "--max-load",
            &max.to_string(),
        ])
        .output()
        .expect("the CSIT venv (scripts/setup.sh makes .venv-csit)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn ours(seed: u64, cap: f64, noise: f64, spurious: f64, max: f64) -> mlr::Outcome {
    let mut dut = SimDut::ideal(cap)
        .with_knee(cap * 0.9, 0.02)
        .with_noise(noise, spurious, seed)
        .replayable();
    let mut cfg = mlr::Config::ndr_pdr(max, 0.005);
    cfg.initial_seconds = 1.0;
    cfg.final_seconds = 4.0;
    for g in &mut cfg.goals {
        g.duration_sum = Some(4.0);
    }
    mlr::search(&mut dut, &cfg, &mut Trials::new(|_| {})).unwrap()
}

/// Both searches on one DUT per seed, noise `noise(seed)`; each goal's
/// lower bounds must agree within `tolerance` (relative). The rows, for
/// the failure message and the docs.
fn compare(noise: impl Fn(u64) -> f64, tolerance: impl Fn(f64) -> f64) -> Vec<String> {
    let mut rows = Vec::new();
    for seed in 0..12u64 {
        let cap = 0.2e6 + seed as f64 * 0.7e6;
        let n = noise(seed);
        let max = cap * (1.5 + (seed % 4) as f64 * 0.5);
        let theirs = csit(seed, cap, n, 0.0, max);
        let mine = ours(seed, cap, n, 0.0, max);
        for g in &mine.goals {
            let lo = g.lower_pps.unwrap();
            let csit_lo = theirs[&g.name]["lower_pps"].as_f64().unwrap();
            rows.push(format!(
                "seed {seed} noise {n} {}: linerate {lo:.0} CSIT {csit_lo:.0} ({:+.3}%)",
                g.name,
                (lo / csit_lo - 1.0) * 100.0
            ));
            assert!(
                (lo - csit_lo).abs() <= tolerance(n) * lo.max(csit_lo),
                "seed {seed} {}: linerate {lo:.0}, CSIT {csit_lo:.0}\n{}",
                g.name,
                rows.join("\n")
            );
        }
    }
    rows
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs the CSIT venv scripts/setup.sh makes (as root): --features privileged"
)]
fn ndr_and_pdr_agree_with_csit_mlrsearch_within_the_width() {
    // DUTs whose knee moves by at most 0.2% from trial to trial: within
    // the width (0.5%) on every seed.
    let rows = compare(|seed| [0.0, 0.001, 0.002][seed as usize % 3], |_| 0.005);
    println!("{}", rows.join("\n"));
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs the CSIT venv scripts/setup.sh makes (as root): --features privileged"
)]
fn on_noisier_duts_they_agree_within_the_width_and_the_noise() {
    // A knee that moves by 0.5% from trial to trial puts any search's
    // answer anywhere in that band: the two agree within the width plus
    // twice the noise.
    let rows = compare(|_| 0.005, |n| 0.005 + 2.0 * n);
    println!("{}", rows.join("\n"));
}

/// How many of 3 trials of 4 s at `load` meet `loss_ratio` on a fresh,
/// not replayable, stream of the DUT's noise (`stream` seeds it): the
/// result measured again, as a user would.
fn holds(load: f64, loss_ratio: f64, cap: f64, noise: f64, spurious: f64, stream: u64) -> usize {
    use linerate_search::Dut;
    let mut dut = SimDut::ideal(cap)
        .with_knee(cap * 0.9, 0.02)
        .with_noise(noise, spurious, stream);
    (0..3)
        .filter(|_| dut.trial(load, 4.0).unwrap().loss_ratio() <= loss_ratio)
        .count()
}

/// Issue 30's goal on simulated DUTs, not met yet: on these noisy DUTs
/// linerate's PDRs held 28 of 36 re-trials, CSIT's 33 (NDR 28 and 29):
/// CSIT ends a fraction of a percent lower. Run it with `--ignored` (and
/// the CSIT venv) to see where it stands; in the lab the goal is met
/// (docs/search.md).
#[test]
#[ignore = "issue 30's goal, not met yet on simulated noisy DUTs (docs/search.md): --ignored"]
fn reported_loads_hold_when_measured_again_at_least_as_often_as_csits() {
    // Noisy DUTs: the knee moves by 0.5% a trial and one trial in ten
    // loses a few frames whatever its load. Each tool's NDR and PDR are
    // measured again, 3 trials each, on the same fresh noise for both.
    let (noise, spurious) = (0.005, 0.1);
    let mut count = [[0usize; 2]; 2]; // [tool][goal]
    for seed in 0..12u64 {
        let cap = 0.2e6 + seed as f64 * 0.7e6;
        let max = cap * 2.0;
        let theirs = csit(seed, cap, noise, spurious, max);
        let mine = ours(seed, cap, noise, spurious, max);
        for (k, g) in mine.goals.iter().enumerate() {
            let stream = seed * 1000 + 7 + k as u64;
            let csit_lo = theirs[&g.name]["lower_pps"].as_f64();
            let a = g.lower_pps.map_or(0, |lo| {
                holds(lo, g.loss_ratio, cap, noise, spurious, stream)
            });
            let b = csit_lo.map_or(0, |lo| {
                holds(lo, g.loss_ratio, cap, noise, spurious, stream)
            });
            println!(
                "seed {seed} {}: linerate {:?} {a}/3, CSIT {:?} {b}/3",
                g.name,
                g.lower_pps.map(|x| x as u64),
                csit_lo.map(|x| x as u64)
            );
            count[0][k] += a;
            count[1][k] += b;
        }
    }
    println!(
        "held, of 36 re-trials each: linerate NDR {} PDR {}, CSIT NDR {} PDR {}",
        count[0][0], count[0][1], count[1][0], count[1][1]
    );
    assert!(count[0][0] >= count[1][0], "NDR: {count:?}");
    assert!(count[0][1] >= count[1][1], "PDR: {count:?}");
}
