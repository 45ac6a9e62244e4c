//! `linerate trial`: one trial at a fixed rate through a lab or named
//! interfaces, the measurement every search makes at each load (the same
//! `LabTrials`, as the searches' `Dut`): the "measurer" other tools (CSIT's
//! MLRsearch, scripts) can call.
use crate::cli::TrialArgs;
use crate::cmd_search::{path, traffic};
use crate::stop;
use anyhow::{bail, Result};
use linerate_labrun::measure::LabTrials;
use linerate_search::{equilibrium::kpps, Dut};
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
    linerate_host::privilege::require_root("linerate trial")?;
    let path = path(&a.path)?;
    let mut dut = LabTrials::new(path, traffic, a.receiver, stop::flag());
    let m = dut.trial(rate, a.seconds)?;
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
