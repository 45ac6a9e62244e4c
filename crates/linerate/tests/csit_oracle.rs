//! FD.io CSIT's MLRsearch (PyPI MLRsearch 1.2.1, in the venv
//! scripts/setup.sh makes) as the oracle of linerate's: both search the
//! same replayable simulated DUTs (`linerate trial --sim`) for NDR and PDR
//! with the same goals (loss ratios 0 and 0.005, exceed ratio 0, width
//! 0.005, trials 1 to 4 s, duration sum 4 s). linerate's search is CSIT's
//! in its structure (the load grid, the phases, the strategies, the order
//! of candidates), so on every seed both must make the same number of
//! trials and report the same NDR and PDR and the same upper bounds (to
//! float rounding): more than the "within the width", and what
//! catches any divergence from the reference.
use linerate_search::sim::SimDut;
use linerate_search::{mlr, Trials};
use serde_json::Value;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

fn venv_python() -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.join(".venv-csit/bin/python")
}

/// One simulated DUT and the goals' exceed ratio and duration sum (loss
/// ratios 0 and 0.005, width 0.005, trials 1 to 4 s).
#[derive(Clone, Copy, Debug)]
struct Setup {
    seed: u64,
    cap: f64,
    max: f64,
    noise: f64,
    spurious: f64,
    exceed_ratio: f64,
    duration_sum: f64,
}

impl Setup {
    fn new(seed: u64, cap: f64, max: f64, noise: f64, spurious: f64) -> Self {
        Setup {
            seed,
            cap,
            max,
            noise,
            spurious,
            exceed_ratio: 0.0,
            duration_sum: 4.0,
        }
    }
}

fn csit(s: Setup) -> Value {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/csit-mlrsearch.py");
    let arg = |x: f64| x.to_string();
    let o = Command::new(venv_python())
        .arg(script)
        .args(["--linerate", BIN, "--seed", &s.seed.to_string()])
        .args(["--capacity", &arg(s.cap), "--noise", &arg(s.noise)])
        .args(["--spurious", &arg(s.spurious)])
        .args([
            "--min-load",
            &arg(s.max / 1000.0),
            "--max-load",
            &arg(s.max),
        ])
        .args(["--exceed-ratio", &arg(s.exceed_ratio)])
        .args(["--duration-sum", &arg(s.duration_sum)])
        .output()
        .expect("the CSIT venv (scripts/setup.sh makes .venv-csit)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn ours(s: Setup) -> (mlr::Outcome, usize) {
    let mut dut = SimDut::ideal(s.cap)
        .with_knee(s.cap * 0.9, 0.02)
        .with_noise(s.noise, s.spurious, s.seed)
        .replayable();
    let mut cfg = mlr::Config::ndr_pdr(s.max, 0.005);
    cfg.initial_seconds = 1.0;
    cfg.final_seconds = 4.0;
    for g in &mut cfg.goals {
        g.exceed_ratio = s.exceed_ratio;
        g.duration_sum = Some(s.duration_sum);
    }
    let mut trials = Trials::new(|_| {});
    let outcome = mlr::search(&mut dut, &cfg, &mut trials).unwrap();
    (outcome, trials.list.len())
}

/// Both searches on one DUT per seed, noise `noise(seed)`: the same
/// number of trials, each goal's lower and upper bound the same (relative
/// 1e-9: the two compute the grid's loads with different float rounding).
/// The rows, for the failure message and the docs.
fn compare(setup: impl Fn(u64) -> Setup) -> Vec<String> {
    let same = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.max(b),
        (a, b) => a.is_none() && b.is_none(),
    };
    let mut rows = Vec::new();
    for seed in 0..12u64 {
        let s = setup(seed);
        let theirs = csit(s);
        let (mine, trials) = ours(s);
        let csit_trials = theirs["trials"].as_u64().unwrap() as usize;
        rows.push(format!(
            "seed {seed} noise {} spurious {} exceed ratio {} duration sum {}: {trials} trials, CSIT {csit_trials}",
            s.noise, s.spurious, s.exceed_ratio, s.duration_sum
        ));
        assert_eq!(trials, csit_trials, "seed {seed}\n{}", rows.join("\n"));
        for g in &mine.goals {
            let (lo, up) = (g.lower_pps, g.upper_pps);
            let csit_lo = theirs[&g.name]["lower_pps"].as_f64();
            let csit_up = theirs[&g.name]["upper_pps"].as_f64();
            rows.push(format!(
                "  {}: linerate {lo:.0?} (upper {up:.0?}), CSIT {csit_lo:.0?} (upper {csit_up:.0?})",
                g.name
            ));
            assert!(
                same(lo, csit_lo) && same(up, csit_up),
                "seed {seed} {}\n{}",
                g.name,
                rows.join("\n")
            );
        }
    }
    rows
}

/// The 12 DUTs: 0.2 to 7.9 Mpps, searched up to 1.5 to 3 times that.
fn cap(seed: u64) -> f64 {
    0.2e6 + seed as f64 * 0.7e6
}

fn max(seed: u64) -> f64 {
    cap(seed) * (1.5 + (seed % 4) as f64 * 0.5)
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs the CSIT venv scripts/setup.sh makes (as root): --features privileged"
)]
fn ndr_and_pdr_are_csit_mlrsearchs_on_every_seed() {
    // DUTs whose knee moves by at most 0.2% from trial to trial.
    let rows = compare(|seed| {
        Setup::new(
            seed,
            cap(seed),
            max(seed),
            [0.0, 0.001, 0.002][seed as usize % 3],
            0.0,
        )
    });
    println!("{}", rows.join("\n"));
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs the CSIT venv scripts/setup.sh makes (as root): --features privileged"
)]
fn on_noisier_duts_too() {
    // A knee that moves by 0.5% from trial to trial: any search's answer
    // is anywhere in that band, but both tools meet the same trials.
    let rows = compare(|seed| Setup::new(seed, cap(seed), max(seed), 0.005, 0.0));
    println!("{}", rows.join("\n"));
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs the CSIT venv scripts/setup.sh makes (as root): --features privileged"
)]
fn with_an_exceed_ratio_and_a_longer_duration_sum_too() {
    // Half of a load's trial seconds may miss (a median), 8 s of final
    // trials, on DUTs that lose a few frames in one trial of five: loads
    // stay undecided over several trials, the refine strategies measure
    // them again, short misses are balanced by short passes.
    let rows = compare(|seed| Setup {
        exceed_ratio: 0.5,
        duration_sum: 8.0,
        ..Setup::new(seed, cap(seed), max(seed), 0.003, 0.2)
    });
    println!("{}", rows.join("\n"));
}

/// The searches' agreement goal on simulated noisy DUTs: the knee moves by 0.5% a
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
        let theirs = csit(Setup::new(seed, cap, max, noise, spurious));
        let (mine, _) = ours(Setup::new(seed, cap, max, noise, spurious));
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
