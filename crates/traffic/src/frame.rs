//! Frame templates for the generator: Ethernet + IPv4/IPv6 + UDP + payload,
//! built with etherparse, and the constant part of the UDP checksum that
//! the XDP program completes for every frame.
use anyhow::{bail, Result};
use etherparse::PacketBuilder;
use linerate_bpf::layout::{GenConfig, GEN_TEMPLATE_MAX, STAMP_LEN};
use std::net::IpAddr;

pub const ETH_LEN: usize = 14;
pub const UDP_LEN: usize = 8;
pub const MIN_FRAME: usize = 60;
pub const MAX_FRAME: usize = 1514;

/// Everything that makes one frame, apart from what changes per flow.
#[derive(Clone, Debug)]
pub struct FrameSpec {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    /// First addresses of the ranges (the rest of the address is constant).
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    /// Frame length without FCS, like pkt-gen's `-l`.
    pub len: usize,
    pub ttl: u8,
}

pub fn l3_header_len(ipv6: bool) -> usize {
    if ipv6 {
        40
    } else {
        20
    }
}

/// Bytes of headers: Ethernet, IP, UDP.
pub fn header_len(ipv6: bool) -> usize {
    ETH_LEN + l3_header_len(ipv6) + UDP_LEN
}

/// The smallest frame that holds the headers and the payload stamp.
pub fn min_stamped_len(ipv6: bool) -> usize {
    (header_len(ipv6) + STAMP_LEN).max(MIN_FRAME)
}

impl FrameSpec {
    pub fn is_ipv6(&self) -> bool {
        self.src.is_ipv6()
    }

    /// Whether frames of this length carry the stamp (sequence, timestamp).
    pub fn stamped(&self) -> bool {
        self.len >= header_len(self.is_ipv6()) + STAMP_LEN
    }

    pub fn validate(&self) -> Result<()> {
        let v6 = self.is_ipv6();
        if self.src.is_ipv6() != self.dst.is_ipv6() {
            bail!(
                "source {} and destination {} are not of the same family",
                self.src,
                self.dst
            );
        }
        let min = header_len(v6).max(MIN_FRAME);
        if self.len < min || self.len > MAX_FRAME {
            bail!(
                "-l: frame length {} is out of range: {}..{} bytes for {} (without FCS)",
                self.len,
                min,
                MAX_FRAME,
                if v6 { "IPv6" } else { "IPv4" }
            );
        }
        Ok(())
    }

    /// The whole frame (headers for the first flow, zero payload).
    pub fn build(&self) -> Result<Vec<u8>> {
        self.validate()?;
        let payload = vec![0u8; self.len - header_len(self.is_ipv6())];
        let eth = PacketBuilder::ethernet2(self.src_mac, self.dst_mac);
        let ip = match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => eth.ipv4(s.octets(), d.octets(), self.ttl),
            (IpAddr::V6(s), IpAddr::V6(d)) => eth.ipv6(s.octets(), d.octets(), self.ttl),
            _ => unreachable!("validated"),
        };
        let b = ip.udp(self.src_port, self.dst_port);
        let mut out = Vec::with_capacity(self.len);
        b.write(&mut out, &payload)?;
        Ok(out)
    }

    /// The generator's map configuration for this frame (flow ranges are
    /// filled in by the caller).
    pub fn gen_config(&self, frame: &[u8]) -> GenConfig {
        let v6 = self.is_ipv6();
        let hdr = header_len(v6);
        let mut c = GenConfig::default();
        c.template[..hdr].copy_from_slice(&frame[..hdr]);
        debug_assert!(hdr <= GEN_TEMPLATE_MAX);
        c.family = if v6 { 6 } else { 4 };
        c.hdr_len = hdr as u32;
        c.stamp = self.stamped() as u32;
        c.udp_csum_base = udp_csum_base(frame, v6, self.stamped());
        c
    }
}

/// Unfolded ones'-complement sum (16-bit words in memory order, as the XDP
/// program adds them) of what the UDP checksum covers except the addresses,
/// the ports, the checksum field and the stamp: the pseudo-header's protocol
/// and length, the UDP length field and the constant payload.
pub fn udp_csum_base(frame: &[u8], ipv6: bool, stamped: bool) -> u32 {
    let udp = ETH_LEN + l3_header_len(ipv6);
    let udp_len = (frame.len() - udp) as u16;
    let mut sum: u32 = 0;
    let word = |b: [u8; 2]| u16::from_ne_bytes(b) as u32;
    // Pseudo-header: zero byte + protocol (17), and the UDP length (IPv6
    // writes it as 32 bits, whose high half is zero).
    sum += word([0, 17]);
    sum += word(udp_len.to_be_bytes());
    // UDP header's own length field.
    sum += word([frame[udp + 4], frame[udp + 5]]);
    let payload_start = udp + UDP_LEN + if stamped { STAMP_LEN } else { 0 };
    for pair in frame[payload_start..].chunks(2) {
        sum += word([pair[0], *pair.get(1).unwrap_or(&0)]);
    }
    sum
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(what: &str, s: &str) -> Result<[u8; 6]> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        bail!("{what}: {s:?} is not a MAC address (aa:bb:cc:dd:ee:ff)");
    }
    let mut mac = [0u8; 6];
    for (i, p) in parts.iter().enumerate() {
        mac[i] = u8::from_str_radix(p, 16)
            .ok()
            .filter(|_| p.len() == 2)
            .ok_or_else(|| {
                anyhow::anyhow!("{what}: {s:?} is not a MAC address (aa:bb:cc:dd:ee:ff)")
            })?;
    }
    Ok(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(src: &str, dst: &str, len: usize) -> FrameSpec {
        FrameSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            src_port: 2000,
            dst_port: 2000,
            len,
            ttl: 64,
        }
    }

    #[test]
    fn sizes_follow_pktgen() {
        assert_eq!(
            spec("198.18.10.1", "198.19.10.1", 60)
                .build()
                .unwrap()
                .len(),
            60
        );
        assert_eq!(
            spec("2001:2::1", "2001:2:0:8000::1", 62)
                .build()
                .unwrap()
                .len(),
            62
        );
        assert!(spec("198.18.10.1", "198.19.10.1", 60).stamped());
        assert!(!spec("2001:2::1", "2001:2:0:8000::1", 62).stamped());
        assert!(spec("2001:2::1", "2001:2:0:8000::1", 78).stamped());
        assert_eq!(min_stamped_len(true), 78);
    }

    #[test]
    fn bad_lengths_and_families_are_refused() {
        assert!(spec("198.18.10.1", "198.19.10.1", 59)
            .build()
            .unwrap_err()
            .to_string()
            .starts_with("-l:"));
        assert!(spec("198.18.10.1", "198.19.10.1", 1515).build().is_err());
        assert!(spec("198.18.10.1", "2001::1", 100)
            .build()
            .unwrap_err()
            .to_string()
            .contains("same family"));
    }

    #[test]
    fn macs() {
        assert_eq!(
            parse_mac("-S", "02:00:00:00:00:0a").unwrap(),
            [2, 0, 0, 0, 0, 10]
        );
        for bad in ["02:00:00:00:00", "02:00:00:00:00:0g", "2:0:0:0:0:1"] {
            assert!(parse_mac("-S", bad)
                .unwrap_err()
                .to_string()
                .starts_with("-S:"));
        }
    }
}
