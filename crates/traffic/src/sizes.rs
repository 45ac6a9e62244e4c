//! Frame sizes (`-l`): one length, a list the generator cycles through,
//! simple IMIX, or RFC 2544's list. Lengths are Ethernet frames without
//! FCS, like pkt-gen's `-l`; IMIX is defined on IP packet lengths.
use anyhow::{bail, Result};
use linerate_bpf::layout::{GenSize, GEN_SIZES_MAX, STAMP_LEN};

pub const ETH_LEN: usize = 14;
pub const UDP_LEN: usize = 8;
/// Ethernet's minimum frame without FCS; shorter IP packets are padded.
pub const MIN_FRAME: usize = 60;
/// The largest frame of a jumbo network (MTU 9216, the usual switch
/// limit); what an interface takes is checked against its own MTU when
/// the generator starts.
pub const MAX_FRAME: usize = 9216 + ETH_LEN;
/// The largest frame the XDP generator sends: live frames (BPF_PROG_RUN)
/// live in one page with the kernel's headroom and bookkeeping (about
/// 3.4 KB on 4 KB pages); the kernel refuses larger ones.
pub const MAX_LIVE_FRAME: usize = 3072;

/// RFC 2544 section 9.1 frame sizes for Ethernet (with FCS: 64 .. 1518).
pub const RFC2544_FRAMES: [usize; 7] = [60, 124, 252, 508, 1020, 1276, 1514];
/// RFC 5180 raises the smallest IPv6 frame: 78 bytes with FCS, which is
/// exactly Ethernet + IPv6 + UDP + our stamp.
pub const RFC5180_FRAMES: [usize; 7] = [74, 124, 252, 508, 1020, 1276, 1514];

/// Simple IMIX (7:4:1 of 40, 576 and 1500-byte IP packets), spread out so
/// that no size comes in long runs.
const IMIX_PATTERN: [usize; 12] = [0, 1, 0, 2, 0, 1, 0, 0, 1, 0, 1, 0];
const IMIX_IPV4: [usize; 3] = [40, 576, 1500];
/// IPv6 cannot make a 40-byte UDP packet: the smallest IMIX packet becomes
/// the smallest that carries IPv6, UDP and the stamp.
const IMIX_IPV6: [usize; 3] = [60, 576, 1500];

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

/// The sizes one generator cycles through, frame by frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeMix {
    /// As given: `60`, `imix`, `rfc2544`, `60,1514`.
    pub name: String,
    pub sizes: Vec<GenSize>,
}

impl SizeMix {
    /// One frame length.
    pub fn fixed(frame_len: usize, ipv6: bool) -> Result<Self> {
        Ok(SizeMix {
            name: frame_len.to_string(),
            sizes: vec![frame_size(frame_len, ipv6)?],
        })
    }

    /// Parses `-l`: a frame length, a comma-separated list of them,
    /// `imix` or `rfc2544`.
    pub fn parse(s: &str, ipv6: bool) -> Result<Self> {
        let sizes = match s.trim() {
            "imix" => {
                let ip = if ipv6 { IMIX_IPV6 } else { IMIX_IPV4 };
                IMIX_PATTERN
                    .iter()
                    .map(|&i| ip_size(ip[i], ipv6))
                    .collect::<Result<Vec<_>>>()?
            }
            "rfc2544" => {
                let list = if ipv6 { RFC5180_FRAMES } else { RFC2544_FRAMES };
                list.iter()
                    .map(|&l| frame_size(l, ipv6))
                    .collect::<Result<Vec<_>>>()?
            }
            list => {
                let mut v = Vec::new();
                for part in list.split(',') {
                    let n: usize = part.trim().parse().map_err(|_| {
                        anyhow::anyhow!(
                            "{part:?} is not a frame length (a number, a list like 60,1514, imix or rfc2544)"
                        )
                    })?;
                    v.push(frame_size(n, ipv6)?);
                }
                v
            }
        };
        if sizes.len() > GEN_SIZES_MAX {
            bail!(
                "at most {GEN_SIZES_MAX} sizes in a list, got {}",
                sizes.len()
            );
        }
        Ok(SizeMix {
            name: s.trim().to_string(),
            sizes,
        })
    }

