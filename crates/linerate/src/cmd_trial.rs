//! `linerate trial`: one trial at a fixed rate through a lab or named
//! interfaces, the measurement every search makes at each load (the same
//! `LabTrials`, as the searches' `Dut`): the "measurer" other tools (CSIT's
//! MLRsearch, scripts) can call.
use crate::cli::{SimArgs, TrialArgs};
use crate::cmd_search::{path, traffic};
use anyhow::{bail, Result};
use linerate_host::stop;
use linerate_labrun::measure::{LabTrials, Runner};
use linerate_search::{equilibrium::kpps, sim::SimDut, Dut};
use serde_json::json;

pub fn run(a: TrialArgs) -> Result<()> {
    let traffic = traffic(&a.traffic)?;
    let rate = linerate_imix::parse_rate("-R", &a.rate).map_err(anyhow::Error::msg)?;
    if !(rate >= 1.0 && rate.is_finite()) {
        bail!("-R: the rate must be at least 1 pps, got {}", a.rate);
    }
    if !(a.seconds > 0.0 && a.seconds <= 3600.0) {
        bail!(
            "-t: must be more than 0 and at most 3600 seconds, got {}",
            a.seconds
        );
    }
    let m = match sim_dut(&a.sim)? {
        Some(mut dut) => dut.trial(rate, a.seconds)?,
        None => {
            linerate_host::privilege::require_root("linerate trial")?;
            let path = path(&a.path)?;
            LabTrials::new(
                Runner::InProcess { path, traffic },
                a.receiver,
                stop::flag(),
            )
            .trial(rate, a.seconds)?
        }
    };
    if a.json {
        let v = json!({
            "requested_pps": m.requested_pps,
            "seconds": m.seconds,
            "offered": m.offered,
            "received": m.received,
            "offered_pps": m.offered_pps(),
            "forwarding_pps": m.forwarding_pps(),
            "loss_ratio": m.loss_ratio(),
            "valid": m.valid,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "{} Kpps for {:.2} s: offered {} ({} Kpps), received {} ({} Kpps), loss {:.4}%{}",
            kpps(m.requested_pps),
            m.seconds,
            m.offered,
            kpps(m.offered_pps()),
            m.received,
            kpps(m.forwarding_pps()),
            m.loss_ratio() * 100.0,
            if m.valid {
                ""
            } else {
                " INVALID: the generator fell short of the rate"
            }
        );
    }
    Ok(())
}

/// The simulated DUT `--sim SEED` asks for (replayable: each trial a
/// function of the seed, the rate and the duration alone), None without
/// `--sim`.
pub fn sim_dut(a: &SimArgs) -> Result<Option<SimDut>> {
    let Some(seed) = a.seed else {
        return Ok(None);
    };
    let cap =
        linerate_imix::parse_rate("--sim-capacity", &a.sim_capacity).map_err(anyhow::Error::msg)?;
    if !(0.0..0.5).contains(&a.sim_noise) {
        bail!(
            "--sim-noise: must be at least 0 and less than 0.5, got {}",
            a.sim_noise
        );
    }
    if !(0.0..=1.0).contains(&a.sim_spurious) {
        bail!(
            "--sim-spurious: must be a probability, got {}",
            a.sim_spurious
        );
    }
    Ok(Some(
        SimDut::ideal(cap)
            .with_knee(cap * 0.9, 0.02)
            .with_noise(a.sim_noise, a.sim_spurious, seed)
            .replayable(),
    ))
}
