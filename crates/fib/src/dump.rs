//! Route dumps as text: `PREFIX NEXTHOP` per line, or `ip route` /
//! `ip -6 route` output. Next hops are numbers (ids) or names (a gateway
//! address, `dev eth0`), which get ids in order of first appearance. Any
//! bad line fails the whole load, naming the line and the reason.
use crate::key::Key;
use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::net::IpAddr;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dump<K> {
    pub routes: Vec<(K, u8, u32)>,
    /// Names of next hops given as names: id `i + 1` is `names[i]`.
    pub names: Vec<String>,
}

/// Parses a dump of one family (`K` = u32 for IPv4, u128 for IPv6).
pub fn parse<K: Key>(text: &str, source: &str) -> Result<Dump<K>> {
    let mut routes = Vec::new();
    let mut ids: HashMap<String, u32> = HashMap::new();
    let mut names = Vec::new();
    let mut seen: HashMap<(K, u8), usize> = HashMap::new();
    for (n, raw) in text.lines().enumerate() {
        let line_no = n + 1;
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (addr, len, hop) =
            parse_line::<K>(line).with_context(|| format!("{source}: line {line_no}: {raw:?}"))?;
        if let Some(prev) = seen.insert((addr, len), line_no) {
            bail!("{source}: line {line_no}: duplicate prefix (also on line {prev})");
        }
        let id = match hop.parse::<u32>() {
            Ok(id) => {
                if id == 0 || id > crate::MAX_NEXTHOP {
                    bail!(
                        "{source}: line {line_no}: next-hop id {id} is out of range 1..={}",
                        crate::MAX_NEXTHOP
                    );
                }
                id
            }
            Err(_) => *ids.entry(hop.clone()).or_insert_with(|| {
                names.push(hop.clone());
                names.len() as u32
            }),
        };
        routes.push((addr, len, id));
    }
    Ok(Dump { routes, names })
}

/// One line: `PREFIX NEXTHOP` or `ip route`'s `[default|PREFIX] [via GW] [dev DEV] ...`.
/// `ip route show table` output as [`parse`] reads it: each route one
/// line, `PREFIX NEXT-HOP`. A route that does not forward (blackhole,
/// unreachable, throw, local, ...) and a multipath route (its members on
/// the lines after it) each take an entry of the table all the same,
/// under a next hop named by its kind.
pub fn kernel_table(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            // A multipath route's members.
            _ if line.starts_with(char::is_whitespace) => {}
            [] => {}
            [kind, prefix, ..] if NOT_FORWARDING.contains(kind) => {
                out += &format!("{prefix} {kind}\n")
            }
            [prefix, rest @ ..] if !rest.contains(&"via") && !rest.contains(&"dev") => {
                out += &format!("{prefix} multipath\n")
            }
            _ => out += &format!("{line}\n"),
        }
    }
    out
}

/// The route types `ip route` names before a prefix, unicast apart: routes
/// that do not forward through a next hop.
const NOT_FORWARDING: [&str; 9] = [
    "blackhole",
    "unreachable",
    "prohibit",
    "local",
    "broadcast",
    "throw",
    "multicast",
    "anycast",
    "nat",
];

fn parse_line<K: Key>(line: &str) -> Result<(K, u8, String)> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut i = 0;
    if words[0] == "unicast" || NOT_FORWARDING.contains(&words[0]) {
        if words[0] != "unicast" {
            bail!("{} routes are not forwarding routes", words[0]);
        }
        i = 1;
    }
    let Some(prefix) = words.get(i) else {
        bail!("no prefix");
    };
    let (addr, len) = parse_prefix::<K>(prefix)?;
    let rest = &words[i + 1..];
    let hop = if let Some(p) = rest.iter().position(|w| *w == "via") {
        let gw = rest
            .get(p + 1)
            .ok_or_else(|| anyhow::anyhow!("`via` without a gateway"))?;
        // `via inet6 ADDR` names the family first.
        let gw = if *gw == "inet" || *gw == "inet6" {
            rest.get(p + 2).copied().unwrap_or("")
        } else {
            gw
        };
        gw.parse::<IpAddr>()
            .map_err(|_| anyhow::anyhow!("gateway {gw:?} is not an address"))?;
        gw.to_string()
    } else if let Some(p) = rest.iter().position(|w| *w == "dev") {
        let dev = rest
            .get(p + 1)
            .ok_or_else(|| anyhow::anyhow!("`dev` without a device"))?;
        format!("dev {dev}")
    } else if rest.len() == 1 {
        rest[0].to_string()
    } else if rest.is_empty() {
        bail!("no next hop");
    } else {
        bail!("cannot tell the next hop in {:?}", rest.join(" "));
    };
    Ok((addr, len, hop))
}

