//! MLRsearch (RFC 9971, Multiple Loss Ratio Search): one search finds the
//! throughput for several loss-ratio goals at once (NDR: 0, PDR: 0.5% by
//! default), with trial durations escalating from short to final.
//!
//! Every trial is shared by all goals: at a given duration, a load whose
//! loss ratio is at most a goal's is a lower bound for that goal, a load
//! with more loss an upper bound. The search runs in phases: each phase
//! has a trial duration (geometric from `initial_seconds` to
//! `final_seconds`) and a target width (the final width doubled for each
//! phase still to come). In a phase, a goal's bounds come only from trials
//! of that phase's duration; those of shorter trials are hints, measured
//! again first. So the final phase starts with bounds already about twice
//! the final width apart, and most trials are short ones.
//!
//! Where trials disagree (a load passing above one that failed, as a noisy
//! DUT does), the lowest upper bound wins and passes above it are
//! ignored: the result is conservative.
use crate::{Dut, Measurement, Trials};
use anyhow::{bail, Result};
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct Goal {
    pub name: String,
    pub loss_ratio: f64,
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
    /// example) between max/1000 and `max_pps`.
    pub fn ndr_pdr(max_pps: f64, pdr_loss_ratio: f64) -> Self {
        Config {
            min_pps: max_pps / 1000.0,
            max_pps,
            goals: vec![
                Goal {
                    name: "ndr".into(),
                    loss_ratio: 0.0,
                },
                Goal {
                    name: "pdr".into(),
                    loss_ratio: pdr_loss_ratio,
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
    /// The goal's throughput: the highest load that met the loss ratio in
    /// a final-length trial below every load that did not. None when even
    /// the minimum load missed it.
    pub lower_pps: Option<f64>,
    /// The lowest final-length load that missed it (None: the maximum met it).
    pub upper_pps: Option<f64>,
    /// The DUT's forwarding rate in the trial at `lower_pps`.
    pub forwarding_pps: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub goals: Vec<GoalOutcome>,
    /// The generator could not offer more than this; loads above it were
    /// not tested (not counted as DUT loss).
    pub generator_ceiling_pps: Option<f64>,
}

/// Bounds for one goal from the trials of one duration.
#[derive(Clone, Copy, Debug, Default)]
struct Bounds {
    lower: Option<(f64, f64)>, // (load, forwarding rate)
    upper: Option<f64>,
}

struct Record {
    load: f64,
    seconds: f64,
    m: Measurement,
}

fn bounds(records: &[Record], goal: &Goal, seconds: f64) -> Bounds {
    let same = |r: &&Record| r.seconds == seconds && r.m.valid;
    let upper = records
        .iter()
        .filter(same)
        .filter(|r| r.m.loss_ratio() > goal.loss_ratio)
        .map(|r| r.load)
        .reduce(f64::min);
    let lower = records
        .iter()
        .filter(same)
        .filter(|r| r.m.loss_ratio() <= goal.loss_ratio)
        .filter(|r| upper.is_none_or(|u| r.load < u))
        .map(|r| (r.load, r.m.forwarding_pps()))
        .reduce(|a, b| if b.0 > a.0 { b } else { a });
    Bounds { lower, upper }
}

pub fn search(dut: &mut dyn Dut, cfg: &Config, trials: &mut Trials) -> Result<Outcome> {
    cfg.check()?;
    let mut records: Vec<Record> = Vec::new();
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
        if !m.valid {
            let achieved = m.offered_pps().min(load * 0.999);
            if achieved <= cfg.min_pps {
                bail!(
                    "the generator could not offer {:.0} pps (only {:.0}): below the search's minimum",
                    load,
                    m.offered_pps()
                );
            }
            *ceiling = Some(ceiling.map_or(achieved, |c| c.min(achieved)));
        }
        records.push(Record { load, seconds, m });
        Ok(m)
    };

    // Initial phase: the maximum rate, then what the DUT forwarded there
    // (MRR), both short. They seed the hints of the first phase.
    let m = run(
        &mut records,
        &mut ceiling,
        trials,
        "initial max".into(),
        cfg.max_pps,
        cfg.initial_seconds,
    )?;
    if m.valid && m.loss_ratio() > 0.0 {
        let mrr = m.forwarding_pps().clamp(cfg.min_pps, cfg.max_pps);
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
            let mut expansion = 0;
            loop {
                let b = bounds(&records, goal, seconds);
                let hint = bounds(&records, goal, previous);
                let top = ceiling.unwrap_or(cfg.max_pps);
                let next = match (b.lower, b.upper) {
                    (Some((lo, _)), Some(up)) => {
                        if up - lo <= width * up {
                            None
                        } else {
                            Some((lo + up) / 2.0)
                        }
                    }
                    (Some((lo, _)), None) => {
                        if lo >= top * (1.0 - width) {
                            None // met at the highest load that can be offered
                        } else if let Some(h) = hint.upper.filter(|&h| h > lo) {
                            Some(h)
                        } else {
                            expansion += 1;
                            Some((lo * (1.0 + width * 2f64.powi(expansion))).min(top))
                        }
                    }
                    (None, Some(up)) => {
                        if up <= cfg.min_pps {
                            None // missed even at the minimum
                        } else if let Some((h, _)) = hint.lower.filter(|&(h, _)| h < up) {
                            Some(h)
                        } else {
                            expansion += 1;
                            Some((up * (1.0 - width * 2f64.powi(expansion))).max(cfg.min_pps))
                        }
                    }
                    (None, None) => Some(
                        hint.upper
                            .or(hint.lower.map(|l| l.0))
                            .unwrap_or(top)
                            .min(top),
                    ),
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
            let b = bounds(&records, g, last);
            GoalOutcome {
                name: g.name.clone(),
                loss_ratio: g.loss_ratio,
                lower_pps: b.lower.map(|l| l.0),
                upper_pps: b.upper,
                forwarding_pps: b.lower.map(|l| l.1),
            }
        })
        .collect();
    Ok(Outcome {
        goals,
        generator_ceiling_pps: ceiling,
    })
}
