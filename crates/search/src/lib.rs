//! Throughput searches over a device under test that can run one trial:
//! offer a load for some seconds, count what comes out.
//!
//! - [`equilibrium`]: BSDRP's equilibrium throughput (the seeds' method).
//! - [`binary`]: RFC 2544 section 26.1 throughput, a binary search for the
//!   highest load without loss, with short search trials and full-length
//!   final trials.
//! - [`mlr`]: MLRsearch (RFC 9971): NDR and PDR in one search, trial
//!   durations escalating from short to final.
//! - [`sim`]: a simulated DUT with a known capacity, noise and spurious
//!   loss, for deterministic tests and for comparing the searches' cost.
//!
//! The searches never see the generator. A trial the generator could not
//! offer at the requested rate comes back `valid: false`: it bounds what
//! can be tested, it is never counted as loss in the DUT.
pub mod binary;
pub mod classify;
pub mod cost;
pub mod equilibrium;
pub mod grid;
pub mod mlr;
pub mod selector;
pub mod sim;
mod trial;

pub use trial::{Dut, Measurement, Trial, Trials};
