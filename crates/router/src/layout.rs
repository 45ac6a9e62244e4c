//! Rust mirrors of `bpf/include/router_maps.h`; the tests check sizes and
//! offsets against the BTF clang emitted for the C side.
use linerate_bpf::layout::Pod;

pub const ROUTER_IFACES: u32 = 1024;
pub const ROUTER_NEXTHOPS: u32 = 65536;

/// Refuses an interface index the `ifaces` map has no slot for.
pub fn check_ifindex(ifindex: u32) -> anyhow::Result<()> {
    if ifindex == 0 || ifindex >= ROUTER_IFACES {
        anyhow::bail!("interface index {ifindex} is out of range 1..{ROUTER_IFACES}");
    }
    Ok(())
}

pub const NH_VALID: u8 = 1;
pub const NH_RESOLVED: u8 = 2;
pub const NH_KERNEL: u8 = 4;
pub const NH_GROUP: u8 = 8;
/// tc acts on the egress: set instead of NH_RESOLVED, naming why frames
/// through this next hop pass.
pub const NH_TC: u8 = 16;

pub const NH_GROUP_BUCKETS: usize = 64;
pub const ROUTER_NH_GROUPS: u32 = 4096;

/// The C `enum reason`, in order: counter index and name.
pub const REASONS: [&str; 22] = [
    "forwarded",
    "pass_not_ip",
    "pass_not_ours",
    "pass_special",
    "pass_ttl",
    "pass_options",
    "pass_fragment",
    "pass_bad_csum",
    "pass_ext_hdr",
    "pass_local",
    "pass_no_route",
    "pass_no_neigh",
    "pass_mtu",
    "pass_same_if",
    "pass_no_port",
    "pass_not_forwarding",
    "pass_rp_filter",
    "pass_policy",
    "pass_netfilter",
    "pass_tc",
    "pass_multibuf",
    "drop_malformed",
];
pub const R_MAX: usize = REASONS.len();
/// The first reason: forwarded in XDP.
pub const R_FORWARDED: usize = 0;
/// The last: dropped as malformed; those between are the passes.
pub const R_DROP_MALFORMED: usize = R_MAX - 1;
/// The reasons a frame is passed to the kernel, by index.
pub const R_PASSES: std::ops::Range<usize> = R_FORWARDED + 1..R_DROP_MALFORMED;

/// The index of the reason called `name` in [`REASONS`].
pub fn reason_index(name: &str) -> Option<usize> {
    REASONS.iter().position(|r| *r == name)
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Nexthop {
    pub ifindex: u32,
    pub mtu: u16,
    pub flags: u8,
    pub used: u8,
    pub dmac: [u8; 6],
    pub smac: [u8; 6],
}

/// An ECMP route's member next-hop ids, one per bucket.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NhGroup {
    pub bucket: [u32; NH_GROUP_BUCKETS],
}

