//! One-way latency from the receiver's histogram: 16 linear sub-buckets
//! per power of two (HdrHistogram with 4 bits of precision), the layout
//! `latency_bucket()` in bpf/lab/recv.bpf.c fills.
use linerate_bpf::layout::{RecvLatency, RECV_LAT_BUCKETS};
use serde::{Deserialize, Serialize};

/// The bucket of a latency in nanoseconds (the C function, in Rust).
pub fn bucket_of(v: u32) -> usize {
    if v < 16 {
        return v as usize;
    }
    let msb = 31 - v.leading_zeros();
    (((msb - 3) << 4) | ((v >> (msb - 4)) & 15)) as usize
}

/// `[low, high)` of a bucket in nanoseconds.
pub fn bucket_bounds(i: usize) -> (u64, u64) {
    if i < 16 {
        return (i as u64, i as u64 + 1);
    }
    let msb = (i >> 4) as u32 + 3;
    let sub = (i & 15) as u64;
    let width = 1u64 << (msb - 4);
    let low = (16 + sub) * width;
    (low, low + width)
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Log2Bucket {
    /// Latencies in `[ge_ns, lt_ns)`.
    pub ge_ns: u64,
    pub lt_ns: u64,
    pub count: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub count: u64,
    pub min: u64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: u64,
    /// Non-empty power-of-two buckets.
    pub log2_histogram: Vec<Log2Bucket>,
}

/// Sums per-CPU histograms.
pub fn merge(per_cpu: &[RecvLatency]) -> RecvLatency {
    let mut m = RecvLatency::default();
    for l in per_cpu.iter().filter(|l| l.count > 0) {
        m.min_ns = if m.count == 0 {
            l.min_ns
        } else {
            m.min_ns.min(l.min_ns)
        };
        m.count += l.count;
        m.sum_ns += l.sum_ns;
        m.max_ns = m.max_ns.max(l.max_ns);
        for (a, b) in m.hist.iter_mut().zip(l.hist.iter()) {
            *a += b;
        }
    }
    m
}

/// The q-quantile (0..1), interpolated linearly inside its bucket and kept
/// within the observed min and max.
pub fn quantile(l: &RecvLatency, q: f64) -> f64 {
    if l.count == 0 {
        return 0.0;
    }
    let rank = q * l.count as f64;
    let mut below = 0u64;
    for (i, &n) in l.hist.iter().enumerate() {
        if n == 0 {
            continue;
        }
        if (below + n) as f64 >= rank {
            let (lo, hi) = bucket_bounds(i);
            let v = lo as f64 + (hi - lo) as f64 * ((rank - below as f64) / n as f64);
            return v.clamp(l.min_ns as f64, l.max_ns as f64);
        }
        below += n;
    }
    l.max_ns as f64
}

pub fn summarize(l: &RecvLatency) -> Latency {
    let mut log2: Vec<Log2Bucket> = Vec::new();
    for (i, &n) in l.hist.iter().enumerate().take(RECV_LAT_BUCKETS) {
        if n == 0 {
            continue;
        }
        let (lo, _) = bucket_bounds(i);
        let ge = if lo == 0 {
            0
        } else {
            1u64 << (63 - lo.leading_zeros())
        };
        let lt = if ge == 0 { 1 } else { ge * 2 };
        match log2.last_mut() {
            Some(b) if b.ge_ns == ge => b.count += n,
            _ => log2.push(Log2Bucket {
                ge_ns: ge,
                lt_ns: lt,
                count: n,
            }),
        }
    }
    Latency {
        count: l.count,
        min: l.min_ns,
        mean: if l.count > 0 {
            l.sum_ns as f64 / l.count as f64
        } else {
            0.0
        },
        p50: quantile(l, 0.5),
        p99: quantile(l, 0.99),
        max: l.max_ns,
        log2_histogram: log2,
    }
}

/// The log2 histogram as text, one line per power of two, bpftrace style:
/// `[1K, 2K)   976 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|`.
pub fn render(l: &Latency) -> String {
    let peak = l.log2_histogram.iter().map(|b| b.count).max().unwrap_or(0);
    let mut out = String::new();
    for b in &l.log2_histogram {
        let bar = (b.count as f64 / peak.max(1) as f64 * 52.0).round() as usize;
        let label = format!("[{}, {})", short(b.ge_ns), short(b.lt_ns));
        out += &format!("{label:<14} {:>12} |{:<52}|\n", b.count, "@".repeat(bar));
    }
    out
}

/// 1024 -> 1K, like bpftrace's histogram labels.
fn short(v: u64) -> String {
    match v {
        _ if v >= 1 << 30 && v.is_multiple_of(1 << 30) => format!("{}G", v >> 30),
        _ if v >= 1 << 20 && v.is_multiple_of(1 << 20) => format!("{}M", v >> 20),
        _ if v >= 1 << 10 && v.is_multiple_of(1 << 10) => format!("{}K", v >> 10),
        _ => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_falls_in_its_bucket() {
        let mut v: u32 = 0;
        loop {
            let b = bucket_of(v);
            assert!(b < RECV_LAT_BUCKETS);
            let (lo, hi) = bucket_bounds(b);
            assert!(
                lo <= v as u64 && (v as u64) < hi,
                "{v} in bucket {b} [{lo},{hi})"
            );
            // Relative width at most 1/16 above the exact range.
            if v >= 16 {
                assert!((hi - lo) as f64 / lo as f64 <= 1.0 / 16.0 + 1e-12);
            }
            if v == u32::MAX {
                break;
            }
            v = v.saturating_add(1 + v / 97);
        }
    }

    #[test]
    fn quantiles_of_a_known_distribution() {
        let mut l = RecvLatency::default();
        // 1000 values: 1000, 1001, ..., 1999 ns.
        for v in 1000u32..2000 {
            l.hist[bucket_of(v)] += 1;
            l.sum_ns += v as u64;
        }
        l.count = 1000;
        l.min_ns = 1000;
        l.max_ns = 1999;
        let s = summarize(&l);
        assert!((s.p50 - 1500.0).abs() <= 1500.0 / 16.0, "p50 {}", s.p50);
        assert!((s.p99 - 1990.0).abs() <= 1990.0 / 16.0, "p99 {}", s.p99);
        assert_eq!(s.mean, 1499.5);
        // [512,1024) holds 1000..1023, [1024,2048) the rest.
        assert_eq!(
            s.log2_histogram,
            vec![
                Log2Bucket {
                    ge_ns: 512,
                    lt_ns: 1024,
                    count: 24
                },
                Log2Bucket {
                    ge_ns: 1024,
                    lt_ns: 2048,
                    count: 976
                }
            ]
        );
    }

    #[test]
    fn merging_cpus() {
        let mut a = RecvLatency::default();
        let mut b = RecvLatency::default();
        (a.count, a.min_ns, a.max_ns, a.sum_ns) = (1, 50, 50, 50);
        a.hist[bucket_of(50)] = 1;
        (b.count, b.min_ns, b.max_ns, b.sum_ns) = (1, 10, 10, 10);
        b.hist[10] = 1;
        let m = merge(&[a, RecvLatency::default(), b]);
        assert_eq!((m.count, m.min_ns, m.max_ns, m.sum_ns), (2, 10, 50, 60));
    }
}