pub fn parse_prefix<K: Key>(s: &str) -> Result<(K, u8)> {
    if s == "default" {
        return Ok((K::from_u128(0), 0));
    }
    let (a, l) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let ip: IpAddr = a
        .parse()
        .map_err(|_| anyhow::anyhow!("{a:?} is not an address"))?;
    let (v, bits) = match ip {
        IpAddr::V4(v4) if K::BITS == 32 => (u32::from(v4) as u128, 32),
        IpAddr::V6(v6) if K::BITS == 128 => (u128::from(v6), 128),
        _ => bail!(
            "{s} is not an {} prefix",
            if K::BITS == 32 { "IPv4" } else { "IPv6" }
        ),
    };
    let len: u8 = match l {
        None => bits,
        Some(l) => l
            .parse()
            .ok()
            .filter(|&n: &u8| n <= bits)
            .ok_or_else(|| anyhow::anyhow!("prefix length {l:?} is not 0..={bits}"))?,
    };
    let k = K::from_u128(v);
    if k.mask(len) != k {
        bail!(
            "{s} has host bits set (did you mean {}?)",
            show(k.mask(len), len)
        );
    }
    Ok((k, len))
}

/// A prefix as text.
pub fn show<K: Key>(a: K, len: u8) -> String {
    if K::BITS == 32 {
        format!("{}/{len}", std::net::Ipv4Addr::from(a.to_u128() as u32))
    } else {
        format!("{}/{len}", std::net::Ipv6Addr::from(a.to_u128()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel table's listing: every route an entry, those that do not
    /// forward and multipath ones under their kind.
    #[test]
    fn a_kernel_tables_listing_is_read_route_by_route() {
        let listed = "default via 198.19.0.1 dev dut1 proto static\n\
            blackhole 10.0.0.0/8 proto static\n\
            throw 10.1.0.0/16\n\
            198.18.0.0/24 dev dut0 proto kernel scope link src 198.18.0.254\n\
            198.51.100.0/24 proto static\n\
            \tnexthop via 198.19.0.2 dev dut1 weight 1\n\
            \tnexthop via 198.19.0.3 dev dut1 weight 1\n";
        let d = parse::<u32>(&kernel_table(listed), "test").unwrap();
        assert_eq!(d.routes.len(), 5);
        assert_eq!(
            d.names,
            ["198.19.0.1", "blackhole", "throw", "dev dut0", "multipath"]
        );
    }

    #[test]
    fn ip_route_output() {
        let text = "default via 192.0.2.1 dev eth0 proto static\n\
                    10.0.0.0/8 via 192.0.2.2 dev eth0\n\
                    192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.10\n\
                    198.51.100.7 via 192.0.2.1 dev eth0 # a host route\n\
                    \n\
                    unicast 203.0.113.0/24 via 192.0.2.2 dev eth0\n";
        let d: Dump<u32> = parse(text, "t").unwrap();
        assert_eq!(d.names, ["192.0.2.1", "192.0.2.2", "dev eth0"]);
        assert_eq!(
            d.routes,
            vec![
                (0, 0, 1),
                (0x0a00_0000, 8, 2),
                (0xc000_0200, 24, 3),
                (0xc633_6407, 32, 1),
                (0xcb00_7100, 24, 2)
            ]
        );
    }

    #[test]
    fn plain_and_ipv6() {
        let d: Dump<u128> = parse(
            "2001:db8::/32 7\n::/0 fe80::1\n2001:db8:1::/48 via inet6 fe80::2 dev x\n",
            "t",
        )
        .unwrap();
        assert_eq!(d.routes[0], (0x2001_0db8u128 << 96, 32, 7));
        assert_eq!(d.routes[1], (0, 0, 1));
        assert_eq!(d.names, ["fe80::1", "fe80::2"]);
    }

    #[test]
    fn bad_lines_name_the_line_and_load_nothing() {
        for (text, why) in [
            ("10.0.0.0/8 1\n10.0.0.0/33 1\n", "line 2"),
            ("10.0.0.1/8 1\n", "host bits"),
            ("10.0.0.0/8\n", "no next hop"),
            ("blackhole 10.0.0.0/8\n", "not forwarding"),
            ("2001:db8::/32 1\n", "not an IPv4"),
            ("10.0.0.0/8 0\n", "out of range"),
            (
                "10.0.0.0/8 1\n10.0.0.0/8 2\n",
                "duplicate prefix (also on line 1)",
            ),
            ("10.0.0.0/8 via nowhere\n", "not an address"),
            ("banana 1\n", "not an address"),
        ] {
            let e = format!("{:#}", parse::<u32>(text, "dump.txt").unwrap_err());
            assert!(e.starts_with("dump.txt: line"), "{text:?}: {e}");
            assert!(e.contains(why), "{text:?}: {e}");
        }
    }
}
