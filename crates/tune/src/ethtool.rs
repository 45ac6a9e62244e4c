//! What an interface's driver says of itself, asked as `ethtool` asks it
//! (the SIOCETHTOOL ioctl: offloads, channels, rings, pause frames,
//! coalescing, the RSS hash's fields), and its XDP state as libbpf reads
//! it (the attached program's mode, the netdev family's xdp_features).
//! Reading only: nothing here changes a device.
//!
//! A driver that lacks an operation answers EOPNOTSUPP: that is a fact
//! about the device ([`Asked::Unsupported`]), not a failure to read.
use serde::{Deserialize, Serialize};
use std::os::fd::{FromRawFd, OwnedFd};

/// One thing asked of a driver.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Asked<T> {
    Said(T),
    /// The driver has no such operation (EOPNOTSUPP).
    Unsupported,
    /// Could not be asked, and why.
    Failed(String),
}

impl<T> Asked<T> {
    fn from(r: Result<T, i32>) -> Asked<T> {
        match r {
            Ok(v) => Asked::Said(v),
            Err(libc::EOPNOTSUPP) => Asked::Unsupported,
            Err(e) => Asked::Failed(std::io::Error::from_raw_os_error(e).to_string()),
        }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Asked<U> {
        match self {
            Asked::Said(v) => Asked::Said(f(v)),
            Asked::Unsupported => Asked::Unsupported,
            Asked::Failed(e) => Asked::Failed(e),
        }
    }
}

/// Offloads that decide what a router receives and sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offloads {
    pub gro: bool,
    pub lro: bool,
    pub tso: bool,
    /// The driver strips VLAN tags before XDP sees the frame.
    pub rx_vlan_strip: bool,
}

/// `ethtool -l`: what is set, and the most the device has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Channels {
    pub rx: u32,
    pub tx: u32,
    pub combined: u32,
    pub max_rx: u32,
    pub max_tx: u32,
    pub max_combined: u32,
}

/// `ethtool -g`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rings {
    pub rx: u32,
    pub tx: u32,
    pub max_rx: u32,
    pub max_tx: u32,
}

/// `ethtool -a`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    pub autoneg: bool,
    pub rx: bool,
    pub tx: bool,
}

/// `ethtool -c`, the receive side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coalesce {
    pub rx_usecs: u32,
    pub rx_frames: u32,
    pub adaptive_rx: bool,
}

/// The attached XDP program's mode (`ip link`'s xdp, xdpgeneric, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XdpMode {
    None,
    Native,
    Generic,
    Offloaded,
    /// Programs in more than one mode.
    Several,
}

/// The netdev family's xdp_features bits (include/uapi/linux/netdev.h).
pub mod xdp_feature {
    pub const BASIC: u64 = 1;
    pub const REDIRECT: u64 = 2;
    pub const NDO_XMIT: u64 = 4;
    pub const XSK_ZEROCOPY: u64 = 8;
    pub const HW_OFFLOAD: u64 = 16;
    pub const RX_SG: u64 = 32;
    pub const NDO_XMIT_SG: u64 = 64;
    /// Their names, as the kernel's netdev spec gives them.
    pub const NAMES: [(u64, &str); 7] = [
        (BASIC, "basic"),
        (REDIRECT, "redirect"),
        (NDO_XMIT, "ndo-xmit"),
        (XSK_ZEROCOPY, "xsk-zerocopy"),
        (HW_OFFLOAD, "hw-offload"),
        (RX_SG, "rx-sg"),
        (NDO_XMIT_SG, "ndo-xmit-sg"),
    ];
}

/// Everything asked of one interface's driver.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Driver {
    pub name: Asked<String>,
    pub offloads: Asked<Offloads>,
    pub channels: Asked<Channels>,
    pub rings: Asked<Rings>,
    pub pause: Asked<Pause>,
    pub coalesce: Asked<Coalesce>,
    /// RXH_* bits hashed for UDP over IPv4 (ETHTOOL_GRXFH).
    pub rss_udp4: Asked<u64>,
    pub xdp_mode: Asked<XdpMode>,
    /// xdp_features; Unsupported where the kernel has no netdev family.
    pub xdp_features: Asked<u64>,
}

