//! A driver's own statistics (`ethtool -S`), read with the ethtool ioctl
//! (ETHTOOL_GSSET_INFO, ETHTOOL_GSTRINGS, ETHTOOL_GSTATS), in the calling
//! thread's network namespace: no process to spawn, so a generator can
//! read them around a run. Netlink's ethtool family has no equivalent of
//! these driver-named counters.
use anyhow::{bail, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GFLAGS: u32 = 0x25;
const ETH_FLAG_RXVLAN: u32 = 1 << 8;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;

/// Runs ethtool command `buf` (its first u32 is the command) on `ifname`,
/// through `sock` (any socket of the namespace: AF_INET, SOCK_DGRAM).
pub fn ioctl(sock: &OwnedFd, ifname: &str, buf: &mut [u64]) -> std::io::Result<()> {
    // SAFETY: an all-zero ifreq is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(ifname.bytes()) {
        *d = s as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = buf.as_mut_ptr().cast();
    // SAFETY: ifr points at `buf`, sized by the caller for the command.
    if unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL, &mut ifr) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether `ifname`'s driver strips 802.1Q tags on receive
/// (rx-vlan-offload, ETH_FLAG_RXVLAN): XDP then sees a tagged frame
/// untagged, its tag only in the driver's metadata. (A veth takes its
/// peer's tags as metadata whatever this says: its peer's tx-vlan-offload.)
pub fn strips_vlan_tags(ifname: &str) -> Result<bool> {
    // SAFETY: a plain socket call; the descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        bail!("socket: {}", std::io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut buf = [0u64; 1];
    put(&mut buf, 0, ETHTOOL_GFLAGS);
    match ioctl(&sock, ifname, &mut buf) {
        Ok(()) => Ok(get(&mut buf, 4) & ETH_FLAG_RXVLAN != 0),
        // A driver without the operation strips nothing it could say.
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(false),
        Err(e) => bail!("{ifname}: ethtool flags: {e}"),
    }
}

/// The bytes of an ioctl buffer (u64s: aligned for the u64 fields).
fn bytes(buf: &mut [u64]) -> &mut [u8] {
    // SAFETY: the same memory, as bytes; u8 has no alignment needs.
    unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast(), buf.len() * 8) }
}

/// Writes u32 `v` at byte `at` of `buf`.
fn put(buf: &mut [u64], at: usize, v: u32) {
    bytes(buf)[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

/// Reads the u32 at byte `at` of `buf`.
fn get(buf: &mut [u64], at: usize) -> u32 {
    u32::from_ne_bytes(bytes(buf)[at..at + 4].try_into().unwrap())
}

/// The driver's statistics of `ifname`, by name, in order.
pub fn stats(ifname: &str) -> Result<Vec<(String, u64)>> {
    if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ {
        bail!("{ifname:?} is not an interface name");
    }
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        bail!(
            "cannot open a socket for ethtool: {}",
            std::io::Error::last_os_error()
        );
    }
    // SAFETY: a new fd, owned here.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let fail = |what: &str, e: std::io::Error| anyhow::anyhow!("{ifname}: ethtool {what}: {e}");
    // struct ethtool_sset_info { u32 cmd, reserved; u64 sset_mask; u32 data[] }
    let mut info = [0u64; 3];
    put(&mut info, 0, ETHTOOL_GSSET_INFO);
    info[1] = 1 << ETH_SS_STATS;
    ioctl(&sock, ifname, &mut info).map_err(|e| fail("GSSET_INFO", e))?;
    if info[1] & (1 << ETH_SS_STATS) == 0 {
        bail!("{ifname}: the driver has no statistics of its own (ethtool -S: no stats available)");
    }
    let n = get(&mut info, 16) as usize;
    if n == 0 {
        return Ok(Vec::new());
    }
    // struct ethtool_gstrings { u32 cmd, string_set, len; u8 data[] }
    let mut strings = vec![0u64; (12 + n * ETH_GSTRING_LEN).div_ceil(8)];
    put(&mut strings, 0, ETHTOOL_GSTRINGS);
    put(&mut strings, 4, ETH_SS_STATS);
    put(&mut strings, 8, n as u32);
    ioctl(&sock, ifname, &mut strings).map_err(|e| fail("GSTRINGS", e))?;
    // struct ethtool_stats { u32 cmd, n_stats; u64 data[] }
    let mut values = vec![0u64; 1 + n];
    put(&mut values, 0, ETHTOOL_GSTATS);
    put(&mut values, 4, n as u32);
    ioctl(&sock, ifname, &mut values).map_err(|e| fail("GSTATS", e))?;
    let names = bytes(&mut strings);
    Ok((0..n)
        .map(|i| {
            let s = &names[12 + i * ETH_GSTRING_LEN..12 + (i + 1) * ETH_GSTRING_LEN];
            let end = s.iter().position(|b| *b == 0).unwrap_or(ETH_GSTRING_LEN);
            (
                String::from_utf8_lossy(&s[..end]).into_owned(),
                values[1 + i],
            )
        })
        .collect())
}

/// The same for `ifname` in namespace `netns` (None: this thread's).
pub fn stats_in(netns: Option<&str>, ifname: &str) -> Result<Vec<(String, u64)>> {
    let _in = netns.map(crate::netns::NetnsGuard::enter).transpose()?;
    stats(ifname)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_interface_is_named_in_the_error() {
        let e = stats("nosuchif0").unwrap_err().to_string();
        assert!(e.starts_with("nosuchif0: ethtool GSSET_INFO: "), "{e}");
        assert!(stats("").is_err());
    }
}
