//! The fast path in Rust: the entries the mirror writes, held in memory,
//! and `bpf/router/router.bpf.c`'s decision on a frame over them, step for step
//! (the single-buffer `router` entry). It lets the mirror's logic be
//! tested without root or a kernel; the router's root tests run the same
//! scenarios on the BPF maps and this model side by side and require the
//! same verdict, reason and bytes (tests/mirror.rs), which keeps the two
//! one.
use crate::dataplane::Dataplane;
use crate::fastpath::FastPath;
use crate::fw_model::{ipv6_ext, FwFrame, FwModel, FwOutcome};
use crate::layout::{
    rules_of, tables_of, FdbEntry, FdbKey, Iface, Nexthop, NhGroup, PolicyRule, VlanKey,
    BRIDGE_NF4, BRIDGE_NF6, BRIDGE_NF_TAGGED, BRIDGE_PORT, BRIDGE_VLAN_DEVICES, FDB_TO_PORT,
    IFACE_FIREWALL4, IFACE_FIREWALL6, IFACE_FORWARD4, IFACE_FORWARD6, IFACE_NETFILTER4,
    IFACE_NETFILTER6, IFACE_POLICY4, IFACE_POLICY6, IFACE_RPF_LOOSE, IFACE_RPF_STRICT,
    IFACE_TABLES4, IFACE_TABLES6, IFACE_TC, NH_GROUP, NH_GROUP_BUCKETS, NH_ID_KERNEL, NH_ID_THROW,
    NH_KERNEL, NH_ONLINK, NH_RESOLVED, NH_TC, NH_UNREACHABLE, NH_UNSUPPORTED, NH_VALID,
    POLICY_PROGRAMS, ROUTER_IFACES, ROUTER_NEXTHOPS, ROUTER_NH_GROUPS,
};
use crate::local;
use crate::rules::{self, POLICY_DROP, POLICY_KERNEL};
use anyhow::{bail, Result};
use linerate_bpf::fib_arena::TABLE_SLOTS;
use linerate_bpf::test_run::XdpAction;
use linerate_fib::{Fib, Ipv6Layout, Key, Shape, Table, Tables, Write};
use linerate_netlink::policy::Flow;
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, HashSet};

/// The reasons of `enum reason`, by name (crate::layout::REASONS).
pub mod reason {
    pub const FORWARDED: &str = "forwarded";
    pub const BRIDGED: &str = "bridged";
    pub const NOT_IP: &str = "pass_not_ip";
    pub const NOT_OURS: &str = "pass_not_ours";
    pub const SPECIAL: &str = "pass_special";
    pub const TTL: &str = "pass_ttl";
    pub const OPTIONS: &str = "pass_options";
    pub const FRAGMENT: &str = "pass_fragment";
    pub const BAD_CSUM: &str = "pass_bad_csum";
    pub const EXT_HDR: &str = "pass_ext_hdr";
    pub const LOCAL: &str = "pass_local";
    pub const KERNEL_ROUTE: &str = "pass_kernel_route";
    pub const NO_ROUTE: &str = "pass_no_route";
    pub const NO_NEIGH: &str = "pass_no_neigh";
    pub const MTU: &str = "pass_mtu";
    pub const SAME_IF: &str = "pass_same_if";
    pub const NO_PORT: &str = "pass_no_port";
    pub const NOT_FORWARDING: &str = "pass_not_forwarding";
    pub const RP_FILTER: &str = "pass_rp_filter";
    pub const POLICY: &str = "pass_policy";
    pub const NETFILTER: &str = "pass_netfilter";
    pub const TC: &str = "pass_tc";
    pub const MULTIBUF: &str = "pass_multibuf";
    pub const FW_MISS: &str = "pass_fw_miss";
    pub const FW_KERNEL: &str = "pass_fw_kernel";
    pub const CT_NONE: &str = "pass_ct_none";
    pub const CT_YOUNG: &str = "pass_ct_young";
    pub const CT_UNCARRIED: &str = "pass_ct_uncarried";
    pub const CT_PROTO: &str = "pass_ct_proto";
    pub const CT_INVALID: &str = "pass_ct_invalid";
    pub const CT_STATE: &str = "pass_ct_state";
    pub const CT_WINDOW: &str = "pass_ct_window";
    pub const CT_OFF: &str = "pass_ct_off";
    pub const BRIDGE_LEARN: &str = "pass_bridge_learn";
    pub const BRIDGE_FLOOD: &str = "pass_bridge_flood";
    pub const BRIDGE_KERNEL: &str = "pass_bridge_kernel";
    pub const VLAN: &str = "pass_vlan";
    pub const DROP_MALFORMED: &str = "drop_malformed";
    pub const DROP_FIREWALL: &str = "drop_firewall";
    pub const DROP_BLACKHOLE: &str = "drop_blackhole";
}