impl Default for NhGroup {
    fn default() -> Self {
        NhGroup {
            bucket: [0; NH_GROUP_BUCKETS],
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Iface {
    pub ifindex: u32,
    pub mac: [u8; 6],
    /// IFACE_FORWARD4 | IFACE_FORWARD6: what the kernel forwards when it
    /// comes in here.
    pub flags: u16,
}

/// The kernel forwards IPv4 arriving on the interface
/// (`net.ipv4.conf.<dev>.forwarding`).
pub const IFACE_FORWARD4: u16 = 1;
/// The kernel forwards IPv6 (`net.ipv6.conf.all.forwarding`).
pub const IFACE_FORWARD6: u16 = 2;
/// IPv4 reverse path filtering on the interface, strict (rp_filter 1) or
/// loose (2): the larger of `conf.all`'s and the interface's.
pub const IFACE_RPF_STRICT: u16 = 4;
pub const IFACE_RPF_LOOSE: u16 = 8;
/// The kernel forwards IPv4 (IPv6) from here, but not by the main table
/// alone (policy rules, an enslaved interface): set instead of
/// IFACE_FORWARD4 (6), it only names why such frames pass.
pub const IFACE_POLICY4: u16 = 16;
pub const IFACE_POLICY6: u16 = 32;
/// Netfilter sees what the kernel forwards of IPv4 (IPv6): set instead of
/// IFACE_FORWARD4 (6), naming why such frames pass.
pub const IFACE_NETFILTER4: u16 = 64;
pub const IFACE_NETFILTER6: u16 = 128;
/// tc acts on what comes in here: set instead of IFACE_FORWARD4 and
/// IFACE_FORWARD6, naming why both families pass.
pub const IFACE_TC: u16 = 256;
/// The driver sends multi-buffer XDP frames (NETDEV_XDP_ACT_NDO_XMIT_SG):
/// a frame that arrived in several buffers may be redirected here.
pub const IFACE_XMIT_SG: u16 = 512;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouterCounters {
    pub packets: [u64; R_MAX],
    pub bytes: [u64; R_MAX],
}

impl RouterCounters {
    /// Packets counted under reason `name` (one of [`REASONS`]).
    pub fn packets_of(&self, name: &str) -> u64 {
        self.packets[Self::index(name)]
    }

    /// Bytes counted under reason `name` (one of [`REASONS`]).
    pub fn bytes_of(&self, name: &str) -> u64 {
        self.bytes[Self::index(name)]
    }

    fn index(name: &str) -> usize {
        reason_index(name).unwrap_or_else(|| panic!("{name:?} is not one of the router's reasons"))
    }

    /// Adds `other`'s counts (another CPU's, another interface's).
    pub fn add(&mut self, other: &Self) {
        for i in 0..R_MAX {
            self.packets[i] += other.packets[i];
            self.bytes[i] += other.bytes[i];
        }
    }

    /// The counts since `earlier`.
    pub fn since(&self, earlier: &Self) -> Self {
        let mut d = *self;
        for i in 0..R_MAX {
            d.packets[i] -= earlier.packets[i];
            d.bytes[i] -= earlier.bytes[i];
        }
        d
    }

    /// Per-CPU values summed.
    pub fn sum(per_cpu: &[Self]) -> Self {
        per_cpu.iter().fold(Self::default(), |mut s, c| {
            s.add(c);
            s
        })
    }
}

unsafe impl Pod for Nexthop {}
unsafe impl Pod for Iface {}
unsafe impl Pod for NhGroup {}
unsafe impl Pod for RouterCounters {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The named indices are where the program counts (bpf/include/router_maps.h).
    #[test]
    fn named_reasons_are_where_the_program_counts() {
        assert_eq!(REASONS[R_FORWARDED], "forwarded");
        assert_eq!(REASONS[R_DROP_MALFORMED], "drop_malformed");
        assert!(R_PASSES.clone().all(|i| REASONS[i].starts_with("pass_")));
        assert_eq!(R_PASSES.len(), R_MAX - 2);
        assert_eq!(reason_index("pass_multibuf"), Some(R_DROP_MALFORMED - 1));
        assert_eq!(reason_index("pass_nothing"), None);
        let mut c = RouterCounters::default();
        c.packets[R_FORWARDED] = 7;
        c.bytes[R_DROP_MALFORMED] = 60;
        assert_eq!(
            (c.packets_of("forwarded"), c.bytes_of("drop_malformed")),
            (7, 60)
        );
    }
    use linerate_bpf::btf_layout::struct_layout;
    use linerate_bpf::objects;
    use std::mem::{offset_of, size_of};

    fn check(name: &str, size: usize, members: Vec<(&str, usize)>) {
        let l = struct_layout(objects::ROUTER, name).expect("BTF");
        assert_eq!(l.size, size, "size of struct {name}");
        let want: Vec<(String, usize)> = members
            .into_iter()
            .map(|(n, o)| (n.to_string(), o))
            .collect();
        assert_eq!(l.members, want, "members of struct {name}");
    }

    #[test]
    fn structs_match_c() {
        check(
            "nexthop",
            size_of::<Nexthop>(),
            vec![
                ("ifindex", offset_of!(Nexthop, ifindex)),
                ("mtu", offset_of!(Nexthop, mtu)),
                ("flags", offset_of!(Nexthop, flags)),
                ("used", offset_of!(Nexthop, used)),
                ("dmac", offset_of!(Nexthop, dmac)),
                ("smac", offset_of!(Nexthop, smac)),
            ],
        );
        check(
            "nh_group",
            size_of::<NhGroup>(),
            vec![("bucket", offset_of!(NhGroup, bucket))],
        );
        check(
            "iface",
            size_of::<Iface>(),
            vec![
                ("ifindex", offset_of!(Iface, ifindex)),
                ("mac", offset_of!(Iface, mac)),
                ("flags", offset_of!(Iface, flags)),
            ],
        );
        check(
            "router_counters",
            size_of::<RouterCounters>(),
            vec![
                ("packets", offset_of!(RouterCounters, packets)),
                ("bytes", offset_of!(RouterCounters, bytes)),
            ],
        );
    }
}
