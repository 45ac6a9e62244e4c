//! Flow ranges, written like netmap pkt-gen's `-s`/`-d` arguments:
//! `ADDR[-ADDR][:PORT[-PORT]]`.
use anyhow::{bail, Context, Result};
use std::net::IpAddr;

/// An inclusive range of addresses and one of ports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoints {
    pub first: IpAddr,
    pub last: IpAddr,
    pub port_first: u16,
    pub port_last: u16,
}

impl Endpoints {
    /// Number of addresses in the range.
    pub fn addr_count(&self) -> u64 {
        addr_low32(self.last) as u64 - addr_low32(self.first) as u64 + 1
    }
    pub fn port_count(&self) -> u32 {
        self.port_last as u32 - self.port_first as u32 + 1
    }
    pub fn is_ipv6(&self) -> bool {
        self.first.is_ipv6()
    }
}

/// The low 32 bits of an address: what the generator varies.
pub fn addr_low32(a: IpAddr) -> u32 {
    match a {
        IpAddr::V4(v4) => u32::from(v4),
        IpAddr::V6(v6) => (u128::from(v6) & 0xffff_ffff) as u32,
    }
}

/// Parses a pkt-gen style range, `ADDR[:PORT][-ADDR[:PORT]]` or
/// `ADDR:PORT-PORT`, also `ADDR-ADDR:PORT`; IPv6 as `ADDR[-ADDR]`,
/// `[ADDR]:PORT-[ADDR]:PORT` or `[ADDR-ADDR]:PORT[-PORT]`. `what` names the
/// option in errors.
pub fn parse(what: &str, s: &str, default_port: u16) -> Result<Endpoints> {
    let (lo, hi) = split_range(s);
    let (a, pa) = split_port(lo);
    let (first, last, port_first, port_last) = match hi {
        None => {
            // A bare address, or the bracketed range of `[A-B]:P`.
            let (x, y) = a.split_once('-').unwrap_or((a, a));
            let p = port_range(what, pa, default_port)?;
            (addr(what, x)?, addr(what, y)?, p.0, p.1)
        }
        // ADDR:PORT-PORT: one address, a port range.
        Some(h) if !h.is_empty() && h.chars().all(|c| c.is_ascii_digit()) && pa.is_some() => {
            let p = port_range(what, Some(&format!("{}-{h}", pa.unwrap())), default_port)?;
            (addr(what, a)?, addr(what, a)?, p.0, p.1)
        }
        Some(h) => {
            let (b, pb) = split_port(h);
            let (p0, p1) = match (pa, pb) {
                (None, None) => (default_port, default_port),
                (Some(x), None) | (None, Some(x)) => port_range(what, Some(x), default_port)?,
                (Some(x), Some(y)) => port_range(what, Some(&format!("{x}-{y}")), default_port)?,
            };
            (addr(what, a)?, addr(what, b)?, p0, p1)
        }
    };
    if first.is_ipv4() != last.is_ipv4() {
        bail!("{what}: {first} and {last} are not of the same family");
    }
    if let (IpAddr::V6(f), IpAddr::V6(l)) = (first, last) {
        if u128::from(f) >> 32 != u128::from(l) >> 32 {
            bail!("{what}: IPv6 ranges may differ only in the low 32 bits ({first} - {last})");
        }
    }
    if addr_low32(last) < addr_low32(first) {
        bail!("{what}: address range {first}-{last} is inverted");
    }
    Ok(Endpoints {
        first,
        last,
        port_first,
        port_last,
    })
}

fn addr(what: &str, s: &str) -> Result<IpAddr> {
    s.parse()
        .with_context(|| format!("{what}: {s:?} is not an IP address"))
}

fn port_range(what: &str, p: Option<&str>, default_port: u16) -> Result<(u16, u16)> {
    let Some(p) = p else {
        return Ok((default_port, default_port));
    };
    let (x, y) = p.split_once('-').unwrap_or((p, p));
    let x: u16 = x
        .parse()
        .with_context(|| format!("{what}: {x:?} is not a port"))?;
    let y: u16 = y
        .parse()
        .with_context(|| format!("{what}: {y:?} is not a port"))?;
    if y < x {
        bail!("{what}: port range {x}-{y} is inverted");
    }
    Ok((x, y))
}

/// Splits at the range dash that is outside brackets; `[A-B]:P` is first
/// rewritten by the caller's split_port.
fn split_range(s: &str) -> (&str, Option<&str>) {
    if let Some(rest) = s.strip_prefix('[') {
        // [A-B]:P[-Q] keeps the range inside the brackets: no split here.
        if let Some(close) = rest.find(']') {
            if rest[..close].contains('-') {
                return (s, None);
            }
            let after = &s[close + 2..];
            if let Some(d) = after.find("-[") {
                let cut = close + 2 + d;
                return (&s[..cut], Some(&s[cut + 1..]));
            }
            return (s, None);
        }
    }
    match s.split_once('-') {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    }
}

/// `ADDR:PORT` for IPv4, `[ADDR]:PORT` for IPv6; a bare IPv6 address has
/// no port. `[A-B]:P` yields `A-B` as the address part.
fn split_port(s: &str) -> (&str, Option<&str>) {
    if let Some(rest) = s.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((a, p)) => (a, p.strip_prefix(':').filter(|p| !p.is_empty())),
            None => (rest, None),
        };
    }
    if s.matches(':').count() == 1 {
        let (a, p) = s.split_once(':').unwrap();
        return (a, Some(p));
    }
    (s, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pktgen_style_ranges() {
        // BSDRP's own command line.
        let e = parse("-s", "198.18.10.1:2000-198.18.10.20", 9).unwrap();
        assert_eq!(
            (e.addr_count(), e.port_first, e.port_last),
            (20, 2000, 2000)
        );
        let e = parse("-s", "198.18.10.1:2000-198.18.10.20:2003", 9).unwrap();
        assert_eq!((e.addr_count(), e.port_count()), (20, 4));
        let e = parse("-s", "198.18.10.1-198.18.10.20:2000", 9).unwrap();
        assert_eq!(
            (e.addr_count(), e.port_first, e.port_last),
            (20, 2000, 2000)
        );
        let d = parse("-d", "198.19.10.1-198.19.10.100", 2000).unwrap();
        assert_eq!((d.addr_count(), d.port_count()), (100, 1));
        let p = parse("-d", "10.0.0.1:1000-1009", 0).unwrap();
        assert_eq!(p.port_count(), 10);
    }

    #[test]
    fn ipv6_ranges() {
        let e = parse("-s", "2001:2::1-2001:2::10", 9).unwrap();
        assert!(e.is_ipv6());
        assert_eq!(e.addr_count(), 16);
        let b = parse("-s", "[2001:2::1-2001:2::2]:7-8", 9).unwrap();
        assert_eq!((b.addr_count(), b.port_first, b.port_last), (2, 7, 8));
        assert!(parse("-s", "2001:2::1-2001:3::1", 9)
            .unwrap_err()
            .to_string()
            .contains("low 32 bits"));
    }

    #[test]
    fn bad_ranges_name_the_option() {
        for bad in [
            "198.18.0.9-198.18.0.1",
            "1.2.3.4:9-8",
            "1.2.3.4-2001::1",
            "nonsense",
            "1.2.3.4:x",
        ] {
            let e = parse("-d", bad, 9).unwrap_err().to_string();
            assert!(e.starts_with("-d:"), "{bad}: {e}");
        }
    }
}
