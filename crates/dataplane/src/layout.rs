//! Rust mirrors of `bpf/include/router/maps.h`; the tests check sizes and
//! offsets against the BTF clang emitted for the C side.
use linerate_bpf::layout::Pod;

pub const ROUTER_IFACES: u32 = 1024;
/// Receive queues counted apart per interface (router_rxq; the last slot
/// takes the queues beyond).
pub const ROUTER_RXQ: u32 = 64;
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
/// With NH_KERNEL: an unreachable, prohibit or blackhole route (pass_no_route).
pub const NH_UNREACHABLE: u8 = 32;
/// With NH_KERNEL: main's connected network, the host without a neighbour
/// entry in the fast path (pass_no_neigh).
pub const NH_ONLINK: u8 = 64;
/// With NH_KERNEL: a route the fast path does not carry (pass_kernel_route).
pub const NH_UNSUPPORTED: u8 = 128;

pub const NH_GROUP_BUCKETS: usize = 64;
pub const ROUTER_NH_GROUPS: u32 = 4096;

/// The C `enum reason`, in order: counter index and name.
pub const REASONS: [&str; 40] = [
    "forwarded",
    "bridged",
    "pass_not_ip",
    "pass_not_ours",
    "pass_special",
    "pass_ttl",
    "pass_options",
    "pass_fragment",
    "pass_bad_csum",
    "pass_ext_hdr",
    "pass_local",
    "pass_kernel_route",
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
    "pass_fw_miss",
    "pass_fw_kernel",
    "pass_ct_none",
    "pass_ct_young",
    "pass_ct_uncarried",
    "pass_ct_proto",
    "pass_ct_invalid",
    "pass_ct_state",
    "pass_ct_window",
    "pass_ct_off",
    "pass_bridge_learn",
    "pass_bridge_flood",
    "pass_bridge_kernel",
    "pass_vlan",
    "drop_malformed",
    "drop_firewall",
    "drop_blackhole",
];
pub const R_MAX: usize = REASONS.len();
/// The first reason: forwarded in XDP.
pub const R_FORWARDED: usize = 0;
/// Bridged between a bridge's ports in XDP.
pub const R_BRIDGED: usize = 1;
/// The first drop: malformed; those between it and forwarded are the
/// passes, those after it the other drops.
pub const R_DROP_MALFORMED: usize = R_MAX - 3;
/// Dropped by the firewall (the nftables ruleset's verdict).
pub const R_DROP_FIREWALL: usize = R_MAX - 2;
/// Dropped by a `blackhole` policy rule.
pub const R_DROP_BLACKHOLE: usize = R_MAX - 1;
/// The reasons a frame is passed to the kernel, by index.
pub const R_PASSES: std::ops::Range<usize> = R_BRIDGED + 1..R_DROP_MALFORMED;
/// The reasons a frame is dropped, by index.
pub const R_DROPS: std::ops::Range<usize> = R_DROP_MALFORMED..R_MAX;

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
    /// The interface the kernel routes out of: `ifindex`, or the bridge
    /// whose port it is, or the VLAN device on it (0: `ifindex`).
    pub l3: u32,
    /// Out of a VLAN device: the tag pushed after the MACs, as on the wire
    /// (TPID, TCI); all zero: none.
    pub tag: [u8; 4],
}

impl Nexthop {
    /// The interface the kernel routes out of through it.
    pub fn l3(&self) -> u32 {
        if self.l3 != 0 {
            self.l3
        } else {
            self.ifindex
        }
    }
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
    /// The interface the kernel routes what arrives here as: this one, or
    /// the bridge it is a port of.
    pub l3: u32,
    /// With IFACE_TABLES4 (6): the tables a transit packet of the family
    /// is looked up in, in order ([`tables_word`]).
    pub tables4: u64,
    pub tables6: u64,
    /// BRIDGE_*: what the fast path bridges of what arrives here for
    /// another MAC (0: nothing).
    pub bridging: u16,
    /// A port with VLAN devices: 1 + its table in `vlan_slots` (0: none).
    /// The fast path's own (FastPath::write_interface fills it in).
    pub vlans: u16,
    pub pad: [u16; 2],
}

/// A bridge's port whose frames for other MACs than the bridge's the fast
/// path bridges by the FDB ([`FdbEntry`]).
pub const BRIDGE_PORT: u16 = 1;
/// br_netfilter shows bridged IPv4 (IPv6) to hooks that are there: those
/// frames are the kernel's.
pub const BRIDGE_NF4: u16 = 2;
pub const BRIDGE_NF6: u16 = 4;
/// ... and VLAN- or PPPoE-tagged frames too.
pub const BRIDGE_NF_TAGGED: u16 = 8;
/// A learning port of a bridge whose FDB the fast path holds: a frame
/// routed from here has its source known behind the port (else it passes,
/// for the kernel to learn), and marks it used.
pub const BRIDGE_LEARN: u16 = 16;
/// A bridge's port with VLAN devices on it: the kernel hands them their
/// tagged frames before the bridge; the fast path passes tagged frames.
pub const BRIDGE_VLAN_DEVICES: u16 = 32;
/// The fast path bridges to the entry's port.
pub const FDB_TO_PORT: u8 = 1;
/// The FDB's sets and ways (abi/router.h): 2^14 sets of 4 slots.
pub const FDB_WAYS: usize = 4;
pub const FDB_SET_BITS: u32 = 14;
pub const FDB_SETS: u32 = 1 << FDB_SET_BITS;
/// The most FDB entries the fast path holds (all bridges); a MAC whose
/// set is full is left out, and the kernel bridges to and from it.
pub const ROUTER_FDB_ENTRIES: u32 = FDB_SETS * FDB_WAYS as u32;

