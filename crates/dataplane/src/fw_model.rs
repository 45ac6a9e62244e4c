//! The firewall stage of the model (crate::model): bpf/include/router/firewall.h
//! in Rust, over an in-memory copy of the verdict cache, the generation
//! and the rule counters. The root tests hold the program to it (the keys
//! it reports, the verdicts, the counts), as the rest of the model.
use crate::fw_cache::{judged_way, set_of, slot_index, FwTable};
use crate::fwc::Tables;
use crate::layout::TRANSPORT_BYTES;
use crate::layout::{
    FwKey, FwMiss, FwReads, FwRuleCounter, FwSlot, FwState, FW_ACCEPT, FW_CT_ON, FW_DROP,
    FW_KERNEL, FW_READ_CT, FW_READ_DADDR, FW_READ_IIF, FW_READ_L4PROTO, FW_READ_NAT,
    FW_READ_NEXTHDR, FW_READ_OIF, FW_READ_SADDR,
};
use crate::model::reason;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

/// What the firewall stage decided on a forwarded frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FwOutcome {
    Accept(Vec<u16>),
    Drop(Vec<u16>),
    /// Passed, for the reason named (crate::model::reason).
    Pass(&'static str),
}

/// A forwarded frame as the stage sees it.
pub struct FwFrame<'a> {
    pub ipv6: bool,
    /// The IP header.
    pub l3: &'a [u8],
    /// From the transport header to the frame's end.
    pub l4: &'a [u8],
    /// The transport header's bytes within the IP packet.
    pub avail: usize,
    pub l4proto: u8,
    pub nexthdr: u8,
    pub iif: u32,
    pub oif: u32,
}

#[derive(Default)]
pub struct FwModel {
    state: FwState,
    slots: RefCell<HashMap<u32, FwSlot>>,
    /// The classifiers, [generation & 1][ipv6], as published.
    classifiers: [[Option<Tables>; 2]; 2],
    counters: RefCell<BTreeMap<u16, FwRuleCounter>>,
    misses: RefCell<Vec<FwMiss>>,
}

impl FwModel {
    /// fw_judge: the verdict cached for the frame's key, or a miss
    /// (recorded, as the program reports it).
    pub fn judge(&self, f: &FwFrame) -> FwOutcome {
        let generation = self.state.generation;
        let rd: FwReads = self.state.reads[generation as usize & 1][f.ipv6 as usize];
        let mut k = FwKey::default();
        let on = |bit: u8| rd.fields & bit != 0;
        if on(FW_READ_IIF) {
            k.flow.iif = f.iif;
        }
        if on(FW_READ_OIF) {
            k.flow.oif = f.oif;
        }
        let (s, d) = if f.ipv6 { (8, 24) } else { (12, 16) };
        let width = if f.ipv6 { 16 } else { 4 };
        if on(FW_READ_SADDR) {
            k.flow.saddr[..width].copy_from_slice(&f.l3[s..s + width]);
        }
        if on(FW_READ_DADDR) {
            k.flow.daddr[..width].copy_from_slice(&f.l3[d..d + width]);
        }
        if on(FW_READ_L4PROTO) {
            k.flow.l4proto = f.l4proto;
        }
        if on(FW_READ_NEXTHDR) {
            k.flow.nexthdr = f.nexthdr;
        }
        k.flow.ipv6 = f.ipv6 as u8;
        // The connection stage (bpf/include/router/ct_judge.h) and the NAT
        // stage (router/nat.h) read the kernel's conntrack table, which the
        // model does not hold: it is held to
        // the kernel itself (crates/linerate/tests/stateful_cli.rs). Off,
        // the program passes such frames, and so does the model.
        if on(FW_READ_CT) || on(FW_READ_NAT) {
            assert!(
                self.state.ct_flags & FW_CT_ON == 0,
                "the model has no conntrack to judge a ct-reading ruleset by"
            );
            return FwOutcome::Pass(reason::CT_OFF);
        }
        let end = rd.transport_end as usize;
        if end > 0 {
            let have = f.avail.min(end).min(TRANSPORT_BYTES);
            if f.l4.len() < have {
                return FwOutcome::Pass(reason::MULTIBUF);
            }
            let mut mask = [0u8; TRANSPORT_BYTES];
            mask[..8].copy_from_slice(&rd.transport_mask[0].to_le_bytes());
            mask[8..].copy_from_slice(&rd.transport_mask[1].to_le_bytes());
            for (i, (t, m)) in k.flow.transport.iter_mut().zip(mask).take(have).enumerate() {
                *t = f.l4[i] & m;
            }
            k.flow.transport_len = have as u8;
        }
        let set = set_of(&k, rd.set_bits);
        let hit = (0..2)
            .map(|w| self.slots.borrow().get(&slot_index(set, w)).copied())
            .find_map(|s| {
                s.filter(|s| {
                    s.seq & 1 == 0 && s.key == k && s.generation == generation && s.verdict != 0
                })
            });
        let s = match hit {
            Some(s) => s,
            None => match &self.classifiers[generation as usize & 1][f.ipv6 as usize] {
                // Judged by the classifier, and its verdict cached, as the
                // program does (fwc_judge, fwc_learn).
                Some(t) => self.judged(t, set, k, generation),
                None => {
                    self.misses.borrow_mut().push(FwMiss {
                        key: k,
                        generation,
                        pad: 0,
                    });
                    return FwOutcome::Pass(reason::FW_MISS);
                }
            },
        };
        let ids = s.counters[..s.counters_n as usize].to_vec();
        match s.verdict {
            FW_ACCEPT => FwOutcome::Accept(ids),
            FW_DROP => FwOutcome::Drop(ids),
            FW_KERNEL => FwOutcome::Pass(reason::FW_KERNEL),
            _ => FwOutcome::Pass(reason::FW_MISS),
        }
    }

