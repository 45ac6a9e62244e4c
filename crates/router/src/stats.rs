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

/// An interface's counters, summed over CPUs.
pub fn read(map: &MapHandle, ifindex: u32) -> Result<RouterCounters> {
    let per_cpu: Vec<RouterCounters> = maps::read_percpu(map, ifindex)?;
    Ok(RouterCounters::sum(&per_cpu))
}
