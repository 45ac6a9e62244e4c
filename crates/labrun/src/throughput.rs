//! One way to run a throughput search against a DUT, for `linerate
//! search` and `lab run` alike: the max-rate probe, each method's
//! configuration from one set of settings, the search itself.
use crate::measure::{self, LabTrials};
use anyhow::Result;
use linerate_search::{binary, equilibrium, mlr, Dut, Trials};
use serde::Serialize;

/// Which search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchMethod {
    /// BSDRP's equilibrium: offer, measure, step towards what came out.
    Equilibrium,
    /// RFC 2544's binary search for the zero-loss rate.
    Rfc2544,
    /// MLRsearch: the no-drop and the partial-drop rates together.
    NdrPdr,
}

/// A search's settings, checked by whoever built them.
#[derive(Clone, Copy, Debug)]
pub struct SearchPlan {
    pub method: SearchMethod,
    /// Seconds of each trial (MLRsearch: of its first phase).
    pub seconds: f64,
    /// Seconds of the trials that decide (RFC 2544's last, MLRsearch's
    /// final phase); at least `seconds`.
    pub final_seconds: f64,
    /// Equilibrium's tolerance.
    pub tolerance: f64,
    /// RFC 2544's and MLRsearch's relative width of the result.
    pub width: f64,
    /// MLRsearch's partial-drop goal.
    pub loss_ratio: f64,
    /// MLRsearch's goals: the share of a load's trial seconds that may
    /// miss the loss ratio (RFC 9971's exceed ratio; 0: none).
    pub exceed_ratio: f64,
    /// MLRsearch's goals: seconds of final trials a load needs to be a
    /// lower bound (None: one final trial's).
    pub duration_sum: Option<f64>,
}

/// What a search found, by method.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum SearchOutcome {
    Equilibrium(equilibrium::Outcome),
    Rfc2544(binary::Outcome),
    NdrPdr(mlr::Outcome),
}

/// The highest rate the generator offers into this DUT paced, as the
/// searches' trials are: its unpaced rate over `seconds` (at most 2), then
/// what it offers when paced at that rate (pacing costs it a little: the
/// unpaced rate alone made the first trial of a search one it could not
/// offer). The search's maximum when none is given.
pub fn probe_max_rate(trials: &mut LabTrials, seconds: f64) -> Result<f64> {
    let seconds = seconds.min(2.0);
    let rate = |r: &linerate_traffic::measure::TrialResult| {
        measure::offered(r) as f64 / r.offered.seconds.max(1e-9)
    };
    let unpaced = rate(&trials.run(None, seconds)?);
    let paced = rate(&trials.run(Some(unpaced), seconds)?);
    Ok(paced.min(unpaced))
}

/// Runs `plan` against `dut` from `max_pps` down; every trial goes to
/// `log`, equilibrium's iterations to `on_iteration`.
pub fn run(
    dut: &mut dyn Dut,
    plan: &SearchPlan,
    max_pps: f64,
    log: &mut Trials,
    on_iteration: impl FnMut(&equilibrium::Iteration),
) -> Result<SearchOutcome> {
    Ok(match plan.method {
        SearchMethod::Equilibrium => {
            let cfg = equilibrium::Config {
                link_rate_pps: max_pps,
                tolerance: plan.tolerance,
                trial_seconds: plan.seconds,
                max_iterations: 16,
            };
            SearchOutcome::Equilibrium(equilibrium::search(dut, &cfg, log, on_iteration)?)
        }
        SearchMethod::Rfc2544 => {
            let mut cfg = binary::Config::new(max_pps);
            cfg.width = plan.width;
            cfg.trial_seconds = plan.seconds;
            cfg.final_seconds = plan.final_seconds;
            SearchOutcome::Rfc2544(binary::search(dut, &cfg, log)?)
        }
        SearchMethod::NdrPdr => {
            let mut cfg = mlr::Config::ndr_pdr(max_pps, plan.loss_ratio);
            cfg.width = plan.width;
            for g in &mut cfg.goals {
                g.exceed_ratio = plan.exceed_ratio;
                g.duration_sum = plan.duration_sum;
            }
            cfg.initial_seconds = plan.seconds;
            cfg.final_seconds = plan.final_seconds;
            SearchOutcome::NdrPdr(mlr::search(dut, &cfg, log)?)
        }
    })
}

/// A line onto a String.
macro_rules! say {
    ($o:expr, $($arg:tt)*) => {{
        use std::fmt::Write;
        let _ = writeln!($o, $($arg)*);
    }};
}