/// A VLAN device on one of the router's ports, as a tagged frame names it:
/// the port, the tag's TPID and VLAN id, both in network order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VlanKey {
    pub ifindex: u32,
    pub tpid: [u8; 2],
    pub vid: [u8; 2],
}

pub const ETH_P_8021Q: u16 = 0x8100;
pub const ETH_P_8021AD: u16 = 0x88a8;
/// VLAN devices the fast path holds (their entries in `ifaces`), on at
/// most ROUTER_VLAN_PORTS ports: a port with VLAN devices has a table of
/// VLAN_TABLE_SLOTS in `vlan_slots` ([`Iface::vlans`]).
pub const ROUTER_VLANS: usize = 4096;
pub const ROUTER_VLAN_PORTS: usize = 32;
pub const VLAN_TABLE_SLOTS: u32 = 8192;

impl VlanKey {
    pub fn new(ifindex: u32, tpid: u16, vid: u16) -> VlanKey {
        VlanKey {
            ifindex,
            tpid: tpid.to_be_bytes(),
            vid: (vid & 0x0fff).to_be_bytes(),
        }
    }

    /// Its place in its port's table of `vlan_slots`: 802.1Q ids, then
    /// 802.1ad ones.
    pub fn table_index(&self) -> u32 {
        let ad = u16::from_be_bytes(self.tpid) == ETH_P_8021AD;
        u16::from_be_bytes(self.vid) as u32 + if ad { 4096 } else { 0 }
    }

    /// The tag a frame leaving by the device carries: TPID, then the TCI
    /// (priority 0, as the kernel's default egress map gives it).
    pub fn tag(&self) -> [u8; 4] {
        [self.tpid[0], self.tpid[1], self.vid[0], self.vid[1]]
    }
}

/// A bridge's FDB entry's key: the bridge, a MAC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FdbKey {
    pub bridge: u32,
    pub mac: [u8; 6],
}

impl FdbKey {
    pub fn new(bridge: u32, mac: [u8; 6]) -> FdbKey {
        FdbKey { bridge, mac }
    }
}

/// The port a MAC is behind, and that port's MTU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FdbEntry {
    pub port: u32,
    pub mtu: u16,
    /// FDB_TO_PORT: the fast path bridges to `port`.
    pub flags: u8,
    /// Set by the fast path when it bridges a frame from this MAC.
    pub used: u8,
}

/// An FDB slot as the program reads it (`struct fdb_slot`): the key word
/// (crate::fdb::key), then the entry.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FdbSlot {
    pub key: u64,
    pub port: u32,
    pub mtu: u16,
    pub flags: u8,
    pub used: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FdbSet {
    pub way: [FdbSlot; FDB_WAYS],
}

impl Iface {
    /// An interface routed by main's table alone, as itself.
    pub fn new(ifindex: u32, mac: [u8; 6], flags: u16) -> Iface {
        Iface {
            ifindex,
            mac,
            flags,
            l3: ifindex,
            ..Default::default()
        }
    }
}

/// An interface's tables as its entry holds them: each table's FIB root
/// as its arena offset in MiB, four to the word from the low bits,
/// FIB_TABLES_END after the last (none: the word of no table).
pub fn tables_word(roots_mib: &[u16]) -> u64 {
    assert!(roots_mib.len() <= FIB_WALK_TABLES, "{roots_mib:?}");
    (0..FIB_WALK_TABLES).fold(0u64, |w, i| {
        let t = roots_mib.get(i).copied().unwrap_or(FIB_TABLES_END);
        w | (t as u64) << (16 * i)
    })
}

/// The tables of an entry's word, in order.
pub fn tables_of(word: u64) -> Vec<u16> {
    (0..FIB_WALK_TABLES)
        .map(|i| (word >> (16 * i)) as u16)
        .take_while(|t| *t != FIB_TABLES_END)
        .collect()
}

/// The most tables an interface's walk holds, and its end.
pub const FIB_WALK_TABLES: usize = 4;
pub const FIB_TABLES_END: u16 = 0xffff;
/// The first table of a word that names a rule program instead
/// ([`rules_word`]).
pub const FIB_TABLES_RULES: u16 = 0xfffe;
/// The IPv4 word of an interface whose packets main's table alone routes
/// (its root, MiB 0): the reverse path filter walks it for packets that
/// leave there; the forward lookup does not read it.
pub const FIB_TABLES_MAIN4: u64 = 0xffff_ffff_ffff_0000;
/// The next hop of what goes to the kernel for the router (its addresses).
pub const NH_ID_KERNEL: u32 = 1;
/// The kernel's next hops by what it does: NH_UNREACHABLE's, NH_ONLINK's,
/// NH_UNSUPPORTED's (the control plane's own ids start after them).
pub const NH_ID_UNREACHABLE: u32 = 3;
pub const NH_ID_ONLINK: u32 = 4;
pub const NH_ID_UNSUPPORTED: u32 = 5;

