//! A simulated DUT with a known capacity, for testing searches quickly and
//! deterministically (seeded), and for counting what each search costs.
//!
//! Loss model: no loss up to `knee_pps`; between the knee and
//! `capacity_pps` the loss ratio grows linearly to `knee_loss` (a DUT
//! dropping a little before it saturates, which is what separates NDR from
//! PDR); above the capacity, everything beyond it is lost. On top of that:
//! `noise` moves knee and capacity by up to that fraction in each trial,
//! and `spurious` is the probability that a trial loses a few frames
//! whatever its load (an inconsistent trial, as a real lab has).
use crate::{Dut, Measurement};
use anyhow::Result;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Clone, Debug)]
pub struct SimDut {
    pub knee_pps: f64,
    pub capacity_pps: f64,
    pub knee_loss: f64,
    pub noise: f64,
    pub spurious: f64,
    /// The generator cannot offer more than this.
    pub generator_max_pps: f64,
    /// The generator's accepted shortfall before a trial is invalid.
    pub generator_tolerance: f64,
    rng: ChaCha8Rng,
    seed: u64,
    /// Each trial's noise a function of the seed, its load and duration
    /// alone (see `replayable`).
    replayable: bool,
    /// Seconds of traffic offered so far.
    pub seconds: f64,
    pub trials: usize,
}

impl SimDut {
    /// A DUT that forwards everything up to `capacity_pps` and nothing more.
    pub fn ideal(capacity_pps: f64) -> Self {
        SimDut {
            knee_pps: capacity_pps,
            capacity_pps,
            knee_loss: 0.0,
            noise: 0.0,
            spurious: 0.0,
            generator_max_pps: f64::INFINITY,
            generator_tolerance: 0.01,
            rng: ChaCha8Rng::seed_from_u64(1),
            seed: 1,
            replayable: false,
            seconds: 0.0,
            trials: 0,
        }
    }

    pub fn with_knee(mut self, knee_pps: f64, knee_loss: f64) -> Self {
        self.knee_pps = knee_pps;
        self.knee_loss = knee_loss;
        self
    }

    pub fn with_noise(mut self, noise: f64, spurious: f64, seed: u64) -> Self {
        self.noise = noise;
        self.spurious = spurious;
        self.rng = ChaCha8Rng::seed_from_u64(seed);
        self.seed = seed;
        self
    }

    /// Makes every trial's noise a function of the seed, the load (to the
    /// frame per second) and the duration alone, not of the trials before it: the same trial gives
    /// the same result in any order, from any process (`linerate trial
    /// --sim`), so that two search implementations face the same DUT.
    pub fn replayable(mut self) -> Self {
        self.replayable = true;
        self
    }

    pub fn with_generator_max(mut self, pps: f64) -> Self {
        self.generator_max_pps = pps;
        self
    }

    /// The load at which the loss ratio first exceeds `ratio`, without noise.
    pub fn true_throughput(&self, ratio: f64) -> f64 {
        if ratio <= 0.0 || self.knee_pps >= self.capacity_pps {
            return self.knee_pps;
        }
        if ratio < self.knee_loss {
            return self.knee_pps + (self.capacity_pps - self.knee_pps) * ratio / self.knee_loss;
        }
        // Above the capacity: 1 - C'/L with C' the rate forwarded there.
        self.capacity_pps * (1.0 - self.knee_loss) / (1.0 - ratio)
    }

    /// The probability that one trial at `load_pps` meets `loss_ratio`:
    /// the chance that this trial's knee and capacity (moved by the noise,
    /// uniformly) leave the load within it, and for a loss ratio of 0 that
    /// the trial loses no spurious frames. (A spurious trial loses at most
    /// 20 frames: it is not counted against a loss ratio above 0.)
    pub fn pass_probability(&self, load_pps: f64, loss_ratio: f64) -> f64 {
        let at = self.true_throughput(loss_ratio);
        let within = if self.noise > 0.0 {
            // Met when the trial's scale is at least load / at.
            ((1.0 + self.noise - load_pps / at) / (2.0 * self.noise)).clamp(0.0, 1.0)
        } else if load_pps <= at {
            1.0
        } else {
            0.0
        };
        if loss_ratio > 0.0 {
            within
        } else {
            within * (1.0 - self.spurious)
        }
    }

    fn loss_ratio(&self, load: f64, scale: f64) -> f64 {
        let (knee, cap) = (self.knee_pps * scale, self.capacity_pps * scale);
        if load <= knee {
            0.0
        } else if load <= cap {
            self.knee_loss * (load - knee) / (cap - knee)
        } else {
            1.0 - cap * (1.0 - self.knee_loss) / load
        }
    }
}

impl Dut for SimDut {
    fn trial(&mut self, load_pps: f64, seconds: f64) -> Result<Measurement> {
        self.trials += 1;
        self.seconds += seconds;
        if self.replayable {
            // The load to the frame per second: two tools that compute the
            // same load with different float rounding meet the same trial.
            let mix = (load_pps.round() as u64).rotate_left(17) ^ seconds.to_bits();
            self.rng =
                ChaCha8Rng::seed_from_u64(self.seed ^ mix.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        }
        let scale = if self.noise > 0.0 {
            1.0 + self.rng.gen_range(-self.noise..=self.noise)
        } else {
            1.0
        };
        let achieved = load_pps.min(self.generator_max_pps);
        let offered = (achieved * seconds).round() as u64;
        let mut lost = (offered as f64 * self.loss_ratio(achieved, scale)).round() as u64;
        if self.spurious > 0.0 && self.rng.gen_bool(self.spurious) {
            lost += self.rng.gen_range(1..=20);
        }
        Ok(Measurement {
            requested_pps: load_pps,
            offered,
            received: offered.saturating_sub(lost),
            seconds,
            valid: achieved >= load_pps * (1.0 - self.generator_tolerance),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pass_probability` against the DUT's own trials: the share of
    /// 20,000 trials that meet the loss ratio.
    #[test]
    fn pass_probability_is_the_share_of_trials_that_pass() {
        let dut = SimDut::ideal(1e6)
            .with_knee(0.9e6, 0.02)
            .with_noise(0.005, 0.1, 7);
        for (load, ratio) in [
            (0.897e6, 0.0),
            (0.9e6, 0.0),
            (0.903e6, 0.0),
            (0.92e6, 0.005),
            (0.925e6, 0.005),
            (0.929e6, 0.005),
            (0.8e6, 0.0),
            (0.95e6, 0.005),
        ] {
            let mut d = dut.clone();
            let n = 20_000;
            let passed = (0..n)
                .filter(|_| d.trial(load, 4.0).unwrap().loss_ratio() <= ratio)
                .count();
            let share = passed as f64 / n as f64;
            let p = dut.pass_probability(load, ratio);
            assert!((share - p).abs() < 0.015, "{load} {ratio}: {share} vs {p}");
        }
    }
}