    /// fw_count: a judged frame of `bytes` (its IP packet) at its rules.
    /// The slot the classifier `t` makes for key `k`, written into the
    /// way the program would write it.
    fn judged(&self, t: &Tables, set: u32, k: FwKey, generation: u32) -> FwSlot {
        let w = t.walk(&k.flow);
        let mut counters = [0u16; crate::layout::FW_ENTRY_COUNTERS];
        for (c, id) in counters.iter_mut().zip(&w.counted) {
            *c = *id as u16;
        }
        let slot = FwSlot {
            seq: 0,
            generation,
            key: k,
            verdict: w.verdict,
            counters_n: if w.verdict == FW_KERNEL {
                0
            } else {
                w.counted.len() as u8
            },
            counters,
            reserved: [0; 14],
        };
        let ways = [0, 1].map(|w| self.slot(slot_index(set, w)));
        let index = slot_index(set, judged_way(&ways, generation, &k.flow));
        let seq = ways[(index & 1) as usize].seq & !1;
        self.slots.borrow_mut().insert(
            index,
            FwSlot {
                seq: seq + 2,
                ..slot
            },
        );
        slot
    }

    pub fn count(&self, ids: &[u16], bytes: usize) {
        let mut c = self.counters.borrow_mut();
        for id in ids {
            let e = c.entry(*id).or_default();
            e.packets += 1;
            e.bytes += bytes as u64;
        }
    }

    /// Rule counter `id` as counted.
    pub fn counter(&self, id: u16) -> FwRuleCounter {
        self.counters.borrow().get(&id).copied().unwrap_or_default()
    }

    /// The misses reported since the last call, in order.
    pub fn take_misses(&self) -> Vec<FwMiss> {
        std::mem::take(&mut self.misses.borrow_mut())
    }

    pub fn generation(&self) -> u32 {
        self.state.generation
    }
}

impl FwTable for FwModel {
    fn slot(&self, index: u32) -> FwSlot {
        self.slots.borrow().get(&index).copied().unwrap_or_default()
    }

    fn write_slot(&mut self, index: u32, slot: &FwSlot) {
        let seq = self.slot(index).seq & !1;
        self.slots.get_mut().insert(
            index,
            FwSlot {
                seq: seq + 2,
                ..*slot
            },
        );
    }

    fn publish(
        &mut self,
        generation: u32,
        reads: [FwReads; 2],
        classifiers: [Option<&Tables>; 2],
        carried: &[(u32, FwSlot)],
    ) {
        for (index, slot) in carried {
            self.write_slot(*index, slot);
        }
        self.state.reads[generation as usize & 1] = reads;
        self.classifiers[generation as usize & 1] = classifiers.map(|t| t.cloned());
        self.state.generation = generation;
    }
}

/// Whether IPv6 next header `h` keeps a frame from the firewall stage
/// (fw_ipv6_ext): an extension header, or one not classified here.
pub fn ipv6_ext(h: u8) -> bool {
    matches!(
        h,
        0 | 43 | 44 | 50 | 51 | 59 | 60 | 135 | 139 | 140 | 253 | 254
    )
}
