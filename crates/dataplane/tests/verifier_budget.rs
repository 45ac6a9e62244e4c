//! The router program against the kernel verifier's limit: the verifier
//! processes at most 1M instructions to load a program, and the router's
//! grows with every feature of the fast path. A program near the limit
//! loads today and not after the next change (the compact IPv6 layout's
//! once took 98.5% of it); this keeps a fifth of it free.
use linerate_bpf::{loader, objects};
use linerate_dataplane::ct_cache::cache_sizes;

const VERIFIER_LIMIT: u64 = 1_000_000;

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_router_programs_leave_a_fifth_of_the_verifiers_limit() {
    for (layout, object) in [
        ("wide", objects::ROUTER),
        ("compact", objects::ROUTER_FIB6_COMPACT),
    ] {
        let processed = loader::verifier_processed(object, &cache_sizes()).unwrap();
        let names: Vec<&str> = processed.iter().map(|(n, _)| n.as_str()).collect();
        assert!(
            names.contains(&"router") && names.contains(&"router_mb"),
            "{layout}: every program's statistics: {processed:?}"
        );
        for (name, n) in &processed {
            eprintln!("{layout} layout, {name}: {n} instructions processed");
            assert!(
                *n <= VERIFIER_LIMIT * 4 / 5,
                "{layout} layout, program {name}: the verifier processed {n} of its {VERIFIER_LIMIT} instructions"
            );
        }
    }
}
