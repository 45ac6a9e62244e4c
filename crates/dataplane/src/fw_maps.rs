//! The firewall's maps in the loaded fast path (bpf/include/router/maps.h,
//! `fw_*`): the verdict cache and the generation, mapped into this process
//! and written without a syscall; the misses' ring buffer; the rule
//! counters. They perform what linerate_firewall::compile decides, and can move to
//! the thread that learns (Send).
use crate::fw_cache::FwTable;
use crate::fwc::{self, Tables};
use crate::layout::{FwReads, FwRuleCounter, FwSlot, FwState};
use anyhow::{Context, Result};
use libbpf_rs::MapHandle;
use linerate_bpf::fib_arena::FibArena;
use linerate_bpf::layout::Pod;
use linerate_bpf::maps::{self, MappedArray};
use std::mem::{offset_of, size_of};
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

/// How long a generation's reads stay untouched after the next one is
/// published: a frame that read the old generation builds its key from
/// them for well under a microsecond; the control plane waits this long
/// before it rewrites them (two publishes apart).
const READS_GRACE: Duration = Duration::from_millis(2);

pub struct FwMaps {
    cache: MappedArray,
    state: MappedArray,
    counters: MapHandle,
    misses: MapHandle,
    /// The router's arena, where the classifiers' tables go.
    arena: FibArena,
    published: Option<Instant>,
}

impl FwMaps {
    /// The maps of a loaded router object.
    pub fn open(obj: &libbpf_rs::Object) -> Result<FwMaps> {
        let map = |name| linerate_bpf::loader::map(obj, name);
        let handle = |name| -> Result<MapHandle> {
            MapHandle::try_from(&map(name)?).with_context(|| format!("map {name}"))
        };
        Ok(FwMaps {
            cache: MappedArray::open(&map("fw_cache")?)?,
            state: MappedArray::open(&map("fw_state")?)?,
            counters: handle("fw_counters")?,
            misses: handle("fw_misses")?,
            arena: FibArena::open(obj)?,
            published: None,
        })
    }

    /// The generation frames are judged by now.
    pub fn generation(&self) -> u32 {
        self.state
            .word(0, offset_of!(FwState, generation))
            .load(Ordering::Acquire)
    }

    /// The ring buffer the program reports misses on (struct fw_miss).
    pub fn misses(&self) -> &MapHandle {
        &self.misses
    }

    /// What the fast path counted for rule counter `id`, over CPUs.
    pub fn counter(&self, id: u16) -> Result<FwRuleCounter> {
        let per_cpu: Vec<FwRuleCounter> = maps::read_percpu(&self.counters, id as u32)?;
        Ok(per_cpu
            .iter()
            .fold(FwRuleCounter::default(), |a, c| FwRuleCounter {
                packets: a.packets + c.packets,
                bytes: a.bytes + c.bytes,
            }))
    }

    /// Zeroes rule counter `id` on every CPU.
    pub fn clear_counter(&self, id: u16) -> Result<()> {
        maps::write_percpu(&self.counters, id as u32, &FwRuleCounter::default())
    }
}

impl FwTable for FwMaps {
    fn slot(&self, index: u32) -> FwSlot {
        self.cache.read_entry(index)
    }

    fn write_slot(&mut self, index: u32, slot: &FwSlot) {
        let seq = self.cache.word(index, offset_of!(FwSlot, seq));
        // Claimed as the program claims a way it writes (an odd word set
        // by compare-and-swap): waits out a frame writing it.
        let s = loop {
            let s = seq.load(Ordering::Relaxed);
            if s & 1 == 0
                && seq
                    .compare_exchange(s, s + 1, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                break s;
            }
            std::hint::spin_loop();
        };
        // The odd word is seen before any field changes...
        fence(Ordering::SeqCst);
        let bytes = slot.as_bytes();
        let after_seq = offset_of!(FwSlot, generation);
        self.cache
            .write_bytes(index, after_seq, &bytes[after_seq..]);
        // ...and the even one after all of them.
        seq.store(s + 2, Ordering::Release);
    }

    fn publish(
        &mut self,
        generation: u32,
        reads: [FwReads; 2],
        classifiers: [Option<&Tables>; 2],
        carried: &[(u32, FwSlot)],
    ) {
        if let Some(t) = self.published {
            if let Some(left) = READS_GRACE.checked_sub(t.elapsed()) {
                std::thread::sleep(left);
            }
        }
        // The generation's regions: off while they are written, on once
        // whole (a family without a classifier stays off).
        for (ipv6, t) in classifiers.iter().enumerate() {
            let at = fwc::region(generation, ipv6 == 1);
            self.arena.write_bytes(at as usize, &0u32.to_le_bytes());
            if let Some(bytes) = t.and_then(|t| t.encode(at).ok()) {
                self.arena.write_bytes(at as usize + 4, &bytes[4..]);
                self.arena.write_bytes(at as usize, &bytes[..4]);
            }
        }
        for (ipv6, r) in reads.iter().enumerate() {
            let at = offset_of!(FwState, reads)
                + ((generation as usize & 1) * 2 + ipv6) * size_of::<FwReads>();
            self.state.write_bytes(0, at, r.as_bytes());
        }
        for (index, slot) in carried {
            self.write_slot(*index, slot);
        }
        self.state
            .word(0, offset_of!(FwState, generation))
            .store(generation, Ordering::Release);
        self.published = Some(Instant::now());
    }
}
