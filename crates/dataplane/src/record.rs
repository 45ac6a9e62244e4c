//! The counters of a running `linerate route`, from another process: the
//! router records its pid, interfaces and the id of its counters map in
//! /run/linerate/routers/NAME.json (NAME: its network namespace, or
//! "default"); `linerate stats` opens the map by id while the router runs.
use crate::layout::RouterCounters;
use anyhow::{bail, Context, Result};
use libbpf_rs::MapHandle;
use linerate_bpf::maps;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

const DIR: &str = "/run/linerate/routers";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RouterRecord {
    pub pid: u32,
    pub stats_map_id: u32,
    /// The frames-by-receive-queue map (0: a router from before it).
    #[serde(default)]
    pub rxq_map_id: u32,
    /// (name, ifindex) of the interfaces it routes between.
    pub interfaces: Vec<(String, u32)>,
}

fn path(name: &str) -> PathBuf {
    PathBuf::from(DIR).join(format!("{name}.json"))
}

/// Removes the record when the router ends (not after kill -9: a reader
/// then finds the pid gone).
pub struct RecordGuard(PathBuf);

impl Drop for RecordGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub fn write_record(name: &str, rec: &RouterRecord) -> Result<RecordGuard> {
    std::fs::create_dir_all(DIR).with_context(|| format!("cannot create {DIR}"))?;
    let p = path(name);
    std::fs::write(&p, serde_json::to_vec_pretty(rec)?)
        .with_context(|| format!("cannot write {}", p.display()))?;
    Ok(RecordGuard(p))
}

/// What a running router's firewall judges, and the fast path's counts by
/// rule (linerate_fwfollow::thread writes it beside the router's record, on each
/// new generation and every 200 ms while the counts move).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirewallRecord {
    /// The generation in force (0: none published yet).
    pub generation: u32,
    /// Per family (IPv4, IPv6), the base chains the fast path judges.
    pub judged: [Vec<String>; 2],
    /// Per family, why it judges none of it.
    pub refused: [Option<String>; 2],
    /// What the fast path counted, by rule, over every generation.
    pub rules: Vec<RuleCount>,
    /// Times the ruleset was read whole, and set elements changed in place
    /// (from nf_tables' notifications, without a read).
    pub reads: u64,
    pub elements_changed: u64,
    /// The firewall thread's own time on those element changes (receiving
    /// and decoding nf_tables' notifications, applying, publishing), in
    /// microseconds.
    #[serde(default)]
    pub elements_busy_us: u64,
    /// Rules added or removed in place (from nf_tables' notifications,
    /// the rules added read from `nft monitor`, without a read).
    #[serde(default)]
    pub rules_changed: u64,
    /// Cached verdicts carried into the next generation (of a family its
    /// cache alone judges), and those left to be learned from their
    /// misses because carrying took too long (linerate_firewall::carry).
    #[serde(default)]
    pub verdicts_carried: u64,
    #[serde(default)]
    pub verdicts_left: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleCount {
    pub ipv6: bool,
    /// "inet filter".
    pub table: String,
    pub table_handle: u64,
    pub chain: String,
    pub handle: u64,
    pub packets: u64,
    pub bytes: u64,
}

pub fn firewall_path(name: &str) -> PathBuf {
    PathBuf::from(DIR).join(format!("{name}.firewall.json"))
}

/// Writes router `name`'s firewall record (whole, by a rename: a reader
/// never sees half of it).
pub fn write_firewall(name: &str, rec: &FirewallRecord) -> Result<()> {
    std::fs::create_dir_all(DIR).with_context(|| format!("cannot create {DIR}"))?;
    let p = firewall_path(name);
    let tmp = p.with_extension("json.new");
    std::fs::write(&tmp, serde_json::to_vec_pretty(rec)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &p).with_context(|| format!("cannot write {}", p.display()))
}

/// Router `name`'s firewall record, if it runs and wrote one.
pub fn read_firewall(name: &str) -> Result<Option<FirewallRecord>> {
    let p = firewall_path(name);
    match std::fs::read_to_string(&p) {
        Ok(text) => {
            Ok(Some(serde_json::from_str(&text).with_context(|| {
                format!("{}: not a firewall record", p.display())
            })?))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", p.display())),
    }
}

/// The router named `name` and its counters map.
pub fn open(name: &str) -> Result<(RouterRecord, MapHandle)> {
    let p = path(name);
    let text = std::fs::read_to_string(&p).map_err(|_| {
        anyhow::anyhow!(
            "no linerate route is running for {name} (no {})",
            p.display()
        )
    })?;
    let rec: RouterRecord = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a router record", p.display()))?;
    if !std::path::Path::new(&format!("/proc/{}", rec.pid)).exists() {
        bail!(
            "the linerate route recorded in {} (pid {}) is no longer running",
            p.display(),
            rec.pid
        );
    }
    let map = MapHandle::from_map_id(rec.stats_map_id).with_context(|| {
        format!(
            "cannot open the counters of linerate route (pid {})",
            rec.pid
        )
    })?;
    Ok((rec, map))
}

/// Frames interface `ifindex` received on each of its first `queues`
/// receive queues (the last holding any beyond [`crate::layout::ROUTER_RXQ`]),
/// summed over CPUs.
pub fn read_queues(map: &MapHandle, ifindex: u32, queues: u32) -> Result<Vec<u64>> {
    use crate::layout::ROUTER_RXQ;
    (0..queues.clamp(1, ROUTER_RXQ))
        .map(|q| {
            let per_cpu: Vec<u64> = maps::read_percpu(map, ifindex * ROUTER_RXQ + q)?;
            Ok(per_cpu.iter().sum())
        })
        .collect()
}

/// An interface's counters, summed over CPUs.
pub fn read(map: &MapHandle, ifindex: u32) -> Result<RouterCounters> {
    let per_cpu: Vec<RouterCounters> = maps::read_percpu(map, ifindex)?;
    Ok(RouterCounters::sum(&per_cpu))
}
