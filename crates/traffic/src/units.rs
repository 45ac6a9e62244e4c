//! Numbers the way netmap pkt-gen prints them.

/// pkt-gen's `norm()`: three decimals and a K/M/G/T suffix by powers of
/// 1000, e.g. `3.512 M` (the unit follows: `3.512 Mpps`).
pub fn norm(v: f64) -> String {
    let mut v = v;
    let mut i = 0;
    const UNITS: [&str; 5] = ["", "K", "M", "G", "T"];
    while v >= 1000.0 && i < UNITS.len() - 1 {
        v /= 1000.0;
        i += 1;
    }
    format!("{v:.3} {}", UNITS[i])
}

/// pkt-gen's per-second line: `<pps> pps (<pkts> pkts <bps> bps in <usec> usec)`.
pub fn rate_line(packets: u64, bytes: u64, usec: u64) -> String {
    let secs = usec.max(1) as f64 / 1e6;
    format!(
        "{}pps ({}pkts {}bps in {} usec)",
        norm(packets as f64 / secs),
        norm(packets as f64),
        norm(bytes as f64 * 8.0 / secs),
        usec
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn norm_like_pktgen() {
        assert_eq!(norm(0.0), "0.000 ");
        assert_eq!(norm(999.0), "999.000 ");
        assert_eq!(norm(1488095.0), "1.488 M");
        assert_eq!(norm(14_880_952_380.0), "14.881 G");
    }

    #[test]
    fn rate_line_like_pktgen() {
        assert_eq!(
            rate_line(3_500_000, 210_000_000, 1_000_000),
            "3.500 Mpps (3.500 Mpkts 1.680 Gbps in 1000000 usec)"
        );
    }
}
