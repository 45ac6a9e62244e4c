//! RFC 9971's load classification: whether a load is a lower bound, an
//! upper bound or still undecided for a goal, from all the trials measured
//! at it. Trials at least the goal's trial duration long are "long";
//! shorter ones count too: a short trial that missed the loss ratio counts
//! as missing unless enough short trials that met it balance it (by the
//! exceed ratio), and one that met it never makes a lower bound alone.
//!
//! With exceed ratio `x`, a load is an upper bound once more than `x` of
//! the duration sum (at least the goal's) missed the loss ratio, whatever
//! the trials still to come; a lower bound once at most `x` of it can miss
//! it even if every trial still to come missed it; otherwise undecided.
//! With `x = 0` any trial that missed makes an upper bound, and a lower
//! bound needs long trials that all met it, their durations summing to the
//! goal's: a lucky trial after an unlucky one decides nothing.

/// A goal as one phase of the search sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Target {
    pub loss_ratio: f64,
    pub exceed_ratio: f64,
    /// Seconds of trials a decision needs.
    pub duration_sum: f64,
    /// Trials at least this long are long ones.
    pub trial_seconds: f64,
}

/// What a load is for a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Lower,
    Upper,
    Undecided,
}

/// Seconds of trials at one load, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LoadStats {
    pub good_long: f64,
    pub bad_long: f64,
    pub good_short: f64,
    pub bad_short: f64,
}

impl LoadStats {
    /// Counts a trial of `seconds` that lost `loss_ratio`.
    pub fn add(&mut self, t: &Target, seconds: f64, loss_ratio: f64) {
        let good = loss_ratio <= t.loss_ratio;
        let long = seconds >= t.trial_seconds;
        *match (long, good) {
            (true, true) => &mut self.good_long,
            (true, false) => &mut self.bad_long,
            (false, true) => &mut self.good_short,
            (false, false) => &mut self.bad_short,
        } += seconds;
    }

    pub fn classify(&self, t: &Target) -> Class {
        let x = t.exceed_ratio;
        // Short trials that met the loss ratio excuse as many seconds of
        // short ones that missed it as the exceed ratio allows.
        let balancing = self.good_short * x / (1.0 - x);
        let effective_bad = self.bad_long + (self.bad_short - balancing).max(0.0);
        let whole = (self.good_long + effective_bad).max(t.duration_sum);
        let allowed = whole * x;
        if effective_bad > allowed {
            Class::Upper
        } else if whole - self.good_long <= allowed {
            Class::Lower
        } else {
            Class::Undecided
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(exceed_ratio: f64, duration_sum: f64) -> Target {
        Target {
            loss_ratio: 0.005,
            exceed_ratio,
            duration_sum,
            trial_seconds: 4.0,
        }
    }

    fn stats(t: &Target, trials: &[(f64, f64)]) -> LoadStats {
        let mut s = LoadStats::default();
        for &(seconds, loss) in trials {
            s.add(t, seconds, loss);
        }
        s
    }

    #[test]
    fn with_no_exceed_any_miss_is_an_upper_bound_and_a_pass_needs_the_sum() {
        let t = target(0.0, 8.0);
        assert_eq!(stats(&t, &[]).classify(&t), Class::Undecided);
        assert_eq!(stats(&t, &[(4.0, 0.0)]).classify(&t), Class::Undecided);
        assert_eq!(
            stats(&t, &[(4.0, 0.0), (4.0, 0.001)]).classify(&t),
            Class::Lower
        );
        // A short trial that missed, then long ones that met it: upper.
        assert_eq!(
            stats(&t, &[(1.0, 0.01), (4.0, 0.0), (4.0, 0.0)]).classify(&t),
            Class::Upper
        );
        // Short trials that met it never make a lower bound.
        assert_eq!(stats(&t, &[(1.0, 0.0); 20]).classify(&t), Class::Undecided);
    }

    #[test]
    fn an_exceed_ratio_allows_that_share_of_misses() {
        // Half may miss (a median), 8 seconds at least.
        let t = target(0.5, 8.0);
        assert_eq!(stats(&t, &[(4.0, 0.01)]).classify(&t), Class::Undecided);
        assert_eq!(
            stats(&t, &[(4.0, 0.01), (4.0, 0.0)]).classify(&t),
            Class::Lower
        );
        assert_eq!(
            stats(&t, &[(4.0, 0.01), (4.0, 0.01)]).classify(&t),
            Class::Upper
        );
        assert_eq!(
            stats(&t, &[(4.0, 0.01), (4.0, 0.01), (4.0, 0.0)]).classify(&t),
            Class::Upper,
            "8 of 12 seconds missed"
        );
        // A short miss balanced by a short pass of the same length.
        assert_eq!(
            stats(&t, &[(1.0, 0.01), (1.0, 0.0), (4.0, 0.0), (4.0, 0.0)]).classify(&t),
            Class::Lower
        );
        // Unbalanced short misses count as long ones.
        assert_eq!(
            stats(&t, &[(2.0, 0.01), (2.0, 0.01), (2.0, 0.01), (4.0, 0.0)]).classify(&t),
            Class::Upper
        );
    }
}
