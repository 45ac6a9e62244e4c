//! The loads MLRsearch may ask for: a logarithmic grid from the minimum to
//! the maximum load whose step is at most the goal width, as CSIT's
//! MLRsearch rounds its loads (`LoadRounding`).
//!
//! Why a grid and not any float: an interval halved on it splits into
//! whole steps, so the final intervals are exactly one goal width (no
//! narrower sliver below an upper bound), and the same loads come back
//! from phase to phase and from goal to goal. A load measured at 1 s, then
//! at 2 s and at 4 s carries all those trials into its classification; a
//! float midpoint is a new load every time, whose one lucky trial decides
//! it.

/// Loads `min * exp(i * step)` for `i` in `0..=top`; `top` makes the last
/// one the maximum.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grid {
    min: f64,
    step: f64,
    top: u32,
}

impl Grid {
    /// The grid from `min` to `max` whose step, as a relative width
    /// `(upper - lower) / upper`, is at most `width`: as many steps as
    /// CSIT's `LoadRounding` makes (the fewest that put the width between
    /// 0.99 and 0.999999 of a whole number of steps, here one), so that
    /// the two grids are the same loads.
    pub fn new(min: f64, max: f64, width: f64) -> Self {
        let span = (max / min).ln();
        let goal = -(-width).ln_1p();
        let top = steps(span, goal);
        Grid {
            min,
            step: span / top as f64,
            top,
        }
    }

    pub fn top(&self) -> u32 {
        self.top
    }

    pub fn load(&self, i: u32) -> f64 {
        if i >= self.top {
            // Exactly the maximum, not what exp() rounds it to.
            return self.min * (self.step * self.top as f64).exp();
        }
        self.min * (self.step * i as f64).exp()
    }

    /// The highest grid load at most `pps` (0 below the minimum).
    pub fn floor(&self, pps: f64) -> u32 {
        if pps <= self.min {
            return 0;
        }
        let i = ((pps / self.min).ln() / self.step).floor() as u32;
        // exp/ln may land one step off either way.
        let mut i = i.min(self.top);
        while i > 0 && self.load(i) > pps {
            i -= 1;
        }
        while i < self.top && self.load(i + 1) <= pps {
            i += 1;
        }
        i
    }

    /// Where to split `lo..hi` (more than `goal` steps apart) as CSIT does:
    /// the upper part a power-of-two multiple of `goal` steps, as even a
    /// split as that allows, the lower part the smaller one when they
    /// differ (conservative: the next trial is the lower load). Below two
    /// goals the split is at half a goal if that is whole, else halfway.
    pub fn middle(lo: u32, hi: u32, goal: u32) -> u32 {
        let width = hi - lo;
        debug_assert!(width > goal && goal > 0);
        if width == 2 * goal {
            return lo + goal;
        }
        if width < 2 * goal {
            if goal.is_multiple_of(2) {
                return Self::middle(lo, hi, goal / 2);
            }
            return lo + width / 2;
        }
        let (mut upper, mut lower) = (goal, width - goal);
        loop {
            let (upper2, lower2) = (upper * 2, width - upper * 2);
            if lower2 <= upper2 {
                // The more even of the last two splits; the tie goes to
                // the smaller lower part.
                let lower = if upper as u64 * lower as u64 > upper2 as u64 * lower2 as u64 {
                    upper
                } else {
                    lower2
                };
                return lo + lower;
            }
            (upper, lower) = (upper2, lower2);
        }
    }
}

/// CSIT's `LoadRounding._find_ints` for one width: the number of steps
/// from min to max (`span`, in log) such that the width (`goal`, in log)
/// is a whole number of steps times a quality between 0.99 and 0.999999.
fn steps(span: f64, goal: f64) -> u32 {
    let (low, high) = (0.99, 0.999999);
    let mut candidate = 1.0f64;
    loop {
        let units = goal / (span / candidate);
        let whole = units.floor();
        let quality = whole / units;
        if (low..=high).contains(&quality) {
            return candidate as u32;
        }
        let next = (whole + 1.0) / high / units * candidate;
        candidate = (candidate + 1.0).max(next).ceil();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_spans_min_to_max_in_steps_no_wider_than_the_width() {
        let g = Grid::new(1000.0, 1e6, 0.005);
        assert_eq!(g.load(0), 1000.0);
        assert!((g.load(g.top()) - 1e6).abs() < 1e-6);
        for i in [1, 17, g.top() - 1, g.top()] {
            let rel = (g.load(i) - g.load(i - 1)) / g.load(i);
            assert!(rel <= 0.005 && rel > 0.0049, "{i}: {rel}");
        }
    }

    #[test]
    fn as_many_steps_as_csits_load_rounding() {
        // LoadRounding(min_load, max_load, float_goals=[width]).max_int_load
        // in MLRsearch 1.2.1, and the one step per width it gives.
        for (min, max, width, top) in [
            (1000.0, 1e6, 0.005, 1379),
            (1800.0, 1.8e6, 0.005, 1379),
            (100.0, 1e7, 0.01, 1146),
            (1000.0, 2000.0, 0.005, 139),
        ] {
            let g = Grid::new(min, max, width);
            assert_eq!(g.top(), top, "{min} {max} {width}");
        }
    }

    #[test]
    fn floor_is_the_highest_grid_load_not_above() {
        let g = Grid::new(1000.0, 1e6, 0.005);
        for i in [0, 1, 500, g.top() - 1, g.top()] {
            assert_eq!(g.floor(g.load(i)), i);
            if i < g.top() {
                let between = (g.load(i) + g.load(i + 1)) / 2.0;
                assert_eq!(g.floor(between), i);
            }
        }
        assert_eq!(g.floor(1.0), 0);
        assert_eq!(g.floor(1e9), g.top());
    }

    #[test]
    fn middles_split_as_csits_discrete_interval_does() {
        // (width, goal) -> lower part, from MLRsearch 1.2.1's
        // DiscreteInterval.middle worked by hand.
        for (width, goal, lower) in [
            (2, 1, 1),
            (3, 1, 1),
            (4, 1, 2),
            (5, 1, 2),
            (6, 1, 2),
            (7, 1, 3),
            (8, 1, 4),
            (12, 1, 4),
            (3, 2, 1), // below two goals, even goal: at half a goal
            (5, 3, 2), // below two goals, odd goal: halfway
        ] {
            assert_eq!(
                Grid::middle(10, 10 + width, goal),
                10 + lower,
                "{width} {goal}"
            );
        }
    }
}
