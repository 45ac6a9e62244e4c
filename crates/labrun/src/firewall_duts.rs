//! DUT configurations that reproduce the seeds' stateless firewall slides
//! (AsiaBSDCon 2018, slides 52-53: "rules impact", "table size impact"):
//! the lab's traffic crosses N rules and matches the last one, or is
//! looked up in a set of M addresses that does not hold it. The same
//! ruleset under the kernel alone (`linux-nft-rules-N`,
//! `linux-nft-set-M`) and under linerate (`linerate-nft-rules-N`,
//! `linerate-nft-set-M`). An access list as people write one,
//! whose rules each read an address and a port (`...-nft-acl-N`). The
//! rulesets are linerate_firewall::seeds'.
//! And the seeds' stateful ones (`...-nft-stateful`, `...-nft-stateful-strict`:
//! new connections only from the generator's side; `...-nft-stateful-masquerade`:
//! that, and what leaves through dut1 masqueraded; `...-nft-stateful-dnat`:
//! that, and the receiver's side mapped one-to-one from a public block), whose runs first
//! establish the profile's flows (scenario::DutDef::establish).

/// Whether a built-in firewall configuration is a stateful one.
pub fn is_stateful(name: &str) -> bool {
    name.ends_with("-nft-stateful")
        || name.ends_with("-nft-stateful-strict")
        || name.ends_with("-nft-stateful-masquerade")
        || name.ends_with("-nft-stateful-dnat")
}

/// The conntrack limits the stateful configurations set for their runs:
/// room for a million connections and more, a bucket for every two.
pub const STATEFUL_CONNTRACK_MAX: u64 = 2_000_000;
pub const STATEFUL_CONNTRACK_BUCKETS: u64 = 1 << 20;

use linerate_firewall::seeds::{access_list, rules, set, RULES, SET_SIZES};

/// The ruleset a built-in firewall configuration names, and whether
/// linerate forwards (else the kernel alone).
pub fn by_name(name: &str) -> Option<(bool, String)> {
    let (linerate, rest) = if let Some(r) = name.strip_prefix("linux-nft-") {
        (false, r)
    } else {
        (true, name.strip_prefix("linerate-nft-")?)
    };
    match rest {
        "stateful" => return Some((linerate, linerate_firewall::seeds::stateful())),
        "stateful-strict" => {
            return Some((linerate, linerate_firewall::seeds::stateful_strict("dut0")))
        }
        "stateful-masquerade" => {
            return Some((
                linerate,
                linerate_firewall::seeds::stateful_masquerade("dut0", "dut1"),
            ))
        }
        "stateful-dnat" => {
            return Some((linerate, linerate_firewall::seeds::stateful_dnat("dut0")))
        }
        _ => {}
    }
    if let Some(n) = rest.strip_prefix("rules-") {
        let n: u32 = n.parse().ok()?;
        return RULES.contains(&n).then(|| (linerate, rules(n)));
    }
    if let Some(n) = rest.strip_prefix("acl-") {
        let n: u32 = n.parse().ok()?;
        return RULES.contains(&n).then(|| (linerate, access_list(n)));
    }
    let m: u32 = rest.strip_prefix("set-")?.parse().ok()?;
    SET_SIZES.contains(&m).then(|| (linerate, set(m)))
}

/// Every built-in firewall configuration's name.
pub fn names() -> Vec<String> {
    let mut v = Vec::new();
    for who in ["linux", "linerate"] {
        v.extend(RULES.iter().map(|n| format!("{who}-nft-rules-{n}")));
        v.extend(SET_SIZES.iter().map(|m| format!("{who}-nft-set-{m}")));
        v.extend(RULES.iter().map(|n| format!("{who}-nft-acl-{n}")));
        v.push(format!("{who}-nft-stateful"));
        v.push(format!("{who}-nft-stateful-strict"));
        v.push(format!("{who}-nft-stateful-masquerade"));
        v.push(format!("{who}-nft-stateful-dnat"));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_which_ruleset_and_which_router() {
        assert_eq!(by_name("linux-nft-rules-1000").map(|r| r.0), Some(false));
        assert_eq!(by_name("linerate-nft-set-1000000").map(|r| r.0), Some(true));
        assert_eq!(by_name("linux-nft-rules-7"), None);
        assert_eq!(by_name("linux-nft-set-x"), None);
        assert_eq!(names().len(), 32);
        let acl = by_name("linux-nft-acl-10000").unwrap();
        assert!(
            !acl.0
                && acl
                    .1
                    .contains("ip daddr 10.39.14.0/24 udp dport 10998 drop")
        );
        let strict = by_name("linerate-nft-stateful-strict").unwrap();
        assert!(strict.0 && strict.1.contains("ct state new iifname \"dut0\" accept"));
        let masq = by_name("linux-nft-stateful-masquerade").unwrap();
        assert!(!masq.0 && masq.1.contains("oifname \"dut1\" masquerade"));
        assert!(masq.1.contains("ct state new iifname \"dut0\" accept"));
        assert!(is_stateful("linerate-nft-stateful-masquerade"));
        let dnat = by_name("linerate-nft-stateful-dnat").unwrap();
        assert!(dnat.0 && dnat.1.contains("dnat ip prefix to ip daddr map"));
        assert!(is_stateful("linux-nft-stateful-dnat"));
        assert!(is_stateful("linux-nft-stateful") && !is_stateful("linux-nft-rules-1"));
        let def = crate::scenario::builtin_dut("linux-nft-stateful").unwrap();
        assert!(def.establish && def.conntrack_max == Some(STATEFUL_CONNTRACK_MAX));
        // The scenario's list of built-ins names them.
        let listed = crate::scenario::BUILTIN_DUTS.join(", ");
        for n in RULES.iter().chain(SET_SIZES) {
            assert!(listed.contains(&n.to_string()), "{listed}");
        }
    }
}
