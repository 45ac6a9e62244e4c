//! The searches against simulated DUTs whose true capacity is known, and
//! BSDRP's equilibrium against the trace printed in the seeds.
use anyhow::Result;
use linerate_search::sim::SimDut;
use linerate_search::{binary, equilibrium, mlr, Dut, Measurement, Trials};
use proptest::prelude::*;

/// Replays the forwarding rates of the seeds' equilibrium run (BSDRP
/// forwarding guide, "Equilibrium throughput": link rate 4000 Kpps,
/// tolerance 0.01, seven iterations).
struct Scripted {
    kpps: Vec<f64>,
    loads: Vec<f64>,
}

impl Dut for Scripted {
    fn trial(&mut self, load_pps: f64, seconds: f64) -> Result<Measurement> {
        self.loads.push(load_pps);
        let fwd = self.kpps.remove(0) * 1000.0;
        Ok(Measurement {
            requested_pps: load_pps,
            offered: (load_pps * seconds) as u64,
            received: (fwd * seconds) as u64,
            seconds,
            valid: true,
        })
    }
}

#[test]
fn equilibrium_follows_the_seeds_trace() {
    let mut dut = Scripted {
        kpps: vec![1999.0, 2949.0, 2499.0, 2750.0, 2875.0, 2933.0, 2948.0],
        loads: vec![],
    };
    let mut cfg = equilibrium::Config::new(4_000_000.0);
    cfg.trial_seconds = 1.0;
    let mut trials = Trials::new(|_| {});
    let mut shown = Vec::new();
    let out = equilibrium::search(&mut dut, &cfg, &mut trials, |i| {
        shown.push((
            equilibrium::kpps(i.load_pps),
            equilibrium::kpps(i.step_pps),
            i.trend,
        ))
    })
    .unwrap();
    use equilibrium::Trend::*;
    // Loads, steps and trends as the seeds print them (Kpps, rounded down).
    assert_eq!(
        shown,
        vec![
            (2000, 1000, None),
            (3000, 1000, Some(Increasing)),
            (2500, 500, Some(Decreasing)),
            (2750, 250, Some(Increasing)),
            (2875, 125, Some(Increasing)),
            (2937, 62, Some(Increasing)),
            (2968, 31, Some(Increasing)),
        ]
    );
    assert_eq!(out.iterations, 7);
    assert_eq!(
        out.line(),
        "Estimated Equilibrium Ethernet throughput= 2948 Kpps (maximum value seen: 2949 Kpps)"
    );
    assert!(!out.generator_limited);
}

#[test]
fn equilibrium_restarts_from_the_forwarded_rate_when_far_too_high() {
    let mut dut = SimDut::ideal(100_000.0);
    let mut trials = Trials::new(|_| {});
    let cfg = equilibrium::Config::new(10_000_000.0);
    let out = equilibrium::search(&mut dut, &cfg, &mut trials, |_| {}).unwrap();
    // Second trial at what the DUT forwarded in the first (BSDRP's rule).
    assert_eq!(trials.list[1].measurement.requested_pps, 100_000.0);
    assert!(
        (out.estimate_pps - 100_000.0).abs() <= 0.02 * 100_000.0,
        "{out:?}"
    );
}

