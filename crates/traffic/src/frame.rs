//! Frame templates for the generator: Ethernet + IPv4/IPv6 + UDP or TCP +
//! zero payload, built with etherparse, and the map configuration the XDP
//! program completes every frame from.
use crate::flows::{addr_low32, Endpoints};
use crate::sizes::{l3_header_len, SizeMix, ETH_LEN};
use crate::tcp::{Proto, TcpRun};
use anyhow::{bail, Result};
use etherparse::PacketBuilder;
use linerate_bpf::layout::{GenConfig, GEN_TEMPLATE_MAX, STAMP_LEN};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// What every frame's IP header carries beyond the plain header: the
/// frames a router's fast path hands to its kernel (UDP only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Headers {
    /// The plain header.
    #[default]
    Plain,
    /// IPv4: 8 bytes of options (seven NOPs and an end). IPv6: a
    /// hop-by-hop options header (8 bytes, PadN).
    Options,
    /// A first fragment, more to follow: IPv4's MF flag; IPv6: a fragment
    /// header (8 bytes).
    Fragment,
}

/// The bytes an extension adds between the IP header and the UDP header.
const EXTRA_LEN: usize = 8;

impl Headers {
    pub const CHOICES: &'static [(&'static str, Headers)] = &[
        ("plain", Headers::Plain),
        ("options", Headers::Options),
        ("fragment", Headers::Fragment),
    ];

    /// Bytes it adds to the IP header of a family's frames.
    pub fn extra_len(self, ipv6: bool) -> usize {
        match self {
            Headers::Plain => 0,
            Headers::Options => EXTRA_LEN,
            Headers::Fragment if ipv6 => EXTRA_LEN,
            Headers::Fragment => 0,
        }
    }

    /// Rewrites plain frame `f` (its payload `extra_len` bytes short) to
    /// carry it, the lengths and the IPv4 checksum made to match.
    fn apply(self, f: &mut Vec<u8>, ipv6: bool) -> Result<()> {
        let l3 = crate::sizes::ETH_LEN;
        if ipv6 {
            let (mut h, _) = etherparse::Ipv6Header::from_slice(&f[l3..])?;
            let ext: [u8; EXTRA_LEN] = match self {
                Headers::Plain => return Ok(()),
                // Next header, length past the first 8 bytes, PadN of 4.
                Headers::Options => [h.next_header.0, 0, 1, 4, 0, 0, 0, 0],
                // Next header, reserved, offset 0 with M, an identification.
                Headers::Fragment => [h.next_header.0, 0, 0, 1, 0, 0, 0x4c, 0x52],
            };
            h.next_header = match self {
                Headers::Options => etherparse::IpNumber::IPV6_HEADER_HOP_BY_HOP,
                _ => etherparse::IpNumber::IPV6_FRAGMENTATION_HEADER,
            };
            h.payload_length += EXTRA_LEN as u16;
            let at = l3 + etherparse::Ipv6Header::LEN;
            f.splice(at..at, ext);
            f[l3..at].copy_from_slice(&h.to_bytes());
            return Ok(());
        }
        let (mut h, _) = etherparse::Ipv4Header::from_slice(&f[l3..])?;
        let old = h.header_len();
        match self {
            Headers::Plain => return Ok(()),
            Headers::Options => {
                h.options = etherparse::Ipv4Options::try_from(&[1, 1, 1, 1, 1, 1, 1, 0][..])
                    .expect("8 bytes of options");
                h.total_len += EXTRA_LEN as u16;
            }
            Headers::Fragment => {
                h.dont_fragment = false;
                h.more_fragments = true;
            }
        }
        h.header_checksum = h.calc_header_checksum();
        f.splice(l3..l3 + old, h.to_bytes());
        Ok(())
    }
}

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
    /// Frame lengths without FCS, like pkt-gen's `-l`.
    pub sizes: SizeMix,
    pub ttl: u8,
    pub l4: Proto,
    /// What the IP header carries beyond the plain one (UDP only).
    pub headers: Headers,
    /// Every frame tagged with this 802.1Q VLAN id (1 to 4094; the
    /// frame 4 bytes longer than its size says, the IP packet not).
    pub vlan: Option<u16>,
}

impl FrameSpec {
    pub fn is_ipv6(&self) -> bool {
        self.src.is_ipv6()
    }

    /// Bytes of headers: Ethernet, IP (and its extension), UDP or TCP.
    pub fn header_len(&self) -> usize {
        ETH_LEN
            + l3_header_len(self.is_ipv6())
            + self.headers.extra_len(self.is_ipv6())
            + self.l4.header_len()
    }

    /// Whether every frame carries the stamp (stream, sequence, time).
    pub fn stamped(&self) -> bool {
        let min = self.header_len() + STAMP_LEN;
        self.sizes
            .sizes
            .iter()
            .all(|s| s.ip_len as usize + ETH_LEN >= min)
    }

    pub fn validate(&self) -> Result<()> {
        if self.src.is_ipv6() != self.dst.is_ipv6() {
            bail!(
                "source {} and destination {} are not of the same family",
                self.src,
                self.dst
            );
        }
        let min = self.header_len();
        if let Some(s) = self
            .sizes
            .sizes
            .iter()
            .find(|s| (s.ip_len as usize) + ETH_LEN < min)
        {
            bail!(
                "-l: {} bytes cannot hold the {} {} headers ({min} bytes)",
                s.frame_len,
                if self.is_ipv6() { "IPv6" } else { "IPv4" },
                if self.l4 == Proto::Tcp { "TCP" } else { "UDP" }
            );
        }
        if self.sizes.sizes.is_empty() {
            bail!("-l: no frame size");
        }
        if self.headers != Headers::Plain && self.l4 == Proto::Tcp {
            bail!(
                "--headers: IP options, extension headers and fragments are sent over UDP, not TCP"
            );
        }
        Ok(())
    }