impl Driver {
    /// Nothing asked: every answer is `why` (a copied tree has no
    /// driver).
    pub fn unasked(why: &str) -> Driver {
        Driver {
            name: Asked::Failed(why.to_string()),
            offloads: Asked::Failed(why.to_string()),
            channels: Asked::Failed(why.to_string()),
            rings: Asked::Failed(why.to_string()),
            pause: Asked::Failed(why.to_string()),
            coalesce: Asked::Failed(why.to_string()),
            rss_udp4: Asked::Failed(why.to_string()),
            xdp_mode: Asked::Failed(why.to_string()),
            xdp_features: Asked::Failed(why.to_string()),
        }
    }

    /// Interface `name`'s driver, in the calling thread's network
    /// namespace.
    pub fn ask(name: &str) -> Driver {
        let sock = match Ioctl::open(name) {
            Ok(s) => s,
            Err(e) => return Driver::unasked(&e),
        };
        let ifindex = ifindex(name);
        Driver {
            name: Asked::from(sock.driver_name()),
            offloads: Asked::from(sock.offloads()),
            channels: Asked::from(sock.words::<9>(ETHTOOL_GCHANNELS).map(|w| Channels {
                max_rx: w[1],
                max_tx: w[2],
                max_combined: w[4],
                rx: w[5],
                tx: w[6],
                combined: w[8],
            })),
            rings: Asked::from(sock.words::<9>(ETHTOOL_GRINGPARAM).map(|w| Rings {
                max_rx: w[1],
                max_tx: w[4],
                rx: w[5],
                tx: w[8],
            })),
            pause: Asked::from(sock.words::<4>(ETHTOOL_GPAUSEPARAM).map(|w| Pause {
                autoneg: w[1] != 0,
                rx: w[2] != 0,
                tx: w[3] != 0,
            })),
            coalesce: Asked::from(sock.words::<23>(ETHTOOL_GCOALESCE).map(|w| Coalesce {
                rx_usecs: w[1],
                rx_frames: w[2],
                adaptive_rx: w[10] != 0,
            })),
            rss_udp4: Asked::from(sock.rx_flow_hash(UDP_V4_FLOW)),
            xdp_mode: match ifindex {
                Ok(i) => xdp_mode(i),
                Err(ref e) => Asked::Failed(e.clone()),
            },
            xdp_features: match ifindex {
                Ok(i) => xdp_features(i),
                Err(e) => Asked::Failed(e),
            },
        }
    }
}

const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GCOALESCE: u32 = 0x0e;
const ETHTOOL_GRINGPARAM: u32 = 0x10;
const ETHTOOL_GPAUSEPARAM: u32 = 0x12;
const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_GFLAGS: u32 = 0x25;
const ETHTOOL_GRXFH: u32 = 0x29;
const ETHTOOL_GGRO: u32 = 0x2b;
const ETHTOOL_GCHANNELS: u32 = 0x3c;
const ETH_FLAG_RXVLAN: u32 = 1 << 8;
const ETH_FLAG_LRO: u32 = 1 << 15;
const UDP_V4_FLOW: u32 = 0x02;

/// A socket to ask one interface's driver through.
struct Ioctl {
    fd: OwnedFd,
    name: String,
}

