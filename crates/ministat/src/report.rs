//! The whole ministat report, as text (byte for byte FreeBSD's) or as a
//! value for JSON.
use crate::cfmt::{g, g_width};
use crate::plot::{plot, SYMBOL};
use crate::stats::{compare, Comparison, Dataset, Vitals};
use crate::student::CONFIDENCE;
use serde::Serialize;

#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Index into CONFIDENCE (default 2: 95%).
    pub confidence: usize,
    /// Plot width inside the frame (74 when not on a terminal).
    pub width: usize,
    /// -s: one bar per data set.
    pub separate_bars: bool,
    /// -n: statistics only, no plot, no test.
    pub stats_only: bool,
    /// -A: no plot (statistics and test).
    pub no_plot: bool,
    /// -q: no data set names, no table header.
    pub quiet: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            confidence: 2,
            width: 74,
            separate_bars: false,
            stats_only: false,
            no_plot: false,
            quiet: false,
        }
    }
}

pub const VITALS_HEAD: &str =
    "    N           Min           Max        Median           Avg        Stddev\n";

fn vitals_line(v: &Vitals, symbol: u8) -> String {
    format!(
        "{} {:>3} {} {} {} {} {}\n",
        symbol as char,
        v.n,
        g_width(v.min, 13, 8),
        g_width(v.max, 13, 8),
        g_width(v.median, 13, 8),
        g_width(v.avg, 13, 8),
        g_width(v.stddev, 13, 8)
    )
}

/// The "Difference at ..." or "No difference proven at ..." block.
pub fn comparison_text(c: &Comparison) -> String {
    if c.proven {
        format!(
            "Difference at {:.1}% confidence\n\t{} +/- {}\n\t{}% +/- {}%\n\t(Student's t, pooled s = {})\n",
            c.confidence,
            g(c.difference, 6),
            g(c.difference_error, 6),
            g(c.difference_percent, 6),
            g(c.percent_error, 6),
            g(c.pooled_s, 6)
        )
    } else {
        format!("No difference proven at {:.1}% confidence\n", c.confidence)
    }
}

/// ministat's output for `sets` (the first is the baseline; at most
/// [`crate::MAX_SETS`], as FreeBSD's, which has a plot symbol for no more).
pub fn text(sets: &[Dataset], o: &Options) -> String {
    assert!(
        sets.len() <= crate::MAX_SETS,
        "ministat compares at most {} data sets, got {}",
        crate::MAX_SETS,
        sets.len()
    );
    let mut out = String::new();
    if !o.quiet {
        for (i, ds) in sets.iter().enumerate() {
            out.push_str(&format!("{} {}\n", SYMBOL[i + 1] as char, ds.name));
        }
    }
    if !o.stats_only && !o.no_plot {
        out.push_str(&plot(sets, o.width, o.separate_bars));
    }
    if !o.quiet {
        out.push_str(VITALS_HEAD);
    }
    out.push_str(&vitals_line(&sets[0].vitals(), SYMBOL[1]));
    for (i, ds) in sets.iter().enumerate().skip(1) {
        out.push_str(&vitals_line(&ds.vitals(), SYMBOL[i + 1]));
        if !o.stats_only {
            out.push_str(&comparison_text(&compare(ds, &sets[0], o.confidence)));
        }
    }
    out
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub confidence: f64,
    pub datasets: Vec<Vitals>,
    pub comparisons: Vec<Comparison>,
}

/// The same statistics as a value.
pub fn report(sets: &[Dataset], confidence: usize) -> Report {
    Report {
        confidence: CONFIDENCE[confidence],
        datasets: sets.iter().map(Dataset::vitals).collect(),
        comparisons: sets
            .iter()
            .skip(1)
            .map(|ds| compare(ds, &sets[0], confidence))
            .collect(),
    }
}