/// What the program did with a frame: its action, the reason it counted,
/// and the frame as it left (rewritten when redirected, else as it came).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub action: XdpAction,
    pub reason: &'static str,
    pub frame: Vec<u8>,
}

/// A family's FIB as the arena holds it: the entries written so far.
#[derive(Default)]
struct TableCopy {
    shape: Option<Shape>,
    root: Vec<u32>,
    groups: Vec<u32>,
    shortcut: Vec<u32>,
}

impl TableCopy {
    fn apply<K: Key>(&mut self, fib: &Fib<K>, writes: &[Write]) {
        if self.shape.is_none() {
            self.shape = Some(fib.shape());
            self.root = vec![0; fib.root().len()];
        }
        for w in writes {
            let (mine, theirs) = match w.table {
                Table::Root => (&mut self.root, fib.root()),
                Table::Groups => (&mut self.groups, fib.groups()),
                Table::Shortcut => (&mut self.shortcut, fib.shortcut()),
            };
            if mine.len() < theirs.len() {
                mine.resize(theirs.len(), 0);
            }
            let i = w.index as usize;
            mine[i] = theirs[i];
        }
    }

    /// The whole of `fib`, at once.
    fn load<K: Key>(&mut self, fib: &Fib<K>) {
        self.shape = Some(fib.shape());
        self.root = fib.root().to_vec();
        self.groups = fib.groups().to_vec();
        self.shortcut = fib.shortcut().to_vec();
    }

    /// The next-hop id the fast path finds for `addr` (0: none).
    fn lookup<K: Key>(&self, addr: K) -> u32 {
        let Some(shape) = self.shape else { return 0 };
        let tables = Tables {
            shape,
            root: &self.root,
            groups: &self.groups,
            shortcut: &self.shortcut,
        };
        tables.lookup(addr).unwrap_or(0)
    }
}

/// The router's maps in memory, and the program's decision over them.
pub struct Model {
    ipv6: Ipv6Layout,
    ifaces: HashMap<u32, Iface>,
    vlan_ifaces: HashMap<VlanKey, Iface>,
    /// The egress ports (both devmaps hold the same).
    tx_ports: BTreeSet<u32>,
    nexthops: HashMap<u32, Nexthop>,
    /// Next hops sent through since their mark was last taken.
    used: RefCell<BTreeSet<u32>>,
    nh_groups: HashMap<u32, NhGroup>,
    local_src4: HashMap<u32, u64>,
    /// Each table slot's FIB (0: main's).
    fib4: Vec<TableCopy>,
    fib6: Vec<TableCopy>,
    /// The rule programs' steps (the end after them).
    programs: Vec<Vec<PolicyRule>>,
    fdb: HashMap<FdbKey, FdbEntry>,
    /// Where the program's array would hold them (the same room).
    fdb_places: crate::fdb::Places,
    /// FDB entries frames were bridged from since their mark was taken.
    fdb_used: RefCell<BTreeSet<FdbKey>>,
    fw: FwModel,
}

impl Model {
    pub fn new(ipv6: Ipv6Layout) -> Self {
        Model {
            ipv6,
            ifaces: HashMap::new(),
            vlan_ifaces: HashMap::new(),
            tx_ports: BTreeSet::new(),
            nexthops: HashMap::new(),
            used: RefCell::new(BTreeSet::new()),
            nh_groups: HashMap::new(),
            local_src4: HashMap::new(),
            fib4: (0..TABLE_SLOTS).map(|_| TableCopy::default()).collect(),
            fib6: (0..TABLE_SLOTS).map(|_| TableCopy::default()).collect(),
            programs: vec![Vec::new(); POLICY_PROGRAMS],
            fdb: HashMap::new(),
            fdb_places: Default::default(),
            fdb_used: RefCell::new(BTreeSet::new()),
            fw: FwModel::default(),
        }
    }

    /// The firewall's verdict cache, generation and counters.
    pub fn fw(&self) -> &FwModel {
        &self.fw
    }

    pub fn fw_mut(&mut self) -> &mut FwModel {
        &mut self.fw
    }

    /// Next hop `id` as written.
    pub fn nexthop(&self, id: u32) -> Nexthop {
        self.nexthops.get(&id).copied().unwrap_or_default()
    }

