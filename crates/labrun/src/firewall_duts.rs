//! DUT configurations that reproduce the seeds' stateless firewall slides
//! (AsiaBSDCon 2018, slides 52-53: "rules impact", "table size impact"):
//! the lab's traffic crosses N rules and matches the last one, or is
//! looked up in a set of M addresses that does not hold it. The same
//! ruleset under the kernel alone (`linux-nft-rules-N`,
//! `linux-nft-set-M`) and under linerate (`linerate-nft-rules-N`,
//! `linerate-nft-set-M`).
use std::fmt::Write;

/// The rule counts and set sizes named by built-in configurations.
pub const RULES: &[u32] = &[1, 100, 1000, 10000];
pub const SET_SIZES: &[u32] = &[1, 1000, 100_000, 1_000_000];

/// N rules in the forward chain, each read by both families, the last
/// the one the lab's traffic (UDP) matches: `meta l4proto tcp th dport P
/// drop` for N-1 distinct ports, then `meta l4proto udp accept`.
pub fn rules(n: u32) -> String {
    let mut s = String::from(
        "table inet linerate {\n  chain forward {\n    type filter hook forward priority 0; policy drop;\n",
    );
    for i in 1..n {
        // Ports 1..=65535, then again: the rules stay distinct by their
        // place, and none matches UDP.
        writeln!(
            s,
            "    meta l4proto tcp th dport {} drop",
            (i - 1) % 65535 + 1
        )
        .unwrap();
    }
    s.push_str("    meta l4proto udp accept\n  }\n}\n");
    s
}

/// Sets of M IPv4 and M IPv6 source addresses the lab's traffic is not
/// from (100.64.0.0/10 and 2001:db8::/32), looked up for every packet,
/// then the rule it matches.
pub fn set(m: u32) -> String {
    let mut s = String::from("table inet linerate {\n  set blocked4 {\n    type ipv4_addr\n");
    elements(&mut s, m, |i| {
        let a = (100u32 << 24 | 64 << 16) + i;
        std::net::Ipv4Addr::from(a).to_string()
    });
    s.push_str("  }\n  set blocked6 {\n    type ipv6_addr\n");
    elements(&mut s, m, |i| {
        let a = (0x2001_0db8u128 << 96) | i as u128;
        std::net::Ipv6Addr::from(a).to_string()
    });
    s.push_str(
        "  }\n  chain forward {\n    type filter hook forward priority 0; policy drop;\n    ip saddr @blocked4 drop\n    ip6 saddr @blocked6 drop\n    meta l4proto udp accept\n  }\n}\n",
    );
    s
}

fn elements(s: &mut String, m: u32, addr: impl Fn(u32) -> String) {
    s.push_str("    elements = {");
    for i in 0..m {
        if i % 8 == 0 {
            s.push_str("\n     ");
        }
        write!(s, " {},", addr(i)).unwrap();
    }
    s.push_str("\n    }\n");
}

/// The ruleset a built-in firewall configuration names, and whether
/// linerate forwards (else the kernel alone).
pub fn by_name(name: &str) -> Option<(bool, String)> {
    let (linerate, rest) = if let Some(r) = name.strip_prefix("linux-nft-") {
        (false, r)
    } else {
        (true, name.strip_prefix("linerate-nft-")?)
    };
    if let Some(n) = rest.strip_prefix("rules-") {
        let n: u32 = n.parse().ok()?;
        return RULES.contains(&n).then(|| (linerate, rules(n)));
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
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rulesets_hold_what_their_names_say() {
        let r = rules(100);
        assert_eq!(r.matches("drop\n").count(), 99);
        assert!(r.contains("th dport 99 drop") && r.ends_with("udp accept\n  }\n}\n"));
        assert_eq!(rules(1).matches(" drop\n").count(), 0);
        let s = set(1000);
        assert_eq!(s.matches("100.64.").count(), 1000);
        assert!(s.contains(" 100.64.3.231,") && !s.contains(" 100.64.3.232,"));
        assert_eq!(s.matches("2001:db8::").count(), 1000);
        assert_eq!(by_name("linux-nft-rules-1000").map(|r| r.0), Some(false));
        assert_eq!(by_name("linerate-nft-set-1000000").map(|r| r.0), Some(true));
        assert_eq!(by_name("linux-nft-rules-7"), None);
        assert_eq!(by_name("linux-nft-set-x"), None);
        assert_eq!(names().len(), 16);
        // The scenario's list of built-ins names them.
        let listed = crate::scenario::BUILTIN_DUTS.join(", ");
        for n in RULES.iter().chain(SET_SIZES) {
            assert!(listed.contains(&n.to_string()), "{listed}");
        }
    }
}
