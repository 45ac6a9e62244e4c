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

/// Issue 30's goal on simulated noisy DUTs: the knee moves by 0.5% a
/// trial and one trial in ten loses a few frames whatever its load. Each
/// tool's NDR and PDR, measured again with a trial of 4 s, hold with a
/// probability the simulated DUT knows exactly (`pass_probability`), so
/// the comparison carries no re-trial noise; summed over the seeds, that
/// is how many re-trials are expected to hold.
///
/// The searches' own trials are noisy, and the two tools meet different
/// noise (the replayable noise follows each load's exact bits): on one
/// seed either may end a step higher by luck. So linerate's loads must
/// hold at least as often as CSIT's unless the difference is significant:
/// the test fails when linerate's sum falls short of CSIT's by more than
/// twice the standard error of the paired per-seed differences (one-sided,
/// about 98%). CSIT_HOLD_SEEDS and CSIT_HOLD_FIRST_SEED widen or move the
/// sample (docs/search.md has the figures over 500 seeds).
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs the CSIT venv scripts/setup.sh makes (as root): --features privileged"
)]
fn reported_loads_hold_when_measured_again_at_least_as_often_as_csits() {
    let env = |name: &str, default: u64| -> u64 {
        std::env::var(name)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    };
    let first = env("CSIT_HOLD_FIRST_SEED", 0);
    let seeds = env("CSIT_HOLD_SEEDS", 60);
    let (noise, spurious) = (0.005, 0.1);
    // Per goal: each seed's hold probability, linerate's and CSIT's.
    let mut held: [Vec<(f64, f64)>; 2] = [Vec::new(), Vec::new()];
    for seed in first..first + seeds {
        let cap = 0.2e6 + (seed % 12) as f64 * 0.7e6;
        let max = cap * 2.0;
        let dut = SimDut::ideal(cap)
            .with_knee(cap * 0.9, 0.02)
            .with_noise(noise, spurious, seed);
        let theirs = csit(seed, cap, noise, spurious, max);
        let mine = ours(seed, cap, noise, spurious, max);
        for (k, g) in mine.goals.iter().enumerate() {
            let csit_lo = theirs[&g.name]["lower_pps"].as_f64();
            let p = |lo: Option<f64>| lo.map_or(0.0, |lo| dut.pass_probability(lo, g.loss_ratio));
            let (a, b) = (p(g.lower_pps), p(csit_lo));
            println!(
                "seed {seed} {}: linerate {:?} holds {a:.3}, CSIT {:?} {b:.3}",
                g.name,
                g.lower_pps.map(|x| x as u64),
                csit_lo.map(|x| x as u64)
            );
            held[k].push((a, b));
        }
    }
    for (k, name) in ["NDR", "PDR"].iter().enumerate() {
        let (ours, theirs): (f64, f64) = held[k]
            .iter()
            .fold((0.0, 0.0), |(x, y), (a, b)| (x + a, y + b));
        let n = held[k].len() as f64;
        let mean = (ours - theirs) / n;
        let var = held[k]
            .iter()
            .map(|(a, b)| (a - b - mean).powi(2))
            .sum::<f64>()
            / (n - 1.0);
        let se = (n * var).sqrt();
        println!(
            "{name}: expected to hold, of {seeds} re-trials each: linerate {ours:.1}, CSIT {theirs:.1} (difference {:+.1}, standard error {se:.1})",
            ours - theirs
        );
        assert!(
            ours >= theirs - 2.0 * se,
            "{name}: linerate's loads hold significantly less often than CSIT's: {ours:.1} vs {theirs:.1} (standard error {se:.1})"
        );
    }
}
