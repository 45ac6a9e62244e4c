//! Typed access to map entries whose values are [`Pod`] structs.
use crate::layout::Pod;
use anyhow::{anyhow, Context, Result};
use libbpf_rs::{MapCore, MapFlags};

/// Writes `value` at `key` of an array or hash map.
pub fn write<T: Pod>(map: &impl MapCore, key: u32, value: &T) -> Result<()> {
    map.update(&key.to_ne_bytes(), value.as_bytes(), MapFlags::ANY)
        .with_context(|| format!("cannot update map {:?}", map.name()))
}

/// Reads the value at `key` of an array or hash map.
pub fn read<T: Pod>(map: &impl MapCore, key: u32) -> Result<T> {
    let bytes = map
        .lookup(&key.to_ne_bytes(), MapFlags::ANY)
        .with_context(|| format!("cannot read map {:?}", map.name()))?
        .ok_or_else(|| anyhow!("map {:?} has no key {key}", map.name()))?;
    T::from_bytes(&bytes).ok_or_else(|| anyhow!("map {:?}: value size mismatch", map.name()))
}

/// Reads the value at `key` of a per-CPU map, one entry per possible CPU.
pub fn read_percpu<T: Pod>(map: &impl MapCore, key: u32) -> Result<Vec<T>> {
    let per_cpu = map
        .lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)
        .with_context(|| format!("cannot read map {:?}", map.name()))?
        .ok_or_else(|| anyhow!("map {:?} has no key {key}", map.name()))?;
    per_cpu
        .iter()
        .map(|b| {
            T::from_bytes(b).ok_or_else(|| anyhow!("map {:?}: value size mismatch", map.name()))
        })
        .collect()
}

/// Writes the same value for every CPU at `key` of a per-CPU map.
pub fn write_percpu<T: Pod>(map: &impl MapCore, key: u32, value: &T) -> Result<()> {
    let n = libbpf_rs::num_possible_cpus()?;
    let values: Vec<Vec<u8>> = (0..n).map(|_| value.as_bytes().to_vec()).collect();
    map.update_percpu(&key.to_ne_bytes(), &values, MapFlags::ANY)
        .with_context(|| format!("cannot update map {:?}", map.name()))
}

/// Writes one value per possible CPU at `key` of a per-CPU map.
pub fn write_percpu_each<T: Pod>(map: &impl MapCore, key: u32, values: &[T]) -> Result<()> {
    let n = libbpf_rs::num_possible_cpus()?;
    if values.len() != n {
        return Err(anyhow!(
            "map {:?}: {} values for {n} CPUs",
            map.name(),
            values.len()
        ));
    }
    let values: Vec<Vec<u8>> = values.iter().map(|v| v.as_bytes().to_vec()).collect();
    map.update_percpu(&key.to_ne_bytes(), &values, MapFlags::ANY)
        .with_context(|| format!("cannot update map {:?}", map.name()))
}