/// A trial as `linerate search` shows it.
pub fn trial_line(t: &linerate_search::Trial) -> String {
    format!(
        "trial {:>2} {:<14} {:>9} Kpps {:>5.2} s: offered {:>9} received {:>9} Kpps, loss {:.4}%{}",
        t.index,
        t.step,
        equilibrium::kpps(t.measurement.requested_pps),
        t.duration,
        equilibrium::kpps(t.measurement.offered_pps()),
        equilibrium::kpps(t.measurement.forwarding_pps()),
        t.loss_ratio * 100.0,
        if t.measurement.valid {
            ""
        } else {
            " INVALID (the generator fell short)"
        }
    )
}

/// The equilibrium search's preamble, in BSDRP's words.
pub fn equilibrium_preamble(frame_size: &str, max_pps: f64, tolerance: f64) -> String {
    format!(
        "Benchmark tool using equilibrium throughput method\n- Benchmark mode: Throughput (pps) for Router\n- Frame size = {frame_size}\n- Link rate = {} Kpps\n- Tolerance = {tolerance}\n",
        equilibrium::kpps(max_pps)
    )
}

/// An equilibrium iteration, in BSDRP's words.
pub fn iteration_text(i: &equilibrium::Iteration) -> String {
    let trend = match i.trend {
        Some(equilibrium::Trend::Increasing) => "\n- Trend = increasing",
        Some(equilibrium::Trend::Decreasing) => "\n- Trend = decreasing",
        None => "",
    };
    format!(
        "Iteration {}\n- Offering load = {} Kpps\n- Step = {} Kpps{trend}",
        i.number,
        equilibrium::kpps(i.load_pps),
        equilibrium::kpps(i.step_pps)
    )
}

impl SearchOutcome {
    /// The search's result in the words of its method (`max`: the
    /// highest load, for the RFC 2544 search's floor).
    pub fn text(&self, max: f64) -> String {
        let mut out = String::new();
        match self {
            SearchOutcome::Equilibrium(o) => {
                say!(out, "{}", o.line());
                if o.generator_limited {
                    say!(out, "(some loads could not be offered by the generator: the estimate may be the generator's limit)");
                }
            }
            SearchOutcome::Rfc2544(o) => match o.throughput_pps {
                Some(t) => say!(
                    out,
                    "RFC 2544 throughput (zero loss) = {} Kpps{}",
                    equilibrium::kpps(t),
                    o.generator_ceiling_pps
                        .map(|c| format!(
                            " (the generator could offer no more than {} Kpps)",
                            equilibrium::kpps(c)
                        ))
                        .unwrap_or_default()
                ),
                None => say!(
                    out,
                    "RFC 2544 throughput: none, frames were lost even at {} Kpps",
                    equilibrium::kpps(binary::Config::new(max).min_pps)
                ),
            },
            SearchOutcome::NdrPdr(o) => {
                for g in &o.goals {
                    match g.lower_pps {
                    Some(l) => say!(
                out,
                        "{} (loss ratio {}, exceed ratio {}, {} s of final trials) = {} Kpps (upper bound {})",
                        g.name.to_uppercase(),
                        g.loss_ratio,
                        g.exceed_ratio,
                        g.duration_sum,
                        equilibrium::kpps(l),
                        g.upper_pps
                            .map(|u| format!("{} Kpps", equilibrium::kpps(u)))
                            .unwrap_or("none: met at the maximum".into())
                    ),
                    None => say!(
                out,
                        "{}: not met even at the minimum load",
                        g.name.to_uppercase()
                    ),
                }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_search::sim::SimDut;

    /// The same plan against the simulated DUT finds its capacity by every
    /// method.
    #[test]
    fn every_method_finds_the_simulated_capacity() {
        for method in [
            SearchMethod::Equilibrium,
            SearchMethod::Rfc2544,
            SearchMethod::NdrPdr,
        ] {
            let plan = SearchPlan {
                method,
                seconds: 1.0,
                final_seconds: 1.0,
                tolerance: 0.01,
                width: 0.005,
                loss_ratio: 0.005,
                exceed_ratio: 0.0,
                duration_sum: None,
            };
            let mut dut = SimDut::ideal(1_000_000.0);
            let mut log = Trials::new(|_| {});
            let found = match run(&mut dut, &plan, 2_000_000.0, &mut log, |_| {}).unwrap() {
                SearchOutcome::Equilibrium(o) => o.estimate_pps,
                SearchOutcome::Rfc2544(o) => o.throughput_pps.unwrap(),
                SearchOutcome::NdrPdr(o) => o.goals[0].lower_pps.unwrap(),
            };
            assert!(
                (found / 1e6 - 1.0).abs() < 0.02,
                "{method:?}: {found} pps against a 1 Mpps DUT"
            );
        }
    }
}
