//! One trial's result and the record every search keeps of its trials.
use anyhow::Result;
use serde::Serialize;

/// What one trial measured.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Measurement {
    /// The load asked of the generator, frames per second.
    pub requested_pps: f64,
    /// Frames the generator offered the DUT.
    pub offered: u64,
    /// Frames that came out of the DUT.
    pub received: u64,
    /// Seconds the load was offered.
    pub seconds: f64,
    /// The generator offered the requested load (within its tolerance).
    /// An invalid trial says nothing about the DUT's loss.
    pub valid: bool,
}

impl Measurement {
    pub fn offered_pps(&self) -> f64 {
        self.offered as f64 / self.seconds
    }

    /// The DUT's forwarding rate during the trial.
    pub fn forwarding_pps(&self) -> f64 {
        self.received as f64 / self.seconds
    }

    /// Lost over offered; 0 when more came out than went in (duplicates).
    pub fn loss_ratio(&self) -> f64 {
        if self.offered == 0 {
            return 0.0;
        }
        (self.offered.saturating_sub(self.received)) as f64 / self.offered as f64
    }
}

/// The search range both RFC 2544 and MLRsearch take.
pub(crate) fn check_range(min_pps: f64, max_pps: f64) -> Result<()> {
    if !(max_pps.is_finite() && min_pps > 0.0 && min_pps < max_pps) {
        anyhow::bail!("rates: need 0 < min ({min_pps}) < max ({max_pps})");
    }
    Ok(())
}

/// Anything that can run a trial: the lab, named interfaces, a simulation.
pub trait Dut {
    /// Offers `load_pps` for `seconds` and measures.
    fn trial(&mut self, load_pps: f64, seconds: f64) -> Result<Measurement>;
}

impl<D: Dut + ?Sized> Dut for &mut D {
    fn trial(&mut self, load_pps: f64, seconds: f64) -> Result<Measurement> {
        (**self).trial(load_pps, seconds)
    }
}

/// One trial as a search ran it.
#[derive(Clone, Debug, Serialize)]
pub struct Trial {
    /// 1, 2, ... in the order run.
    pub index: usize,
    /// What the search was doing ("iteration 3", "final", "phase 1/3 ndr").
    pub step: String,
    /// Seconds asked for.
    pub duration: f64,
    /// The search's verdict: the DUT passed this trial's criterion.
    pub passed: bool,
    #[serde(flatten)]
    pub measurement: Measurement,
    pub loss_ratio: f64,
    /// For searches with several goals (MLRsearch): whether this trial met
    /// each goal's loss ratio, by goal name.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub goals: std::collections::BTreeMap<String, bool>,
}

/// The trials of one search, with a callback to show progress.
pub struct Trials<'a> {
    pub list: Vec<Trial>,
    on_trial: Box<dyn FnMut(&Trial) + 'a>,
}

impl<'a> Trials<'a> {
    pub fn new(on_trial: impl FnMut(&Trial) + 'a) -> Self {
        Trials {
            list: Vec::new(),
            on_trial: Box::new(on_trial),
        }
    }

    /// Runs a trial on `dut`, judges it with `pass`, records it.
    pub fn run(
        &mut self,
        dut: &mut dyn Dut,
        step: String,
        load_pps: f64,
        seconds: f64,
        pass: impl Fn(&Measurement) -> bool,
    ) -> Result<Measurement> {
        let m = dut.trial(load_pps, seconds)?;
        let t = Trial {
            index: self.list.len() + 1,
            step,
            duration: seconds,
            passed: m.valid && pass(&m),
            loss_ratio: m.loss_ratio(),
            measurement: m,
            goals: Default::default(),
        };
        (self.on_trial)(&t);
        self.list.push(t);
        Ok(m)
    }

    /// The highest load the generator offered in full so far.
    pub fn highest_valid_load(&self) -> Option<f64> {
        self.list
            .iter()
            .filter(|t| t.measurement.valid)
            .map(|t| t.measurement.requested_pps)
            .reduce(f64::max)
    }

    /// Seconds of traffic the search has used so far.
    pub fn seconds(&self) -> f64 {
        self.list.iter().map(|t| t.duration).sum()
    }
}
