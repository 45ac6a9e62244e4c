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
