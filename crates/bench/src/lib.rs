//! linerate's benchmarks, apart from the libraries they measure (so that
//! the peers they measure against are no dependency of those): `fib`
//! (`linerate bench fib`: our FIB against the prefix-trie and poptrie
//! crates on the same table and keys) and `fastpath` (`linerate bench
//! fastpath`: the router program against bpf_fib_lookup, with
//! BPF_PROG_RUN) and `route_churn` (`linerate bench route-churn`: how far
//! the fast path lags the kernel during a burst of route changes), `bgp`
//! (the same with BIRD and FRR), `conntrack` (finding a connection: the
//! kernel's table through the XDP kfuncs, or a hash of our own), `fw_cache` (a verdict cache's lookup
//! by its shape), `firewall` (the firewall's cost per packet by the
//! ruleset's size) and `punt` (what policing a passed frame costs). The benches under traffic in a lab of their own are
//! linerate-labbench's; `linerate bench gen` is the generator's own, in
//! linerate-traffic.
pub mod bgp;
pub mod conntrack;
pub mod fastpath;
pub mod fib;
pub mod firewall;
pub mod follow;
pub mod fw_cache;
pub mod probe;
pub mod punt;
pub mod route_churn;
pub mod rule_churn;

/// The median of a bench's rounds (ministat's).
pub fn median(v: &[f64]) -> f64 {
    linerate_ministat::Dataset::new("rounds", v).median()
}

/// Ratios over rounds as `1.23x (1.01-1.40)`: the median, the least and
/// the most.
pub fn show_ratios(r: &[f64]) -> String {
    let d = linerate_ministat::Dataset::new("ratios", r);
    format!("{:.2}x ({:.2}-{:.2})", d.median(), d.min(), d.max())
}
