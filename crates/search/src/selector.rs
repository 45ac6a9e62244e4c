//! How MLRsearch picks its next load, as CSIT's MLRsearch 1.2.1 does (its
//! `Selector`, strategies, `TargetedExpander`, `GlobalWidth` and
//! `LimitHandler`), on grid steps: one selector per goal walks its phases
//! (targets); in each, the first of six strategies that wants a load
//! nominates it; the lowest nominated load is measured.
//!
//! Why a port and not our own: CSIT's MLRsearch is the reference of RFC
//! 9971 and the oracle of our tests. Making the same decisions, trial for
//! trial, on the same DUT, the two report the same loads
//! (tests/csit_oracle.rs), so the comparison says whether ours is right,
//! not whose noise was luckier.
use crate::classify::{Class, LoadStats, Target};
use crate::grid::Grid;
use crate::Measurement;
use anyhow::{bail, Result};
use std::collections::BTreeMap;

/// One trial as the selectors see it: the load's step on the grid, the
/// trial's duration and what it measured.
pub struct Record {
    pub at: u32,
    pub seconds: f64,
    pub m: Measurement,
}

/// A goal's bounds under one target, as grid steps: the highest lower
/// bound below the lowest upper bound (CSIT's relevant bounds).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Bounds {
    pub lower: Option<u32>,
    pub upper: Option<u32>,
}

/// Every load's trials (valid ones: an invalid trial says nothing about
/// the DUT) classified for `t`; loads still undecided are skipped.
pub fn bounds(records: &[Record], t: &Target) -> Bounds {
    let mut by_load: BTreeMap<u32, LoadStats> = BTreeMap::new();
    for r in records.iter().filter(|r| r.m.valid) {
        by_load
            .entry(r.at)
            .or_default()
            .add(t, r.seconds, r.m.loss_ratio());
    }
    let mut b = Bounds::default();
    for (&at, stats) in &by_load {
        match stats.classify(t) {
            Class::Upper => {
                b.upper = Some(at);
                break;
            }
            Class::Lower => b.lower = Some(at),
            Class::Undecided => {}
        }
    }
    b
}

/// Keeps a candidate load off the limits and away from the bounds
/// (CSIT's `LimitHandler.handle`): None where no load is worth it.
/// `top` is the highest step (the maximum load, or the generator's
/// ceiling).
pub fn handle(load: i64, width: u32, clo: Option<u32>, chi: Option<u32>, top: u32) -> Option<u32> {
    let load = load.clamp(0, top as i64) as u32;
    match (clo, chi) {
        (None, None) => excluding(load, width, 0, top, false, false),
        (None, Some(chi)) => {
            if chi == 0 || load >= chi {
                return None;
            }
            excluding(load, width, 0, chi, false, true)
        }
        (Some(clo), None) => {
            if clo >= top || load <= clo {
                return None;
            }
            excluding(load, width, clo, top, true, false)
        }
        (Some(clo), Some(chi)) => {
            if !(clo < load && load < chi) {
                return None;
            }
            excluding(load, width, clo, chi, true, true)
        }
    }
}

/// `load` kept at least `width` from an excluded limit (rounded to it)
/// and rounded to a limit that is not excluded when closer than that.
fn excluding(load: u32, width: u32, min: u32, max: u32, min_ex: bool, max_ex: bool) -> Option<u32> {
    if width >= max - min {
        return if !min_ex {
            Some(min)
        } else if !max_ex {
            Some(max)
        } else {
            None
        };
    }
    let (mut soft_min, mut soft_max) = (min + width, max - width);
    if soft_min > soft_max {
        let middle = Grid::middle(min, max, width);
        (soft_min, soft_max) = (middle, middle);
    }
    Some(if load < soft_min {
        if min_ex {
            soft_min
        } else {
            min
        }
    } else if load > soft_max {
        if max_ex {
            soft_max
        } else {
            max
        }
    } else {
        load
    })
}

/// CSIT's strategies, in the order a selector asks them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Strategy {
    /// The middle of the previous phase's bounds, when at most two of this
    /// phase's widths apart.
    Halve,
    /// The previous phase's lower bound, at this phase's duration.
    RefineLo,
    /// The previous phase's upper bound, at this phase's duration.
    RefineHi,
    /// No lower bound: down from the upper one by a growing width.
    ExtendLo,
    /// No upper bound: up from the lower one by a growing width.
    ExtendHi,
    /// Both bounds: their middle, or an extension from the one that moved
    /// away from the previous phase's if that stays closer to it.
    Bisect,
}

const STRATEGIES: [Strategy; 6] = [
    Strategy::Halve,
    Strategy::RefineLo,
    Strategy::RefineHi,
    Strategy::ExtendLo,
    Strategy::ExtendHi,
    Strategy::Bisect,
];

