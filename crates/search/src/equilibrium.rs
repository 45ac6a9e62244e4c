//! BSDRP's equilibrium throughput (BSDRP `equilibrium`, after Tisovsky and
//! Baronak's IPsec gateway methodology): offer half the link rate with a
//! step of a quarter; a trial passes when the DUT forwards at least the
//! offered load less the tolerance. Go up after a pass, down after a
//! failure; once the direction has reversed (the peak is found) the step
//! halves at every iteration. Stop when the step falls below the load
//! times the tolerance. The estimate is the last measured forwarding rate.
use crate::{Dut, Trials};
use anyhow::{bail, Result};
use serde::Serialize;

#[derive(Clone, Copy, Debug, Serialize)]
pub struct Config {
    /// The link's maximum rate, frames per second (BSDRP's -l, in pps).
    pub link_rate_pps: f64,
    /// 0.01 for 1%.
    pub tolerance: f64,
    /// Seconds per trial.
    pub trial_seconds: f64,
    /// BSDRP stops after 16 iterations whatever the step.
    pub max_iterations: usize,
}

impl Config {
    pub fn new(link_rate_pps: f64) -> Self {
        Config {
            link_rate_pps,
            tolerance: 0.01,
            trial_seconds: 10.0,
            max_iterations: 16,
        }
    }

    fn check(&self) -> Result<()> {
        if !(self.link_rate_pps >= 4.0 && self.link_rate_pps.is_finite()) {
            bail!(
                "link rate: must be at least 4 pps, got {}",
                self.link_rate_pps
            );
        }
        if !(self.tolerance > 0.0 && self.tolerance < 1.0) {
            bail!("tolerance: must be in (0, 1), got {}", self.tolerance);
        }
        if self.trial_seconds.is_nan() || self.trial_seconds <= 0.0 {
            bail!(
                "trial seconds: must be positive, got {}",
                self.trial_seconds
            );
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Trend {
    Increasing,
    Decreasing,
}

#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// The last measured forwarding rate.
    pub estimate_pps: f64,
    /// The highest forwarding rate any trial measured.
    pub max_seen_pps: f64,
    pub iterations: usize,
    /// Some trial could not be offered at its rate: the estimate is bounded
    /// by the generator, not necessarily by the DUT.
    pub generator_limited: bool,
}

impl Outcome {
    /// BSDRP's last line.
    pub fn line(&self) -> String {
        format!(
            "Estimated Equilibrium Ethernet throughput= {} Kpps (maximum value seen: {} Kpps)",
            kpps(self.estimate_pps),
            kpps(self.max_seen_pps)
        )
    }
}

/// Kpps as BSDRP prints them: whole, rounded down.
pub fn kpps(pps: f64) -> u64 {
    (pps / 1000.0).floor() as u64
}

/// One iteration as BSDRP shows it, before its trial runs.
#[derive(Clone, Copy, Debug)]
pub struct Iteration {
    pub number: usize,
    pub load_pps: f64,
    pub step_pps: f64,
    pub trend: Option<Trend>,
}

pub fn search(
    dut: &mut dyn Dut,
    cfg: &Config,
    trials: &mut Trials,
    mut on_iteration: impl FnMut(&Iteration),
) -> Result<Outcome> {
    cfg.check()?;
    let mut load = cfg.link_rate_pps / 2.0;
    let mut step = cfg.link_rate_pps / 4.0;
    let mut trend: Option<Trend> = None;
    let mut peak = false;
    let mut max_seen: f64 = 0.0;
    let mut last = 0.0;
    let mut generator_limited = false;
    let mut iterations = 0;
    for number in 1..=cfg.max_iterations {
        iterations = number;
        on_iteration(&Iteration {
            number,
            load_pps: load,
            step_pps: step,
            trend,
        });
        let tol = cfg.tolerance;
        let m = trials.run(
            dut,
            format!("iteration {number}"),
            load,
            cfg.trial_seconds,
            |m| m.forwarding_pps() >= load * (1.0 - tol),
        )?;
        let passed = trials.list.last().map(|t| t.passed).unwrap_or(false);
        generator_limited |= !m.valid;
        last = m.forwarding_pps();
        max_seen = max_seen.max(last);
        if passed {
            if trend == Some(Trend::Decreasing) {
                peak = true;
            }
            if peak {
                step /= 2.0;
            }
            load += step;
            trend = Some(Trend::Increasing);
        } else {
            if trend == Some(Trend::Increasing) {
                peak = true;
            }
            if peak {
                step /= 2.0;
            }
            // A first load far above the DUT's rate would take the next one
            // to zero: start again from what the DUT forwarded (BSDRP).
            if trend.is_none() && last < step {
                step = last / 2.0;
                load = last;
            } else {
                // BSDRP stops with an error when a DUT that fails at every
                // load takes the offered load to zero; halving the step
                // instead keeps searching downwards.
                while load - step < load * cfg.tolerance && step > load * cfg.tolerance {
                    step /= 2.0;
                }
                load -= step;
            }
            trend = Some(Trend::Decreasing);
        }
        if load < 1.0 {
            bail!(
                "the offered load reached 0 (the DUT forwarded {:.0} pps at {:.0} pps offered): nothing to search",
                last,
                m.requested_pps
            );
        }
        if step < load * cfg.tolerance {
            break;
        }
    }
    Ok(Outcome {
        estimate_pps: last,
        max_seen_pps: max_seen,
        iterations,
        generator_limited,
    })
}