/// The word of an interface whose family walks rule program `program`
/// (an index of [`POLICY_PROGRAMS`]).
pub fn rules_word(program: u16) -> u64 {
    FIB_TABLES_RULES as u64 | (program as u64) << 16
}

/// The rule program a word names, if it names one.
pub fn rules_of(word: u64) -> Option<u16> {
    (word as u16 == FIB_TABLES_RULES).then_some((word >> 16) as u16)
}

/// Steps of a rule program, and programs (two families, two banks).
pub const POLICY_RULES: usize = 64;
pub const POLICY_PROGRAMS: usize = 4;

/// `enum rule_step`: what a step of a rule program does when it matches.
pub const RULE_END: u8 = 0;
pub const RULE_LOOKUP: u8 = 1;
pub const RULE_GOTO: u8 = 2;
pub const RULE_BLACKHOLE: u8 = 3;
pub const RULE_KERNEL: u8 = 4;
/// What a step's flags add to its words: `not`, the ports within their
/// ranges, and (IPv6) the addresses' low words (3 and 4) compared too.
pub const RULE_INVERT: u8 = 1;
pub const RULE_PORTS: u8 = 2;
pub const RULE_LOW: u8 = 4;
/// The words of a family's rule key (`struct rule_word`, abi/router.h):
/// IPv4 the source << 32 | the destination, then the meta word; IPv6 the
/// source's and the destination's high words, the meta word, their low
/// words. The meta word is the ingress ifindex << 32 | tos << 8 |
/// protocol.
pub const RULE_KEY4_WORDS: usize = 2;
pub const RULE_KEY6_WORDS: usize = 5;

/// A word of a rule key as a step matches it: the packet's word under
/// `mask` is `value`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleWord {
    pub value: u64,
    pub mask: u64,
}

/// A step of a rule program (`struct policy_rule`): a policy rule with
/// its selectors as the fast path matches them and what it does.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolicyRule {
    pub step: u8,
    pub flags: u8,
    pub table_mib: u16,
    /// A goto's: the step it jumps to.
    pub next: u16,
    pub pad: u16,
    pub sport_lo: u16,
    pub sport_hi: u16,
    pub dport_lo: u16,
    pub dport_hi: u16,
    pub word: [RuleWord; RULE_KEY6_WORDS],
}
/// The next-hop id of `throw` routes: a miss, the walk goes on.
pub const NH_ID_THROW: u32 = 2;

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
/// All netfilter sees of forwarded IPv4 (IPv6) is nftables filter chains
/// the firewall judges: set with IFACE_FORWARD4 (6), the family's
/// forwarded frames go through the verdict cache.
pub const IFACE_FIREWALL4: u16 = 1024;
/// The family judged by the firewall has nat chains: connections are
/// found, and mapped, before the route lookup (bpf/include/router/nat.h).
pub const IFACE_NAT4: u16 = 4096;
pub const IFACE_NAT6: u16 = 8192;
/// Policy rules look the family up in other tables than main alone: the
/// fast path walks `tables4` (`tables6`).
pub const IFACE_TABLES4: u16 = 16384;
pub const IFACE_TABLES6: u16 = 32768;
pub const IFACE_FIREWALL6: u16 = 2048;

/// The firewall's verdict cache (bpf/include/router/maps.h, `fw_*`).
pub const FW_CACHE_SETS: u32 = 1 << 17;
pub const FW_CACHE_WAYS: u32 = 2;
/// The sets a family's keys take, as bits (abi/firewall.h): 2^13 with a
/// classifier (its slots stay in the CPU's caches), all of them without.
pub const FW_SET_BITS_CLASSIFIED: u8 = 13;
pub const FW_SET_BITS_ALL: u8 = 17;
pub const FW_RULE_COUNTERS: u32 = 65536;
pub const FW_ENTRY_COUNTERS: usize = 4;
pub const FW_READ_IIF: u8 = 1;
pub const FW_READ_OIF: u8 = 2;
pub const FW_READ_SADDR: u8 = 4;
pub const FW_READ_DADDR: u8 = 8;
pub const FW_READ_L4PROTO: u8 = 16;
pub const FW_READ_NEXTHDR: u8 = 32;
pub const FW_READ_CT: u8 = 64;
/// The family has nat chains (bpf/include/router/nat.h).
pub const FW_READ_NAT: u8 = 128;
pub const FW_CT_ON: u32 = 1;
pub const FW_CT_CHECKSUM: u32 = 2;
pub const FW_CT_TCP_LIBERAL: u32 = 4;
/// The operator's `carry_tcp`: established TCP connections the ruleset
/// accepts are offered (ct_offers, a [`CtFlowKey`] each: the offering
/// packet's source in `a`) to be marked liberal and carried.
pub const FW_CT_TCP_CARRY: u32 = 8;
pub const FW_CT_ESTABLISHED: u8 = 2;
/// The reply direction's bit in [`FlowKey::ct`] (no `ct state` bit is
/// this high).
pub const FW_CT_REPLY: u8 = 0x80;
pub const CT_KEEP_BATCH: usize = 64;
/// The fast path's connection caches: sets of two ways, IPv4's
/// (ct_cache4) and IPv6's (ct_cache6), at most this many (sized at load:
/// crate::ct_cache::cache_sizes).
pub const CT4_SETS_MAX: usize = 1 << 21;
pub const CT6_SETS_MAX: usize = 1 << 19;
pub const CT_CACHE_WAYS: usize = 2;
/// A connection's set: the low `ct_bits` bits of the top this many of its
/// hash.
pub const CT_SET_BITS_TOP: u32 = 21;
pub const CT_KEEP_GONE: u8 = 1;
pub const CT_KEEP_KEPT: u8 = 2;
pub const FW_ACCEPT: u8 = 1;
pub const FW_DROP: u8 = 2;
pub const FW_KERNEL: u8 = 3;