    /// The largest frame of the mix for the first flow, zero payload: the
    /// frame every live-frames run starts from.
    pub fn build(&self) -> Result<Vec<u8>> {
        self.validate()?;
        let len = self.sizes.max_frame_len();
        let payload = vec![0u8; len - self.header_len()];
        let eth = PacketBuilder::ethernet2(self.src_mac, self.dst_mac);
        let ip = match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => eth.ipv4(s.octets(), d.octets(), self.ttl),
            (IpAddr::V6(s), IpAddr::V6(d)) => eth.ipv6(s.octets(), d.octets(), self.ttl),
            _ => unreachable!("validated"),
        };
        let mut out = Vec::with_capacity(len);
        match self.l4 {
            Proto::Udp => ip
                .udp(self.src_port, self.dst_port)
                .write(&mut out, &payload)?,
            Proto::Tcp => ip
                .tcp(self.src_port, self.dst_port, 0, 0xffff)
                .ack(0)
                .write(&mut out, &payload)?,
        }
        self.headers.apply(&mut out, self.is_ipv6())?;
        Ok(out)
    }

    /// The generator's map configuration: template, sizes and flow ranges;
    /// for TCP, the run's phase. `rate_pps` is per CPU (0: as fast as
    /// possible).
    pub fn gen_config(
        &self,
        src: &Endpoints,
        dst: &Endpoints,
        stream_base: u16,
        rate_pps: u64,
        tcp: Option<TcpRun>,
    ) -> Result<GenConfig> {
        let frame = self.build()?;
        // The program writes a TCP header whole: the template is the
        // Ethernet and IP headers then; and a UDP header after an
        // extension (which the template holds).
        let extra = self.headers.extra_len(self.is_ipv6());
        let hdr = match self.l4 {
            Proto::Udp if extra == 0 => self.header_len(),
            _ => ETH_LEN + l3_header_len(self.is_ipv6()) + extra,
        };
        let mut c = GenConfig::default();
        debug_assert!(hdr <= GEN_TEMPLATE_MAX);
        c.template[..hdr].copy_from_slice(&frame[..hdr]);
        c.family = if self.is_ipv6() { 6 } else { 4 };
        c.src_addr_first = addr_low32(src.first);
        c.src_addr_count = src.addr_count() as u32;
        c.dst_addr_first = addr_low32(dst.first);
        c.dst_addr_count = dst.addr_count() as u32;
        c.src_port_first = src.port_first as u32;
        c.src_port_count = src.port_count();
        c.dst_port_first = dst.port_first as u32;
        c.dst_port_count = dst.port_count();
        c.stream_base = stream_base as u32;
        c.size_count = self.sizes.sizes.len() as u32;
        c.sizes[..self.sizes.sizes.len()].copy_from_slice(&self.sizes.sizes);
        c.rate_pps = rate_pps;
        c.l4 = self.l4.number();
        c.l3_extra = extra as u32;
        if let Some(id) = self.vlan {
            c.vlan_tag = u32::from_ne_bytes([0x81, 0x00, (id >> 8) as u8 & 0x0f, id as u8]);
        }
        if let Some(t) = tcp {
            c.tcp_phase = t.phase.code();
            c.tcp_from = t.from;
            c.tcp_stride = crate::tcp::stride(&self.sizes, self.is_ipv6());
            if t.phase == crate::tcp::TcpPhase::Churn {
                c.tcp_steps = t.steps();
                c.tcp_lag = match t.lag {
                    0 => crate::tcp::churn_lag((rate_pps > 0).then_some(rate_pps), t.steps()),
                    lag => lag,
                };
                if let Some(gap) = 500_000_000u64.checked_div(rate_pps) {
                    c.tcp_min_gap_ns = gap.min(u32::MAX as u64) as u32;
                }
            }
        }
        Ok(c)
    }
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

/// Offset of the IP header, the UDP header and the stamp in a UDP frame.
pub fn offsets(ipv6: bool) -> (usize, usize, usize) {
    let l3 = ETH_LEN;
    let l4 = l3 + l3_header_len(ipv6);
    (l3, l4, l4 + 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(src: &str, dst: &str, len: &str) -> FrameSpec {
        let src: IpAddr = src.parse().unwrap();
        FrameSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            dst: dst.parse().unwrap(),
            src_port: 2000,
            dst_port: 2000,
            sizes: SizeMix::parse(len, src.is_ipv6()).unwrap(),
            src,
            ttl: 64,
            l4: Proto::Udp,
            headers: Headers::Plain,
            vlan: None,
        }
    }

    #[test]
    fn the_template_is_the_largest_frame() {
        let v4 = spec("198.18.10.1", "198.19.10.1", "60");
        assert_eq!(v4.build().unwrap().len(), 60);
        assert!(v4.stamped());
        let v6 = spec("2001:2::1", "2001:2:0:8000::1", "62");
        assert_eq!(v6.build().unwrap().len(), 62);
        assert!(!v6.stamped());
        let imix = spec("198.18.10.1", "198.19.10.1", "imix");
        assert_eq!(imix.build().unwrap().len(), 1514);
        assert_eq!(crate::sizes::min_stamped_len(true), 74);
    }

    #[test]
    fn families_must_match() {
        let mut s = spec("198.18.10.1", "198.19.10.1", "100");
        s.dst = "2001::1".parse().unwrap();
        assert!(s.build().unwrap_err().to_string().contains("same family"));
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
