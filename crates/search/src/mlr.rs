//! MLRsearch (RFC 9971, Multiple Loss Ratio Search): one search finds the
//! throughput for several goals at once (NDR: no loss, PDR: 0.5% by
//! default), with trial durations escalating from short to final.
//!
//! A goal is a loss ratio, an exceed ratio and a duration sum. Every trial
//! at a load counts toward that load's classification for every goal
//! (crate::classify): long trials as they are, shorter ones too (a short
//! trial that missed the loss ratio counts as missing unless balanced by
//! short ones that met it). So a load is never retried into a pass: with
//! the default exceed ratio 0, one trial that missed makes it an upper
//! bound, and a lower bound needs full-length trials that all met the loss
//! ratio, their durations summing to the goal's duration sum. A goal's
//! throughput is the highest lower bound below the lowest upper bound.
//!
//! The search runs in phases as CSIT's MLRsearch 1.2.1 does: each has a
//! duration sum (the goal's for the final phase, smaller by a constant
//! factor for each one before, down to `initial_seconds`), trials as long
//! as that sum (at most `final_seconds`) and a width (the final one doubled
//! for each phase still to come); a phase starts from the bounds of the
//! one before. Loads lie on a logarithmic grid (crate::grid), so a phase's
//! candidates are often loads measured before, at shorter trials, whose
//! trials all count. Most trials are short.
use crate::classify::Target;
use crate::grid::Grid;
use crate::selector::{self, bounds, Nomination, Record, Selector};
use crate::{Dut, Measurement, Trials};
use anyhow::{bail, Result};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Serialize)]
pub struct Goal {
    pub name: String,
    pub loss_ratio: f64,
    /// The share of a load's trial seconds that may miss the loss ratio
    /// (RFC 9971's goal exceed ratio). 0: none may.
    pub exceed_ratio: f64,
    /// Seconds of full-length trials a load needs to be a lower bound;
    /// None: one final trial's.
    pub duration_sum: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Config {
    pub min_pps: f64,
    pub max_pps: f64,
    pub goals: Vec<Goal>,
    /// Final relative width: (upper - lower) <= width * upper.
    pub width: f64,
    pub initial_seconds: f64,
    pub final_seconds: f64,
    /// Phases before the final one (CSIT's preceding targets): the first
    /// at the initial trial duration, four times the width with 2.
    pub preceding_phases: usize,
    /// A search that needs more trials than this is stopped with an error.
    pub max_trials: usize,
}

impl Config {
    /// NDR (no loss) and PDR (`pdr_loss_ratio`, 0.005 by RFC 9971's
    /// example) between max/1000 and `max_pps`, with exceed ratio 0 and one
    /// final trial's duration sum: a result is a load where no trial missed
    /// the loss ratio, short or long (what holds when measured again).
    pub fn ndr_pdr(max_pps: f64, pdr_loss_ratio: f64) -> Self {
        Config {
            min_pps: max_pps / 1000.0,
            max_pps,
            goals: vec![
                Goal {
                    name: "ndr".into(),
                    loss_ratio: 0.0,
                    exceed_ratio: 0.0,
                    duration_sum: None,
                },
                Goal {
                    name: "pdr".into(),
                    loss_ratio: pdr_loss_ratio,
                    exceed_ratio: 0.0,
                    duration_sum: None,
                },
            ],
            width: 0.005,
            initial_seconds: 1.0,
            final_seconds: 30.0,
            preceding_phases: 2,
            max_trials: 200,
        }
    }

