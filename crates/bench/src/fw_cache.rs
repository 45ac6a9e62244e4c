//! `linerate bench firewall-cache`: what a verdict cache lookup costs the
//! fast path, by the cache's shape (docs/firewall-measurements.md): the same 64-byte
//! flow key built from a frame, then nothing (`fw_key_only`), a lookup in
//! a BPF LRU hash (`fw_lru`), or in a direct-mapped table (`fw_direct`: a
//! mappable array indexed by a hash of the key, each slot holding its key
//! to compare). bpf/probe/fw_cache_probe.bpf.c. Every flow's key is in both
//! caches; each frame runs through the three programs side by side
//! (BPF_PROG_TEST_RUN, `repeat` each), rounds over the sampled flows, the
//! medians of the rounds' means. Every sampled flow must hit in both before
//! anything is measured.
use crate::probe::udp_frame as frame;
use anyhow::{bail, Result};
use libbpf_rs::{MapCore, MapFlags};
use linerate_bpf::{loader, objects, test_run};
use linerate_dataplane::layout::FlowKey;
use serde::Serialize;
use std::os::fd::AsFd;

const SLOT_BITS: u32 = 20;
const PROGRAMS: [&str; 3] = ["fw_key_only", "fw_lru", "fw_direct"];

pub struct Options {
    /// Flows in the caches.
    pub flows: u32,
    /// Flows whose frames are run (spread over all of them).
    pub samples: u32,
    pub repeat: u32,
    pub rounds: usize,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub flows: u32,
    pub samples: u32,
    /// Flows the direct-mapped table lost to another flow of the same
    /// slot (not sampled).
    pub direct_collisions: u32,
    pub shapes: Vec<crate::probe::ProgramCost>,
}

/// The key bpf/probe/fw_cache_probe.bpf.c builds for `frame` (BPF_PROG_TEST_RUN
/// without a context runs it as arriving on the loopback device, index 1).
fn key(frame: &[u8]) -> [u8; 64] {
    let mut k = FlowKey {
        iif: 1,
        oif: 3,
        transport_len: 4,
        l4proto: 17,
        nexthdr: 17,
        ..Default::default()
    };
    let ip = etherparse::Ipv4HeaderSlice::from_slice(&frame[14..]).expect("an IPv4 frame");
    k.saddr[..4].copy_from_slice(&ip.source());
    k.daddr[..4].copy_from_slice(&ip.destination());
    // The ports: the transport bytes a ruleset on ports reads.
    let l4 = 14 + ip.slice().len();
    k.transport[..4].copy_from_slice(&frame[l4..l4 + 4]);
    linerate_bpf::layout::Pod::as_bytes(&k).try_into().unwrap()
}

fn slot(key: &[u8; 64]) -> u32 {
    let mut h: u64 = 0;
    for w in key.chunks_exact(8) {
        h = (h ^ u64::from_ne_bytes(w.try_into().unwrap())).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    ((h ^ (h >> 29)) >> (64 - SLOT_BITS)) as u32
}

fn entry() -> [u8; 16] {
    let mut e = [0u8; 16];
    e[0..4].copy_from_slice(&1u32.to_ne_bytes());
    e
}

pub fn run(o: &Options) -> Result<Report> {
    if o.flows == 0 || o.flows > 1 << SLOT_BITS {
        bail!(
            "--flows: must be 1 to {}, got {}",
            1u32 << SLOT_BITS,
            o.flows
        );
    }
    if o.samples == 0 || o.samples > o.flows {
        bail!("--samples: must be 1 to --flows, got {}", o.samples);
    }
    if o.repeat == 0 || o.rounds == 0 {
        bail!("--repeat and --rounds: at least 1");
    }
    let obj = loader::load(objects::FW_CACHE_PROBE, "verdict cache probe")?;
    let lru = loader::map(&obj, "cache_lru")?;
    let direct = loader::map(&obj, "cache_direct")?;
    let mut owner = vec![u32::MAX; 1 << SLOT_BITS];
    let mut collisions = 0;
    for i in 0..o.flows {
        let k = key(&frame(i));
        lru.update(&k, &entry(), MapFlags::ANY)?;
        let s = slot(&k);
        if owner[s as usize] != u32::MAX {
            collisions += 1;
        }
        owner[s as usize] = i;
        let mut v = Vec::with_capacity(88);
        v.extend_from_slice(&[0u8; 8]);
        v.extend_from_slice(&k);
        v.extend_from_slice(&entry());
        direct.update(&s.to_ne_bytes(), &v, MapFlags::ANY)?;
    }
    // Sampled flows: spread over all, each the owner of its slot.
    let step = (o.flows / o.samples).max(1);
    let sampled: Vec<Vec<u8>> = (0..o.flows)
        .step_by(step as usize)
        .filter(|&i| owner[slot(&key(&frame(i))) as usize] == i)
        .take(o.samples as usize)
        .map(frame)
        .collect();
    let progs: Vec<_> = PROGRAMS
        .iter()
        .map(|p| loader::prog(&obj, p))
        .collect::<Result<_>>()?;
    let mut out = vec![0u8; 256];
    for f in &sampled {
        for (p, want) in progs[1..].iter().zip([test_run::XdpAction::Tx; 2]) {
            let r = test_run::run_xdp(p.as_fd(), f, &mut out, 1)?;
            if r.verdict != want {
                bail!(
                    "{}: a cached flow missed ({:?}): the bench's key is not the program's",
                    p.name().to_string_lossy(),
                    r.verdict
                );
            }
        }
    }
    let shapes = crate::probe::rounds(&PROGRAMS, &progs, &sampled, o.repeat, o.rounds, || Ok(()))?;
    Ok(Report {
        flows: o.flows,
        samples: sampled.len() as u32,
        direct_collisions: collisions,
        shapes,
    })
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} flows cached ({} lost to a slot's collision in the direct-mapped table), {} sampled:",
            self.flows, self.direct_collisions, self.samples
        )?;
        write!(f, "{}", crate::probe::lines(&self.shapes, "the key alone"))
    }
}
