//! The benchmark lab: generator -> DUT -> receiver, three network
//! namespaces joined by veth pairs (docs/lab.md).
//!
//! A [`Lab`] is a value: [`Lab::up`] builds it, dropping it removes it, so a
//! test that panics still cleans up. [`Lab::persist`] keeps it after the
//! value goes (for `linerate lab up`); [`down`] removes a persisted one.

pub mod scratch;
pub mod setup;
pub mod state;
pub mod status;
pub mod topology;

use anyhow::{bail, Result};
use linerate_host::netns;
pub use status::LabStatus;
pub use topology::{Interfaces, LabSpec, Namespaces, SpecError};

/// A lab that is up. Dropping it removes it unless it was persisted.
#[derive(Debug)]
pub struct Lab {
    pub record: state::LabRecord,
    remove_on_drop: bool,
}

/// What `up` found when asked to build.
#[derive(Debug, PartialEq, Eq)]
pub enum UpOutcome {
    Built,
    AlreadyUp,
}

impl Lab {
    /// Builds the lab of `spec`. If that lab is already up: with `force`,
    /// removes and rebuilds it; without, returns it unchanged (and not owned:
    /// dropping the value will not remove a lab this call did not build).
    pub fn up(spec: &LabSpec, force: bool) -> Result<(Lab, UpOutcome)> {
        linerate_host::privilege::require_root("linerate lab")?;
        spec.validate()?;
        for tool in ["ip", "ethtool"] {
            linerate_host::cmd::require_tool(tool)?;
        }
        let ns = spec.namespaces();
        if let Some(existing) = state::load(&spec.name)? {
            let complete = existing
                .spec
                .namespaces()
                .all()
                .into_iter()
                .all(netns::exists);
            if complete && !force {
                return Ok((
                    Lab {
                        record: existing,
                        remove_on_drop: false,
                    },
                    UpOutcome::AlreadyUp,
                ));
            }
            // Rebuild: asked to (--force), or the record is stale (some of
            // its namespaces were removed by hand).
            remove(&existing)?;
        }
        if let Some(clash) = ns.all().into_iter().find(|n| netns::exists(n)) {
            bail!(
                "network namespace {clash} already exists and is not part of a linerate lab: \
                 choose another --name, or remove it with `ip netns del {clash}`"
            );
        }
        let napi_threads = setup::build(spec)?;
        let record = state::LabRecord {
            spec: spec.clone(),
            napi_threads,
            queues_in_use: None,
        };
        if let Err(e) = state::save(&record) {
            let _ = setup::remove(spec);
            return Err(e);
        }
        Ok((
            Lab {
                record,
                remove_on_drop: true,
            },
            UpOutcome::Built,
        ))
    }

    /// What `linerate lab up` says of it: what it made (or that it was
    /// up), its second port, and the checksums its ends send.
    pub fn said_at_up(&self, outcome: &UpOutcome) -> String {
        let name = &self.spec().name;
        if *outcome == UpOutcome::AlreadyUp {
            return format!("lab {name} is already up; nothing changed (--force rebuilds it)\n");
        }
        let (ns, i) = (self.namespaces(), self.interfaces());
        let mut s = format!("lab {name} up: {} -> {} -> {}\n", ns.gen, ns.dut, ns.recv);
        if self.spec().gen_ports > 1 {
            s += &format!(
                "second port: {} -> {} ({}, {})\n",
                i.gen_port2,
                i.dut_port2,
                topology::addr::GEN_PORT2_NET_V4,
                topology::addr::GEN_PORT2_NET_V6
            );
        }
        s + &format!(
            "checksums complete on the wire: transmit checksum offload off on {} and {} \
             (a veth would hand a local socket's partial checksum on)\n",
            i.gen, i.recv
        )
    }

    pub fn spec(&self) -> &LabSpec {
        &self.record.spec
    }

    pub fn namespaces(&self) -> Namespaces {
        self.record.spec.namespaces()
    }

    pub fn interfaces(&self) -> Interfaces {
        Interfaces::default()
    }

    pub fn status(&self) -> Result<LabStatus> {
        status::read(&self.record)
    }

    /// How many of its veth queues carry the generator's frames now.
    pub fn queues_in_use(&self) -> u32 {
        self.record.queues_in_use.unwrap_or(self.record.spec.queues)
    }

    /// Puts `k` (1 to the lab's queues) of the veth queues in use between
    /// runs (`setup::use_queues`): the DUT then takes frames on `k`
    /// receive queues, one NAPI thread each, pinned from the DUT's CPU on.
    /// No XDP program may be attached to dut0 meanwhile.
    pub fn use_queues(&mut self, k: u32) -> Result<()> {
        if !(1..=self.record.spec.queues).contains(&k) {
            bail!(
                "queues: {k} is not between 1 and the lab's {} queues",
                self.record.spec.queues
            );
        }
        if k == self.queues_in_use() {
            return Ok(());
        }
        self.record.napi_threads =
            setup::use_queues(&self.record.spec, k, &self.record.napi_threads)?;
        self.record.queues_in_use = Some(k);
        state::save(&self.record)
    }

    /// Keeps the lab after this value is dropped.
    pub fn persist(mut self) {
        self.remove_on_drop = false;
    }

    /// Removes the lab now, reporting errors (Drop can only ignore them).
    pub fn down(mut self) -> Result<Vec<String>> {
        self.remove_on_drop = false;
        remove(&self.record)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if self.remove_on_drop {
            if let Err(e) = remove(&self.record) {
                eprintln!("warning: removing lab {}: {e:#}", self.record.spec.name);
            }
        }
    }
}

fn remove(rec: &state::LabRecord) -> Result<Vec<String>> {
    let removed = setup::remove(&rec.spec)?;
    state::remove(&rec.spec.name)?;
    Ok(removed)
}

/// Removes the lab called `name`. Errors if there is no such lab.
pub fn down(name: &str) -> Result<Vec<String>> {
    linerate_host::privilege::require_root("linerate lab")?;
    match state::load(name)? {
        Some(rec) => remove(&rec),
        None => bail!("no lab named {name} is up (labs up: {})", list_or_none()),
    }
}

/// The status of the lab called `name`.
pub fn status(name: &str) -> Result<LabStatus> {
    match state::load(name)? {
        Some(rec) => status::read(&rec),
        None => bail!("no lab named {name} is up (labs up: {})", list_or_none()),
    }
}

/// The record of lab `name`, if it is up.
pub fn find(name: &str) -> Result<Option<state::LabRecord>> {
    state::load(name)
}

fn list_or_none() -> String {
    let l = state::list();
    if l.is_empty() {
        "none".into()
    } else {
        l.join(", ")
    }
}