    /// The program's decision on `frame` arriving on `ingress`.
    pub fn run(&self, frame: &[u8], ingress: u32) -> Verdict {
        let mut out = frame.to_vec();
        let (action, reason) = self.route_frame(&mut out, ingress);
        if action != XdpAction::Redirect {
            out = frame.to_vec();
        }
        Verdict {
            action,
            reason,
            frame: out,
        }
    }

    fn route_frame(&self, f: &mut Vec<u8>, ingress: u32) -> (XdpAction, &'static str) {
        use reason::*;
        let pass = |r| (XdpAction::Pass, r);
        if f.len() < 14 {
            return (XdpAction::Drop, DROP_MALFORMED);
        }
        let slot = if ingress < ROUTER_IFACES { ingress } else { 0 };
        let ifc = self.ifaces.get(&slot).copied().unwrap_or_default();
        if ifc.ifindex != ingress {
            return pass(NOT_OURS);
        }
        // A bridge's port: the bridge's way, as an untagged frame, unless
        // VLAN devices on it may take it first (the kernel's).
        if matches!(
            u16::from_be_bytes([f[12], f[13]]),
            crate::layout::ETH_P_8021Q | crate::layout::ETH_P_8021AD
        ) && ifc.bridging & (BRIDGE_PORT | BRIDGE_VLAN_DEVICES) != BRIDGE_PORT
        {
            if ifc.bridging & BRIDGE_VLAN_DEVICES != 0 {
                return pass(VLAN);
            }
            if f.len() < 18 {
                return (XdpAction::Drop, DROP_MALFORMED);
            }
            match self.vlan_device(f, ingress) {
                Some(sub) => {
                    f.drain(12..16);
                    return self.route_as(f, &sub, ingress);
                }
                None => return pass(VLAN),
            }
        }
        self.route_as(f, &ifc, ingress)
    }

    /// The VLAN device a tagged frame is routed as (route_frame): its
    /// port's and its tag's, if the fast path holds it; none for a
    /// priority tag, a second tag. (A frame passed goes back whole:
    /// [`Model::run`].)
    fn vlan_device(&self, f: &[u8], ingress: u32) -> Option<Iface> {
        use crate::layout::{ETH_P_8021AD, ETH_P_8021Q};
        let key = VlanKey {
            ifindex: ingress,
            tpid: [f[12], f[13]],
            vid: [f[14] & 0x0f, f[15]],
        };
        let inner = u16::from_be_bytes([f[16], f[17]]);
        if key.vid == [0, 0] || inner == ETH_P_8021Q || inner == ETH_P_8021AD {
            return None;
        }
        self.vlan_ifaces.get(&key).copied()
    }

    /// A frame arriving as on `ifc` (a port, or a VLAN device on it).
    fn route_as(&self, f: &mut Vec<u8>, ifc: &Iface, ingress: u32) -> (XdpAction, &'static str) {
        use reason::*;
        let ifc = *ifc;
        let pass = |r| (XdpAction::Pass, r);
        if f[0] & 1 != 0 {
            return pass(SPECIAL);
        }
        if f[0..6] != ifc.mac {
            if ifc.bridging & BRIDGE_PORT != 0 {
                return self.bridge_frame(f, &ifc, ingress);
            }
            return pass(NOT_OURS);
        }
        if ifc.bridging & crate::layout::BRIDGE_LEARN != 0 {
            let src = self.fdb_source(f, &ifc, ingress);
            match src {
                Some(k) => {
                    self.fdb_used.borrow_mut().insert(k);
                }
                None => return pass(BRIDGE_LEARN),
            }
        }
        let not_forwarded = |policy, netfilter| {
            pass(if ifc.flags & policy != 0 {
                POLICY
            } else if ifc.flags & IFACE_TC != 0 {
                TC
            } else if ifc.flags & netfilter != 0 {
                NETFILTER
            } else {
                NOT_FORWARDING
            })
        };
        match u16::from_be_bytes([f[12], f[13]]) {
            0x0800 if ifc.flags & IFACE_FORWARD4 == 0 => {
                not_forwarded(IFACE_POLICY4, IFACE_NETFILTER4)
            }
            0x0800 => self.forward_ipv4(f, ifc.l3, ifc.flags, ifc.tables4),
            0x86dd if ifc.flags & IFACE_FORWARD6 == 0 => {
                not_forwarded(IFACE_POLICY6, IFACE_NETFILTER6)
            }
            0x86dd => self.forward_ipv6(f, ifc.l3, ifc.flags, ifc.tables6),
            _ => pass(NOT_IP),
        }
    }