/// What a family's ruleset reads: the key fields kept, and the transport
/// bytes (a 0xff mask byte each, `transport_end` one past the last).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FwReads {
    pub transport_mask: [u64; 2],
    pub fields: u8,
    pub transport_end: u8,
    /// The cache's sets the family's keys take: 1 << set_bits.
    pub set_bits: u8,
    pub pad: [u8; 5],
}

/// The generation, and each family's reads for either parity.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FwState {
    pub generation: u32,
    /// FW_CT_*.
    pub ct_flags: u32,
    /// Jiffies a connection's cache way is kept for after its last packet
    /// while others want its set.
    pub ct_idle: u32,
    /// Bits of a connection's hash that pick its set, `[ipv6]`: the sets
    /// in use (crate::ct_cache, `CtMaps::fit`).
    pub ct_bits: [u8; 2],
    pub pad: [u8; 2],
    /// `[generation & 1][ipv6]`.
    pub reads: [[FwReads; 2]; 2],
    /// What the kernel sets a carried connection's timeout to on each of
    /// its packets, ms: `[UDP, TCP]` (0: not read yet).
    pub ct_timeout_ms: [u32; 2],
}

/// Transport header bytes a key can hold: enough for TCP's flags (13)
/// and every port; a ruleset reading further is not cached.
pub const TRANSPORT_BYTES: usize = 16;

/// A forwarded packet as the verdict cache knows it (bpf/include/router/maps.h,
/// `struct fw_key`): only what the ruleset reads, the rest zero
/// (linerate_firewall::cache builds it from a packet and back).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// Addresses in network order (IPv4 in the first four bytes).
    pub saddr: [u8; 16],
    pub daddr: [u8; 16],
    pub iif: u32,
    pub oif: u32,
    /// The transport header's bytes read, the others zero.
    pub transport: [u8; TRANSPORT_BYTES],
    /// How many of the transport bytes up to the last one read the packet
    /// has: a rule reading past a short packet's end fails.
    pub transport_len: u8,
    pub l4proto: u8,
    pub nexthdr: u8,
    pub ipv6: u8,
    /// The connection as the fast path found it: its `ct state` bit, and
    /// [`FW_CT_REPLY`] for the reply direction (0 if not read).
    pub ct: u8,
    pub pad: [u8; 3],
}

/// A flow key as the program builds it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FwKey {
    pub flow: FlowKey,
}

/// A connection the fast path carries: its two ends in canonical order
/// (bpf/include/router/ct_judge.h, ct_key_of).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CtFlowKey {
    /// Network order; IPv4 in the first four bytes.
    pub a: [u8; 16],
    pub b: [u8; 16],
    /// Network order.
    pub aport: u16,
    pub bport: u16,
    pub l4proto: u8,
    pub ipv6: u8,
    pub pad: [u8; 2],
}

/// A way of the fast path's IPv4 connection cache (ct_cache4): a set's
/// two in one cache line.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtWay4 {
    /// Odd while written.
    pub seq: u32,
    /// Network order, as loaded.
    pub aport: u16,
    pub bport: u16,
    /// Network order.
    pub a: [u8; 4],
    pub b: [u8; 4],
    /// 0: empty.
    pub l4proto: u8,
    pub orig_from_a: u8,
    pub pad: [u8; 6],
    /// bpf_jiffies64 of the last packet carried.
    pub seen: u64,
}

/// A way of the fast path's IPv6 connection cache (ct_cache6).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtSlot {
    /// Odd while written.
    pub seq: u32,
    pub orig_from_a: u8,
    pub pad: [u8; 3],
    /// bpf_jiffies64 of the last packet carried.
    pub seen: u64,
    /// l4proto 0: empty.
    pub key: CtFlowKey,
    pub reserved: [u8; 8],
}

/// A way of the NAT stage's IPv4 table (nat_cache4): a direction of a
/// connection, by its tuple as it arrives, and its one rewrite; a set's
/// two in one cache line.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NatWay4 {
    /// Odd while written.
    pub seq: u32,
    /// Network order, as loaded.
    pub sport: u16,
    pub dport: u16,
    /// Network order.
    pub saddr: [u8; 4],
    pub daddr: [u8; 4],
    /// 0: empty.
    pub l4proto: u8,
    pub ct: u8,
    pub manip: u8,
    pub pad: u8,
    pub to_addr: [u8; 4],
    pub to_port: u16,
    pub pad2: [u8; 2],
    /// bpf_jiffies64's low 32 bits at the last packet carried.
    pub seen: u32,
}