fn within(x: f64, truth: f64, rel: f64) -> bool {
    (x - truth).abs() <= rel * truth
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn equilibrium_converges_to_capacity(cap in 0.1e6..9.0e6f64, link in 1.2f64..4.0, seed in 0u64..1000) {
        // Link rate from 1.2 to 4 times the capacity, ±0.3% noise.
        let mut dut = SimDut::ideal(cap).with_noise(0.003, 0.0, seed);
        let cfg = equilibrium::Config::new(cap * link);
        let mut trials = Trials::new(|_| {});
        let out = equilibrium::search(&mut dut, &cfg, &mut trials, |_| {}).unwrap();
        prop_assert!(within(out.estimate_pps, cap, cfg.tolerance + dut.noise), "{:?} vs {}", out, cap);
        prop_assert!(out.max_seen_pps <= cap * (1.0 + dut.noise) + 1.0);
    }

    #[test]
    fn rfc2544_converges_to_zero_loss_capacity(cap in 0.1e6..9.0e6f64, over in 1.05f64..4.0, noise in 0.0f64..0.01, seed in 0u64..1000) {
        let mut dut = SimDut::ideal(cap).with_knee(cap * 0.97, 0.02).with_noise(noise, 0.0, seed);
        let mut cfg = binary::Config::new(cap * over);
        cfg.final_seconds = 10.0;
        let mut trials = Trials::new(|_| {});
        let out = binary::search(&mut dut, &cfg, &mut trials).unwrap();
        let truth = dut.true_throughput(0.0);
        let t = out.throughput_pps.unwrap();
        // Never above what the DUT forwards without loss in its best trial,
        // within width plus noise of the true value.
        prop_assert!(t <= truth * (1.0 + noise) + 1.0, "{t} > {truth}");
        prop_assert!(within(t, truth, cfg.width + 2.0 * noise), "{t} vs {truth}");
        // The result is a load that passed a final, full-length trial.
        let last = trials.list.last().unwrap();
        prop_assert!(last.step.starts_with("final") && last.passed && last.measurement.requested_pps == t);
    }

    #[test]
    fn mlrsearch_finds_ndr_and_pdr(cap in 0.1e6..9.0e6f64, over in 1.05f64..4.0, noise in 0.0f64..0.005, seed in 0u64..1000) {
        let mut dut = SimDut::ideal(cap).with_knee(cap * 0.9, 0.02).with_noise(noise, 0.0, seed);
        let mut cfg = mlr::Config::ndr_pdr(cap * over, 0.005);
        cfg.final_seconds = 10.0;
        let mut trials = Trials::new(|_| {});
        let out = mlr::search(&mut dut, &cfg, &mut trials).unwrap();
        for g in &out.goals {
            let truth = dut.true_throughput(g.loss_ratio);
            let lo = g.lower_pps.unwrap();
            prop_assert!(within(lo, truth, cfg.width + 2.0 * noise), "{}: {lo} vs {truth}", g.name);
            if let Some(up) = g.upper_pps {
                prop_assert!(up - lo <= cfg.width * up + 1e-6);
            }
        }
        prop_assert!(out.goals[0].lower_pps <= out.goals[1].lower_pps);
    }

    #[test]
    fn mlrsearch_reports_only_loads_where_no_trial_missed(cap in 0.5e6..5.0e6f64, spurious in 0.0f64..0.5, seed in 0u64..1000) {
        // Trials that lose a few frames at any load, as a noisy DUT does:
        // with exceed ratio 0, a reported load is one where every trial,
        // short or long, met the goal, and the full-length ones add up to
        // the duration sum. Retrying a load until a trial passes (what
        // made NDRs that failed when measured again) breaks this.
        let mut dut = SimDut::ideal(cap).with_knee(cap * 0.9, 0.02).with_noise(0.002, spurious, seed);
        let mut cfg = mlr::Config::ndr_pdr(cap * 2.0, 0.005);
        cfg.final_seconds = 4.0;
        let mut trials = Trials::new(|_| {});
        let out = mlr::search(&mut dut, &cfg, &mut trials).unwrap();
        for g in &out.goals {
            let Some(lo) = g.lower_pps else { continue };
            let at: Vec<_> = trials.list.iter().filter(|t| t.measurement.requested_pps == lo && t.measurement.valid).collect();
            prop_assert!(at.iter().all(|t| t.loss_ratio <= g.loss_ratio), "{}: a trial at {lo} missed", g.name);
            prop_assert!(at.iter().all(|t| t.goals[&g.name] == (t.loss_ratio <= g.loss_ratio)));
            let long: f64 = at.iter().filter(|t| t.duration >= cfg.final_seconds).map(|t| t.duration).sum();
            prop_assert!(long >= g.duration_sum, "{}: {long} s at {lo}", g.name);
        }
    }

    #[test]
    fn inconsistent_trials_never_overstate(cap in 0.5e6..5.0e6f64, seed in 0u64..1000) {
        // One trial in five loses a few frames whatever its load.
        let mk = || SimDut::ideal(cap).with_knee(cap * 0.9, 0.02).with_noise(0.002, 0.2, seed);
        let mut cfg = binary::Config::new(cap * 2.0);
        cfg.final_seconds = 5.0;
        let mut dut = mk();
        let out = binary::search(&mut dut, &cfg, &mut Trials::new(|_| {})).unwrap();
        if let Some(t) = out.throughput_pps {
            prop_assert!(t <= dut.true_throughput(0.0) * 1.002 + 1.0);
        }
        let mut dut = mk();
        let mut cfg = mlr::Config::ndr_pdr(cap * 2.0, 0.005);
        cfg.final_seconds = 5.0;
        let out = mlr::search(&mut dut, &cfg, &mut Trials::new(|_| {})).unwrap();
        for g in &out.goals {
            if let Some(lo) = g.lower_pps {
                prop_assert!(lo <= dut.true_throughput(g.loss_ratio) * 1.002 + 1.0, "{}: {lo}", g.name);
            }
        }
    }
}