    fn check(&self) -> Result<()> {
        crate::trial::check_range(self.min_pps, self.max_pps)?;
        if self.goals.is_empty() {
            bail!("goals: at least one loss ratio is needed");
        }
        for g in &self.goals {
            if !(0.0..1.0).contains(&g.loss_ratio) {
                bail!(
                    "goal {}: loss ratio must be in [0, 1), got {}",
                    g.name,
                    g.loss_ratio
                );
            }
            if !(0.0..1.0).contains(&g.exceed_ratio) {
                bail!(
                    "goal {}: exceed ratio must be in [0, 1), got {}",
                    g.name,
                    g.exceed_ratio
                );
            }
            if let Some(d) = g.duration_sum.filter(|&d| !(d > 0.0 && d.is_finite())) {
                bail!(
                    "goal {}: duration sum must be more than 0 seconds, got {d}",
                    g.name
                );
            }
        }
        if !(self.width > 0.0 && self.width < 0.5) {
            bail!("width: must be in (0, 0.5), got {}", self.width);
        }
        if !(self.initial_seconds > 0.0 && self.final_seconds >= self.initial_seconds) {
            bail!(
                "durations: need 0 < initial ({}) <= final ({})",
                self.initial_seconds,
                self.final_seconds
            );
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct GoalOutcome {
    pub name: String,
    pub loss_ratio: f64,
    pub exceed_ratio: f64,
    /// Seconds of full-length trials behind a lower bound.
    pub duration_sum: f64,
    /// The goal's throughput: the highest load classified a lower bound
    /// below every upper bound. None when even the minimum load is not one.
    pub lower_pps: Option<f64>,
    /// The lowest load classified an upper bound (None: the maximum is a
    /// lower bound).
    pub upper_pps: Option<f64>,
    /// The DUT's forwarding rate over the full-length trials at `lower_pps`.
    pub forwarding_pps: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub goals: Vec<GoalOutcome>,
    /// Where the generator fell short of some load: the highest load it
    /// offered in full. Loads it could not offer say nothing of the DUT.
    pub generator_ceiling_pps: Option<f64>,
}

/// Goal `g`'s phase `k` (0 the first, `cfg.preceding_phases` the final):
/// its target and its width in grid steps. As CSIT's MLRsearch scales its
/// targets: the final one is the goal's (final trial duration, duration
/// sum, one step); each one before it has a duration sum smaller by the
/// same factor, down to the initial trial duration, trials as long as that
/// sum (at most the final duration), and twice the width.
fn phase(g: &Goal, cfg: &Config, k: usize) -> (Target, u32) {
    let n = cfg.preceding_phases;
    let final_sum = g.duration_sum.unwrap_or(cfg.final_seconds);
    let sum = if k >= n {
        final_sum
    } else if k == 0 {
        cfg.initial_seconds
    } else {
        let factor = (cfg.initial_seconds / final_sum).powf(1.0 / n as f64);
        final_sum * factor.powi((n - k) as i32)
    };
    let trial_seconds = if k >= n {
        cfg.final_seconds
    } else {
        sum.min(cfg.final_seconds)
    };
    let target = Target {
        loss_ratio: g.loss_ratio,
        exceed_ratio: g.exceed_ratio,
        duration_sum: sum,
        trial_seconds,
    };
    (target, 1 << (n - k.min(n)))
}

pub fn search(dut: &mut dyn Dut, cfg: &Config, trials: &mut Trials) -> Result<Outcome> {
    cfg.check()?;
    let grid = Grid::new(cfg.min_pps, cfg.max_pps, cfg.width);
    let mut records: Vec<Record> = Vec::new();
    // The highest step the generator can offer: after a trial it could not
    // offer, what it achieved there, but never below a load it did offer
    // (its rate varies from trial to trial: one short trial hides no valid
    // one).
    let mut ceiling: Option<u32> = None;
    let mut run = |records: &mut Vec<Record>,
                   ceiling: &mut Option<u32>,
                   trials: &mut Trials,
                   step: String,
                   at: u32,
                   seconds: f64|
     -> Result<Measurement> {
        if trials.list.len() >= cfg.max_trials {
            bail!("MLRsearch: no result after {} trials", cfg.max_trials);
        }
        let load = grid.load(at);
        let strictest = cfg.goals.iter().map(|g| g.loss_ratio).fold(1.0, f64::min);
        let m = trials.run(dut, step, load, seconds, |m| m.loss_ratio() <= strictest)?;
        // What this trial says for each goal (its own loss; the load's
        // class comes from all its trials).
        if let Some(t) = trials.list.last_mut() {
            t.goals = cfg
                .goals
                .iter()
                .map(|g| (g.name.clone(), m.valid && m.loss_ratio() <= g.loss_ratio))
                .collect();
        }
        records.push(Record { at, seconds, m });
        let offered = trials.highest_valid_load().map(|l| grid.floor(l));
        if !m.valid {
            let achieved = m.offered_pps().min(load * 0.999);
            if offered.is_none() && achieved <= cfg.min_pps {
                bail!(
                    "the generator could not offer {:.0} pps (only {:.0}): below the search's minimum",
                    load,
                    m.offered_pps()
                );
            }
            let below = grid.floor(achieved).min(at.saturating_sub(1));
            *ceiling = Some(ceiling.map_or(below, |c: u32| c.min(below)));
        }
        // Never below a load the generator offered in full.
        *ceiling = ceiling.map(|c| c.max(offered.unwrap_or(0)));
        Ok(m)
    };

    // The initial trials (CSIT's): the maximum load; where the DUT
    // forwarded there (MRR, corrected for the strictest loss ratio); then,
    // if the DUT lost more than that at the MRR, where it forwarded there,
    // else the MRR plus the first phase's width; each at least that width
    // away from a limit or load already measured. All at `-t`.
    let strictest = cfg.goals.iter().map(|g| g.loss_ratio).fold(1.0, f64::min);
    let first_width = cfg
        .goals
        .iter()
        .map(|g| phase(g, cfg, 0).1)
        .max()
        .unwrap_or(1);
    // What the DUT forwarded at `at`, as a load (an invalid trial: what
    // came out; else the load less its loss, as CSIT reckons it).
    let forwarded = |at: u32, m: &Measurement| {
        let rate = if m.valid {
            grid.load(at) * (1.0 - m.loss_ratio())
        } else {
            m.forwarding_pps()
        };
        grid.floor(rate / (1.0 - strictest))
    };
    let top = grid.top();
    let m = run(
        &mut records,
        &mut ceiling,
        trials,
        "initial max".into(),
        top,
        cfg.initial_seconds,
    )?;
    let mut start = (top, top);
    let top = ceiling.unwrap_or(top);
    let corrected = forwarded(grid.top(), &m);
    if corrected < top || !m.valid {
        let mrr = selector::handle(corrected as i64, first_width, None, Some(top), top)
            .unwrap_or(corrected.min(top));
        let m = run(
            &mut records,
            &mut ceiling,
            trials,
            "initial mrr".into(),
            mrr,
            cfg.initial_seconds,
        )?;
        let top = ceiling.unwrap_or(grid.top());
        let mrr2 = if !m.valid || m.loss_ratio() > strictest {
            selector::handle(forwarded(mrr, &m) as i64, first_width, None, Some(mrr), top)
        } else {
            selector::handle(
                (mrr + first_width) as i64,
                first_width,
                Some(mrr),
                Some(top),
                top,
            )
        };
        start = (mrr, mrr);
        if let Some(mrr2) = mrr2 {
            run(
                &mut records,
                &mut ceiling,
                trials,
                "initial mrr2".into(),
                mrr2,
                cfg.initial_seconds,
            )?;
            start = (mrr.min(mrr2), mrr.max(mrr2));
        }
    }

    // One selector per goal; each round every one nominates a load and
    // the first in CSIT's order is measured.
    let phases = cfg.preceding_phases + 1;
    let mut global = start.1 - start.0;
    let mut selectors: Vec<Selector> = cfg
        .goals
        .iter()
        .map(|g| Selector::new(phases, start.0, start.1, phase(g, cfg, 0).1))
        .collect();
    loop {
        let top = ceiling.unwrap_or(grid.top());
        let mut winner: Option<(usize, Nomination)> = None;
        for (i, (goal, sel)) in cfg.goals.iter().zip(&mut selectors).enumerate() {
            let n = sel.nominate(
                &records,
                |k| phase(goal, cfg, k),
                top,
                global,
                |lo| once_short(&records, lo),
            )?;
            if let Some(n) = n {
                if winner.is_none_or(|(_, w)| !w.before(&n)) {
                    winner = Some((i, n));
                }
            }
        }
        let Some((i, n)) = winner else {
            break;
        };
        let step = format!(
            "phase {}/{} {}",
            selectors[i].phase + 1,
            phases,
            cfg.goals[i].name
        );
        run(&mut records, &mut ceiling, trials, step, n.at, n.seconds)?;
        global = n.width;
        let b = bounds(&records, &phase(&cfg.goals[i], cfg, selectors[i].phase).0);
        selectors[i].won(n.at, b, &mut global);
    }

    let goals = cfg
        .goals
        .iter()
        .map(|g| {
            let (t, _) = phase(g, cfg, cfg.preceding_phases);
            let b = bounds(&records, &t);
            let forwarding = b.lower.map(|lo| {
                let long = records
                    .iter()
                    .filter(|r| r.at == lo && r.m.valid && r.seconds >= t.trial_seconds);
                let (received, seconds) = long.fold((0.0, 0.0), |(n, s), r| {
                    (n + r.m.received as f64, s + r.m.seconds)
                });
                received / seconds
            });
            GoalOutcome {
                name: g.name.clone(),
                loss_ratio: g.loss_ratio,
                exceed_ratio: g.exceed_ratio,
                duration_sum: t.duration_sum,
                lower_pps: b.lower.map(|l| grid.load(l)),
                upper_pps: b.upper.map(|u| grid.load(u)),
                forwarding_pps: forwarding,
            }
        })
        .collect();
    Ok(Outcome {
        goals,
        // Reported where the generator fell short somewhere: the highest
        // load it validly offered.
        generator_ceiling_pps: ceiling.and(trials.highest_valid_load()),
    })
}

/// The lowest load above `lo` the generator fell short of exactly once,
/// and never offered in full.
fn once_short(records: &[Record], lo: u32) -> Option<u32> {
    let mut short: BTreeMap<u32, usize> = BTreeMap::new();
    for r in records.iter().filter(|r| r.at > lo) {
        if r.m.valid {
            return None;
        }
        *short.entry(r.at).or_default() += 1;
    }
    short.into_iter().find(|&(_, n)| n == 1).map(|(l, _)| l)
}