    /// The key of the frame's source's FDB entry, if the bridge holds it
    /// behind the port it came in by (router.bpf.c's fdb_source).
    fn fdb_source(&self, f: &[u8], ifc: &Iface, ingress: u32) -> Option<FdbKey> {
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&f[6..12]);
        let key = FdbKey::new(ifc.l3, mac);
        self.fdb
            .get(&key)
            .filter(|e| e.port == ingress)
            .map(|_| key)
    }

    /// A frame for another MAC on a bridge's port (router.bpf.c's
    /// bridge_frame).
    fn bridge_frame(&self, f: &[u8], ifc: &Iface, ingress: u32) -> (XdpAction, &'static str) {
        use reason::*;
        let pass = |r| (XdpAction::Pass, r);
        let nf = ifc.bridging;
        let kernel = match u16::from_be_bytes([f[12], f[13]]) {
            0x0806 => true,
            0x0800 => nf & BRIDGE_NF4 != 0,
            0x86dd => nf & BRIDGE_NF6 != 0,
            0x8100 | 0x88a8 | 0x8864 => nf & BRIDGE_NF_TAGGED != 0,
            _ => false,
        };
        if kernel {
            return pass(BRIDGE_KERNEL);
        }
        let Some(src) = self.fdb_source(f, ifc, ingress) else {
            return pass(BRIDGE_LEARN);
        };
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&f[0..6]);
        let Some(dst) = self.fdb.get(&FdbKey::new(ifc.l3, mac)) else {
            return pass(BRIDGE_FLOOD);
        };
        if dst.port == ingress {
            return pass(SAME_IF);
        }
        if dst.flags & FDB_TO_PORT == 0 {
            return pass(BRIDGE_KERNEL);
        }
        if f.len() - 14 > dst.mtu as usize {
            return pass(MTU);
        }
        if !self.tx_ports.contains(&dst.port) {
            return pass(NO_PORT);
        }
        self.fdb_used.borrow_mut().insert(src);
        (XdpAction::Redirect, BRIDGED)
    }

    /// `iif`: the interface the frame arrived as (a bridge's port, as the
    /// bridge), for the rules, the same-interface check, the reverse path
    /// and the firewall.
    fn forward_ipv4(
        &self,
        f: &mut Vec<u8>,
        iif: u32,
        ifflags: u16,
        tables: u64,
    ) -> (XdpAction, &'static str) {
        use reason::*;
        let pass = |r| (XdpAction::Pass, r);
        let drop = (XdpAction::Drop, DROP_MALFORMED);
        if f.len() < 14 + 20 {
            return drop;
        }
        let ip = &f[14..34];
        let (version, ihl) = (ip[0] >> 4, (ip[0] & 15) as usize);
        if version != 4 || ihl < 5 {
            return drop;
        }
        let l3_len = u16::from_be_bytes([ip[2], ip[3]]) as usize;
        if l3_len < ihl * 4 || 14 + l3_len > f.len() {
            return drop;
        }
        if ihl != 5 {
            return pass(OPTIONS);
        }
        if !ipv4_checksum_holds(ip) {
            return pass(BAD_CSUM);
        }
        if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
            return pass(FRAGMENT);
        }
        let saddr = u32::from_be_bytes(ip[12..16].try_into().unwrap());
        let daddr = u32::from_be_bytes(ip[16..20].try_into().unwrap());
        if ipv4_special(daddr) || ipv4_special(saddr) || self.local_source(saddr) {
            return pass(SPECIAL);
        }
        if ip[8] <= 1 {
            return pass(TTL);
        }
        let bucket = flow_bucket(
            u32::from_le_bytes(ip[12..16].try_into().unwrap()) as u64,
            u32::from_le_bytes(ip[16..20].try_into().unwrap()) as u64,
        );
        let flow = || {
            let (sport, dport) = rules::ports(ip[9], &f[34..])?;
            Some(Flow {
                iif,
                src: saddr as u128,
                dst: daddr as u128,
                tos: ip[1],
                proto: ip[9],
                sport,
                dport,
            })
        };
        let nh = match self.route(
            &self.fib4,
            ifflags & IFACE_TABLES4 != 0,
            tables,
            daddr,
            flow,
        ) {
            Ok(nh) => nh,
            Err(verdict) => return verdict,
        };
        let n = match self.next_hop(nh, l3_len, iif, bucket) {
            Ok(n) => n,
            Err(r) => return pass(r),
        };
        let back = || {
            flow().map(|f| Flow {
                iif: n.1.ifindex,
                src: f.dst,
                dst: f.src,
                sport: f.dport,
                dport: f.sport,
                ..f
            })
        };
        if ifflags & (IFACE_RPF_STRICT | IFACE_RPF_LOOSE) != 0
            && !self.rpf_ok(saddr, back, iif, n.1.ifindex, ifflags)
        {
            return pass(RP_FILTER);
        }
        let counted = if ifflags & IFACE_FIREWALL4 != 0 {
            match self.fw_stage(f, false, l3_len, iif, n.1.l3()) {
                Ok(ids) => ids,
                Err(verdict) => return verdict,
            }
        } else {
            Vec::new()
        };
        self.fw.count(&counted, l3_len);
        f.truncate(14 + l3_len);
        // TTL - 1, the checksum patched as ipv4_decrease_ttl does on a
        // little-endian machine (RFC 1624).
        let check = u16::from_le_bytes([f[24], f[25]]) as u32 + 0x0001;
        let check = (check + (check >= 0xffff) as u32) as u16;
        f[24..26].copy_from_slice(&check.to_le_bytes());
        f[22] -= 1;
        self.send(f, &n)
    }

    fn forward_ipv6(
        &self,
        f: &mut Vec<u8>,
        iif: u32,
        ifflags: u16,
        tables: u64,
    ) -> (XdpAction, &'static str) {
        use reason::*;
        let pass = |r| (XdpAction::Pass, r);
        let drop = (XdpAction::Drop, DROP_MALFORMED);
        if f.len() < 14 + 40 {
            return drop;
        }
        let ip = &f[14..54];
        if ip[0] >> 4 != 6 {
            return drop;
        }
        if ip[6] == 0 {
            return pass(EXT_HDR);
        }
        let l3_len = 40 + u16::from_be_bytes([ip[4], ip[5]]) as usize;
        if 14 + l3_len > f.len() {
            return drop;
        }
        let saddr = u128::from_be_bytes(ip[8..24].try_into().unwrap());
        let daddr = u128::from_be_bytes(ip[24..40].try_into().unwrap());
        if ipv6_special((daddr >> 64) as u64) || ipv6_special((saddr >> 64) as u64) {
            return pass(SPECIAL);
        }
        if ip[7] <= 1 {
            return pass(TTL);
        }
        // The words as the program loads them: 32 bits, little-endian.
        let w =
            |a: &[u8], i: usize| u32::from_le_bytes(a[i * 4..i * 4 + 4].try_into().unwrap()) as u64;
        let (s, d) = (&ip[8..24], &ip[24..40]);
        let bucket = flow_bucket(
            (w(s, 0) << 32 | w(s, 1)) ^ (w(s, 2) << 32 | w(s, 3)),
            (w(d, 0) << 32 | w(d, 1)) ^ (w(d, 2) << 32 | w(d, 3)),
        );
        let flow = || {
            let (sport, dport) = rules::ports(ip[6], &f[54..])?;
            Some(Flow {
                iif,
                src: saddr,
                dst: daddr,
                tos: ip[0] << 4 | ip[1] >> 4,
                proto: ip[6],
                sport,
                dport,
            })
        };
        if ifflags & IFACE_TABLES6 != 0 && rules_of(tables).is_some() && ipv6_ext(ip[6]) {
            return pass(EXT_HDR);
        }
        let nh = match self.route(
            &self.fib6,
            ifflags & IFACE_TABLES6 != 0,
            tables,
            daddr,
            flow,
        ) {
            Ok(nh) => nh,
            Err(verdict) => return verdict,
        };
        let n = match self.next_hop(nh, l3_len, iif, bucket) {
            Ok(n) => n,
            Err(r) => return pass(r),
        };
        let counted = if ifflags & IFACE_FIREWALL6 != 0 {
            if ipv6_ext(f[14 + 6]) {
                return pass(EXT_HDR);
            }
            match self.fw_stage(f, true, l3_len, iif, n.1.l3()) {
                Ok(ids) => ids,
                Err(verdict) => return verdict,
            }
        } else {
            Vec::new()
        };
        self.fw.count(&counted, l3_len);
        f.truncate(14 + l3_len);
        f[14 + 7] -= 1;
        self.send(f, &n)
    }

    /// The firewall stage on a forwarded frame (IPv4 without options,
    /// IPv6 without extension headers) leaving on `oif`: the rules to
    /// count once it leaves, or what the program returns (a drop, counted;
    /// a pass).
    fn fw_stage(
        &self,
        f: &[u8],
        ipv6: bool,
        l3_len: usize,
        ingress: u32,
        oif: u32,
    ) -> Result<Vec<u16>, (XdpAction, &'static str)> {
        let (header, proto_at) = if ipv6 { (40, 6) } else { (20, 9) };
        let frame = FwFrame {
            ipv6,
            l3: &f[14..14 + header],
            l4: &f[14 + header..],
            avail: l3_len - header,
            l4proto: f[14 + proto_at],
            nexthdr: f[14 + proto_at],
            iif: ingress,
            oif,
        };
        match self.fw.judge(&frame) {
            FwOutcome::Accept(ids) => Ok(ids),
            FwOutcome::Drop(ids) => {
                self.fw.count(&ids, l3_len);
                Err((XdpAction::Drop, reason::DROP_FIREWALL))
            }
            FwOutcome::Pass(r) => Err((XdpAction::Pass, r)),
        }
    }

    /// The next hop for FIB entry `nh` (an ECMP route's member in the
    /// flow's bucket), or why the frame passes.
    fn next_hop(
        &self,
        nh: u32,
        l3_len: usize,
        ingress: u32,
        bucket: u32,
    ) -> Result<(u32, Nexthop), &'static str> {
        use reason::*;
        let entry = |id: u32| (id < ROUTER_NEXTHOPS).then(|| self.nexthop(id));
        if nh == 0 {
            return Err(NO_ROUTE);
        }
        let mut n = entry(nh)
            .filter(|n| n.flags & NH_VALID != 0)
            .ok_or(NO_ROUTE)?;
        let mut id = nh;
        if n.flags & NH_GROUP != 0 {
            if n.ifindex >= ROUTER_NH_GROUPS {
                return Err(NO_ROUTE);
            }
            let g = self.nh_groups.get(&n.ifindex).copied().unwrap_or_default();
            let member = g.bucket[bucket as usize & (NH_GROUP_BUCKETS - 1)];
            n = entry(member)
                .filter(|n| n.flags & NH_VALID != 0 && n.flags & NH_GROUP == 0)
                .ok_or(NO_ROUTE)?;
            id = member;
        }
        if n.flags & NH_KERNEL != 0 {
            return Err(if n.flags & NH_ONLINK != 0 {
                NO_NEIGH
            } else if n.flags & NH_UNREACHABLE != 0 {
                NO_ROUTE
            } else if n.flags & NH_UNSUPPORTED != 0 {
                KERNEL_ROUTE
            } else {
                LOCAL
            });
        }
        if n.flags & NH_RESOLVED == 0 {
            return Err(if n.flags & NH_TC != 0 { TC } else { NO_NEIGH });
        }
        if l3_len > n.mtu as usize {
            return Err(MTU);
        }
        if n.l3() == ingress {
            return Err(SAME_IF);
        }
        if !self.tx_ports.contains(&n.ifindex) {
            return Err(NO_PORT);
        }
        Ok((id, n))
    }

    fn local_source(&self, saddr: u32) -> bool {
        let bit = local::bit(saddr);
        let w = self.local_src4.get(&(bit >> 6)).copied().unwrap_or(0);
        (w >> (bit & 63)) & 1 != 0
    }

    /// Reverse path filtering where the fast path can tell (rpf_ok).
    /// The next-hop id for `addr`: main's FIB, or with `walk` the tables
    /// of the interface's word in turn, a miss (none, a throw) going on,
    /// as fib4_walk_tables and fib6_walk_tables do.
    ///
    /// A word naming a rule program walks it (policy_walk), for the
    /// packet `flow` gives (None: its ports are cut short, the kernel's).
    fn route<K: Key>(
        &self,
        fibs: &[TableCopy],
        walk: bool,
        tables: u64,
        addr: K,
        flow: impl FnOnce() -> Option<Flow>,
    ) -> Result<u32, (XdpAction, &'static str)> {
        use reason::*;
        if !walk {
            return Ok(fibs[0].lookup(addr));
        }
        let ipv6 = K::BITS == 128;
        let at = |mib: u16| {
            (0..TABLE_SLOTS)
                .find(|&s| FastPath::table_root_mib(ipv6, s) == mib)
                .map(|slot| fibs[slot].lookup(addr))
        };
        if let Some(program) = rules_of(tables) {
            let f = flow().ok_or((XdpAction::Pass, POLICY))?;
            let steps = &self.programs[program as usize];
            return match rules::walk(steps, &f, K::BITS, |mib| at(mib).unwrap_or(0)) {
                POLICY_KERNEL => Err((XdpAction::Pass, POLICY)),
                POLICY_DROP if fibs[0].lookup(addr) == NH_ID_KERNEL => {
                    Err((XdpAction::Pass, POLICY))
                }
                POLICY_DROP => Err((XdpAction::Drop, DROP_BLACKHOLE)),
                nh => Ok(nh),
            };
        }
        for mib in tables_of(tables) {
            let Some(nh) = at(mib) else {
                return Ok(0);
            };
            if nh != 0 && nh != NH_ID_THROW {
                return Ok(nh);
            }
        }
        Ok(0)
    }

    /// Reverse path filtering where the fast path can tell (rpf_ok): the
    /// source looked up as the packet coming back (`back`: addresses and
    /// ports swapped, from the forward route's egress as it is routed) by the
    /// egress's word, and its route through a resolved gateway (strict:
    /// on the ingress).
    fn rpf_ok(
        &self,
        saddr: u32,
        back: impl FnOnce() -> Option<Flow>,
        ingress: u32,
        egress: u32,
        ifflags: u16,
    ) -> bool {
        let slot = if egress < ROUTER_IFACES { egress } else { 0 };
        let Some(out) = self.ifaces.get(&slot).filter(|o| o.ifindex == egress) else {
            return false;
        };
        // (From the interface the egress is routed as.)
        let back = || back().map(|f| Flow { iif: out.l3, ..f });
        let nh = match self.route(&self.fib4, true, out.tables4, saddr, back) {
            Ok(nh) if nh != 0 && nh < ROUTER_NEXTHOPS => nh,
            _ => return false,
        };
        let n = self.nexthop(nh);
        let kinds = NH_VALID | NH_RESOLVED | NH_KERNEL | NH_GROUP;
        if n.flags & kinds != NH_VALID | NH_RESOLVED {
            return false;
        }
        ifflags & IFACE_RPF_STRICT == 0 || n.l3() == ingress
    }

    fn send(&self, f: &mut Vec<u8>, (id, n): &(u32, Nexthop)) -> (XdpAction, &'static str) {
        self.used.borrow_mut().insert(*id);
        if n.tag[..2] != [0, 0] {
            f.splice(12..12, n.tag);
        }
        f[0..6].copy_from_slice(&n.dmac);
        f[6..12].copy_from_slice(&n.smac);
        (XdpAction::Redirect, reason::FORWARDED)
    }
}

