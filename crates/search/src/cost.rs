//! What the searches cost: trial-seconds MLRsearch needs for NDR and PDR
//! against two plain binary searches (every trial full length, RFC 2544
//! style) for the same goals and the same final width, on simulated DUTs.
use crate::sim::SimDut;
use crate::{binary, mlr, Trials};
use anyhow::Result;
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub capacity_pps: f64,
    pub noise: f64,
    pub mlr_trials: usize,
    pub mlr_seconds: f64,
    pub binary_trials: usize,
    pub binary_seconds: f64,
    /// binary_seconds / mlr_seconds.
    pub saving: f64,
    /// The two searches' NDR and PDR, to show they found the same thing.
    pub mlr_ndr_pps: Option<f64>,
    pub mlr_pdr_pps: Option<f64>,
    pub binary_ndr_pps: Option<f64>,
    pub binary_pdr_pps: Option<f64>,
}

/// The DUT: knee at 90% of capacity, 2% loss at capacity; the search's
/// maximum is twice the capacity.
pub fn compare(capacity_pps: f64, noise: f64, seed: u64, cfg: &mlr::Config) -> Result<Row> {
    let dut = || {
        SimDut::ideal(capacity_pps)
            .with_knee(capacity_pps * 0.9, 0.02)
            .with_noise(noise, 0.0, seed)
    };
    let mut mcfg = cfg.clone();
    mcfg.max_pps = capacity_pps * 2.0;
    mcfg.min_pps = mcfg.max_pps / 1000.0;
    let mut t = Trials::new(|_| {});
    let m = mlr::search(&mut dut(), &mcfg, &mut t)?;
    let (mlr_trials, mlr_seconds) = (t.list.len(), t.seconds());

    let (mut binary_trials, mut binary_seconds) = (0, 0.0);
    let mut found = Vec::new();
    for g in &mcfg.goals {
        let bcfg = binary::Config {
            min_pps: mcfg.min_pps,
            max_pps: mcfg.max_pps,
            width: mcfg.width,
            loss_ratio: g.loss_ratio,
            trial_seconds: mcfg.final_seconds,
            final_seconds: mcfg.final_seconds,
            final_trials: 0,
        };
        let mut t = Trials::new(|_| {});
        found.push(binary::search(&mut dut(), &bcfg, &mut t)?.throughput_pps);
        binary_trials += t.list.len();
        binary_seconds += t.seconds();
    }
    let goal = |i: usize| m.goals.get(i).and_then(|g| g.lower_pps);
    Ok(Row {
        capacity_pps,
        noise,
        mlr_trials,
        mlr_seconds,
        binary_trials,
        binary_seconds,
        saving: binary_seconds / mlr_seconds,
        mlr_ndr_pps: goal(0),
        mlr_pdr_pps: goal(1),
        binary_ndr_pps: found.first().copied().flatten(),
        binary_pdr_pps: found.get(1).copied().flatten(),
    })
}
