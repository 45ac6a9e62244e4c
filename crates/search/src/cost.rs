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

/// The noise levels `linerate bench search` simulates.
pub const NOISES: [f64; 3] = [0.0, 0.002, 0.01];

/// Rows for `duts` simulated DUTs of capacities spread over 0.1-10 Mpps
/// (log scale) at each of [`NOISES`].
pub fn rows(duts: usize, cfg: &mlr::Config) -> Result<Vec<Row>> {
    if duts == 0 {
        anyhow::bail!("--duts: at least 1");
    }
    let mut rows = Vec::new();
    for noise in NOISES {
        for i in 0..duts {
            let cap = 1e5 * 100f64.powf(i as f64 / duts.max(2).saturating_sub(1) as f64);
            rows.push(compare(cap, noise, i as u64, cfg)?);
        }
    }
    Ok(rows)
}

/// The rows' table, a line a noise level: medians over the DUTs.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "noise   DUTs  MLR trials  MLR s (median)  binary trials  binary s (median)  saving (median, min-max)\n",
    );
    let med = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        (
            if n % 2 == 1 {
                v[n / 2]
            } else {
                (v[n / 2 - 1] + v[n / 2]) / 2.0
            },
            v[0],
            v[n - 1],
        )
    };
    for noise in NOISES {
        let r: Vec<&Row> = rows.iter().filter(|r| r.noise == noise).collect();
        if r.is_empty() {
            continue;
        }
        let mt = med(r.iter().map(|x| x.mlr_trials as f64).collect());
        let ms = med(r.iter().map(|x| x.mlr_seconds).collect());
        let bt = med(r.iter().map(|x| x.binary_trials as f64).collect());
        let bs = med(r.iter().map(|x| x.binary_seconds).collect());
        let sv = med(r.iter().map(|x| x.saving).collect());
        out += &format!(
            "{:<6.3} {:>5} {:>11.0} {:>15.0} {:>14.0} {:>18.0}  {:.2}x ({:.2}-{:.2})\n",
            noise,
            r.len(),
            mt.0,
            ms.0,
            bt.0,
            bs.0,
            sv.0,
            sv.1,
            sv.2
        );
    }
    out
}