/// 0/8, 127/8 and 224/3 (multicast, reserved, broadcast): the kernel's.
fn ipv4_special(a: u32) -> bool {
    let top = a >> 24;
    top == 0 || top == 127 || top >= 224
}

/// ff00::/8, fe80::/10, ::/64, by the address's high 64 bits.
fn ipv6_special(hi: u64) -> bool {
    hi >> 56 == 0xff || hi >> 54 == 0xfe80 >> 6 || hi == 0
}

fn ipv4_checksum_holds(header: &[u8]) -> bool {
    let mut s: u32 = header
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s == 0xffff
}

/// flow_bucket: the ECMP bucket of a flow (a multiply-xorshift's top bits).
fn flow_bucket(src: u64, dst: u64) -> u32 {
    let mut h = src.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ dst;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    ((h ^ (h >> 29)) >> (64 - 6)) as u32
}

impl Model {
    /// Main's table shape for the family.
    fn shape_of<K: Key>(&self) -> Shape {
        if K::BITS == 32 {
            Shape::IPV4
        } else {
            self.ipv6.shape()
        }
    }
}

impl Dataplane for Model {
    fn ipv6_layout(&self) -> Ipv6Layout {
        self.ipv6
    }

    fn set_interface(&mut self, ifc: &Iface, egress: bool) -> Result<()> {
        let ifindex = ifc.ifindex;
        crate::layout::check_ifindex(ifindex)?;
        self.ifaces.insert(ifindex, *ifc);
        if egress {
            self.tx_ports.insert(ifindex);
        } else {
            self.tx_ports.remove(&ifindex);
        }
        Ok(())
    }

