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
//! The search runs in phases: each has a trial duration (geometric from
//! `initial_seconds` to `final_seconds`), a duration sum scaled to it and a
//! width (the final one doubled for each phase still to come); a phase
//! starts from the bounds of the one before. Most trials are short.
use crate::classify::{Class, LoadStats, Target};
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
    /// Phases between the initial and the final one.
    pub intermediate_phases: usize,
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
            intermediate_phases: 2,
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

    /// (duration, width) of each phase after the initial one.
    pub fn phases(&self) -> Vec<(f64, f64)> {
        let n = self.intermediate_phases + 1;
        let ratio = self.final_seconds / self.initial_seconds;
        (0..n)
            .map(|k| {
                let d = if k + 1 == n {
                    self.final_seconds
                } else {
                    self.initial_seconds * ratio.powf((k + 1) as f64 / n as f64)
                };
                (d, self.width * 2f64.powi((n - 1 - k) as i32))
            })
            .collect()
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

struct Record {
    load: f64,
    seconds: f64,
    m: Measurement,
}

/// A goal's bounds under one target: the highest lower bound below the
/// lowest upper bound, the undecided loads between them.
#[derive(Clone, Debug, Default)]
struct Bounds {
    lower: Option<f64>,
    upper: Option<f64>,
    undecided: Vec<f64>,
}

/// Every load's trials (valid ones: an invalid trial says nothing about
/// the DUT) classified for `t`.
fn bounds(records: &[Record], t: &Target) -> Bounds {
    let mut by_load: BTreeMap<u64, LoadStats> = BTreeMap::new();
    for r in records.iter().filter(|r| r.m.valid) {
        by_load
            .entry(r.load.to_bits())
            .or_default()
            .add(t, r.seconds, r.m.loss_ratio());
    }
    let classes: Vec<(f64, Class)> = by_load
        .iter()
        .map(|(&l, s)| (f64::from_bits(l), s.classify(t)))
        .collect();
    let upper = classes
        .iter()
        .filter(|c| c.1 == Class::Upper)
        .map(|c| c.0)
        .reduce(f64::min);
    let below = |l: f64| upper.is_none_or(|u| l < u);
    let lower = classes
        .iter()
        .filter(|c| c.1 == Class::Lower && below(c.0))
        .map(|c| c.0)
        .reduce(f64::max);
    let undecided = classes
        .iter()
        .filter(|c| c.1 == Class::Undecided && below(c.0) && lower.is_none_or(|lo| c.0 > lo))
        .map(|c| c.0)
        .collect();
    Bounds {
        lower,
        upper,
        undecided,
    }
}

/// Goal `g`'s target in a phase of trials `seconds` long, whose duration
/// sum is the final one's scaled by the phase's share of the final
/// duration (at least one trial).
fn target(g: &Goal, cfg: &Config, seconds: f64) -> Target {
    let final_sum = g.duration_sum.unwrap_or(cfg.final_seconds);
    Target {
        loss_ratio: g.loss_ratio,
        exceed_ratio: g.exceed_ratio,
        duration_sum: (final_sum * seconds / cfg.final_seconds).max(seconds),
        trial_seconds: seconds,
    }
}

pub fn search(dut: &mut dyn Dut, cfg: &Config, trials: &mut Trials) -> Result<Outcome> {
    cfg.check()?;
    let mut records: Vec<Record> = Vec::new();
    // The loads the generator can offer: after a trial it could not offer,
    // what it achieved there, but never below a load it did offer (its rate
    // varies from trial to trial: one short trial hides no valid one).
    let mut ceiling: Option<f64> = None;
    let mut run = |records: &mut Vec<Record>,
                   ceiling: &mut Option<f64>,
                   trials: &mut Trials,
                   step: String,
                   load: f64,
                   seconds: f64|
     -> Result<Measurement> {
        if trials.list.len() >= cfg.max_trials {
            bail!("MLRsearch: no result after {} trials", cfg.max_trials);
        }
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
        records.push(Record { load, seconds, m });
        let offered = trials.highest_valid_load().unwrap_or(0.0);
        if !m.valid {
            let achieved = m.offered_pps().min(load * 0.999);
            if achieved.max(offered) <= cfg.min_pps {
                bail!(
                    "the generator could not offer {:.0} pps (only {:.0}): below the search's minimum",
                    load,
                    m.offered_pps()
                );
            }
            *ceiling = Some(ceiling.map_or(achieved, |c: f64| c.min(achieved)));
        }
        // Never below a load the generator offered in full.
        *ceiling = ceiling.map(|c| c.max(offered));
        Ok(m)
    };

    // Initial phase: the maximum rate, then what the DUT forwarded there
    // (MRR), both short; the MRR also when the generator could not offer
    // the maximum (what came out is still what the DUT forwarded). They
    // seed the first phase.
    let m = run(
        &mut records,
        &mut ceiling,
        trials,
        "initial max".into(),
        cfg.max_pps,
        cfg.initial_seconds,
    )?;
    if !m.valid || m.loss_ratio() > 0.0 {
        let top = ceiling.unwrap_or(cfg.max_pps);
        let mrr = m.forwarding_pps().min(top).clamp(cfg.min_pps, cfg.max_pps);
        run(
            &mut records,
            &mut ceiling,
            trials,
            "initial mrr".into(),
            mrr,
            cfg.initial_seconds,
        )?;
    }

    let phases = cfg.phases();
    for (k, &(seconds, width)) in phases.iter().enumerate() {
        let previous = if k == 0 {
            cfg.initial_seconds
        } else {
            phases[k - 1].0
        };
        for goal in &cfg.goals {
            let here = target(goal, cfg, seconds);
            let before = target(goal, cfg, previous);
            let mut expansion = 0;
            loop {
                let b = bounds(&records, &here);
                let hint = bounds(&records, &before);
                let top = ceiling.unwrap_or(cfg.max_pps);
                // A load between the bounds that needs more trials is
                // measured again first: it may become either.
                let next = if let Some(&u) = b.undecided.last() {
                    Some(u)
                } else {
                    match (b.lower, b.upper) {
                        (Some(lo), Some(up)) => (up - lo > width * up).then_some((lo + up) / 2.0),
                        (Some(lo), None) => {
                            if lo >= top * (1.0 - width) {
                                // Met at the highest load the generator
                                // offered. A load above it that the
                                // generator fell short of only once is
                                // tried again (its rate varies): one short
                                // trial does not end the search.
                                once_short(&records, lo)
                            } else if let Some(h) = hint.upper.filter(|&h| h > lo && h <= top) {
                                Some(h)
                            } else {
                                expansion += 1;
                                Some((lo * (1.0 + width * 2f64.powi(expansion))).min(top))
                            }
                        }
                        (None, Some(up)) => {
                            if up <= cfg.min_pps {
                                None // missed even at the minimum
                            } else if let Some(h) = hint.lower.filter(|&h| h < up) {
                                Some(h)
                            } else {
                                expansion += 1;
                                Some((up * (1.0 - width * 2f64.powi(expansion))).max(cfg.min_pps))
                            }
                        }
                        (None, None) => Some(
                            hint.upper
                                .or(hint.lower)
                                .or(hint.undecided.last().copied())
                                .unwrap_or(top)
                                .min(top),
                        ),
                    }
                };
                let Some(load) = next else { break };
                let step = format!("phase {}/{} {}", k + 1, phases.len(), goal.name);
                run(&mut records, &mut ceiling, trials, step, load, seconds)?;
            }
        }
    }

    let last = cfg.final_seconds;
    let goals = cfg
        .goals
        .iter()
        .map(|g| {
            let t = target(g, cfg, last);
            let b = bounds(&records, &t);
            let forwarding = b.lower.map(|lo| {
                let long = records
                    .iter()
                    .filter(|r| r.load == lo && r.m.valid && r.seconds >= last);
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
                lower_pps: b.lower,
                upper_pps: b.upper,
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
fn once_short(records: &[Record], lo: f64) -> Option<f64> {
    let mut short: BTreeMap<u64, usize> = BTreeMap::new();
    for r in records.iter().filter(|r| r.load > lo) {
        if r.m.valid {
            return None;
        }
        *short.entry(r.load.to_bits()).or_default() += 1;
    }
    short
        .into_iter()
        .find(|&(_, n)| n == 1)
        .map(|(l, _)| f64::from_bits(l))
}
