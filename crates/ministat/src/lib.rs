//! FreeBSD's ministat as a library and a command: statistics of data sets,
//! Student's t comparison against the first set, and the ASCII plot, with
//! output identical to current FreeBSD ministat's (usr.bin/ministat).
//!
//! Note that Debian's `ministat` package is an older port: it takes the
//! upper middle point as the median of an even N, computes the variance in
//! one pass, and prints the percentage's error without the relative-error
//! correction. This crate follows current FreeBSD.

pub mod cfmt;
pub mod cli;
pub mod plot;
pub mod read;
pub mod report;
pub mod stats;
pub mod student;

pub use report::{report, text, Options, Report};

/// Data sets ministat compares at once (FreeBSD's MAX_DS - 1: one plot
/// symbol each); [`text`] takes no more.
pub const MAX_SETS: usize = 7;
pub use stats::{compare, Comparison, Dataset, Vitals};
