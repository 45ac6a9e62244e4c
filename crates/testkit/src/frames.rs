//! Frames built by field (etherparse's builders) rather than written by
//! byte offset, so that a test says what a frame is.
use crate::plane::MAC_IN;

/// A UDP frame to the router's ingress MAC from `src` to `dst`.
pub fn frame_between(src: std::net::IpAddr, dst: std::net::IpAddr) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], MAC_IN);
    let b = match (src, dst) {
        (std::net::IpAddr::V4(s), std::net::IpAddr::V4(d)) => b.ipv4(s.octets(), d.octets(), 64),
        (std::net::IpAddr::V6(s), std::net::IpAddr::V6(d)) => b.ipv6(s.octets(), d.octets(), 64),
        _ => unreachable!(),
    };
    let mut f = Vec::new();
    b.udp(1, 2).write(&mut f, &[0u8; 18]).unwrap();
    f
}

/// Ethernet II's header: where an IP header starts.
pub const ETH_LEN: usize = etherparse::Ethernet2Header::LEN;

/// Sets the EtherType of Ethernet frame `f`.
pub fn set_ethertype(f: &mut [u8], ether_type: u16) {
    let (mut h, _) = etherparse::Ethernet2Header::from_slice(f).expect("an Ethernet frame");
    h.ether_type = etherparse::EtherType(ether_type);
    f[..ETH_LEN].copy_from_slice(&h.to_bytes());
}

/// The IPv4 header of Ethernet frame `f` (checked by etherparse), and its
/// length in the frame.
fn ipv4_of(f: &[u8]) -> (etherparse::Ipv4Header, usize) {
    let (h, _) = etherparse::Ipv4Header::from_slice(&f[ETH_LEN..]).expect("an IPv4 header");
    let len = h.header_len();
    (h, len)
}

/// Changes the IPv4 header of Ethernet frame `f` with `edit`, then writes
/// it back with its checksum made to hold: options added or removed move
/// the payload, and the header length follows them (the total length is
/// `edit`'s to set).
pub fn edit_ipv4(f: &mut Vec<u8>, edit: impl FnOnce(&mut etherparse::Ipv4Header)) {
    let (mut h, old) = ipv4_of(f);
    edit(&mut h);
    h.header_checksum = h.calc_header_checksum();
    f.splice(ETH_LEN..ETH_LEN + old, h.to_bytes());
}

/// IPv4 options `options` (a multiple of 4 bytes) in the header of
/// Ethernet frame `f`, the total length and the checksum made to match.
pub fn add_ipv4_options(f: &mut Vec<u8>, options: &[u8]) {
    edit_ipv4(f, |h| {
        h.options = etherparse::Ipv4Options::try_from(options).expect("options of 4n bytes");
        h.total_len += options.len() as u16;
    });
}

/// Flips bits of the IPv4 header checksum of Ethernet frame `f` (a
/// checksum that no longer holds).
pub fn spoil_ipv4_checksum(f: &mut [u8], bits: u16) {
    let (mut h, len) = ipv4_of(f);
    h.header_checksum ^= bits;
    f[ETH_LEN..ETH_LEN + len].copy_from_slice(&h.to_bytes());
}

/// Changes the IPv6 header of Ethernet frame `f` with `edit`.
pub fn edit_ipv6(f: &mut [u8], edit: impl FnOnce(&mut etherparse::Ipv6Header)) {
    let (mut h, _) = etherparse::Ipv6Header::from_slice(&f[ETH_LEN..]).expect("an IPv6 header");
    edit(&mut h);
    f[ETH_LEN..ETH_LEN + etherparse::Ipv6Header::LEN].copy_from_slice(&h.to_bytes());
}

/// A hop-by-hop options header (8 bytes: PadN of 4) between the IPv6
/// header of Ethernet frame `f` and what followed it, the payload length
/// and the next-header chain made to match.
pub fn add_ipv6_hop_by_hop(f: &mut Vec<u8>) {
    let (h, _) = etherparse::Ipv6Header::from_slice(&f[ETH_LEN..]).expect("an IPv6 header");
    let at = ETH_LEN + etherparse::Ipv6Header::LEN;
    // Next header, length in 8-byte units past the first, PadN of 4 bytes.
    let hbh = [h.next_header.0, 0, 1, 4, 0, 0, 0, 0];
    f.splice(at..at, hbh);
    edit_ipv6(f, |h| {
        h.next_header = etherparse::IpNumber::IPV6_HEADER_HOP_BY_HOP;
        h.payload_length += hbh.len() as u16;
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{NetSlice, SlicedPacket};

    fn udp4() -> Vec<u8> {
        let mut f = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([198, 18, 0, 1], [198, 19, 0, 1], 64)
            .udp(1000, 53)
            .write(&mut f, &[7u8; 18])
            .unwrap();
        f
    }

    /// Options go between the header and the payload, which is unchanged;
    /// the header's length, total length and checksum hold.
    #[test]
    fn ipv4_options_lengthen_the_header_and_keep_the_payload() {
        let plain = udp4();
        let mut f = plain.clone();
        add_ipv4_options(&mut f, &[1, 1, 1, 0]);
        assert_eq!(f.len(), plain.len() + 4);
        assert_eq!(f[ETH_LEN] & 0x0f, 6, "IHL of 24 bytes");
        assert_eq!(&f[ETH_LEN + 20..ETH_LEN + 24], &[1, 1, 1, 0]);
        assert_eq!(&f[ETH_LEN + 24..], &plain[ETH_LEN + 20..]);
        let (h, _) = ipv4_of(&f);
        assert_eq!(h.total_len as usize, f.len() - ETH_LEN);
        assert_eq!(h.header_checksum, h.calc_header_checksum());
    }

    /// A fragment's flags and a spoiled checksum, as a reader sees them.
    #[test]
    fn ipv4_edits_are_what_a_parser_reads() {
        let mut f = udp4();
        edit_ipv4(&mut f, |h| {
            h.dont_fragment = false;
            h.more_fragments = true;
        });
        let (h, _) = ipv4_of(&f);
        assert!(h.more_fragments && !h.dont_fragment);
        assert_eq!(h.header_checksum, h.calc_header_checksum());
        spoil_ipv4_checksum(&mut f, 0xff);
        let (h, _) = ipv4_of(&f);
        assert_ne!(h.header_checksum, h.calc_header_checksum());
        set_ethertype(&mut f, 0x0806);
        assert_eq!(&f[12..14], &[0x08, 0x06]);
    }

    /// The hop-by-hop header is walked past to the same UDP datagram.
    #[test]
    fn a_hop_by_hop_header_leads_to_the_same_datagram() {
        let mut plain = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv6([0x20; 16], [0x21; 16], 64)
            .udp(1000, 53)
            .write(&mut plain, &[7u8; 18])
            .unwrap();
        let mut f = plain.clone();
        add_ipv6_hop_by_hop(&mut f);
        assert_eq!(f.len(), plain.len() + 8);
        let p = SlicedPacket::from_ethernet(&f).unwrap();
        let Some(NetSlice::Ipv6(ip)) = p.net else {
            panic!("IPv6")
        };
        assert_eq!(
            ip.header().next_header(),
            etherparse::IpNumber::IPV6_HEADER_HOP_BY_HOP
        );
        assert_eq!(
            ip.payload().payload,
            &plain[ETH_LEN + 40..],
            "the datagram after the extension"
        );
    }
}