    fn remove_interface(&mut self, ifindex: u32) -> Result<()> {
        crate::layout::check_ifindex(ifindex)?;
        self.ifaces.remove(&ifindex);
        self.tx_ports.remove(&ifindex);
        Ok(())
    }

    fn set_vlan_interface(&mut self, key: &VlanKey, ifc: Option<&Iface>) -> Result<bool> {
        use crate::layout::{ROUTER_VLANS, ROUTER_VLAN_PORTS};
        match ifc {
            Some(i) => {
                if !self.vlan_ifaces.contains_key(key) {
                    let ports: HashSet<u32> = self.vlan_ifaces.keys().map(|k| k.ifindex).collect();
                    if self.vlan_ifaces.len() >= ROUTER_VLANS
                        || !ports.contains(&key.ifindex) && ports.len() >= ROUTER_VLAN_PORTS
                    {
                        return Ok(false);
                    }
                }
                self.vlan_ifaces.insert(*key, *i);
            }
            None => {
                self.vlan_ifaces.remove(key);
            }
        }
        Ok(true)
    }

    fn set_nexthop(&mut self, id: u32, nh: &Nexthop) -> Result<()> {
        if id >= ROUTER_NEXTHOPS {
            bail!("next hop {id} is out of range 0..{ROUTER_NEXTHOPS}");
        }
        self.nexthops.insert(id, *nh);
        // A write replaces the entry, its used mark with it.
        if nh.used == 0 {
            self.used.borrow_mut().remove(&id);
        }
        Ok(())
    }

