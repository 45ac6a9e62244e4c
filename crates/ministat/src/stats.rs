//! A data set's vitals and the Student's t comparison, computed the way
//! current FreeBSD ministat computes them (the order of floating-point
//! operations included, so the printed digits agree).
use crate::student::{CONFIDENCE, NSTUDENT, T};
use serde::Serialize;

#[derive(Clone, Debug)]
pub struct Dataset {
    pub name: String,
    /// Sorted ascending.
    points: Vec<f64>,
    /// Sum in input order (FreeBSD adds points as they are read).
    sy: f64,
}

impl Dataset {
    /// A data set from values in input order. Panics on an empty slice;
    /// ministat itself refuses fewer than 3 points before getting here.
    pub fn new(name: &str, values: &[f64]) -> Self {
        assert!(!values.is_empty(), "a data set needs points");
        let sy = values.iter().fold(0.0, |a, v| a + v);
        let mut points = values.to_vec();
        points.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        Dataset {
            name: name.to_string(),
            points,
            sy,
        }
    }

    pub fn points(&self) -> &[f64] {
        &self.points
    }
    pub fn n(&self) -> usize {
        self.points.len()
    }
    pub fn min(&self) -> f64 {
        self.points[0]
    }
    pub fn max(&self) -> f64 {
        self.points[self.n() - 1]
    }
    pub fn avg(&self) -> f64 {
        self.sy / self.n() as f64
    }
    /// The middle point, or the mean of the two middle points for even N.
    pub fn median(&self) -> f64 {
        let m = self.n() / 2;
        if self.n().is_multiple_of(2) {
            (self.points[m] + self.points[m - 1]) / 2.0
        } else {
            self.points[m]
        }
    }
    /// Sample variance, two-pass over the sorted points.
    pub fn var(&self) -> f64 {
        let a = self.avg();
        let syy = self.points.iter().fold(0.0, |s, p| s + (p - a) * (p - a));
        syy / (self.n() as f64 - 1.0)
    }
    pub fn stddev(&self) -> f64 {
        self.var().sqrt()
    }

    pub fn vitals(&self) -> Vitals {
        Vitals {
            name: self.name.clone(),
            n: self.n(),
            min: self.min(),
            max: self.max(),
            median: self.median(),
            avg: self.avg(),
            stddev: self.stddev(),
        }
    }
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Vitals {
    pub name: String,
    pub n: usize,
    pub min: f64,
    pub max: f64,
    pub median: f64,
    pub avg: f64,
    pub stddev: f64,
}

/// Index into [`CONFIDENCE`] of a confidence level, if ministat supports it.
pub fn confidence_index(pct: f64) -> Option<usize> {
    CONFIDENCE.iter().position(|c| *c == pct)
}

/// One data set against the baseline (the first set).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Comparison {
    pub name: String,
    pub baseline: String,
    pub confidence: f64,
    /// avg(set) - avg(baseline)
    pub difference: f64,
    /// The half-width of the confidence interval of the difference.
    pub difference_error: f64,
    pub difference_percent: f64,
    /// The relative error of the percentage (FreeBSD's `re`).
    pub percent_error: f64,
    pub pooled_s: f64,
    /// Whether |difference| exceeds its error: "Difference at X% confidence".
    pub proven: bool,
}

/// FreeBSD ministat's `Relative(ds, rs, confidx)`.
pub fn compare(ds: &Dataset, rs: &Dataset, confidx: usize) -> Comparison {
    let (dn, rn) = (ds.n(), rs.n());
    let z = dn + rn - 2;
    let t = if z > NSTUDENT {
        T[0][confidx]
    } else {
        T[z][confidx]
    };
    let mut spool = (dn - 1) as f64 * ds.var() + (rn - 1) as f64 * rs.var();
    spool /= (dn + rn - 2) as f64;
    spool = spool.sqrt();
    let s = spool * (1.0 / dn as f64 + 1.0 / rn as f64).sqrt();
    let d = ds.avg() - rs.avg();
    let e = t * s;

    let mut re = (dn - 1) as f64 * ds.var()
        + (rn - 1) as f64 * rs.var() * (ds.avg() * ds.avg()) / (rs.avg() * rs.avg());
    re *= (dn + rn) as f64 / ((dn * rn) as f64 * ((dn + rn) as f64 - 2.0));
    re = t * re.sqrt();

    Comparison {
        name: ds.name.clone(),
        baseline: rs.name.clone(),
        confidence: CONFIDENCE[confidx],
        difference: d,
        difference_error: e,
        difference_percent: d * 100.0 / rs.avg(),
        percent_error: re * 100.0 / rs.avg(),
        pooled_s: spool,
        proven: d.abs() > e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_median_is_the_mean_of_the_middle_two() {
        assert_eq!(Dataset::new("a", &[4.0, 1.0, 3.0, 2.0]).median(), 2.5);
        assert_eq!(Dataset::new("a", &[3.0, 1.0, 2.0]).median(), 2.0);
    }

    #[test]
    fn variance_is_the_sample_variance() {
        let d = Dataset::new("a", &[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(d.avg(), 5.0);
        assert!((d.var() - 32.0 / 7.0).abs() < 1e-12);
    }

    #[test]
    fn a_clear_difference_is_proven_and_none_is_not() {
        let a = Dataset::new("a", &[10.0, 11.0, 10.5, 10.2, 10.8]);
        let b = Dataset::new("b", &[20.0, 21.0, 20.5, 20.2, 20.8]);
        let c = compare(&b, &a, 2);
        assert!(c.proven);
        assert!((c.difference - 10.0).abs() < 1e-12);
        let same = compare(&a, &a, 2);
        assert!(!same.proven);
    }

    #[test]
    fn confidence_levels() {
        assert_eq!(confidence_index(95.0), Some(2));
        assert_eq!(confidence_index(99.5), Some(5));
        assert_eq!(confidence_index(97.0), None);
    }
}