    pub fn max_frame_len(&self) -> usize {
        self.sizes
            .iter()
            .map(|s| s.frame_len as usize)
            .max()
            .unwrap_or(0)
    }

    /// Mean frame length over one cycle of the mix.
    pub fn mean_frame_len(&self) -> f64 {
        self.sizes.iter().map(|s| s.frame_len as f64).sum::<f64>() / self.sizes.len() as f64
    }

    /// Whether every frame of the mix carries the stamp.
    pub fn all_stamped(&self, ipv6: bool) -> bool {
        self.sizes
            .iter()
            .all(|s| s.ip_len as usize + ETH_LEN >= header_len(ipv6) + STAMP_LEN)
    }
}

/// A frame of `frame_len` bytes (without FCS).
pub fn frame_size(frame_len: usize, ipv6: bool) -> Result<GenSize> {
    let min = header_len(ipv6).max(MIN_FRAME);
    if frame_len < min || frame_len > MAX_FRAME {
        bail!(
            "frame length {frame_len} is out of range: {min}..{MAX_FRAME} bytes for {} (without FCS)",
            if ipv6 { "IPv6" } else { "IPv4" }
        );
    }
    Ok(GenSize {
        frame_len: frame_len as u16,
        ip_len: (frame_len - ETH_LEN) as u16,
    })
}

/// An IP packet of `ip_len` bytes, padded to Ethernet's minimum frame.
fn ip_size(ip_len: usize, ipv6: bool) -> Result<GenSize> {
    let frame_len = (ip_len + ETH_LEN).max(MIN_FRAME);
    frame_size(frame_len, ipv6)?;
    Ok(GenSize {
        frame_len: frame_len as u16,
        ip_len: ip_len as u16,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imix_is_7_4_1_of_40_576_1500_ip_bytes() {
        let m = SizeMix::parse("imix", false).unwrap();
        let count = |ip: u16| m.sizes.iter().filter(|s| s.ip_len == ip).count();
        assert_eq!((count(40), count(576), count(1500)), (7, 4, 1));
        // 40-byte packets are padded to a 60-byte frame.
        assert!(m.sizes.contains(&GenSize {
            frame_len: 60,
            ip_len: 40
        }));
        // Mean IP packet: (7*40 + 4*576 + 1500) / 12 = 340.33 bytes, the
        // seeds' Simple IMIX average.
        let ip_mean = m.sizes.iter().map(|s| s.ip_len as f64).sum::<f64>() / 12.0;
        assert!((ip_mean - 340.333).abs() < 0.001);
        assert!(m.all_stamped(false));
        let m6 = SizeMix::parse("imix", true).unwrap();
        assert!(m6.all_stamped(true));
        assert_eq!(m6.sizes.iter().filter(|s| s.ip_len == 60).count(), 7);
    }

    #[test]
    fn rfc2544_lists() {
        let m = SizeMix::parse("rfc2544", false).unwrap();
        let frames: Vec<u16> = m.sizes.iter().map(|s| s.frame_len).collect();
        assert_eq!(frames, [60, 124, 252, 508, 1020, 1276, 1514]);
        assert_eq!(
            SizeMix::parse("rfc2544", true).unwrap().sizes[0].frame_len,
            74
        );
        assert_eq!(m.max_frame_len(), 1514);
    }

    #[test]
    fn lists_and_errors() {
        let m = SizeMix::parse("60, 1514", false).unwrap();
        assert_eq!(m.sizes.len(), 2);
        assert_eq!(m.mean_frame_len(), 787.0);
        for (bad, why) in [
            ("59", "out of range"),
            ("9231", "out of range"),
            ("abc", "not a frame length"),
            ("60,,70", "not a frame length"),
        ] {
            let e = SizeMix::parse(bad, false).unwrap_err().to_string();
            assert!(!e.starts_with('-') && e.contains(why), "{bad}: {e}");
        }
        assert!(SizeMix::parse("61", true).is_err(), "IPv6 needs 62 bytes");
        assert!(!SizeMix::fixed(62, true).unwrap().all_stamped(true));
        assert!(SizeMix::fixed(74, true).unwrap().all_stamped(true));
        let many = vec!["60"; 17].join(",");
        assert!(SizeMix::parse(&many, false)
            .unwrap_err()
            .to_string()
            .contains("at most 16"));
    }
}