/// A load a selector wants measured.
#[derive(Clone, Copy, Debug)]
pub struct Nomination {
    pub at: u32,
    pub seconds: f64,
    /// The width it was chosen with; it becomes the global width when
    /// measured.
    pub width: u32,
}

impl Nomination {
    /// CSIT's candidate order: the lower load first, then the longer
    /// trial, then the wider width; on a full tie the earlier goal
    /// (`self` is the earlier one).
    pub fn before(&self, other: &Nomination) -> bool {
        if self.at != other.at {
            return self.at < other.at;
        }
        if self.seconds != other.seconds {
            return self.seconds > other.seconds;
        }
        self.width >= other.width
    }
}

/// One goal's search: its phase, the previous phase's bounds and the width
/// it extends by (CSIT's `Selector` with its `TargetedExpander`).
pub struct Selector {
    /// The current phase (target), 0 the first.
    pub phase: usize,
    /// The number of phases; the last is the goal's own.
    phases: usize,
    initial_lower: Option<u32>,
    initial_upper: Option<u32>,
    /// The width the next extension will use (before the global one).
    next_width: u32,
    /// The strategy of the last nomination.
    strategy: Option<Strategy>,
    /// Bisect's extensions: widen when the load became that bound.
    expand_on_lower: bool,
    expand_on_upper: bool,
}

impl Selector {
    /// A selector in its first phase of width `width`, between the initial
    /// trials' two loads.
    pub fn new(phases: usize, lower: u32, upper: u32, width: u32) -> Self {
        let mut s = Selector {
            phase: 0,
            phases,
            initial_lower: Some(lower),
            initial_upper: Some(upper),
            next_width: 0,
            strategy: None,
            expand_on_lower: false,
            expand_on_upper: false,
        };
        s.restart(width);
        s
    }

    /// New strategies for a phase of width `width`.
    fn restart(&mut self, width: u32) {
        self.next_width = width;
        if let (Some(lo), Some(hi)) = (self.initial_lower, self.initial_upper) {
            self.next_width = self.next_width.max(hi - lo);
        }
        self.next_width = self.next_width.saturating_mul(2);
        self.strategy = None;
        self.expand_on_lower = false;
        self.expand_on_upper = false;
    }

    fn expand(&mut self, global: &mut u32) {
        self.next_width = self.next_width.saturating_mul(2);
        *global = self.next_width;
    }

    fn limit(&mut self, last: u32, width: u32) {
        self.next_width = last.max(width).saturating_mul(2);
    }

    /// The load this goal wants next, or None when it is done.
    /// `target(k)` gives phase k's target and width; `extra` may add a load
    /// where the strategies would stop at the top (the generator retry).
    pub fn nominate(
        &mut self,
        records: &[Record],
        target: impl Fn(usize) -> (Target, u32),
        top: u32,
        global: u32,
        extra: impl Fn(u32) -> Option<u32>,
    ) -> Result<Option<Nomination>> {
        self.strategy = None;
        loop {
            let (t, width) = target(self.phase);
            let b = bounds(records, &t);
            for s in STRATEGIES {
                if let Some((at, w)) = self.propose(s, b, width, top, global, &extra) {
                    self.strategy = Some(s);
                    return Ok(Some(Nomination {
                        at,
                        seconds: t.trial_seconds,
                        width: w,
                    }));
                }
            }
            if b.lower.is_none() && b.upper.is_none() {
                bail!(
                    "MLRsearch: no bound in phase {} to start from",
                    self.phase + 1
                );
            }
            if self.phase + 1 >= self.phases {
                return Ok(None);
            }
            self.phase += 1;
            self.initial_lower = b.lower;
            self.initial_upper = b.upper;
            self.restart(target(self.phase).1);
        }
    }