/// A way of the NAT stage's IPv6 table (nat_cache6).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NatWay6 {
    /// Odd while written.
    pub seq: u32,
    pub ct: u8,
    pub manip: u8,
    pub pad: [u8; 2],
    /// bpf_jiffies64 of the last packet carried.
    pub seen: u64,
    /// The packet's source in `a`; l4proto 0: empty.
    pub key: CtFlowKey,
    pub to_sport: u16,
    pub to_dport: u16,
    pub pad2: [u8; 4],
    pub to_saddr: [u8; 16],
    pub to_daddr: [u8; 16],
    pub reserved: [u8; 32],
}

/// One record of ct_keeper's batch.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtKeep {
    pub key: CtFlowKey,
    pub timeout_ms: u32,
    /// 1: a way of the NAT stage's, `key` a direction's tuple.
    pub nat: u8,
    pub result: u8,
    pub pad: [u8; 2],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FwSlot {
    pub seq: u32,
    pub generation: u32,
    pub key: FwKey,
    pub verdict: u8,
    pub counters_n: u8,
    pub counters: [u16; FW_ENTRY_COUNTERS],
    pub reserved: [u8; 14],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FwMiss {
    pub key: FwKey,
    pub generation: u32,
    pub pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FwRuleCounter {
    pub packets: u64,
    pub bytes: u64,
}

/// The C `enum punt_class`, in order: the classes of what the fast path
/// passes to the kernel, each policed to a rate of its own.
pub const PUNT_CLASSES: [&str; 9] = [
    "neighbour",
    "control",
    "icmp",
    "local",
    "errors",
    "slow",
    "unresolved",
    "connections",
    "transit",
];

/// A class's limit (struct punt_limit): a frame every `interval_ns`,
/// up to `burst_ns` early; 0: no limit.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PuntLimit {
    pub interval_ns: u64,
    pub burst_ns: u64,
}

/// The limits (struct punt_policy), on a clock of `jiffy_ns` ticks.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PuntPolicy {
    pub jiffy_ns: u64,
    pub class: [PuntLimit; PUNT_CLASSES.len()],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouterCounters {
    pub packets: [u64; R_MAX],
    pub bytes: [u64; R_MAX],
    /// Frames of each pass reason the policer dropped (not in `packets`).
    pub policed: [u64; R_MAX],
}

// (By hand: std derives Default for arrays of at most 32.)
impl Default for RouterCounters {
    fn default() -> Self {
        RouterCounters {
            packets: [0; R_MAX],
            bytes: [0; R_MAX],
            policed: [0; R_MAX],
        }
    }
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
            self.policed[i] += other.policed[i];
        }
    }

    /// The counts since `earlier`.
    pub fn since(&self, earlier: &Self) -> Self {
        let mut d = *self;
        for i in 0..R_MAX {
            d.packets[i] -= earlier.packets[i];
            d.bytes[i] -= earlier.bytes[i];
            d.policed[i] -= earlier.policed[i];
        }
        d
    }

    /// Frames passed to the kernel, all reasons.
    pub fn passed(&self) -> u64 {
        R_PASSES.map(|i| self.packets[i]).sum()
    }

    /// Frames the policer dropped, all reasons.
    pub fn policed(&self) -> u64 {
        self.policed.iter().sum()
    }

    /// Frames dropped in XDP: the drops' reasons and the policed.
    pub fn dropped(&self) -> u64 {
        R_DROPS.map(|i| self.packets[i]).sum::<u64>() + self.policed()
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
unsafe impl Pod for PolicyRule {}
unsafe impl Pod for RuleWord {}
unsafe impl Pod for NhGroup {}
unsafe impl Pod for FdbSlot {}
unsafe impl Pod for FdbSet {}
unsafe impl Pod for RouterCounters {}
unsafe impl Pod for PuntLimit {}
unsafe impl Pod for PuntPolicy {}
unsafe impl Pod for FwState {}
unsafe impl Pod for CtFlowKey {}
unsafe impl Pod for CtSlot {}
unsafe impl Pod for CtWay4 {}
unsafe impl Pod for CtKeep {}
unsafe impl Pod for NatWay4 {}
unsafe impl Pod for NatWay6 {}
unsafe impl Pod for FwReads {}
unsafe impl Pod for FwSlot {}
unsafe impl Pod for FwMiss {}
unsafe impl Pod for FwKey {}
unsafe impl Pod for FlowKey {}
unsafe impl Pod for FwRuleCounter {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The named indices are where the program counts (bpf/include/router/maps.h).
    #[test]
    fn named_reasons_are_where_the_program_counts() {
        assert_eq!(REASONS[R_FORWARDED], "forwarded");
        assert_eq!(REASONS[R_BRIDGED], "bridged");
        assert_eq!(REASONS[R_DROP_MALFORMED], "drop_malformed");
        assert_eq!(REASONS[R_DROP_FIREWALL], "drop_firewall");
        assert_eq!(REASONS[R_DROP_BLACKHOLE], "drop_blackhole");
        assert!(R_PASSES.clone().all(|i| REASONS[i].starts_with("pass_")));
        assert!(R_DROPS.clone().all(|i| REASONS[i].starts_with("drop_")));
        assert_eq!(R_PASSES.len() + R_DROPS.len(), R_MAX - 2);
        assert_eq!(reason_index("pass_vlan"), Some(R_DROP_MALFORMED - 1));
        assert_eq!(reason_index("pass_nothing"), None);
        let mut c = RouterCounters::default();
        c.packets[R_FORWARDED] = 7;
        c.bytes[R_DROP_MALFORMED] = 60;
        assert_eq!(
            (c.packets_of("forwarded"), c.bytes_of("drop_malformed")),
            (7, 60)
        );
    }
    /// The constants of the tables' walk are abi/router.h's.
    #[test]
    fn table_walk_constants_are_the_headers() {
        let h = include_str!("../../../bpf/include/abi/router.h");
        let define = |name: &str| -> u64 {
            let line = h
                .lines()
                .find(|l| l.starts_with(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("#define {name}"));
            let v = line.split_whitespace().nth(2).unwrap();
            let v = v.trim_end_matches("ull");
            match v.strip_prefix("0x") {
                Some(x) => u64::from_str_radix(x, 16).unwrap(),
                None => v.parse().unwrap(),
            }
        };
        assert_eq!(define("IFACE_TABLES4"), IFACE_TABLES4 as u64);
        assert_eq!(define("IFACE_TABLES6"), IFACE_TABLES6 as u64);
        for (name, v) in [
            ("BRIDGE_PORT", BRIDGE_PORT),
            ("BRIDGE_NF4", BRIDGE_NF4),
            ("BRIDGE_NF6", BRIDGE_NF6),
            ("BRIDGE_NF_TAGGED", BRIDGE_NF_TAGGED),
            ("BRIDGE_LEARN", BRIDGE_LEARN),
            ("BRIDGE_VLAN_DEVICES", BRIDGE_VLAN_DEVICES),
            ("FDB_TO_PORT", FDB_TO_PORT as u16),
        ] {
            assert_eq!(define(name), v as u64, "{name}");
        }
        assert_eq!(define("FDB_WAYS"), FDB_WAYS as u64);
        assert_eq!(define("ROUTER_VLANS"), ROUTER_VLANS as u64);
        assert_eq!(define("ROUTER_VLAN_PORTS"), ROUTER_VLAN_PORTS as u64);
        assert_eq!(define("VLAN_TABLE_SLOTS"), VLAN_TABLE_SLOTS as u64);
        assert_eq!(define("FDB_SET_BITS"), FDB_SET_BITS as u64);
        assert_eq!(define("FIB_WALK_TABLES"), FIB_WALK_TABLES as u64);
        assert_eq!(define("FIB_TABLES_END"), FIB_TABLES_END as u64);
        assert_eq!(define("NH_ID_THROW"), NH_ID_THROW as u64);
        assert_eq!(define("NH_ID_KERNEL"), NH_ID_KERNEL as u64);
        for (name, v) in [
            ("NH_ID_UNREACHABLE", NH_ID_UNREACHABLE),
            ("NH_ID_ONLINK", NH_ID_ONLINK),
            ("NH_ID_UNSUPPORTED", NH_ID_UNSUPPORTED),
        ] {
            assert_eq!(define(name), v as u64, "{name}");
        }
        for (name, v) in [
            ("NH_UNREACHABLE", NH_UNREACHABLE),
            ("NH_ONLINK", NH_ONLINK),
            ("NH_UNSUPPORTED", NH_UNSUPPORTED),
        ] {
            assert_eq!(define(name), v as u64, "{name}");
        }
        assert_eq!(define("FIB_TABLES_RULES"), FIB_TABLES_RULES as u64);
        assert_eq!(define("FIB_TABLES_MAIN4"), FIB_TABLES_MAIN4);
        let main4 = linerate_bpf::fib_arena::root_mib(linerate_bpf::fib_arena::FIB4);
        assert_eq!(tables_word(&[main4]), FIB_TABLES_MAIN4);
        assert_eq!(define("POLICY_RULES"), POLICY_RULES as u64);
        assert_eq!(define("POLICY_PROGRAMS"), POLICY_PROGRAMS as u64);
        assert_eq!(define("RULE_KEY4_WORDS"), RULE_KEY4_WORDS as u64);
        assert_eq!(define("RULE_KEY6_WORDS"), RULE_KEY6_WORDS as u64);
        for (name, v) in [
            ("RULE_INVERT", RULE_INVERT),
            ("RULE_PORTS", RULE_PORTS),
            ("RULE_LOW", RULE_LOW),
        ] {
            assert_eq!(define(name), v as u64, "{name}");
        }
        assert_eq!(rules_of(rules_word(3)), Some(3));
        assert_eq!(rules_of(tables_word(&[1216])), None);
        // The word: in order from the low bits, ended.
        let w = tables_word(&[1216, 0]);
        assert_eq!(w, 1216 | 0xffff_ffff_0000_0000);
        assert_eq!(tables_of(w), [1216, 0]);
        assert_eq!(tables_of(tables_word(&[])), Vec::<u16>::new());
        assert_eq!(tables_of(tables_word(&[1, 2, 3, 4])), [1, 2, 3, 4]);
    }

    use linerate_bpf::btf_layout::struct_layout;
    use linerate_bpf::objects;
    use std::mem::{offset_of, size_of};

    fn check(name: &str, size: usize, members: Vec<(&str, usize)>) {
        let l =
            struct_layout(objects::ROUTER, name).unwrap_or_else(|| panic!("struct {name} in BTF"));
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
                ("l3", offset_of!(Nexthop, l3)),
                ("tag", offset_of!(Nexthop, tag)),
            ],
        );
        check(
            "policy_rule",
            size_of::<PolicyRule>(),
            vec![
                ("step", offset_of!(PolicyRule, step)),
                ("flags", offset_of!(PolicyRule, flags)),
                ("table_mib", offset_of!(PolicyRule, table_mib)),
                ("next", offset_of!(PolicyRule, next)),
                ("pad", offset_of!(PolicyRule, pad)),
                ("sport_lo", offset_of!(PolicyRule, sport_lo)),
                ("sport_hi", offset_of!(PolicyRule, sport_hi)),
                ("dport_lo", offset_of!(PolicyRule, dport_lo)),
                ("dport_hi", offset_of!(PolicyRule, dport_hi)),
                ("word", offset_of!(PolicyRule, word)),
            ],
        );
        check(
            "rule_word",
            size_of::<RuleWord>(),
            vec![
                ("value", offset_of!(RuleWord, value)),
                ("mask", offset_of!(RuleWord, mask)),
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
                ("l3", offset_of!(Iface, l3)),
                ("tables4", offset_of!(Iface, tables4)),
                ("tables6", offset_of!(Iface, tables6)),
                ("bridging", offset_of!(Iface, bridging)),
                ("vlans", offset_of!(Iface, vlans)),
                ("pad", offset_of!(Iface, pad)),
            ],
        );
        check(
            "fdb_slot",
            size_of::<FdbSlot>(),
            vec![
                ("key", offset_of!(FdbSlot, key)),
                ("port", offset_of!(FdbSlot, port)),
                ("mtu", offset_of!(FdbSlot, mtu)),
                ("flags", offset_of!(FdbSlot, flags)),
                ("used", offset_of!(FdbSlot, used)),
            ],
        );
        check(
            "fdb_set",
            size_of::<FdbSet>(),
            vec![("way", offset_of!(FdbSet, way))],
        );
        check(
            "fw_reads",
            size_of::<FwReads>(),
            vec![
                ("transport_mask", offset_of!(FwReads, transport_mask)),
                ("fields", offset_of!(FwReads, fields)),
                ("transport_end", offset_of!(FwReads, transport_end)),
                ("set_bits", offset_of!(FwReads, set_bits)),
                ("pad", offset_of!(FwReads, pad)),
            ],
        );
        check(
            "fw_state",
            size_of::<FwState>(),
            vec![
                ("generation", offset_of!(FwState, generation)),
                ("ct_flags", offset_of!(FwState, ct_flags)),
                ("ct_idle", offset_of!(FwState, ct_idle)),
                ("ct_bits", offset_of!(FwState, ct_bits)),
                ("pad", offset_of!(FwState, pad)),
                ("reads", offset_of!(FwState, reads)),
                ("ct_timeout_ms", offset_of!(FwState, ct_timeout_ms)),
            ],
        );
        let key = |field: usize| offset_of!(FwKey, flow) + field;
        check(
            "fw_key",
            size_of::<FwKey>(),
            vec![
                ("saddr", key(offset_of!(FlowKey, saddr))),
                ("daddr", key(offset_of!(FlowKey, daddr))),
                ("iif", key(offset_of!(FlowKey, iif))),
                ("oif", key(offset_of!(FlowKey, oif))),
                ("transport", key(offset_of!(FlowKey, transport))),
                ("transport_len", key(offset_of!(FlowKey, transport_len))),
                ("l4proto", key(offset_of!(FlowKey, l4proto))),
                ("nexthdr", key(offset_of!(FlowKey, nexthdr))),
                ("ipv6", key(offset_of!(FlowKey, ipv6))),
                ("ct", key(offset_of!(FlowKey, ct))),
                ("pad", key(offset_of!(FlowKey, pad))),
            ],
        );
        check(
            "fw_slot",
            size_of::<FwSlot>(),
            vec![
                ("seq", offset_of!(FwSlot, seq)),
                ("generation", offset_of!(FwSlot, generation)),
                ("key", offset_of!(FwSlot, key)),
                ("verdict", offset_of!(FwSlot, verdict)),
                ("counters_n", offset_of!(FwSlot, counters_n)),
                ("counters", offset_of!(FwSlot, counters)),
                ("reserved", offset_of!(FwSlot, reserved)),
            ],
        );
        // No map holds a fw_miss (a ring buffer has no value type), so
        // clang emits no BTF for it: router/firewall.h asserts the same offsets.
        assert_eq!(
            (
                size_of::<FwMiss>(),
                offset_of!(FwMiss, generation),
                offset_of!(FwMiss, pad)
            ),
            (72, 64, 68)
        );
        check(
            "ct_flow_key",
            size_of::<CtFlowKey>(),
            vec![
                ("a", offset_of!(CtFlowKey, a)),
                ("b", offset_of!(CtFlowKey, b)),
                ("aport", offset_of!(CtFlowKey, aport)),
                ("bport", offset_of!(CtFlowKey, bport)),
                ("l4proto", offset_of!(CtFlowKey, l4proto)),
                ("ipv6", offset_of!(CtFlowKey, ipv6)),
                ("pad", offset_of!(CtFlowKey, pad)),
            ],
        );
        check(
            "ct_way4",
            size_of::<CtWay4>(),
            vec![
                ("seq", offset_of!(CtWay4, seq)),
                ("aport", offset_of!(CtWay4, aport)),
                ("bport", offset_of!(CtWay4, bport)),
                ("a", offset_of!(CtWay4, a)),
                ("b", offset_of!(CtWay4, b)),
                ("l4proto", offset_of!(CtWay4, l4proto)),
                ("orig_from_a", offset_of!(CtWay4, orig_from_a)),
                ("pad", offset_of!(CtWay4, pad)),
                ("seen", offset_of!(CtWay4, seen)),
            ],
        );
        check(
            "ct_slot",
            size_of::<CtSlot>(),
            vec![
                ("seq", offset_of!(CtSlot, seq)),
                ("orig_from_a", offset_of!(CtSlot, orig_from_a)),
                ("pad", offset_of!(CtSlot, pad)),
                ("seen", offset_of!(CtSlot, seen)),
                ("key", offset_of!(CtSlot, key)),
                ("reserved", offset_of!(CtSlot, reserved)),
            ],
        );
        check(
            "nat_way4",
            size_of::<NatWay4>(),
            vec![
                ("seq", offset_of!(NatWay4, seq)),
                ("sport", offset_of!(NatWay4, sport)),
                ("dport", offset_of!(NatWay4, dport)),
                ("saddr", offset_of!(NatWay4, saddr)),
                ("daddr", offset_of!(NatWay4, daddr)),
                ("l4proto", offset_of!(NatWay4, l4proto)),
                ("ct", offset_of!(NatWay4, ct)),
                ("manip", offset_of!(NatWay4, manip)),
                ("pad", offset_of!(NatWay4, pad)),
                ("to_addr", offset_of!(NatWay4, to_addr)),
                ("to_port", offset_of!(NatWay4, to_port)),
                ("pad2", offset_of!(NatWay4, pad2)),
                ("seen", offset_of!(NatWay4, seen)),
            ],
        );
        check(
            "nat_way6",
            size_of::<NatWay6>(),
            vec![
                ("seq", offset_of!(NatWay6, seq)),
                ("ct", offset_of!(NatWay6, ct)),
                ("manip", offset_of!(NatWay6, manip)),
                ("pad", offset_of!(NatWay6, pad)),
                ("seen", offset_of!(NatWay6, seen)),
                ("key", offset_of!(NatWay6, key)),
                ("to_sport", offset_of!(NatWay6, to_sport)),
                ("to_dport", offset_of!(NatWay6, to_dport)),
                ("pad2", offset_of!(NatWay6, pad2)),
                ("to_saddr", offset_of!(NatWay6, to_saddr)),
                ("to_daddr", offset_of!(NatWay6, to_daddr)),
                ("reserved", offset_of!(NatWay6, reserved)),
            ],
        );
        // No map holds a ct_keep either (ct_keeper's frame does):
        // router.bpf.c asserts the same.
        assert_eq!(
            (
                size_of::<CtKeep>(),
                offset_of!(CtKeep, timeout_ms),
                offset_of!(CtKeep, nat),
                offset_of!(CtKeep, result)
            ),
            (48, 40, 44, 45)
        );
        check(
            "fw_rule_counter",
            size_of::<FwRuleCounter>(),
            vec![
                ("packets", offset_of!(FwRuleCounter, packets)),
                ("bytes", offset_of!(FwRuleCounter, bytes)),
            ],
        );
        check(
            "router_counters",
            size_of::<RouterCounters>(),
            vec![
                ("packets", offset_of!(RouterCounters, packets)),
                ("bytes", offset_of!(RouterCounters, bytes)),
                ("policed", offset_of!(RouterCounters, policed)),
            ],
        );
        check(
            "punt_limit",
            size_of::<PuntLimit>(),
            vec![
                ("interval_ns", offset_of!(PuntLimit, interval_ns)),
                ("burst_ns", offset_of!(PuntLimit, burst_ns)),
            ],
        );
        check(
            "punt_policy",
            size_of::<PuntPolicy>(),
            vec![
                ("jiffy_ns", offset_of!(PuntPolicy, jiffy_ns)),
                ("class", offset_of!(PuntPolicy, class)),
            ],
        );
    }

    /// The classes are abi/router.h's enum punt_class, in order.
    #[test]
    fn punt_classes_are_the_headers() {
        let h = include_str!("../../../bpf/include/abi/router.h");
        let body = h.split("enum punt_class {").nth(1).unwrap();
        let body = body.split("};").next().unwrap();
        let names: Vec<String> = body
            .lines()
            .filter_map(|l| l.trim().strip_prefix("PUNT_"))
            .map(|l| {
                l.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                    .next()
                    .unwrap()
                    .to_lowercase()
            })
            .collect();
        let mut want: Vec<String> = PUNT_CLASSES.iter().map(|c| c.to_string()).collect();
        want.push("classes".into());
        assert_eq!(names, want);
    }
}
