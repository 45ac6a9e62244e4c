//! A traffic mix: several kinds of traffic from one generator, frame by
//! frame (long TCP connections, UDP flows, churned connections), as an
//! edge router carries them. Each part is a configuration of the
//! generator's program of its own (flows, protocol, TCP run, stream ids,
//! its share of the rate); the program takes frame n's part from a round
//! of slots (bpf/include/abi/lab.h, GEN_PARTS and GEN_MIX_SLOTS).
use crate::flows::Endpoints;
use crate::frame::FrameSpec;
use crate::gen::GenOptions;
use crate::tcp::TcpRun;
pub use linerate_bpf::layout::{GEN_MIX_SLOTS, GEN_PARTS};

/// Another part of a mix, beside the generator options' own traffic.
#[derive(Clone, Debug)]
pub struct GenPart {
    pub frame: FrameSpec,
    pub src: Endpoints,
    pub dst: Endpoints,
    pub random_dst: bool,
    pub random_src: bool,
    pub tcp: Option<TcpRun>,
    /// Frames of this part in each round of the mix.
    pub weight: u32,
    /// Its own frames a second (over all CPUs), whatever the rest of the
    /// mix is offered (a churn part's new connections a second, as users
    /// make them); None: its weight's share of the generator's rate.
    pub rate_pps: Option<u64>,
    /// The interface its frames leave by, when not the generator's (a
    /// lab's second port into the DUT; in the generator's namespace).
    pub out_ifname: Option<String>,
}

/// Each part's frames a second (the options' own first) when the whole
/// is offered `total` (None: as fast as it goes): a part with a rate of
/// its own that, the others what is left of `total` by their weights
/// (unpaced with no total).
pub fn part_rates(parts: &[(u32, Option<u64>)], total: Option<u64>) -> Vec<Option<u64>> {
    let fixed: u64 = parts.iter().filter_map(|p| p.1).sum();
    let shared: u64 = parts
        .iter()
        .filter(|p| p.1.is_none())
        .map(|p| u64::from(p.0))
        .sum();
    parts
        .iter()
        .map(|&(weight, own)| {
            own.or_else(|| {
                total.map(|t| (t.saturating_sub(fixed) * u64::from(weight) / shared.max(1)).max(1))
            })
        })
        .collect()
}

/// Stream ids a part takes (stream = the part's base + CPU): the parts'
/// sequences stay apart at the receiver, which counts up to 256 streams.
pub const STREAMS_A_PART: u16 = 64;

/// The slots of a round for these weights, each part as many as its
/// weight, spread evenly (smooth weighted round robin: every slot goes to
/// the part furthest behind its share), so that a small part's frames are
/// apart rather than in a burst.
pub fn slots(weights: &[u32]) -> Vec<u8> {
    let total: i64 = weights.iter().map(|&w| i64::from(w)).sum();
    let mut credit = vec![0i64; weights.len()];
    let mut out = Vec::with_capacity(total as usize);
    for _ in 0..total {
        for (c, &w) in credit.iter_mut().zip(weights) {
            *c += i64::from(w);
        }
        let mut best = 0;
        for (i, &c) in credit.iter().enumerate() {
            if c > credit[best] {
                best = i;
            }
        }
        credit[best] -= total;
        out.push(best as u8);
    }
    out
}

impl GenOptions {
    /// The parts of this generator's traffic, each as options of its own
    /// (the options' own traffic first, then `mix`), with their weights.
    pub fn parts(&self) -> Vec<(GenOptions, u32)> {
        let alone = GenOptions {
            mix: Vec::new(),
            ..self.clone()
        };
        let mut v = vec![(alone.clone(), self.weight.max(1))];
        for p in &self.mix {
            v.push((
                GenOptions {
                    frame: p.frame.clone(),
                    src: p.src.clone(),
                    dst: p.dst.clone(),
                    random_dst: p.random_dst,
                    random_src: p.random_src,
                    tcp: p.tcp,
                    rate_pps: p.rate_pps,
                    ..alone.clone()
                },
                p.weight,
            ));
        }
        v
    }

    /// The interfaces its frames leave by: its own, then each other
    /// port a part names, once.
    pub fn ports(&self) -> Vec<&str> {
        let mut v = vec![self.ifname.as_str()];
        for p in self.mix.iter().filter_map(|p| p.out_ifname.as_deref()) {
            if !v.contains(&p) {
                v.push(p);
            }
        }
        v
    }

    /// What a mix must be, beside each of its parts being good options.
    pub(crate) fn check_mix(&self) -> Result<(), String> {
        if self.mix.is_empty() {
            return Ok(());
        }
        if self.mix.len() >= GEN_PARTS {
            return Err(format!(
                "{} parts: a mix has {GEN_PARTS} at most",
                self.mix.len() + 1
            ));
        }
        if self.mode != crate::gen::Mode::Xdp {
            return Err("a mix needs the XDP mode".into());
        }
        if self.count.is_some() {
            return Err("a mix runs for a time, not a count of frames".into());
        }
        if let Some(&c) = self.cpus.iter().find(|&&c| c >= STREAMS_A_PART as usize) {
            return Err(format!(
                "CPU {c}: a mix's parts take {STREAMS_A_PART} stream ids each, one a CPU"
            ));
        }
        let parts = self.parts();
        let weights: Vec<u32> = parts.iter().map(|p| p.1).collect();
        if self.weight == 0 || weights.contains(&0) {
            return Err("every part's weight is at least 1".into());
        }
        if self.mix.iter().any(|p| p.rate_pps == Some(0)) {
            return Err("a part's rate is at least 1 frame a second".into());
        }
        let total: u32 = weights.iter().sum();
        if total as usize > GEN_MIX_SLOTS {
            return Err(format!(
                "the weights add up to {total}: a round of the mix has {GEN_MIX_SLOTS} slots"
            ));
        }
        for (i, (p, _)) in parts.iter().enumerate().skip(1) {
            p.check()
                .map_err(|e| format!("part {}: {}: {}", i + 1, e.field, e.reason))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_give_each_part_its_weight_spread_out() {
        let s = slots(&[16, 3, 1]);
        assert_eq!(s.len(), 20);
        for (part, weight) in [(0u8, 16), (1, 3), (2, 1)] {
            assert_eq!(s.iter().filter(|&&p| p == part).count(), weight);
        }
        // Part 1's three slots are apart, not one after another.
        let at: Vec<usize> = (0..s.len()).filter(|&i| s[i] == 1).collect();
        assert!(at.windows(2).all(|w| w[1] - w[0] >= 5), "{s:?}");
        assert_eq!(slots(&[1]), vec![0]);
        assert_eq!(slots(&[1, 1]), vec![0, 1]);
    }

    #[test]
    fn a_part_with_a_rate_keeps_it_and_the_others_share_the_rest() {
        let parts = [(16, None), (3, None), (1, Some(14_000))];
        assert_eq!(
            part_rates(&parts, Some(1_914_000)),
            [Some(1_600_000), Some(300_000), Some(14_000)]
        );
        assert_eq!(part_rates(&parts, None), [None, None, Some(14_000)]);
        // Less than the fixed part asks: the others at 1 frame a second.
        assert_eq!(
            part_rates(&parts, Some(10_000)),
            [Some(1), Some(1), Some(14_000)]
        );
    }
}