    fn propose(
        &mut self,
        s: Strategy,
        b: Bounds,
        width: u32,
        top: u32,
        global: u32,
        extra: &impl Fn(u32) -> Option<u32>,
    ) -> Option<(u32, u32)> {
        let not_worth = |load: u32| {
            b.lower.is_some_and(|lo| lo >= load)
                || b.upper.is_some_and(|up| up <= load)
                || matches!((b.lower, b.upper), (Some(lo), Some(up)) if up - lo <= width)
        };
        let extension = self.next_width.max(global);
        match s {
            Strategy::Halve => {
                let (lo, hi) = (self.initial_lower?, self.initial_upper?);
                let span = hi.checked_sub(lo)?;
                if span > 2 * width || span <= width {
                    return None;
                }
                let load = Grid::middle(lo, hi, width);
                if not_worth(load) {
                    return None;
                }
                self.limit(width, width);
                Some((load, width))
            }
            Strategy::RefineLo | Strategy::RefineHi => {
                let load = if s == Strategy::RefineLo {
                    self.initial_lower?
                } else {
                    self.initial_upper?
                };
                if not_worth(load) {
                    return None;
                }
                self.limit(width, width);
                Some((load, width))
            }
            Strategy::ExtendLo => {
                if b.lower.is_some() || b.upper.is_none_or(|up| up == 0) {
                    return None;
                }
                let up = b.upper?;
                let load = handle(up as i64 - extension as i64, width, b.lower, b.upper, top)?;
                (!not_worth(load)).then_some((load, extension))
            }
            Strategy::ExtendHi => {
                let lo = b.lower?;
                if b.upper.is_some() {
                    return None;
                }
                if lo >= top {
                    // Met at the highest load the generator can offer.
                    return extra(lo).map(|l| (l, width));
                }
                let load = handle(lo as i64 + extension as i64, width, b.lower, b.upper, top)?;
                (!not_worth(load)).then_some((load, extension))
            }
            Strategy::Bisect => {
                let (lo, up) = (b.lower?, b.upper?);
                if lo >= top || up == 0 || up - lo <= width {
                    return None;
                }
                let middle = Grid::middle(lo, up, width);
                // Extending down from the upper bound, as an external search
                // from the previous phase's upper bound would.
                if let Some(hi) = self.initial_upper.filter(|&hi| middle < hi) {
                    let load = handle(up as i64 - extension as i64, width, b.lower, b.upper, top);
                    if let Some(load) = load.filter(|&l| l > middle && l < hi) {
                        (self.expand_on_lower, self.expand_on_upper) = (false, true);
                        return Some((load, extension));
                    }
                }
                if let Some(ilo) = self.initial_lower.filter(|&ilo| middle > ilo) {
                    let load = handle(lo as i64 + extension as i64, width, b.lower, b.upper, top);
                    if let Some(load) = load.filter(|&l| l < middle && l > ilo) {
                        (self.expand_on_lower, self.expand_on_upper) = (true, false);
                        return Some((load, extension));
                    }
                }
                if not_worth(middle) {
                    return None;
                }
                (self.expand_on_lower, self.expand_on_upper) = (false, false);
                let w = (middle - lo).min(up - middle);
                self.limit(w, width);
                Some((middle, w))
            }
        }
    }

    /// After this selector's nomination was measured at `at`: widen the
    /// extension if the load became the bound it extended from (the
    /// external search has to go further).
    pub fn won(&mut self, at: u32, b: Bounds, global: &mut u32) {
        let widen = match self.strategy {
            Some(Strategy::ExtendLo) => b.upper == Some(at),
            Some(Strategy::ExtendHi) => b.lower == Some(at),
            Some(Strategy::Bisect) => {
                (self.expand_on_lower && b.lower == Some(at))
                    || (self.expand_on_upper && b.upper == Some(at))
            }
            _ => false,
        };
        if widen {
            self.expand(global);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_keeps_loads_off_excluded_bounds_as_csits_limit_handler() {
        // Hand-worked from LimitHandler.handle (MLRsearch 1.2.1), top 100.
        // Nothing known: rounded to a limit within a width of it.
        assert_eq!(handle(2, 4, None, None, 100), Some(0));
        assert_eq!(handle(50, 4, None, None, 100), Some(50));
        assert_eq!(handle(98, 4, None, None, 100), Some(100));
        // Below an upper bound: at least a width under it.
        assert_eq!(handle(58, 4, None, Some(60), 100), Some(56));
        assert_eq!(handle(60, 4, None, Some(60), 100), None);
        // Above a lower bound: at least a width over it.
        assert_eq!(handle(41, 4, Some(40), None, 100), Some(44));
        // Between bounds closer than two widths: their middle.
        assert_eq!(handle(41, 4, Some(40), Some(46), 100), Some(42));
        // Bounds a width apart: nothing is worth it.
        assert_eq!(handle(41, 4, Some(40), Some(44), 100), None);
    }

    #[test]
    fn candidates_are_ordered_as_csits() {
        let n = |at, seconds, width| Nomination { at, seconds, width };
        assert!(n(10, 1.0, 1).before(&n(11, 4.0, 4)));
        assert!(n(10, 4.0, 1).before(&n(10, 1.0, 4)));
        assert!(n(10, 4.0, 4).before(&n(10, 4.0, 1)));
        assert!(!n(10, 4.0, 1).before(&n(10, 4.0, 4)));
        // A full tie: the earlier goal.
        assert!(n(10, 4.0, 2).before(&n(10, 4.0, 2)));
    }
}