impl Ioctl {
    fn open(ifname: &str) -> Result<Ioctl, String> {
        if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ {
            return Err(format!("{ifname:?}: not an interface name"));
        }
        // SAFETY: plain socket(2); the descriptor is owned below.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(format!("socket: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: fd is a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Ioctl {
            fd,
            name: ifname.to_string(),
        })
    }

    /// SIOCETHTOOL with `buf` as bytes (its first word the command, a
    /// structure's size at most); `buf` gets what the kernel wrote. Err:
    /// errno.
    fn ask(&self, buf: &mut [u8]) -> Result<(), i32> {
        // The same bytes in memory, in words (the kernel's u64 fields).
        let mut words: Vec<u64> = buf
            .chunks(8)
            .map(|c| {
                let mut a = [0u8; 8];
                a[..c.len()].copy_from_slice(c);
                u64::from_ne_bytes(a)
            })
            .collect();
        linerate_host::ethtool::ioctl(&self.fd, &self.name, &mut words)
            .map_err(|e| e.raw_os_error().unwrap_or(0))?;
        for (c, w) in buf.chunks_mut(8).zip(&words) {
            c.copy_from_slice(&w.to_ne_bytes()[..c.len()]);
        }
        Ok(())
    }

    /// A structure of N 32-bit words, the first the command.
    fn words<const N: usize>(&self, cmd: u32) -> Result<[u32; N], i32> {
        let mut buf = vec![0u8; N * 4];
        buf[..4].copy_from_slice(&cmd.to_ne_bytes());
        self.ask(&mut buf)?;
        let mut w = [0u32; N];
        for (i, c) in buf.chunks_exact(4).enumerate() {
            w[i] = u32::from_ne_bytes(c.try_into().expect("four bytes"));
        }
        Ok(w)
    }

    fn value(&self, cmd: u32) -> Result<u32, i32> {
        Ok(self.words::<2>(cmd)?[1])
    }

    fn offloads(&self) -> Result<Offloads, i32> {
        let flags = self.value(ETHTOOL_GFLAGS)?;
        Ok(Offloads {
            gro: self.value(ETHTOOL_GGRO)? != 0,
            lro: flags & ETH_FLAG_LRO != 0,
            tso: self.value(ETHTOOL_GTSO)? != 0,
            rx_vlan_strip: flags & ETH_FLAG_RXVLAN != 0,
        })
    }

    /// struct ethtool_drvinfo's driver name.
    fn driver_name(&self) -> Result<String, i32> {
        let mut buf = vec![0u8; 196];
        buf[..4].copy_from_slice(&ETHTOOL_GDRVINFO.to_ne_bytes());
        self.ask(&mut buf)?;
        let name = &buf[4..36];
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        Ok(String::from_utf8_lossy(&name[..end]).into_owned())
    }

    /// struct ethtool_rxnfc's `data` for ETHTOOL_GRXFH: the RXH_* bits.
    fn rx_flow_hash(&self, flow: u32) -> Result<u64, i32> {
        // Larger than the structure (its flow spec included).
        let mut buf = vec![0u8; 256];
        buf[..4].copy_from_slice(&ETHTOOL_GRXFH.to_ne_bytes());
        buf[4..8].copy_from_slice(&flow.to_ne_bytes());
        self.ask(&mut buf)?;
        Ok(u64::from_ne_bytes(
            buf[8..16].try_into().expect("eight bytes"),
        ))
    }
}

fn ifindex(ifname: &str) -> Result<u32, String> {
    let cname = std::ffi::CString::new(ifname).map_err(|_| "not an interface name".to_string())?;
    // SAFETY: a C string that outlives the call.
    match unsafe { libc::if_nametoindex(cname.as_ptr()) } {
        0 => Err(std::io::Error::last_os_error().to_string()),
        i => Ok(i),
    }
}

/// The attached XDP program's mode, by libbpf's bpf_xdp_query (netlink).
fn xdp_mode(ifindex: u32) -> Asked<XdpMode> {
    // SAFETY: zeroed is the opts' documented initial state, sz set.
    let mut opts: libbpf_sys::bpf_xdp_query_opts = unsafe { std::mem::zeroed() };
    opts.sz = std::mem::size_of::<libbpf_sys::bpf_xdp_query_opts>() as _;
    // SAFETY: opts lives across the call, its size declared.
    let r = unsafe { libbpf_sys::bpf_xdp_query(ifindex as i32, 0, &mut opts) };
    if r < 0 {
        return Asked::Failed(std::io::Error::from_raw_os_error(-r).to_string());
    }
    Asked::Said(match opts.attach_mode as u32 {
        libbpf_sys::XDP_ATTACHED_NONE => XdpMode::None,
        libbpf_sys::XDP_ATTACHED_DRV => XdpMode::Native,
        libbpf_sys::XDP_ATTACHED_SKB => XdpMode::Generic,
        libbpf_sys::XDP_ATTACHED_HW => XdpMode::Offloaded,
        _ => XdpMode::Several,
    })
}

/// The device's xdp_features, over the netdev generic netlink family;
/// Unsupported by a kernel without it (before 6.3).
fn xdp_features(ifindex: u32) -> Asked<u64> {
    match linerate_netlink::xdp_features::dump_bits() {
        Ok(None) => Asked::Unsupported,
        Ok(Some(all)) => match all.get(&ifindex) {
            Some(&b) => Asked::Said(b),
            None => Asked::Failed("the netdev family does not list it".into()),
        },
        Err(e) => Asked::Failed(format!("{e:#}")),
    }
}
