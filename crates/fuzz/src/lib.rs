//! The bodies of linerate's fuzz targets: each takes arbitrary bytes and
//! must return, whatever they are, without a panic (a refusal is an
//! answer). `fuzz/` holds the cargo-fuzz targets that call them, their
//! corpora and the inputs of every crash found (`fuzz/regressions/`);
//! `scripts/fuzz.sh` runs each for a given time; `tests/corpora.rs` runs
//! every committed input through them on stable, as a test.
use std::collections::BTreeMap;

/// A target's body.
pub type Body = fn(&[u8]);

/// The targets, by name: `fuzz/fuzz_targets/NAME.rs` calls the body.
pub const TARGETS: &[(&str, Body)] = &[
    ("netlink", netlink),
    ("nft_json", nft_json),
    ("config", config),
    ("scenario", scenario),
];

/// Netlink messages as a socket reads them (routes, links, neighbours,
/// addresses, rules, nexthop objects, netconf, tc, nftables, conntrack):
/// every parser on each (linerate_netlink::read_all), then the mirror
/// applying what the router would apply, over the model of the fast path.
/// One mirror serves a process's inputs (a new one zeroes the FIB's
/// hundreds of MiB: 90 inputs a second), emptied before each by a resync
/// with nothing, the router's path when the kernel's tables are gone.
pub fn netlink(data: &[u8]) {
    let changes = linerate_netlink::read_all::read_all(data);
    MIRROR.with(|m| {
        let mut m = m.borrow_mut();
        let _ = m.resync(&[]);
        for c in &changes {
            let _ = m.apply_change(c);
        }
        let _ = m.routing();
    });
}

thread_local! {
    static MIRROR: std::cell::RefCell<linerate_router::mirror::Mirror<linerate_dataplane::model::Model>> =
        std::cell::RefCell::new(mirror());
}

/// A mirror over the model.
fn mirror() -> linerate_router::mirror::Mirror<linerate_dataplane::model::Model> {
    let model = linerate_dataplane::model::Model::new(linerate_fib::Ipv6Layout::default());
    linerate_router::mirror::Mirror::new(model).expect("a mirror over the model")
}

/// `nft -j list ruleset`'s JSON: read, then compiled (classifiers and all)
/// as the firewall's thread compiles it.
pub fn nft_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let names = BTreeMap::from([(7u32, "dut0".to_string()), (8, "dut1".to_string())]);
    let index = |n: &str| names.iter().find(|(_, v)| *v == n).map(|(i, _)| *i);
    if let Ok(ruleset) = linerate_firewall::read::parse(text, &index) {
        let _ = linerate_firewall::compile::Compiled::new(1, &ruleset, names.clone(), true);
    }
}

/// The router's configuration file.
pub fn config(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = linerate_daemon::config::Loaded::parse("fuzz.toml", text);
    }
}

/// A lab scenario.
pub fn scenario(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = linerate_labrun::scenario::Scenario::parse("fuzz.toml", text);
    }
}
