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

/// An array map created with BPF_F_MMAPABLE, mapped into this process:
/// single bytes of its entries read and written without a syscall (the
/// fast path's marks, swept once a second over tens of thousands of
/// entries). Entries are `stride` bytes apart (the value size rounded up
/// to 8, as the kernel lays arrays out).
pub struct MappedArray {
    ptr: *mut u8,
    len: usize,
    stride: usize,
    entries: u32,
}

impl MappedArray {
    pub fn open(map: &impl MapCore) -> Result<Self> {
        use std::os::fd::AsRawFd;
        let stride = (map.value_size() as usize).div_ceil(8) * 8;
        let entries = map.max_entries();
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = (stride * entries as usize).div_ceil(page) * page;
        // SAFETY: a shared mapping of the map's fd, of the map's size;
        // checked for failure below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.as_fd().as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("cannot map {:?} (is it BPF_F_MMAPABLE?)", map.name()));
        }
        Ok(MappedArray {
            ptr: ptr as *mut u8,
            len,
            stride,
            entries,
        })
    }

    fn at(&self, index: u32, offset: usize) -> *mut u8 {
        assert!(
            index < self.entries && offset < self.stride,
            "entry {index} byte {offset}"
        );
        // SAFETY: within the mapping, by the assertion.
        unsafe { self.ptr.add(index as usize * self.stride + offset) }
    }

    /// Byte `offset` of entry `index`, as the programs left it.
    pub fn byte(&self, index: u32, offset: usize) -> u8 {
        // SAFETY: a mapped byte; volatile, as programs write it meanwhile.
        unsafe { self.at(index, offset).read_volatile() }
    }

    pub fn set_byte(&self, index: u32, offset: usize, value: u8) {
        // SAFETY: as above.
        unsafe { self.at(index, offset).write_volatile(value) }
    }
}

impl MappedArray {
    /// Entry `index` as it is now (programs may write it meanwhile: read
    /// it under a sequence word, as the firewall's cache does).
    pub fn read_entry<T: Pod>(&self, index: u32) -> T {
        assert!(std::mem::size_of::<T>() <= self.stride);
        // SAFETY: a whole entry within the mapping (at() checks the
        // index); Pod: any bytes are a value; unaligned read.
        unsafe { (self.at(index, 0) as *const T).read_volatile() }
    }

    /// Writes `bytes` at byte `offset` of entry `index`.
    pub fn write_bytes(&self, index: u32, offset: usize, bytes: &[u8]) {
        assert!(offset + bytes.len() <= self.stride);
        let at = self.at(index, offset);
        for (i, b) in bytes.iter().enumerate() {
            // SAFETY: within the entry, by the assertion.
            unsafe { at.add(i).write_volatile(*b) }
        }
    }

    /// The 64-bit word at byte `offset` of entry `index`, for ordered
    /// reads and writes the programs see whole.
    pub fn word64(&self, index: u32, offset: usize) -> &std::sync::atomic::AtomicU64 {
        assert!(offset.is_multiple_of(8) && offset + 8 <= self.stride);
        // SAFETY: aligned (entries are 8-byte aligned in a page-aligned
        // mapping, the offset a multiple of 8) and within the mapping,
        // which lives as long as `self`.
        unsafe { &*(self.at(index, offset) as *const std::sync::atomic::AtomicU64) }
    }

    /// The 32-bit word at byte `offset` of entry `index`, for ordered
    /// reads and writes (a sequence word, a generation).
    pub fn word(&self, index: u32, offset: usize) -> &std::sync::atomic::AtomicU32 {
        assert!(offset.is_multiple_of(4) && offset + 4 <= self.stride);
        // SAFETY: aligned (entries are 8-byte aligned in a page-aligned
        // mapping, the offset a multiple of 4) and within the mapping,
        // which lives as long as `self`.
        unsafe { &*(self.at(index, offset) as *const std::sync::atomic::AtomicU32) }
    }
}

// SAFETY: the mapping is shared memory, owned by this value alone; every
// access through it is volatile or atomic.
unsafe impl Send for MappedArray {}

impl Drop for MappedArray {
    fn drop(&mut self) {
        // SAFETY: the mapping made in open, unmapped once.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}