    fn take_nexthop_used(&mut self, id: u32) -> bool {
        self.used.borrow_mut().remove(&id)
    }

    fn set_fdb(&mut self, key: &FdbKey, entry: Option<&FdbEntry>) -> Result<bool> {
        if key.bridge == 0 || key.bridge > crate::fdb::MAX_BRIDGE {
            bail!(
                "bridge index {}: the FDB's keys hold 1 to 65535",
                key.bridge
            );
        }
        let w = crate::fdb::key(key);
        match entry {
            Some(e) => {
                if self.fdb_places.place(w).is_none() {
                    return Ok(false);
                }
                self.fdb.insert(*key, *e);
                // A write replaces the entry, its mark with it.
                if e.used == 0 {
                    self.fdb_used.borrow_mut().remove(key);
                }
            }
            None => {
                self.fdb_places.remove(w);
                self.fdb.remove(key);
                self.fdb_used.borrow_mut().remove(key);
            }
        }
        Ok(true)
    }

    fn take_fdb_used(&mut self) -> Result<Vec<FdbKey>> {
        Ok(std::mem::take(&mut *self.fdb_used.borrow_mut())
            .into_iter()
            .collect())
    }

    fn set_nh_group(&mut self, index: u32, group: &NhGroup) -> Result<()> {
        if index >= ROUTER_NH_GROUPS {
            bail!("ECMP group {index} is out of range 0..{ROUTER_NH_GROUPS}");
        }
        self.nh_groups.insert(index, *group);
        Ok(())
    }

