//! Packets per second to bandwidth and back with the Simple IMIX (7 x 40,
//! 4 x 576, 1 x 1500 bytes of IP packet), and Ethernet line rates.
//!
//! The formulas are the BSDRP benchmarking guide's:
//! IP layer `bps = pps * (7*40 + 4*576 + 1500) / 12 * 8`; Ethernet layer
//! (14-byte header added, as switch counters see it)
//! `bps = pps * (7*54 + 4*590 + 1514) / 12 * 8`; line rate for a frame of
//! `size` bytes (FCS included) `pps = speed / ((size + 20) * 8)`, the 20
//! bytes being preamble, start delimiter and inter-frame gap.
use serde::Serialize;

/// Where bytes are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    Ip,
    Ethernet,
}

/// Mean Simple IMIX packet size in bytes at `layer`.
pub fn imix_mean_bytes(layer: Layer) -> f64 {
    match layer {
        Layer::Ip => (7.0 * 40.0 + 4.0 * 576.0 + 1500.0) / 12.0,
        Layer::Ethernet => (7.0 * 54.0 + 4.0 * 590.0 + 1514.0) / 12.0,
    }
}

/// Bits per second carried by `pps` Simple IMIX packets per second.
pub fn imix_bps(pps: f64, layer: Layer) -> f64 {
    pps * imix_mean_bytes(layer) * 8.0
}

/// Simple IMIX packets per second that fill `bps`.
pub fn imix_pps(bps: f64, layer: Layer) -> f64 {
    bps / (imix_mean_bytes(layer) * 8.0)
}

/// Ethernet preamble (7) + start frame delimiter (1) + inter-frame gap (12).
pub const ETHERNET_OVERHEAD: f64 = 20.0;

/// Frames per second at line rate on a `speed_bps` link, one direction.
pub fn line_rate_pps(speed_bps: f64, frame_bytes: f64) -> f64 {
    speed_bps / ((frame_bytes + ETHERNET_OVERHEAD) * 8.0)
}

/// Parses a rate such as `10G`, `2.5G`, `100M`, `1e9`, `7000000`, with an
/// optional unit after the suffix (`10Gbps`, `7Mpps`). Suffixes are powers
/// of 1000 (K, M, G, T). `what` names the option in errors.
pub fn parse_rate(what: &str, s: &str) -> Result<f64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower
        .trim_end_matches("bps")
        .trim_end_matches("pps")
        .trim_end_matches("b/s");
    let (num, mult) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 1e3),
        Some('m') => (&body[..body.len() - 1], 1e6),
        Some('g') => (&body[..body.len() - 1], 1e9),
        Some('t') => (&body[..body.len() - 1], 1e12),
        _ => (body, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{what}: {s:?} is not a rate (e.g. 10G, 1.5M, 7000000)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("{what}: {s:?} must be a positive rate"));
    }
    Ok(v * mult)
}

/// Conversions for one pps figure.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Conversion {
    pub pps: f64,
    pub ip_bps: f64,
    pub ethernet_bps: f64,
}

pub fn convert_pps(pps: f64) -> Conversion {
    Conversion {
        pps,
        ip_bps: imix_bps(pps, Layer::Ip),
        ethernet_bps: imix_bps(pps, Layer::Ethernet),
    }
}

/// The reference rates of one link speed, as in the guides' table.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LineRate {
    pub speed_bps: f64,
    pub frame_bytes: f64,
    /// Smallest-frame line rate, one direction, and full duplex.
    pub line_rate_pps: f64,
    pub line_rate_pps_full_duplex: f64,
    /// Simple IMIX (Ethernet layer) filling the link, one direction and
    /// full duplex: the "FDX IMIX link-speed router".
    pub imix_pps: f64,
    pub imix_pps_full_duplex: f64,
}

/// [`line_rate`] of a frame size given on a command line (`--size`, FCS
/// included), checked.
pub fn line_rate_of(speed_bps: f64, size: u32) -> Result<LineRate, String> {
    if !(64..=16000).contains(&size) {
        return Err(format!(
            "--size: {size} bytes is not an Ethernet frame size (64..16000, FCS included)"
        ));
    }
    Ok(line_rate(speed_bps, size as f64))
}

pub fn line_rate(speed_bps: f64, frame_bytes: f64) -> LineRate {
    let l = line_rate_pps(speed_bps, frame_bytes);
    let i = imix_pps(speed_bps, Layer::Ethernet);
    LineRate {
        speed_bps,
        frame_bytes,
        line_rate_pps: l,
        line_rate_pps_full_duplex: 2.0 * l,
        imix_pps: i,
        imix_pps_full_duplex: 2.0 * i,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        ((a - b) / b).abs() < rel
    }

    #[test]
    fn the_guides_formulas() {
        assert!(close(imix_mean_bytes(Layer::Ip), 4084.0 / 12.0, 1e-15));
        assert!(close(
            imix_mean_bytes(Layer::Ethernet),
            4252.0 / 12.0,
            1e-15
        ));
        assert!(close(imix_bps(12.0, Layer::Ip), 4084.0 * 8.0, 1e-15));
        assert!(close(
            imix_pps(imix_bps(1234.5, Layer::Ethernet), Layer::Ethernet),
            1234.5,
            1e-12
        ));
    }

    // The seeds' table "minimum PPS for a FDX IMIX link-speed router":
    // 1 Gb/s: 1.48 Mpps line rate, 3 Mpps full duplex, 350 Kpps IMIX,
    // 700 Kpps full-duplex IMIX; 10 Gb/s: 14.8, 30, 3.5 and 7 Mpps.
    #[test]
    fn the_seeds_reference_rates() {
        let g1 = line_rate(1e9, 64.0);
        assert_eq!(format!("{:.3}", g1.line_rate_pps / 1e6), "1.488");
        assert!(close(g1.line_rate_pps_full_duplex, 2.976e6, 1e-3));
        assert!(close(g1.imix_pps, 352_790.0, 1e-4), "{}", g1.imix_pps);
        assert!(close(g1.imix_pps_full_duplex, 705_580.0, 1e-4));
        let g10 = line_rate(10e9, 64.0);
        assert!(close(g10.line_rate_pps, 14.88e6, 1e-3));
        assert!(
            close(g10.imix_pps_full_duplex, 7.0558e6, 1e-4),
            "{}",
            g10.imix_pps_full_duplex
        );
    }

    #[test]
    fn rates_parse_with_suffixes_and_units() {
        assert_eq!(parse_rate("--bps", "10G").unwrap(), 10e9);
        assert_eq!(parse_rate("--bps", "2.5Gbps").unwrap(), 2.5e9);
        assert_eq!(parse_rate("--pps", "7Mpps").unwrap(), 7e6);
        assert_eq!(parse_rate("--pps", "7000000").unwrap(), 7e6);
        assert_eq!(parse_rate("--bps", "100m").unwrap(), 100e6);
        for bad in ["", "G", "ten", "-5G", "0", "1e400"] {
            assert!(
                parse_rate("--bps", bad).unwrap_err().starts_with("--bps:"),
                "{bad}"
            );
        }
    }
}
