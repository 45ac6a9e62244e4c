//! RFC 2544 (section 26.1) throughput: the highest offered load at which
//! the DUT loses no frame (or no more than `loss_ratio`), found by binary
//! search between `min_pps` and `max_pps`. Search trials may be shorter
//! than the final ones (RFC 2544 wants 60 s; searching at that length is
//! what makes the method slow); the candidate is then confirmed by
//! `final_trials` full-length trials, and a failed confirmation makes it
//! an upper bound and the search goes on below it.
use crate::{Dut, Trials};
use anyhow::{bail, Result};
use serde::Serialize;

#[derive(Clone, Copy, Debug, Serialize)]
pub struct Config {
    pub min_pps: f64,
    pub max_pps: f64,
    /// Stop when (upper - lower) <= width * upper.
    pub width: f64,
    /// Accepted loss ratio; 0 is RFC 2544's throughput.
    pub loss_ratio: f64,
    pub trial_seconds: f64,
    pub final_seconds: f64,
    /// Full-length trials the result must pass (0: none, plain search).
    pub final_trials: usize,
}

impl Config {
    pub fn new(max_pps: f64) -> Self {
        Config {
            min_pps: max_pps / 1000.0,
            max_pps,
            width: 0.005,
            loss_ratio: 0.0,
            trial_seconds: 1.0,
            final_seconds: 60.0,
            final_trials: 1,
        }
    }

    fn check(&self) -> Result<()> {
        crate::trial::check_range(self.min_pps, self.max_pps)?;
        if !(self.width > 0.0 && self.width < 1.0) {
            bail!("width: must be in (0, 1), got {}", self.width);
        }
        if !(0.0..1.0).contains(&self.loss_ratio) {
            bail!("loss ratio: must be in [0, 1), got {}", self.loss_ratio);
        }
        if !(self.trial_seconds > 0.0 && self.final_seconds > 0.0) {
            bail!("trial durations must be positive");
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// The highest load that passed (confirmed by the final trials), or
    /// None when even `min_pps` lost frames.
    pub throughput_pps: Option<f64>,
    /// The lowest load that failed, if any.
    pub upper_pps: Option<f64>,
    /// The DUT's forwarding rate in the confirming trial.
    pub forwarding_pps: Option<f64>,
    /// Where the generator could not offer some load: the highest load it
    /// offered in full (loads above what it achieved were not tested).
    pub generator_ceiling_pps: Option<f64>,
}

/// What the search does next.
enum Next {
    Trial(f64),
    Confirm(f64),
    /// Even the minimum load lost frames.
    Nothing,
}

/// Where the search stands. Invariant: every load in `passed` is below
/// `upper` and below `ceiling`.
struct Bounds {
    /// Loads that passed search trials. Kept (not just the highest) because
    /// a failed confirmation discredits only loads at or above it.
    passed: Vec<f64>,
    /// The lowest load that failed.
    upper: Option<f64>,
    /// The highest load the generator achieved when it fell short.
    ceiling: Option<f64>,
}

impl Bounds {
    fn lower(&self) -> Option<f64> {
        self.passed.iter().copied().reduce(f64::max)
    }

    fn cap(&mut self, limit: f64) {
        self.passed.retain(|&l| l < limit);
    }

    fn next(&self, cfg: &Config) -> Next {
        let hi = match (self.upper, self.ceiling) {
            (Some(u), Some(c)) => u.min(c),
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => cfg.max_pps,
        };
        match self.lower() {
            None if self.upper.is_none() && self.ceiling.is_none() => Next::Trial(cfg.max_pps),
            None if self.upper.is_some_and(|u| u <= cfg.min_pps) => Next::Nothing,
            None if hi - cfg.min_pps <= cfg.width * hi => Next::Trial(cfg.min_pps),
            None => Next::Trial((cfg.min_pps + hi) / 2.0),
            Some(lo) if self.upper.is_none() && self.ceiling.is_none() => Next::Confirm(lo),
            Some(lo) if hi - lo <= cfg.width * hi => Next::Confirm(lo),
            Some(lo) => Next::Trial((lo + hi) / 2.0),
        }
    }
}

pub fn search(dut: &mut dyn Dut, cfg: &Config, trials: &mut Trials) -> Result<Outcome> {
    cfg.check()?;
    let mut b = Bounds {
        passed: Vec::new(),
        upper: None,
        ceiling: None,
    };
    let ok = |m: &crate::Measurement| m.loss_ratio() <= cfg.loss_ratio;
    loop {
        let load = match b.next(cfg) {
            Next::Nothing => {
                return Ok(Outcome {
                    throughput_pps: None,
                    upper_pps: b.upper,
                    forwarding_pps: None,
                    generator_ceiling_pps: b.ceiling.and(trials.highest_valid_load()),
                })
            }
            Next::Confirm(candidate) => match confirm(dut, cfg, trials, candidate)? {
                Some(fwd) => {
                    return Ok(Outcome {
                        throughput_pps: Some(candidate),
                        upper_pps: b.upper,
                        forwarding_pps: Some(fwd),
                        generator_ceiling_pps: b.ceiling.and(trials.highest_valid_load()),
                    })
                }
                None => {
                    b.upper = Some(candidate);
                    b.cap(candidate);
                    continue;
                }
            },
            Next::Trial(load) => load,
        };
        let m = trials.run(dut, "search".into(), load, cfg.trial_seconds, ok)?;
        if !m.valid {
            // Not the DUT's loss: nothing at or above this load can be
            // offered, so the search continues below what was achieved.
            let achieved = m.offered_pps().min(load * 0.999);
            if achieved <= cfg.min_pps {
                bail!(
                    "the generator could not offer {:.0} pps (only {:.0}): below the search's minimum",
                    load,
                    m.offered_pps()
                );
            }
            // Never below a load the generator offered in full (its rate
            // varies from trial to trial).
            let offered = trials.highest_valid_load().unwrap_or(0.0);
            let c = b.ceiling.map_or(achieved, |c| c.min(achieved)).max(offered);
            b.ceiling = Some(c);
            b.passed.retain(|&l| l <= c);
        } else if ok(&m) {
            b.passed.push(load);
        } else {
            b.upper = Some(b.upper.map_or(load, |u| u.min(load)));
            b.cap(load);
        }
    }
}

/// Runs the final trials at `load`; the lowest forwarding rate if all pass.
fn confirm(dut: &mut dyn Dut, cfg: &Config, trials: &mut Trials, load: f64) -> Result<Option<f64>> {
    let mut fwd = f64::INFINITY;
    for i in 0..cfg.final_trials {
        let m = trials.run(
            dut,
            format!("final {}/{}", i + 1, cfg.final_trials),
            load,
            cfg.final_seconds,
            |m| m.loss_ratio() <= cfg.loss_ratio,
        )?;
        if !m.valid || m.loss_ratio() > cfg.loss_ratio {
            return Ok(None);
        }
        fwd = fwd.min(m.forwarding_pps());
    }
    if cfg.final_trials == 0 {
        return Ok(Some(load));
    }
    Ok(Some(fwd))
}