#[test]
fn the_generator_ceiling_is_not_dut_loss() {
    // The DUT could forward 5 Mpps, the generator offers only 3.
    let mk = || SimDut::ideal(5e6).with_generator_max(3e6);
    let mut trials = Trials::new(|_| {});
    let out = binary::search(&mut mk(), &binary::Config::new(8e6), &mut trials).unwrap();
    // The ceiling is the highest load the generator offered in full
    // (the generator's ceiling): within the search's width of what it can offer.
    let c = out.generator_ceiling_pps.unwrap();
    let highest_valid = trials.highest_valid_load().unwrap();
    assert_eq!(c, highest_valid);
    assert!(within(c, 3e6, 0.01), "{c}");
    assert!(
        out.upper_pps.is_none(),
        "a generator shortfall counted as loss: {out:?}"
    );
    assert!(within(out.throughput_pps.unwrap(), 3e6, 0.005));
    for t in &trials.list {
        assert_eq!(
            t.measurement.valid,
            t.measurement.requested_pps <= 3e6 * 1.01
        );
        assert_eq!(t.loss_ratio, 0.0);
    }

    let out = mlr::search(
        &mut mk(),
        &mlr::Config::ndr_pdr(8e6, 0.005),
        &mut Trials::new(|_| {}),
    )
    .unwrap();
    assert!(out.generator_ceiling_pps.is_some());
    for g in &out.goals {
        assert!(g.upper_pps.is_none(), "{g:?}");
        assert!(within(g.lower_pps.unwrap(), 3e6, 0.01), "{g:?}");
    }

    let mut trials = Trials::new(|_| {});
    let out = equilibrium::search(
        &mut mk(),
        &equilibrium::Config::new(8e6),
        &mut trials,
        |_| {},
    )
    .unwrap();
    assert!(out.generator_limited);
    assert!(trials.list.iter().any(|t| !t.measurement.valid));
}

/// A generator that falls short once: trial `dip_at` offers a fifth less
/// than asked (and is invalid), the others whatever the simulation says.
struct OneDip {
    sim: SimDut,
    dip_at: usize,
    n: usize,
}

impl linerate_search::Dut for OneDip {
    fn trial(&mut self, load: f64, seconds: f64) -> anyhow::Result<linerate_search::Measurement> {
        self.n += 1;
        let mut m = self.sim.trial(load, seconds)?;
        if self.n == self.dip_at {
            m.offered = (m.offered as f64 * 0.8) as u64;
            m.received = m.received.min(m.offered);
            m.valid = false;
        }
        Ok(m)
    }
}

#[test]
fn one_short_generator_trial_hides_no_load_it_offered() {
    // The DUT forwards 5 Mpps, the generator offers 3 and falls short once
    // more, at trial `dip_at` (the MRR, or a load it offers in full
    // before or after). The search tries a load it fell short of once
    // again before it ends at it, so NDR and PDR are the 3 Mpps the
    // generator can offer, and the ceiling is the highest load it offered.
    for dip_at in 2..8 {
        let mut dut = OneDip {
            sim: SimDut::ideal(5e6).with_generator_max(3e6),
            dip_at,
            n: 0,
        };
        let mut trials = Trials::new(|_| {});
        let out = mlr::search(&mut dut, &mlr::Config::ndr_pdr(8e6, 0.005), &mut trials).unwrap();
        let highest_valid = trials.highest_valid_load().unwrap();
        assert_eq!(
            out.generator_ceiling_pps,
            Some(highest_valid),
            "dip at {dip_at}"
        );
        assert!(
            within(highest_valid, 3e6, 0.01),
            "dip at {dip_at}: {highest_valid}"
        );
        for g in &out.goals {
            assert!(
                within(g.lower_pps.unwrap(), 3e6, 0.01),
                "dip at {dip_at}: {g:?}"
            );
        }
    }
}

