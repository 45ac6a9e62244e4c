//! The rulesets of the seeds' stateless firewall slides (AsiaBSDCon 2018,
//! slides 52-53: "rules impact", "table size impact"), as nft text: the
//! lab's DUT configurations (crates/labrun) and `linerate bench firewall`
//! load the same ones.
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

/// An access list as people write one: N rules, N-1 of them `ip daddr
/// 10.A.B.0/24 udp dport P drop` with distinct prefixes and ports, then
/// the one the lab's traffic matches, `ip daddr 198.19.0.0/16 accept`
/// (and the IPv6 receiver side's); policy drop.
pub fn access_list(n: u32) -> String {
    let mut s = String::from(
        "table inet linerate {\n  chain forward {\n    type filter hook forward priority 0; policy drop;\n",
    );
    for i in 1..n {
        let j = i - 1;
        writeln!(
            s,
            "    ip daddr 10.{}.{}.0/24 udp dport {} drop",
            (j >> 8) & 0xff,
            j & 0xff,
            1000 + j % 60000
        )
        .unwrap();
    }
    s.push_str(
        "    ip daddr 198.19.0.0/16 accept\n    ip6 daddr 2001:2:0:8000::/49 accept\n  }\n}\n",
    );
    s
}

/// The seeds' stateful ruleset (ipfw's `check-state` / `keep-state`,
/// pf's `keep state`): established and related connections through, new
/// ones allowed; a packet of neither (invalid) dropped.
pub fn stateful() -> String {
    "table inet linerate {\n  chain forward {\n    type filter hook forward priority 0; policy drop;\n    ct state established,related accept\n    ct state new accept\n  }\n}\n".to_string()
}

/// The stricter one: new connections only from the inside interface
/// (`inside`, the generator's side in the lab), so that the outside
/// answers but never opens.
pub fn stateful_strict(inside: &str) -> String {
    format!("table inet linerate {{\n  chain forward {{\n    type filter hook forward priority 0; policy drop;\n    ct state established,related accept\n    ct state new iifname \"{inside}\" accept\n  }}\n}}\n")
}

/// The stricter one, and what leaves through `outside` masqueraded (an
/// edge router's NAT: the connections' mappings are the kernel's
/// conntrack's).
pub fn stateful_masquerade(inside: &str, outside: &str) -> String {
    let mut s = stateful_strict(inside);
    s.truncate(s.len() - 2);
    s.push_str(&format!(
        "  chain postrouting {{\n    type nat hook postrouting priority srcnat; policy accept;\n    oifname \"{outside}\" masquerade\n  }}\n}}\n"
    ));
    s
}

/// The stricter one, and one-to-one NAT of a public block onto the
/// servers' (a static NAT, as an edge maps its public addresses onto the
/// hosts behind it): new connections from `inside` to 198.19.0.0/17 or
/// 2001:2:0:8000::/50, the lab's receiver side where its profiles send,
/// go to the same host number in 198.19.128.0/17 or 2001:2:0:c000::/50.
/// The mapping is the kernel's conntrack's; replies are mapped back.
pub fn stateful_dnat(inside: &str) -> String {
    let mut s = stateful_strict(inside);
    s.truncate(s.len() - 2);
    s.push_str(&format!(
        "  chain prerouting {{\n    type nat hook prerouting priority dstnat; policy accept;\n    iifname \"{inside}\" dnat ip prefix to ip daddr map {{ 198.19.0.0/17 : 198.19.128.0/17 }}\n    iifname \"{inside}\" dnat ip6 prefix to ip6 daddr map {{ 2001:2:0:8000::/50 : 2001:2:0:c000::/50 }}\n  }}\n}}\n"
    ));
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
    }
}