    fn set_local_sources(&mut self, index: u32, word: u64) -> Result<()> {
        if index >= local::WORDS {
            bail!(
                "local source word {index} is out of range 0..{}",
                local::WORDS
            );
        }
        self.local_src4.insert(index, word);
        Ok(())
    }

    fn open_table(&mut self, _ipv6: bool, slot: usize) -> Result<()> {
        if slot == 0 || slot >= TABLE_SLOTS {
            bail!("table slot {slot} is not another table's");
        }
        Ok(())
    }

    fn set_policy_program(&mut self, program: u16, steps: &[PolicyRule]) -> Result<()> {
        if program as usize >= POLICY_PROGRAMS || steps.len() >= crate::layout::POLICY_RULES {
            bail!("rule program {program} of {} steps", steps.len());
        }
        let mut p = steps.to_vec();
        p.push(PolicyRule::default());
        self.programs[program as usize] = p;
        Ok(())
    }

    fn load_fib<K: Key>(&mut self, slot: usize, fib: &Fib<K>) -> Result<()> {
        if slot == 0 || slot >= TABLE_SLOTS {
            bail!("table slot {slot} is not another table's");
        }
        if fib.shape() != self.shape_of::<K>().other_table() {
            bail!("the model reads another table shape than this table's in slot {slot}");
        }
        if K::BITS == 32 {
            self.fib4[slot].load(fib);
        } else {
            self.fib6[slot].load(fib);
        }
        Ok(())
    }

    fn apply_fib<K: Key>(&mut self, slot: usize, fib: &Fib<K>, writes: &[Write]) -> Result<()> {
        let main = if K::BITS == 32 {
            Shape::IPV4
        } else {
            self.ipv6.shape()
        };
        let want = if slot == 0 { main } else { main.other_table() };
        if slot >= TABLE_SLOTS {
            bail!("table slot {slot}: the arena has {TABLE_SLOTS}");
        }
        if fib.shape() != want {
            bail!("the model reads another table shape than this table's in slot {slot}");
        }
        if K::BITS == 32 {
            self.fib4[slot].apply(fib, writes);
        } else {
            self.fib6[slot].apply(fib, writes);
        }
        Ok(())
    }
}
