//! The record of a lab that is up, kept under /run/linerate/labs so that
//! `status` and `down` know what `up` made (and what it did not make).
use crate::setup::NapiThread;
use crate::topology::LabSpec;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

const STATE_DIR: &str = "/run/linerate/labs";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabRecord {
    pub spec: LabSpec,
    pub napi_threads: Vec<NapiThread>,
    /// Queues put in use since it was built (`Lab::use_queues`); none:
    /// all of `spec.queues`.
    #[serde(default)]
    pub queues_in_use: Option<u32>,
}

fn path(name: &str) -> PathBuf {
    PathBuf::from(STATE_DIR).join(format!("{name}.json"))
}

pub fn save(rec: &LabRecord) -> Result<()> {
    std::fs::create_dir_all(STATE_DIR).with_context(|| format!("cannot create {STATE_DIR}"))?;
    let p = path(&rec.spec.name);
    std::fs::write(&p, serde_json::to_vec_pretty(rec)?)
        .with_context(|| format!("cannot write {}", p.display()))
}

pub fn load(name: &str) -> Result<Option<LabRecord>> {
    let p = path(name);
    match std::fs::read(&p) {
        Ok(bytes) => {
            Ok(Some(serde_json::from_slice(&bytes).with_context(|| {
                format!("{} is not a lab record", p.display())
            })?))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", p.display())),
    }
}

pub fn remove(name: &str) -> Result<()> {
    match std::fs::remove_file(path(name)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}

/// Names of the labs that are recorded as up.
pub fn list() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(STATE_DIR) else {
        return Vec::new();
    };
    let mut names: Vec<String> = dir
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".json")
                .map(str::to_string)
        })
        .collect();
    names.sort();
    names
}
