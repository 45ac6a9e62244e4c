//! The names nft prints for numbers: transport protocols (from
//! /etc/protocols, as nft's getprotobyname), ICMP and ICMPv6 types and TCP
//! flags (nft's own tables, src/proto.c and datatype.c), nfproto.
//! A name not known here keeps its rule from being compiled.

/// nft's icmp_type table.
const ICMP_TYPES: &[(&str, u8)] = &[
    ("echo-reply", 0),
    ("destination-unreachable", 3),
    ("source-quench", 4),
    ("redirect", 5),
    ("echo-request", 8),
    ("router-advertisement", 9),
    ("router-solicitation", 10),
    ("time-exceeded", 11),
    ("parameter-problem", 12),
    ("timestamp-request", 13),
    ("timestamp-reply", 14),
    ("info-request", 15),
    ("info-reply", 16),
    ("address-mask-request", 17),
    ("address-mask-reply", 18),
];

/// nft's icmp6_type table.
const ICMPV6_TYPES: &[(&str, u8)] = &[
    ("destination-unreachable", 1),
    ("packet-too-big", 2),
    ("time-exceeded", 3),
    ("parameter-problem", 4),
    ("echo-request", 128),
    ("echo-reply", 129),
    ("mld-listener-query", 130),
    ("mld-listener-report", 131),
    ("mld-listener-done", 132),
    ("mld-listener-reduction", 132),
    ("nd-router-solicit", 133),
    ("nd-router-advert", 134),
    ("nd-neighbor-solicit", 135),
    ("nd-neighbor-advert", 136),
    ("nd-redirect", 137),
    ("router-renumbering", 138),
    ("ind-neighbor-solicit", 141),
    ("ind-neighbor-advert", 142),
    ("mld2-listener-report", 143),
];

const TCP_FLAGS: &[(&str, u8)] = &[
    ("fin", 0x01),
    ("syn", 0x02),
    ("rst", 0x04),
    ("psh", 0x08),
    ("ack", 0x10),
    ("urg", 0x20),
    ("ecn", 0x40),
    ("cwr", 0x80),
];

/// nft's ct_state table (src/ct.c), the kernel's bits.
const CT_STATES: &[(&str, u8)] = &[
    ("invalid", 1),
    ("established", 2),
    ("related", 4),
    ("new", 8),
    ("untracked", 64),
];

/// What kind of symbol a field's values are named by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Protocol,
    IcmpType,
    Icmpv6Type,
    TcpFlag,
    Nfproto,
    CtState,
    CtDirection,
    /// Numbers only.
    Number,
}

pub fn lookup(kind: Kind, name: &str) -> Option<u128> {
    let table = |t: &[(&str, u8)]| t.iter().find(|(n, _)| *n == name).map(|(_, v)| *v as u128);
    match kind {
        Kind::IcmpType => table(ICMP_TYPES),
        Kind::Icmpv6Type => table(ICMPV6_TYPES),
        Kind::TcpFlag => table(TCP_FLAGS),
        Kind::Nfproto => match name {
            "ipv4" => Some(2),
            "ipv6" => Some(10),
            _ => None,
        },
        Kind::Protocol => protocol(name).map(u128::from),
        Kind::CtState => table(CT_STATES),
        Kind::CtDirection => match name {
            "original" => Some(0),
            "reply" => Some(1),
            _ => None,
        },
        Kind::Number => None,
    }
}

/// A transport protocol by name: /etc/protocols (what nft resolves and
/// prints through), then the common ones should the file be missing.
pub fn protocol(name: &str) -> Option<u8> {
    if let Ok(s) = std::fs::read_to_string("/etc/protocols") {
        for line in s.lines() {
            let line = line.split('#').next().unwrap_or("");
            let mut words = line.split_whitespace();
            let (Some(first), Some(number)) = (words.next(), words.next()) else {
                continue;
            };
            if first == name || words.any(|alias| alias == name) {
                return number.parse().ok();
            }
        }
    }
    Some(match name {
        "icmp" => 1,
        "igmp" => 2,
        "tcp" => 6,
        "udp" => 17,
        "ipv6-icmp" | "icmpv6" => 58,
        "esp" => 50,
        "ah" => 51,
        "gre" => 47,
        "sctp" => 132,
        "udplite" => 136,
        "dccp" => 33,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_to_the_kernels_numbers() {
        assert_eq!(lookup(Kind::Protocol, "udp"), Some(17));
        assert_eq!(lookup(Kind::Protocol, "tcp"), Some(6));
        assert_eq!(lookup(Kind::Protocol, "ipv6-icmp"), Some(58));
        assert_eq!(lookup(Kind::IcmpType, "echo-request"), Some(8));
        assert_eq!(lookup(Kind::Icmpv6Type, "nd-neighbor-solicit"), Some(135));
        assert_eq!(lookup(Kind::TcpFlag, "ack"), Some(0x10));
        assert_eq!(lookup(Kind::Nfproto, "ipv6"), Some(10));
        assert_eq!(lookup(Kind::CtState, "established"), Some(2));
        assert_eq!(lookup(Kind::CtState, "untracked"), Some(64));
        assert_eq!(lookup(Kind::CtDirection, "reply"), Some(1));
        assert_eq!(lookup(Kind::Protocol, "no-such-protocol"), None);
        assert_eq!(lookup(Kind::IcmpType, "nd-neighbor-solicit"), None);
    }
}
