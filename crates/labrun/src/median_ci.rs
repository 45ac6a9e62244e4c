//! How sure a median of a few rounds is: the distribution-free confidence
//! interval of a median from order statistics (the sign test's interval).
//!
//! Of `n` values, the median lies below the k-th smallest with probability
//! P(B < k) and above the k-th largest with the same probability, where B
//! counts heads in n fair coin flips, whatever the values' distribution.
//! So [x(k), x(n+1-k)] covers the median with probability 1 - 2 P(B < k);
//! the interval given is the narrowest whose coverage is at least the
//! confidence asked for, with its exact coverage. No resampling, nothing
//! assumed about the shape: the lab's rounds are few and skewed (a host
//! that slows down for a minute), which is where a normal interval lies.

/// An interval of a median and the probability that it covers it.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct MedianInterval {
    pub low: f64,
    pub high: f64,
    /// The exact coverage, at least the confidence asked for.
    pub coverage: f64,
}

/// The interval of the median of `values` at `confidence` (0.95 for 95%),
/// or None when there are too few values for any interval to reach it
/// (fewer than 6 at 95%: even the range covers only 1 - 2/2^n).
pub fn median_interval(values: &[f64], confidence: f64) -> Option<MedianInterval> {
    let n = values.len();
    let (k, coverage) = rank(n, confidence)?;
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(MedianInterval {
        low: sorted[k - 1],
        high: sorted[n - k],
        coverage,
    })
}

/// The largest k (1-based) with 1 - 2 P(B < k) >= confidence, B binomial
/// (n, 1/2), and that coverage.
fn rank(n: usize, confidence: f64) -> Option<(usize, f64)> {
    if n == 0 || n > 1000 {
        // 2^-n underflows past about a thousand; no lab runs that many.
        return None;
    }
    let mut pmf = 0.5f64.powi(n as i32); // P(B = 0)
    let mut below = 0.0; // P(B < k), for k = 1 after the first step
    let mut best = None;
    for k in 1..=n.div_ceil(2) {
        below += pmf;
        let coverage = 1.0 - 2.0 * below;
        if coverage < confidence {
            break;
        }
        best = Some((k, coverage));
        // P(B = k) from P(B = k - 1).
        pmf *= (n - (k - 1)) as f64 / k as f64;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1 - 2 P(B < k) in exact integers, an independent way to the same
    /// number.
    fn exact_coverage(n: u32, k: u32) -> f64 {
        let choose = |n: u128, r: u128| (0..r).fold(1u128, |c, i| c * (n - i) / (i + 1));
        let below: u128 = (0..k).map(|i| choose(n as u128, i as u128)).sum();
        1.0 - 2.0 * below as f64 / 2f64.powi(n as i32)
    }

    #[test]
    fn the_rank_is_the_largest_whose_exact_coverage_reaches_95_percent() {
        for n in 1..=100u32 {
            let want = (1..=n.div_ceil(2))
                .filter(|&k| exact_coverage(n, k) >= 0.95)
                .max();
            let got = rank(n as usize, 0.95);
            assert_eq!(got.map(|g| g.0 as u32), want, "n = {n}");
            if let (Some(g), Some(k)) = (got, want) {
                assert!((g.1 - exact_coverage(n, k)).abs() < 1e-12, "n = {n}");
            }
        }
    }

    #[test]
    fn known_ranks_of_small_samples() {
        // Fewer than 6 values: even min..max covers less than 95%.
        assert_eq!(rank(5, 0.95), None);
        assert_eq!(rank(6, 0.95).unwrap().0, 1);
        assert_eq!(rank(10, 0.95).unwrap().0, 2);
        assert_eq!(rank(60, 0.95).unwrap().0, 22);
    }

    #[test]
    fn the_interval_is_order_statistics_of_the_values_in_any_order() {
        let v = [0.9, 0.7, 1.0, 0.8, 0.95, 0.85, 0.75, 0.65, 1.05, 0.88];
        let i = median_interval(&v, 0.95).unwrap();
        // Sorted: 0.65 0.7 0.75 0.8 0.85 0.88 0.9 0.95 1.0 1.05; k = 2.
        assert_eq!((i.low, i.high), (0.7, 1.0));
        assert!((i.coverage - 0.978515625).abs() < 1e-12);
        assert_eq!(median_interval(&v[..5], 0.95), None);
    }
}