#[test]
fn a_dut_that_loses_everything_has_no_throughput() {
    let mut dut = SimDut::ideal(1e6).with_knee(0.0, 0.5);
    let out = binary::search(
        &mut dut,
        &binary::Config::new(1e6),
        &mut Trials::new(|_| {}),
    )
    .unwrap();
    assert_eq!(out.throughput_pps, None);
    let mut dut = SimDut::ideal(1e6).with_knee(0.0, 0.5);
    let out = mlr::search(
        &mut dut,
        &mlr::Config::ndr_pdr(1e6, 0.005),
        &mut Trials::new(|_| {}),
    )
    .unwrap();
    assert_eq!(out.goals[0].lower_pps, None);
}

#[test]
fn bad_configurations_are_refused() {
    let mut dut = SimDut::ideal(1e6);
    let mut cfg = binary::Config::new(1e6);
    cfg.width = 0.0;
    let e = binary::search(&mut dut, &cfg, &mut Trials::new(|_| {})).unwrap_err();
    assert!(e.to_string().starts_with("width:"), "{e}");
    let mut cfg = mlr::Config::ndr_pdr(1e6, 0.005);
    cfg.goals[1].loss_ratio = 1.5;
    let e = mlr::search(&mut dut, &cfg, &mut Trials::new(|_| {})).unwrap_err();
    assert!(e.to_string().contains("goal pdr"), "{e}");
    let mut cfg = equilibrium::Config::new(1e6);
    cfg.tolerance = 0.0;
    let e = equilibrium::search(&mut dut, &cfg, &mut Trials::new(|_| {}), |_| {}).unwrap_err();
    assert!(e.to_string().starts_with("tolerance:"), "{e}");
    assert_eq!(dut.trials, 0, "a bad configuration ran trials");
}

#[test]
fn mlrsearch_costs_fewer_trial_seconds_than_binary_search() {
    // Same goals (NDR, PDR 0.5%), same final width (0.5%), same final
    // duration: MLRsearch's short early trials must pay off.
    let cfg = mlr::Config::ndr_pdr(1.0, 0.005);
    for (i, cap) in [0.3e6, 1.0e6, 2.3e6, 7.7e6].into_iter().enumerate() {
        for noise in [0.0, 0.002] {
            let r = linerate_search::cost::compare(cap, noise, i as u64, &cfg).unwrap();
            assert!(r.mlr_seconds < r.binary_seconds, "{r:?}");
            // And finds what the binary searches find, within the width.
            let close = |a: Option<f64>, b: Option<f64>| {
                within(a.unwrap(), b.unwrap(), 2.0 * cfg.width + 2.0 * noise)
            };
            assert!(close(r.mlr_ndr_pps, r.binary_ndr_pps), "{r:?}");
            assert!(close(r.mlr_pdr_pps, r.binary_pdr_pps), "{r:?}");
        }
    }
}

#[test]
fn equilibrium_keeps_searching_down_where_bsdrp_would_reach_zero() {
    // Loses more than 1% above 0.2 Mpps, but forwards more than the step
    // at the first load: the second failure would take BSDRP's load to 0
    // (2000 - 1000 - 1000 Kpps).
    let mut dut = SimDut::ideal(2.0e6).with_knee(0.0, 0.1);
    let cfg = equilibrium::Config::new(4.0e6);
    let mut trials = Trials::new(|_| {});
    let out = equilibrium::search(&mut dut, &cfg, &mut trials, |_| {}).unwrap();
    assert!(trials
        .list
        .iter()
        .all(|t| t.measurement.requested_pps > 0.0));
    // Converges where received >= offered * 0.99 stops holding.
    let knee = dut.true_throughput(0.01);
    assert!(within(out.estimate_pps, knee, 0.03), "{out:?} vs {knee}");
}
