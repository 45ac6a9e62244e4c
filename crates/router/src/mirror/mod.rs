//! The kernel's forwarding state as the fast path needs it, kept from
//! rtnetlink messages, and pushed into the fast path's maps as it changes.
//!
//! What is mirrored: links (MAC, MTU, up), neighbours (MAC when usable),
//! routes of the main and local tables (local wins, then the lowest
//! metric), and of the other tables policy rules look up. A plain unicast route through a gateway gets a next hop that
//! the fast path forwards to once the gateway's neighbour is resolved; a
//! multipath (ECMP) route through gateways gets a group of those, spread
//! over buckets by weight (crate::ecmp). Everything else goes to the
//! kernel next hop (XDP_PASS): connected networks and local addresses (the
//! kernel resolves and delivers), multipath routes with a member without a
//! gateway, blackhole, unreachable, prohibit and the rest. A host on a
//! connected network whose neighbour entry is usable gets its own entry
//! (a /32 or /128 whose next hop is the host), as ip_tryforward reaches
//! it: forwarded in the fast path, the rest of the network the kernel's.
//! Routes through
//! nexthop objects (`ip route add P nhid N`, as FRR installs them) get
//! what the object is, a gateway or a group of them, and follow it when
//! it changes. The routes of every table are held: a table the policy
//! rules look up for one of the router's interfaces gets a FIB of its own
//! ([`tables`]), and the interface's entry the tables its rules walk
//! (linerate_netlink::policy); where the walk cannot be followed, or an
//! interface is enslaved to a VRF, the family passes from that interface.
//! A bridge's port is routed as the bridge, and known unicast between the
//! router's bridge ports is bridged by the mirrored FDB ([`bridges`]).
//!
//! The parts, one job each: [`decode`] reads rtnetlink messages;
//! [`routes`] holds a family's candidates and picks the kernel's;
//! [`nexthops`] gives next hops and ECMP groups their ids; [`neighbours`]
//! holds the usable neighbours and the hosts they make; [`ifaces`] makes
//! an interface's flags. `Mirror` ties them and writes what changes to a
//! [`Dataplane`]: the BPF maps, or the in-memory model of the tests.
pub mod bridges;
pub mod decode;
pub mod ifaces;
pub mod limits;
pub mod neighbours;
pub mod nexthops;
pub mod routes;
pub mod tables;
pub mod vlans;
pub mod vrfs;

use anyhow::Result;
use decode::TABLE_MAIN;
use decode::{Link, Prefix, RouteUpdate};
use ifaces::{Scope, Settings};
use linerate_dataplane::dataplane::Dataplane;
use linerate_dataplane::fastpath::FastPath;
use linerate_dataplane::layout::{
    rules_word, tables_word, FdbEntry, FdbKey, Iface, Nexthop, PolicyRule, VlanKey,
    BRIDGE_VLAN_DEVICES, FIB_TABLES_MAIN4, IFACE_FORWARD4, IFACE_FORWARD6, NH_GROUP, NH_KERNEL,
    NH_ONLINK, NH_RESOLVED, NH_TC, NH_UNREACHABLE, NH_UNSUPPORTED, NH_VALID, POLICY_RULES,
};
use linerate_dataplane::local::LocalSources;
use linerate_fib::{Fib, FibError, Key, Shape};
use linerate_netlink::netconf::Netconf;
use linerate_netlink::netfilter::Hooks;
use linerate_netlink::nhobj::{NhMessage, NhObject};
use linerate_netlink::policy::{Compiled, Policy, Step, View};
use linerate_netlink::route::Change;
use linerate_netlink::tc::TcHooks;
use linerate_netlink::xdp_features::XdpXmit;
use neighbours::{ip_of, NeighKey, Neighbours};
use netlink_packet_route::rule::RuleMessage;
use netlink_packet_route::RouteNetlinkMessage;
use nexthops::{members_key, NhContext, NhIds};
use routes::{Candidate, RouteId, RouteTable};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use tables::Others;

pub use nexthops::{NhKey, KERNEL_NH, ONLINK_NH, UNREACHABLE_NH, UNSUPPORTED_NH};

/// What happened, for logs and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub routes_installed: u64,
    pub routes_removed: u64,
    pub nexthop_updates: u64,
    /// What the FIBs and the FDB could not hold: the kernel's.
    pub full: limits::Overflows,
}

/// What a dump showed: everything else the mirror holds is stale.
#[derive(Default)]
struct Seen {
    links: HashSet<u32>,
    neigh: HashSet<NeighKey>,
    objects: HashSet<u32>,
    routes4: HashSet<RouteId<u32>>,
    routes6: HashSet<RouteId<u128>>,
    local4: HashSet<u32>,
    fdb: HashSet<(u32, [u8; 6])>,
    /// The rules, all of them: they replace the mirror's at the end.
    policy: Policy,
}

/// A family's routes (every table's) and the FIBs made of them: main's,
/// and those of the other tables policy rules look up (crate::mirror::tables).
struct Family<K: Key> {
    routes: RouteTable<K>,
    fib: Fib<K>,
    others: Others<K>,
    /// Main's routes its FIB could not hold, and the first-level blocks
    /// handed to the kernel for them: taken back once groups are free.
    waiting: HashSet<(K, u8)>,
    blocks: HashSet<K>,
}

struct Families {
    v4: Family<u32>,
    v6: Family<u128>,
}

/// IPv4 (u32) or IPv6 (u128): where the mirror keeps that family.
trait PerFamily: Key {
    fn of(f: &Families) -> &Family<Self>;
    fn of_mut(f: &mut Families) -> &mut Family<Self>;
    fn seen(s: &mut Seen) -> &mut HashSet<RouteId<Self>>;
}

impl PerFamily for u32 {
    fn of(f: &Families) -> &Family<u32> {
        &f.v4
    }
    fn of_mut(f: &mut Families) -> &mut Family<u32> {
        &mut f.v4
    }
    fn seen(s: &mut Seen) -> &mut HashSet<RouteId<u32>> {
        &mut s.routes4
    }
}

impl PerFamily for u128 {
    fn of(f: &Families) -> &Family<u128> {
        &f.v6
    }
    fn of_mut(f: &mut Families) -> &mut Family<u128> {
        &mut f.v6
    }
    fn seen(s: &mut Seen) -> &mut HashSet<RouteId<u128>> {
        &mut s.routes6
    }
}

/// A family's rule program (linerate_netlink::policy::Policy::program) as
/// written to the fast path: the program it is in (one of two banks: a new
/// one is written to the bank no interface names, then the interfaces
/// switch), the steps compiled and as written.
#[derive(Default)]
struct Program {
    index: Option<u16>,
    compiled: Vec<Compiled>,
    written: Vec<PolicyRule>,
}

/// How the fast path routes a family's transit packets from one of the
/// router's interfaces.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Routing {
    /// Passes them: the kernel routes them.
    Kernel,
    /// By main's table, as with the default rules.
    Main,
    /// By these tables in turn (the rules' walk is a list of them).
    Tables(Vec<u32>),
    /// By the family's rule program.
    Program,
}

pub struct Mirror<D: Dataplane = FastPath> {
    dp: D,
    links: HashMap<u32, Link>,
    /// Bridge ports' states and flags, by port.
    ports: HashMap<u32, decode::PortInfo>,
    /// The bridges' FDBs: the port a (bridge, MAC) is behind.
    fdb: HashMap<(u32, [u8; 6]), u32>,
    /// The FDB entries the fast path holds (crate::mirror::bridges).
    fdb_written: HashMap<FdbKey, FdbEntry>,
    /// MACs left out of the fast path's FDB: their sets were full.
    fdb_left_out: HashSet<FdbKey>,
    /// Link names: policy rules name their input interface.
    names: HashMap<u32, String>,
    /// The VLAN devices the fast path routes tagged frames as, by device
    /// ([`vlans`]).
    vlans: HashMap<u32, VlanKey>,
    /// VLAN devices the fast path had no room for.
    vlans_left_out: HashSet<u32>,
    /// The router's ports whose drivers strip VLAN tags on receive.
    strips_tags: HashSet<u32>,
    neighbours: Neighbours,
    families: Families,
    nh: NhIds,
    /// The kernel's nexthop objects, by id.
    objects: HashMap<u32, NhObject>,
    /// During a resync: what the dump has shown so far.
    seen: Option<Seen>,
    /// The router's own interfaces (its program is attached to them), with
    /// the MAC the fast path takes frames to as addressed to the router.
    ingress: BTreeMap<u32, [u8; 6]>,
    settings: Settings,
    /// Netfilter sees forwarded IPv4, IPv6 (linerate_netlink::netfilter): the kernel
    /// forwards that family, so that its hooks are not bypassed.
    netfilter: Hooks,
    /// The base chains the firewall judges, per family (`[ipv6]`).
    firewall: [std::collections::BTreeSet<String>; 2],
    /// What tc does on the router's interfaces (linerate_netlink::tc): what comes in
    /// where it acts on ingress, and what would leave where it acts on
    /// egress, the kernel forwards.
    tc: BTreeMap<u32, TcHooks>,
    /// What the router's interfaces take as XDP redirect targets
    /// (linerate_netlink::xdp_features); one not known is taken to send single
    /// buffers only.
    xmit: BTreeMap<u32, XdpXmit>,
    /// The routing policy (ip rule): which interfaces' transit packets the
    /// kernel routes by the main table alone.
    policy: Policy,
    /// Each family's rule program as the fast path has it (`[ipv6]`).
    programs: [Program; 2],
    /// Per family, the tables the rules look up that have no FIB slot,
    /// and whether its rules are past the program's steps: counted in
    /// `counts.full` as they become so.
    unplaced: [BTreeSet<View>; 2],
    steps_over: [bool; 2],
    /// The router's own IPv4 addresses (the local table's /32 local
    /// routes): frames from them pass.
    local4: LocalSources,
    /// A link came, went, or went up or down since the last
    /// `take_links_up_or_down` (tc's hooks are read again then: a link
    /// gets its default qdisc as it comes up).
    links_up_or_down: bool,
    /// Views new to the rules are being filled: the interfaces the rules
    /// route otherwise than by main's table alone pass to the kernel until
    /// they are (the rules the kernel now walks may look those views up).
    filling: bool,
    pub counts: Counts,
}

/// What the next-hop ids read of the mirror: links, neighbours, tc and
/// the FIBs (borrowed field by field, beside the ids and the dataplane).
struct NhView<'a> {
    links: &'a HashMap<u32, Link>,
    neighbours: &'a Neighbours,
    tc: &'a BTreeMap<u32, TcHooks>,
    families: &'a Families,
    ports: &'a HashMap<u32, decode::PortInfo>,
    fdb: &'a HashMap<(u32, [u8; 6]), u32>,
    /// Netfilter's bridge chains see what is routed out of a bridge.
    bridge_chains: bool,
}

impl NhView<'_> {
    /// The port of bridge `bridge` that MAC `mac` is behind, if the fast
    /// path may send there (the port forwards, is up, and no bridge chain
    /// sees the frame).
    fn bridge_port(&self, bridge: u32, mac: [u8; 6]) -> Option<u32> {
        // (A bridge filtering VLANs sends by each port's VLANs.)
        if self.links.get(&bridge).is_some_and(|b| b.vlan_filtering) {
            return None;
        }
        let port = *self.fdb.get(&(bridge, mac))?;
        let forwards = self.ports.get(&port).map(|p| p.state) == Some(decode::BR_STATE_FORWARDING);
        let up = self.links.get(&port).is_some_and(|l| l.up);
        (forwards && up && !self.bridge_chains).then_some(port)
    }
}

impl NhContext for NhView<'_> {
    fn entry(&self, ids: &NhIds, k: &NhKey) -> Nexthop {
        match k {
            // (Objects are resolved before they get an id.)
            NhKey::Kernel
            | NhKey::Unreachable
            | NhKey::OnLink
            | NhKey::Unsupported
            | NhKey::Object { .. }
            | NhKey::Device { .. } => kernel_nexthop(k),
            // Never valid: a throw found in main's table alone is the
            // kernel's (which walks on), pass_no_route.
            NhKey::Throw => Nexthop::default(),
            NhKey::Group(_) => Nexthop {
                ifindex: ids.group_index(k).unwrap_or_default(),
                flags: NH_VALID | NH_GROUP,
                ..Default::default()
            },
            NhKey::Gateway { oif, gw, mtu } => {
                let link = self.links.get(oif).copied().unwrap_or_default();
                let dmac = self.neighbours.mac(&(*oif, *gw));
                // Out of a VLAN device: by its parent, its tag pushed.
                let (dev, tag) = match &link.vlan {
                    None => (*oif, [0; 4]),
                    Some(v) => match vlans::egress(v, self.links.get(&v.parent)) {
                        vlans::Egress::Tagged(parent, tag) => (parent, tag),
                        vlans::Egress::Kernel => return kernel_nexthop(&NhKey::Unsupported),
                    },
                };
                // Out of a bridge: by the port its FDB holds the
                // neighbour's MAC behind (none known: the kernel's).
                let port = match (link.bridge, dmac) {
                    (false, _) => Some(dev),
                    (true, Some(m)) => self.bridge_port(*oif, m),
                    (true, None) => None,
                };
                let out = port.unwrap_or(*oif);
                let tc_egress = |i: &u32| self.tc.get(i).is_some_and(|t| !t.egress.is_empty());
                let mut flags = NH_VALID;
                if tc_egress(oif) || tc_egress(&out) {
                    flags |= NH_TC;
                } else if link.up && dmac.is_some() && port.is_some() {
                    flags |= NH_RESOLVED;
                }
                let port_mtu = self.links.get(&out).map_or(link.mtu, |l| l.mtu);
                let mtu = mtu
                    .unwrap_or(link.mtu)
                    .min(link.mtu.max(1))
                    .min(port_mtu.max(1))
                    .min(u16::MAX as u32);
                Nexthop {
                    ifindex: out,
                    mtu: mtu as u16,
                    flags,
                    used: 0,
                    dmac: dmac.unwrap_or_default(),
                    smac: link.mac,
                    l3: if link.bridge || link.vlan.is_some() {
                        *oif
                    } else {
                        0
                    },
                    tag,
                }
            }
        }
    }

    fn ids_in_fibs(&self) -> HashSet<u32> {
        let mut used: HashSet<u32> = self.families.v4.fib.routes().map(|r| r.2).collect();
        used.extend(self.families.v6.fib.routes().map(|r| r.2));
        used.extend(self.families.v4.others.ids());
        used.extend(self.families.v6.others.ids());
        used
    }
}

/// The view of the mirror's fields the next-hop ids read, beside a
/// mutable borrow of the ids and the dataplane.
macro_rules! nh_view {
    ($m:expr) => {
        NhView {
            links: &$m.links,
            neighbours: &$m.neighbours,
            tc: &$m.tc,
            families: &$m.families,
            ports: &$m.ports,
            fdb: &$m.fdb,
            bridge_chains: !$m.netfilter.bridge.is_empty(),
        }
    };
}

impl<D: Dataplane> Mirror<D> {
    pub fn new(mut dp: D) -> Result<Self> {
        for (id, k) in [
            (KERNEL_NH, NhKey::Kernel),
            (UNREACHABLE_NH, NhKey::Unreachable),
            (ONLINK_NH, NhKey::OnLink),
            (UNSUPPORTED_NH, NhKey::Unsupported),
        ] {
            dp.set_nexthop(id, &kernel_nexthop(&k))?;
        }
        let ipv6 = dp.ipv6_layout().shape();
        Ok(Mirror {
            dp,
            links: HashMap::new(),
            ports: HashMap::new(),
            fdb: HashMap::new(),
            fdb_written: HashMap::new(),
            fdb_left_out: HashSet::new(),
            names: HashMap::new(),
            vlans: HashMap::new(),
            vlans_left_out: HashSet::new(),
            strips_tags: HashSet::new(),
            neighbours: Neighbours::default(),
            families: Families {
                v4: Family {
                    routes: RouteTable::default(),
                    fib: Fib::new(Shape::IPV4),
                    others: Others::new(Shape::IPV4),
                    waiting: HashSet::new(),
                    blocks: HashSet::new(),
                },
                v6: Family {
                    routes: RouteTable::default(),
                    fib: Fib::new(ipv6),
                    others: Others::new(ipv6),
                    waiting: HashSet::new(),
                    blocks: HashSet::new(),
                },
            },
            nh: NhIds::default(),
            objects: HashMap::new(),
            seen: None,
            ingress: BTreeMap::new(),
            settings: Settings::default(),
            netfilter: Hooks::default(),
            firewall: Default::default(),
            tc: BTreeMap::new(),
            xmit: BTreeMap::new(),
            links_up_or_down: false,
            filling: false,
            // Until a dump says otherwise (a mirror fed by hand).
            policy: Policy::kernel_default(),
            programs: Default::default(),
            unplaced: Default::default(),
            steps_over: [false; 2],
            local4: LocalSources::default(),
            counts: Counts::default(),
        })
    }

    /// The dataplane the mirror writes to.
    pub fn fast_path(&self) -> &D {
        &self.dp
    }

    /// The same, to set up what a test dataplane watches (not to write
    /// to it: the mirror would not know).
    pub fn fast_path_mut(&mut self) -> &mut D {
        &mut self.dp
    }

    /// Applies one message from a dump or a notification.
    pub fn apply(&mut self, msg: &RouteNetlinkMessage) -> Result<()> {
        match msg {
            RouteNetlinkMessage::NewLink(l) => {
                self.bridge_port(decode::bridge_port(l, false))?;
                self.link(decode::link(l, false))
            }
            RouteNetlinkMessage::DelLink(l) => {
                self.bridge_port(decode::bridge_port(l, true))?;
                self.link(decode::link(l, true))
            }
            RouteNetlinkMessage::NewNeighbour(n) => {
                self.fdb_entry(decode::fdb(n, false))?;
                self.neighbour(decode::neighbour(n, false))
            }
            RouteNetlinkMessage::DelNeighbour(n) => {
                self.fdb_entry(decode::fdb(n, true))?;
                self.neighbour(decode::neighbour(n, true))
            }
            RouteNetlinkMessage::NewRoute(r) => self.route(decode::route(r, false)),
            RouteNetlinkMessage::DelRoute(r) => self.route(decode::route(r, true)),
            RouteNetlinkMessage::NewRule(r) => {
                self.rule(r);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Applies a dumped entry or a notification, nexthop objects included.
    pub fn apply_change(&mut self, c: &Change) -> Result<()> {
        match c {
            Change::Rt(m) => self.apply(m),
            Change::Nexthop(n) => self.nexthop_object(n),
            Change::Netconf(n) => self.netconf(n),
            // The caller reads the hooks again (set_netfilter).
            Change::Netfilter | Change::Tc => Ok(()),
        }
    }

    /// Brings the mirror to a full dump of the kernel's state after
    /// notifications were lost: applies it, then drops every link,
    /// neighbour, nexthop object and route the dump no longer has (the
    /// kernel deleted them while nobody was listening).
    pub fn resync(&mut self, dump: &[Change]) -> Result<()> {
        self.resync_with(|apply| dump.iter().try_for_each(apply))
    }

    /// `resync` from a dump read as it is applied (`read` hands each
    /// change to `apply`, e.g. linerate_netlink::route::dump_all_each): a full table is
    /// never held whole.
    pub fn resync_with(
        &mut self,
        read: impl FnOnce(&mut dyn FnMut(&Change) -> Result<()>) -> Result<()>,
    ) -> Result<()> {
        self.seen = Some(Seen::default());
        let applied: Result<()> = read(&mut |c| self.apply_change(c));
        let seen = self.seen.take().unwrap_or_default();
        applied?;
        for id in unseen(self.objects.keys(), &seen.objects) {
            self.nexthop_object(&NhMessage {
                id,
                gone: true,
                object: NhObject::Kernel,
            })?;
        }
        for key in unseen(self.neighbours.keys(), &seen.neigh) {
            self.set_neighbour(key, None, false)?;
        }
        for (bridge, mac) in unseen(self.fdb.keys(), &seen.fdb) {
            self.fdb_entry(Some(decode::FdbUpdate {
                bridge,
                mac,
                port: None,
            }))?;
        }
        for index in unseen(self.links.keys(), &seen.links) {
            self.links.remove(&index);
            self.ports.remove(&index);
            self.names.remove(&index);
            self.follow_ingress(index)?;
            self.refresh_nexthops(|k| matches!(k, NhKey::Gateway { oif, .. } if *oif == index))?;
        }
        let gone: Vec<u32> = self
            .local4
            .addrs()
            .filter(|a| !seen.local4.contains(a))
            .collect();
        for a in gone {
            self.local_source(a, false)?;
        }
        for k in self.families.v4.routes.drop_unseen(&seen.routes4) {
            self.sync(k)?;
        }
        for k in self.families.v6.routes.drop_unseen(&seen.routes6) {
            self.sync(k)?;
        }
        self.families.v4.routes.compact();
        self.families.v6.routes.compact();
        if seen.policy != self.policy {
            self.policy = seen.policy;
            self.push_all_ingress()?;
        }
        Ok(())
    }

    /// A policy rule of a dump. Notifications of rules are not applied one
    /// by one (linerate_netlink::policy): the caller reloads them whole (set_rules).
    fn rule(&mut self, r: &RuleMessage) {
        if let Some(seen) = &mut self.seen {
            seen.policy.add(r);
        }
    }

    /// The policy rules, as a dump has them now: the router's interfaces
    /// forward in the fast path only what the kernel routes by the main
    /// table.
    pub fn set_rules(&mut self, rules: &[RuleMessage]) -> Result<()> {
        let policy = Policy::from_dump(rules);
        if policy == self.policy {
            return Ok(());
        }
        self.policy = policy;
        self.push_all_ingress()
    }

    fn push_all_ingress(&mut self) -> Result<()> {
        self.place_tables()?;
        self.write_all_ingress()
    }

    fn write_all_ingress(&mut self) -> Result<()> {
        let all: Vec<u32> = self.ingress.keys().copied().collect();
        all.into_iter().try_for_each(|i| self.write_ingress(i))?;
        self.sync_fdb()
    }

    /// How the fast path routes the family's transit packets from
    /// interface `ifindex`: what the rules' walk for it is
    /// (linerate_netlink::policy::Policy::walk), a list of tables when it
    /// is one, else the family's rule program.
    fn routing_of(&self, ifindex: u32, ipv6: bool) -> Routing {
        if self.kernels_whatever_the_rules(ifindex).is_some() {
            return Routing::Kernel;
        }
        let vrf = self.vrf_of(ifindex);
        if vrf.is_some_and(|(dev, _)| self.vrf_refusal(ifindex, dev, ipv6).is_some()) {
            return Routing::Kernel;
        }
        let w = self.walk_of(ifindex, ipv6);
        match (w.ended_by, w.tables.as_slice()) {
            // (The rule program knows no VRF.)
            (Some(_), _) if vrf.is_some() => Routing::Kernel,
            (Some(_), _) => Routing::Program,
            (None, []) => Routing::Kernel,
            (None, [TABLE_MAIN]) => Routing::Main,
            (None, _) => Routing::Tables(w.tables),
        }
    }

    /// The rules' walk for a transit packet arriving on `ifindex`, as the
    /// kernel routes it: arriving on the bridge or VRF it is a port of.
    fn walk_of(&self, ifindex: u32, ipv6: bool) -> linerate_netlink::policy::Walk {
        let name = self.names.get(&self.l3_of(ifindex)).map(String::as_str);
        self.policy
            .walk_in(ipv6, name, self.vrf_of(ifindex).map(|(_, table)| table))
    }

    /// The family's rules as a program, interfaces named by index; rules
    /// past the program's room are counted once as they get there.
    fn compile(&mut self, ipv6: bool) -> Vec<Compiled> {
        let index: HashMap<&str, u32> = self.names.iter().map(|(i, n)| (n.as_str(), *i)).collect();
        let whole = self
            .policy
            .program(ipv6, |n| index.get(n).copied(), usize::MAX);
        let over = whole.len() > POLICY_RULES - 1;
        if over && !self.steps_over[ipv6 as usize] {
            let what = format!(
                "{} of {} rules' steps",
                if ipv6 { "IPv6" } else { "IPv4" },
                whole.len()
            );
            self.counts.full.left_out(limits::Table::RuleSteps, &what);
        }
        self.steps_over[ipv6 as usize] = over;
        self.policy
            .program(ipv6, |n| index.get(n).copied(), POLICY_RULES - 1)
    }

    /// The views (tables, some with a suppressor) other than main's that
    /// the router's interfaces look up, in the order they get FIBs: the
    /// tables of their walks, then those of the rule program if one of
    /// them walks it; and the program.
    fn wanted_views(&mut self, ipv6: bool) -> (Vec<View>, Option<Vec<Compiled>>) {
        let mut views: Vec<View> = Vec::new();
        let mut program = None;
        let mut ingress: Vec<u32> = self.ingress.keys().copied().collect();
        // (A VLAN device's walk is its port's unless a VRF or a rule takes
        // it: the others are not walked, one by one, at every change.)
        let vlans = ingress.iter().flat_map(|&p| self.vlans_on(p));
        let own_walk = |d: &u32| {
            self.vrf_of(*d).is_some() || self.names.get(d).is_some_and(|n| self.policy.names_iif(n))
        };
        let vlans: Vec<u32> = vlans
            .filter(own_walk)
            .filter(|&d| self.routed_vlan(d).is_some())
            .collect();
        ingress.extend(vlans);
        for i in ingress {
            match self.routing_of(i, ipv6) {
                Routing::Tables(ts) => views.extend(ts.into_iter().map(View::table)),
                Routing::Program if program.is_none() => program = Some(self.compile(ipv6)),
                _ => {}
            }
        }
        if let Some(p) = &program {
            views.extend(Policy::program_views(p));
        }
        let mut seen = BTreeSet::new();
        views.retain(|v| *v != View::MAIN && seen.insert(*v));
        (views, program)
    }

    /// Gives the views the rules now look up their FIBs, filled from
    /// their tables' routes, and empties those no rule looks up any more;
    /// then writes the rule programs that changed. Whether one did, or a
    /// view was filled: the interfaces' entries must then all be written
    /// again, to name them.
    fn place_tables(&mut self) -> Result<bool> {
        let v4 = self.place_family::<u32>()?;
        Ok(self.place_family::<u128>()? || v4)
    }

    fn place_family<K: PerFamily>(&mut self) -> Result<bool> {
        let ipv6 = K::BITS == 128;
        let (wanted, program) = self.wanted_views(ipv6);
        let (gone, added) = K::of_mut(&mut self.families).others.place(&wanted);
        let others = &K::of(&self.families).others;
        let unplaced: BTreeSet<View> = wanted
            .iter()
            .filter(|v| others.slot_of(**v).is_none())
            .copied()
            .collect();
        for v in unplaced.difference(&self.unplaced[ipv6 as usize]) {
            let what = format!("table {v}");
            self.counts.full.left_out(limits::Table::OtherTables, &what);
        }
        self.unplaced[ipv6 as usize] = unplaced;
        for mut t in gone {
            let held: Vec<(K, u8)> = t.fib.routes().map(|r| (r.0, r.1)).collect();
            for (a, len) in held {
                let w = t.fib.remove(a, len).map_err(|e| anyhow::anyhow!("{e}"))?;
                self.dp.apply_fib(t.slot, &t.fib, &w)?;
            }
            K::of_mut(&mut self.families).others.drain(t.slot);
            tracing::info!(
                "table {} gives its FIB slot to a table the rules look up",
                t.view
            );
        }
        // A view filled takes as long as its table's routes (half a second
        // for a million): meanwhile the packets the new rules may send to
        // it go to the kernel, which walks them, not by the rules before.
        let cold = !added.is_empty();
        if cold {
            self.filling = true;
            let passed = self.write_all_ingress();
            let filled = passed.and_then(|()| {
                added
                    .into_iter()
                    .try_for_each(|view| self.fill_view::<K>(view))
            });
            self.filling = false;
            filled?;
        }
        Ok(self.write_program::<K>(program.unwrap_or_default())? || cold)
    }

    /// Writes the family's rule program if it changed (and says so): to
    /// the bank no interface names; the interfaces' words name it once they
    /// are written again (write_ingress), and the old bank is left alone.
    fn write_program<K: PerFamily>(&mut self, compiled: Vec<Compiled>) -> Result<bool> {
        let ipv6 = K::BITS == 128;
        let others = &K::of(&self.families).others;
        let root = |v: View| {
            if v == View::MAIN {
                Some(FastPath::table_root_mib(ipv6, 0))
            } else {
                others.slot_of(v).map(|s| FastPath::table_root_mib(ipv6, s))
            }
        };
        let written = linerate_dataplane::rules::encode(&compiled, K::BITS, root);
        let p = &self.programs[ipv6 as usize];
        if p.index.is_some() && p.written == written {
            return Ok(false);
        }
        let bank = match p.index {
            Some(i) => (i % 2) ^ 1,
            None => 0,
        };
        let index = 2 * ipv6 as u16 + bank;
        self.dp.set_policy_program(index, &written)?;
        self.programs[ipv6 as usize] = Program {
            index: Some(index),
            compiled,
            written,
        };
        Ok(true)
    }

    /// A forwarding or rp_filter setting: the router's interfaces it
    /// concerns forward in the fast path only the families the kernel
    /// forwards there, and filter as the kernel does (or pass).
    pub fn netconf(&mut self, n: &Netconf) -> Result<()> {
        match self.settings.netconf(n) {
            Scope::One(i) => self.push_ingress(i),
            Scope::All => self.push_all_ingress(),
        }
    }

    /// Writes one of the router's interfaces to the fast path: its MAC and
    /// the families the kernel forwards from it by the main table (those it
    /// forwards otherwise are marked as routed by policy).
    fn push_ingress(&mut self, ifindex: u32) -> Result<()> {
        // (A rename or a new master changes the tables the rules give.)
        if self.place_tables()? {
            return self.write_all_ingress();
        }
        self.write_ingress(ifindex)?;
        // A bridge's or a VRF's settings, MAC and name are its ports'; a
        // port's state and flags weigh for what the fast path bridges from
        // the others.
        for p in self.routed_as(self.l3_of(ifindex)) {
            if p != ifindex {
                self.write_ingress(p)?;
            }
        }
        // (What the fast path bridges to follows the ports.)
        self.sync_fdb()
    }

    /// push_ingress, the tables' FIBs placed already; a VLAN device's
    /// entry ([`vlans`]) if `ifindex` is one, and a port's VLAN devices'
    /// with the port's.
    fn write_ingress(&mut self, ifindex: u32) -> Result<()> {
        let Some(&mac) = self.ingress.get(&ifindex) else {
            return self.write_vlan(ifindex);
        };
        // A bridge's port is routed as the bridge: its MAC, its settings,
        // and tc on either (the port's ingress runs first).
        let mac = match self.bridge_of(ifindex) {
            Some(b) => self.link_mac(b).unwrap_or(mac),
            None => mac,
        };
        let mut ifc = self.entry(ifindex, ifindex, mac);
        ifc.bridging = self.bridging_flags(ifindex);
        // (A bridge's port: its VLAN devices take their frames first.)
        if self.bridge_of(ifindex).is_some() && !self.vlans_on(ifindex).is_empty() {
            ifc.bridging |= BRIDGE_VLAN_DEVICES;
        }
        // A driver that strips tags hides them from XDP: with VLAN devices
        // on the port, the fast path cannot tell their frames from its own.
        if self.hides_vlans(ifindex) {
            ifc.flags &= !(IFACE_FORWARD4 | IFACE_FORWARD6);
        }
        self.dp.set_interface(&ifc, self.xmit(ifindex).redirect)?;
        self.write_vlans_on(ifindex)
    }

    /// The entry of what arrives on port `port` as interface `dev` (the
    /// port, or a VLAN device on it) with MAC `mac`: the families the
    /// kernel forwards from `dev` (as the bridge it is a port of), and how.
    fn entry(&self, port: u32, dev: u32, mac: [u8; 6]) -> Iface {
        // None: the kernel routes the family from here; Some(None): main's
        // table alone, the fast path's lookup without a walk.
        let words = [self.word(dev, false), self.word(dev, true)];
        // (IPv4's main alone has a word too, FIB_TABLES_MAIN4: the reverse
        // path filter walks the egress's.)
        let l3 = self.l3_of(dev);
        let tc_on = |i: u32| self.tc.get(&i).is_some_and(|t| !t.ingress.is_empty());
        let context = ifaces::Context {
            routed: [words[0].is_some(), words[1].is_some()],
            walk: [words[0].flatten().is_some(), words[1].flatten().is_some()],
            tc_ingress: tc_on(port) || tc_on(l3),
            netfilter: [
                !self.netfilter.ipv4.is_empty(),
                !self.netfilter.ipv6.is_empty(),
            ],
            firewall: [
                self.judged_by_firewall(false),
                self.judged_by_firewall(true),
            ],
            nat: self.netfilter.nat,
            xmit_multibuf: self.xmit(port).multibuf,
        };
        Iface {
            ifindex: dev,
            mac,
            flags: ifaces::flags(&self.settings, l3, &context),
            l3,
            tables4: match words[0] {
                Some(Some(w)) => w,
                Some(None) => FIB_TABLES_MAIN4,
                None => tables_word(&[]),
            },
            tables6: words[1].flatten().unwrap_or_else(|| tables_word(&[])),
            bridging: 0,
            vlans: 0,
            pad: [0; 2],
        }
    }

    /// What the rules make of the transit packets arriving on the router's
    /// interfaces, where it is not main's table alone or the interface is
    /// a bridge's port (routed as the bridge): for each interface
    /// and family (`IPv4 from dut0`), a line saying which tables the fast
    /// path walks, or why the kernel routes them (the rule it cannot
    /// follow, named as `ip rule` shows it).
    pub fn routing(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut vlans: Vec<u32> = self.vlans.keys().copied().collect();
        vlans.sort_unstable();
        for &i in self.ingress.keys().chain(&vlans) {
            let name = self.names.get(&i).map(String::as_str);
            let shown = name.map_or_else(|| i.to_string(), str::to_string);
            for (ipv6, family) in [(false, "IPv4"), (true, "IPv6")] {
                let key = format!("{family} from {shown}");
                let line = match self.routing_of(i, ipv6) {
                    Routing::Main => match self.bridge_of(i) {
                        Some(b) => {
                            let b = self.names.get(&b).cloned().unwrap_or_else(|| b.to_string());
                            format!("{key}: routed as {b}, a port of it, by main's table")
                        }
                        None => continue,
                    },
                    Routing::Kernel => match self.kernels_whatever_the_rules(i).or_else(|| {
                        let (vrf, _) = self.vrf_of(i)?;
                        self.vrf_refusal(i, vrf, ipv6).map(String::from)
                    }) {
                        Some(why) => format!("{key}: the kernel's ({why})"),
                        None => format!("{key}: the kernel's (no rule looks a table up for it)"),
                    },
                    Routing::Tables(ts) => {
                        let held = self
                            .word(i, ipv6)
                            .flatten()
                            .map_or(0, |w| linerate_dataplane::layout::tables_of(w).len());
                        let w = self.walk_of(i, ipv6);
                        let vrf = self
                            .vrf_of(i)
                            .and_then(|(v, _)| self.names.get(&v))
                            .map_or(String::new(), |v| format!("as VRF {v}, "));
                        let mut l = format!("{key}: routed {vrf}by tables {}", w.names());
                        if held < ts.len() {
                            l += &format!(
                                "; from table {} on the kernel's (no FIB slot left: {} tables beside main)",
                                ts[held],
                                FastPath::TABLE_SLOTS - 1
                            );
                        }
                        l
                    }
                    Routing::Program => self.program_line(&key, ipv6),
                };
                out.push((key, line));
            }
        }
        out.extend(self.bridging());
        out.extend(self.vlan_lines());
        out
    }

    /// What the family's rule program does, for `routing`: its steps'
    /// tables, and the rules whose packets go to the kernel.
    fn program_line(&self, key: &str, ipv6: bool) -> String {
        let p = &self.programs[ipv6 as usize];
        let views = Policy::program_views(&p.compiled);
        let names: Vec<String> = views.iter().map(|v| v.to_string()).collect();
        let mut l = format!(
            "{key}: routed by the rules ({} steps; tables {})",
            p.compiled.len(),
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        );
        let kernel: Vec<String> = p
            .compiled
            .iter()
            .zip(&p.written)
            .filter(|(_, w)| w.step == linerate_dataplane::layout::RULE_KERNEL)
            .map(|(c, _)| match c.step {
                Step::Lookup(v) => format!("`{}` (no FIB slot left for {v})", c.text),
                _ => format!("`{}`", c.text),
            })
            .collect();
        if !kernel.is_empty() {
            l += &format!("; the kernel's, what reaches {}", kernel.join(", "));
        }
        l
    }

    /// Why the kernel routes the family from interface `ifindex` whatever
    /// the walk of its rules: the interface is enslaved to a device other
    /// than a bridge (a bridge's port is routed as the bridge). (Reverse
    /// path filtering walks the rules too: the fast path looks sources up
    /// by the words of the egresses, bpf/router/router.bpf.c rpf_ok.)
    fn kernels_whatever_the_rules(&self, ifindex: u32) -> Option<String> {
        self.links.get(&ifindex).filter(|l| l.master != 0)?;
        let shown = self
            .names
            .get(&ifindex)
            .cloned()
            .unwrap_or_else(|| ifindex.to_string());
        if self.vrf_of(ifindex).is_some() {
            return None;
        }
        let Some(bridge) = self.bridge_of(ifindex) else {
            return Some(format!(
                "{shown} is a port of a device other than a bridge or a VRF"
            ));
        };
        if self.links.get(&bridge).is_some_and(|b| b.vlan_filtering) {
            let b = self.names.get(&bridge).cloned().unwrap_or_default();
            return Some(format!("{shown} is a port of {b}, which filters VLANs"));
        }
        if let Some(c) = self.netfilter.bridge.first() {
            return Some(format!(
                "netfilter's bridge chains see what {shown} takes in ({c})"
            ));
        }
        match self.ports.get(&ifindex).map(|p| p.state) {
            Some(decode::BR_STATE_FORWARDING) => None,
            Some(s) => Some(format!(
                "{shown} is a bridge port not forwarding (STP state {s})"
            )),
            None => Some(format!("{shown} is a bridge port whose state is not known")),
        }
    }

    /// The interfaces whose tc hooks decide the router's: its own, and the
    /// bridges they are ports of.
    pub fn tc_interfaces(&self) -> Vec<u32> {
        let mut all: BTreeSet<u32> = self.ingress.keys().copied().collect();
        all.extend(self.ingress.keys().filter_map(|&i| self.bridge_of(i)));
        all.extend(self.ingress.keys().flat_map(|&i| self.vlans_on(i)));
        all.into_iter().collect()
    }

    /// The word of interface `ifindex`'s entry for the family: None, the
    /// kernel routes it; Some(None), main's table alone; else the tables
    /// to walk (their FIBs' roots, up to the first table without a FIB: a
    /// miss there goes to the kernel, which walks on), or the rule program.
    fn word(&self, ifindex: u32, ipv6: bool) -> Option<Option<u64>> {
        let roots: Vec<u16> = match self.routing_of(ifindex, ipv6) {
            Routing::Kernel => return None,
            Routing::Main => return Some(None),
            _ if self.filling => return None,
            Routing::Program => {
                return self.programs[ipv6 as usize]
                    .index
                    .map(|p| Some(rules_word(p)))
            }
            Routing::Tables(ts) => {
                let f = &self.families;
                let slot_of = |v| match ipv6 {
                    true => f.v6.others.slot_of(v),
                    false => f.v4.others.slot_of(v),
                };
                ts.into_iter()
                    .map_while(|t| {
                        let slot = if t == TABLE_MAIN {
                            Some(0)
                        } else {
                            slot_of(View::table(t))
                        };
                        slot.map(|s| FastPath::table_root_mib(ipv6, s))
                    })
                    .collect()
            }
        };
        match roots.as_slice() {
            [] => None,
            _ => Some(Some(tables_word(&roots))),
        }
    }

    /// What interface `ifindex` takes as an XDP redirect target.
    pub fn xmit(&self, ifindex: u32) -> XdpXmit {
        self.xmit.get(&ifindex).copied().unwrap_or(XdpXmit::UNKNOWN)
    }

    /// What the router's interfaces take as XDP redirect targets
    /// (linerate_netlink::xdp_features): an interface that does not take redirected
    /// frames is no egress of the fast path (the kernel forwards through
    /// it), one that takes single buffers only gets no multi-buffer frame.
    pub fn set_xmit(&mut self, xmit: BTreeMap<u32, XdpXmit>) -> Result<()> {
        let ours: Vec<u32> = self.ingress.keys().copied().collect();
        let before: Vec<XdpXmit> = ours.iter().map(|&i| self.xmit(i)).collect();
        self.xmit = xmit;
        for (i, was) in ours.into_iter().zip(before) {
            if self.xmit(i) != was {
                self.push_ingress(i)?;
            }
        }
        Ok(())
    }

    /// A nexthop object added, replaced or deleted; then the routes
    /// through it, or through a group it is in, are synced again (found by
    /// a pass over the routes: objects change seldom, routes often).
    pub fn nexthop_object(&mut self, n: &NhMessage) -> Result<()> {
        if let Some(seen) = &mut self.seen {
            seen.objects.insert(n.id);
        }
        let mut affected: HashSet<u32> = self
            .objects
            .iter()
            .filter(|(_, o)| matches!(o, NhObject::Group(m) if m.iter().any(|x| x.0 == n.id)))
            .map(|(&g, _)| g)
            .collect();
        affected.insert(n.id);
        let through = |k: &NhKey| matches!(k, NhKey::Object { id, .. } if affected.contains(id));
        let v4 = self.families.v4.routes.having(through);
        let v6 = self.families.v6.routes.having(through);
        if n.gone {
            // The kernel deletes the routes through the object and takes
            // it out of the groups it is in (a group left empty goes too,
            // with its routes); it does not say so route by route.
            let mut gone = vec![n.id];
            self.objects.remove(&n.id);
            for (&gid, o) in self.objects.iter_mut() {
                if let NhObject::Group(members) = o {
                    members.retain(|(m, _)| *m != n.id);
                    if members.is_empty() {
                        gone.push(gid);
                    }
                }
            }
            for id in &gone {
                self.objects.remove(id);
            }
            let dead = |k: &NhKey| matches!(k, NhKey::Object { id, .. } if gone.contains(id));
            self.families.v4.routes.drop_candidates(&v4, dead);
            self.families.v6.routes.drop_candidates(&v6, dead);
        } else {
            self.objects.insert(n.id, n.object.clone());
        }
        for k in v4 {
            self.sync(k)?;
        }
        for k in v6 {
            self.sync(k)?;
        }
        Ok(())
    }

    /// What a candidate's next hop is now: an object's gateway or group,
    /// the kernel's if the object is unknown or not one the fast path
    /// takes.
    fn resolve(&self, k: NhKey) -> NhKey {
        let (id, mtu) = match k {
            NhKey::Object { id, mtu } => (id, mtu),
            // A connected network's hosts with a neighbour entry have
            // entries of their own (Mirror::attached), in every table;
            // the rest are the kernel's to resolve.
            NhKey::Device { .. } => return NhKey::OnLink,
            k => return k,
        };
        let gateway = |o: Option<&NhObject>| match o {
            Some(NhObject::Gateway { oif, gw }) => Some(NhKey::Gateway {
                oif: *oif,
                gw: *gw,
                mtu,
            }),
            _ => None,
        };
        match self.objects.get(&id) {
            Some(NhObject::Group(members)) => {
                let mut keys = Vec::new();
                for (m, w) in members {
                    match gateway(self.objects.get(m)) {
                        Some(g) => keys.push((g, *w)),
                        None => return NhKey::Unsupported,
                    }
                }
                members_key(keys)
            }
            o => gateway(o).unwrap_or(NhKey::Unsupported),
        }
    }

    /// What the fast path's tables could not hold, by table: the kernel's
    /// (limits::Table).
    pub fn overflows(&self) -> limits::Overflows {
        self.counts.full.merged(&self.nh.full)
    }

    /// Lets freed FIB groups be reused: call a grace period after the
    /// writes that freed them.
    /// Next-hop and group ids freed by a sweep come back at the same time;
    /// routes that went without are synced again.
    pub fn release_quarantine(&mut self) -> Result<()> {
        self.families.v4.fib.release_quarantine();
        self.families.v6.fib.release_quarantine();
        self.take_blocks_back::<u32>()?;
        self.take_blocks_back::<u128>()?;
        // Slots given back are free now: views that waited for one get it.
        let waited = self.families.v4.others.draining() || self.families.v6.others.draining();
        self.families.v4.others.release_quarantine();
        self.families.v6.others.release_quarantine();
        if waited {
            self.push_all_ingress()?;
        }
        let view = nh_view!(self);
        if self.nh.release(|| view.ids_in_fibs()) {
            for k in self.families.v4.routes.prefixes() {
                self.sync(k)?;
            }
            for k in self.families.v6.routes.prefixes() {
                self.sync(k)?;
            }
        }
        Ok(())
    }

    /// Once main's FIB has groups free again, the blocks handed to the
    /// kernel for routes it could not hold are taken back: each block's
    /// own prefix as the kernel has it, then the routes that waited (one
    /// that still does not fit hands its block over again). Never while
    /// it is full: that would redo them all after every change.
    fn take_blocks_back<K: PerFamily>(&mut self) -> Result<()> {
        let family = K::of_mut(&mut self.families);
        if family.blocks.is_empty() || family.fib.free_groups() == 0 {
            return Ok(());
        }
        let first = family.fib.shape().first;
        let blocks = std::mem::take(&mut family.blocks);
        let mut waiting: Vec<(K, u8)> = std::mem::take(&mut family.waiting).into_iter().collect();
        waiting.sort();
        for b in blocks {
            self.sync((b, first))?;
        }
        for k in waiting {
            self.sync(k)?;
        }
        Ok(())
    }

    /// The Ethernet address of a link, as the kernel reported it.
    pub fn link_mac(&self, ifindex: u32) -> Option<[u8; 6]> {
        self.links
            .get(&ifindex)
            .map(|l| l.mac)
            .filter(|m| *m != [0; 6])
    }

    /// Makes `ifindex` one of the router's interfaces: frames to its MAC
    /// (as the kernel reported it) are the fast path's to consider, and it
    /// can be an egress. From then on its MAC is followed, and it is
    /// dropped from the fast path when it goes (deleted, or moved to
    /// another namespace).
    pub fn add_ingress(&mut self, ifindex: u32) -> Result<()> {
        let mac = self
            .link_mac(ifindex)
            .ok_or_else(|| anyhow::anyhow!("interface {ifindex} has no Ethernet address"))?;
        self.ingress.insert(ifindex, mac);
        self.push_ingress(ifindex)
    }

    /// Whether IPv6 is on for interface `ifindex` (linerate_netlink::netconf::
    /// ipv6_enabled): where it is off, IPv6 passes (the kernel drops it).
    pub fn set_ipv6_enabled(&mut self, ifindex: u32, on: bool) -> Result<()> {
        if self.settings.set_ipv6_enabled(ifindex, on) {
            self.push_ingress(ifindex)?;
        }
        Ok(())
    }

    /// Whether netfilter sees forwarded IPv4 and IPv6 (linerate_netlink::netfilter):
    /// where it does, the family passes, and the kernel forwards it
    /// through its hooks.
    pub fn set_netfilter(&mut self, hooks: Hooks) -> Result<()> {
        if self.netfilter == hooks {
            return Ok(());
        }
        let bridges = self.netfilter.bridge != hooks.bridge;
        self.netfilter = hooks;
        if bridges {
            self.refresh_bridge_nexthops(None)?;
        }
        self.push_all_ingress()
    }

    /// What tc does on the router's interfaces (linerate_netlink::tc), those where
    /// it does nothing left out: the sides where it acts go to the kernel.
    pub fn set_tc(&mut self, tc: BTreeMap<u32, TcHooks>) -> Result<()> {
        let sides = |t: Option<&TcHooks>| {
            t.map_or((false, false), |t| {
                (!t.ingress.is_empty(), !t.egress.is_empty())
            })
        };
        let mut changed = Vec::new();
        let either: BTreeSet<u32> = self.tc.keys().chain(tc.keys()).copied().collect();
        for i in either {
            let (was, now) = (sides(self.tc.get(&i)), sides(tc.get(&i)));
            if was != now {
                changed.push((i, was.0 != now.0, was.1 != now.1));
            }
        }
        self.tc = tc;
        for (i, ingress, egress) in changed {
            // (What the fast path bridges from a port weighs both sides.)
            if ingress || egress {
                self.push_ingress(i)?;
            }
            if egress {
                self.refresh_nexthops(|k| matches!(k, NhKey::Gateway { oif, .. } if *oif == i))?;
            }
        }
        Ok(())
    }

    /// What tc does on the router's interfaces, as last set.
    pub fn tc(&self) -> &BTreeMap<u32, TcHooks> {
        &self.tc
    }

    /// The base chains the fast path's firewall judges now, per family
    /// (linerate_fwfollow::thread): a family all of whose netfilter hooks are among
    /// them is forwarded through the firewall.
    pub fn set_firewall(&mut self, covered: [std::collections::BTreeSet<String>; 2]) -> Result<()> {
        if self.firewall == covered {
            return Ok(());
        }
        self.firewall = covered;
        self.push_all_ingress()
    }

    /// Whether every netfilter hook on the family's forwarding path is a
    /// chain the firewall judges (none: false).
    pub fn judged_by_firewall(&self, ipv6: bool) -> bool {
        let hooks = if ipv6 {
            &self.netfilter.ipv6
        } else {
            &self.netfilter.ipv4
        };
        !hooks.is_empty()
            && hooks
                .iter()
                .all(|h| self.firewall[ipv6 as usize].contains(h))
    }

    /// The netfilter hooks that see forwarded packets, as last set.
    pub fn netfilter(&self) -> &Hooks {
        &self.netfilter
    }

    /// The router's interfaces whose names are known, by index.
    pub fn ingress_names(&self) -> Vec<(u32, String)> {
        self.ingress
            .keys()
            .filter_map(|i| self.names.get(i).map(|n| (*i, n.clone())))
            .collect()
    }

    /// Interfaces `ifindexes` with their names (the index where it has
    /// none).
    pub fn names_of(&self, ifindexes: &[u32]) -> Vec<(u32, String)> {
        ifindexes
            .iter()
            .map(|i| {
                (
                    *i,
                    self.names.get(i).cloned().unwrap_or_else(|| i.to_string()),
                )
            })
            .collect()
    }

    /// The router's interfaces still there, with their MACs.
    pub fn ingress(&self) -> &BTreeMap<u32, [u8; 6]> {
        &self.ingress
    }

    /// After a change of link `index`: if it is one of the router's, the
    /// fast path follows its new MAC (frames to the old one are no longer
    /// the router's, the kernel would drop them), name and master (which
    /// the policy depends on), or forgets it once gone.
    fn follow_ingress(&mut self, index: u32) -> Result<()> {
        let Some(&had) = self.ingress.get(&index) else {
            return Ok(());
        };
        match self.links.get(&index).map(|l| l.mac) {
            None => {
                self.ingress.remove(&index);
                self.dp.remove_interface(index)?;
                self.write_vlans_on(index)
            }
            Some(mac) => {
                // A link message without an address leaves the MAC alone.
                if mac != had && mac != [0; 6] {
                    self.ingress.insert(index, mac);
                }
                self.push_ingress(index)
            }
        }
    }

    /// Whether a link came, went, or went up or down since the last call.
    /// Other link changes (a veth's features as its peer takes an XDP
    /// program) need no new read of tc, which waits for the kernel's
    /// rtnl lock behind every route a BGP daemon is installing.
    pub fn take_links_up_or_down(&mut self) -> bool {
        std::mem::take(&mut self.links_up_or_down)
    }

    /// Routes in the FIBs: IPv4, IPv6.
    pub fn routes(&self) -> (usize, usize) {
        (self.families.v4.fib.len(), self.families.v6.fib.len())
    }

    /// Each FIB, main's first: (IPv6, its table as `ip rule` names it,
    /// prefixes, bytes the fast path reads).
    pub fn fibs(&self) -> Vec<(bool, String, usize, u64)> {
        let v4 = &self.families.v4;
        let v6 = &self.families.v6;
        let mut out = vec![
            (
                false,
                "main".to_string(),
                v4.fib.len(),
                v4.fib.fast_path_bytes(),
            ),
            (
                true,
                "main".to_string(),
                v6.fib.len(),
                v6.fib.fast_path_bytes(),
            ),
        ];
        let others = |ipv6| move |t: (View, usize, u64)| (ipv6, t.0.to_string(), t.1, t.2);
        out.extend(
            v4.others
                .iter()
                .map(|t| (t.view, t.fib.len(), t.fib.fast_path_bytes()))
                .map(others(false)),
        );
        out.extend(
            v6.others
                .iter()
                .map(|t| (t.view, t.fib.len(), t.fib.fast_path_bytes()))
                .map(others(true)),
        );
        out
    }

    /// Next hops the fast path holds (the kernel's own, "pass", included).
    pub fn nexthops(&self) -> usize {
        self.nh.count()
    }

    fn link(&mut self, update: Option<decode::LinkUpdate>) -> Result<()> {
        let Some(u) = update else { return Ok(()) };
        let index = u.index;
        let vlan_parent = self
            .links
            .get(&index)
            .and_then(|l| l.vlan)
            .map(|v| v.parent);
        if let Some(seen) = &mut self.seen {
            seen.links.insert(index);
        }
        match u.link {
            None => {
                self.links.remove(&index);
                self.ports.remove(&index);
                self.names.remove(&index);
                self.links_up_or_down = true;
            }
            Some(link) => {
                if self.links.get(&index).map(|l| l.up) != Some(link.up) {
                    self.links_up_or_down = true;
                }
                let renamed = u
                    .name
                    .as_ref()
                    .is_some_and(|n| self.names.get(&index) != Some(n));
                if let Some(n) = u.name.filter(|_| renamed) {
                    self.names.insert(index, n);
                }
                if self.links.get(&index) == Some(&link) && !renamed {
                    return Ok(());
                }
                let regrouped = self.links.get(&index).map(|l| l.group) != Some(link.group);
                match (link.master, link.port) {
                    (0, _) => {
                        self.ports.remove(&index);
                    }
                    (_, Some(port)) => {
                        self.ports.insert(index, port);
                    }
                    _ => {}
                }
                self.links.insert(index, link);
                if regrouped {
                    self.refill_group_views::<u32>()?;
                    self.refill_group_views::<u128>()?;
                }
            }
        }
        self.follow_ingress(index)?;
        if vlan_parent.is_some() || self.links.get(&index).is_some_and(|l| l.vlan.is_some()) {
            self.follow_vlan(index, vlan_parent)?;
        } else if !self.ingress.contains_key(&index) && !self.routed_as(index).is_empty() {
            self.push_ingress(index)?;
        }
        self.refresh_nexthops(|k| matches!(k, NhKey::Gateway { oif, .. } if *oif == index))
    }

    fn neighbour(&mut self, update: Option<decode::NeighUpdate>) -> Result<()> {
        let Some(u) = update else { return Ok(()) };
        if let Some(seen) = &mut self.seen {
            seen.neigh.insert(u.key);
        }
        self.set_neighbour(u.key, u.mac, u.fixed)
    }

    /// A neighbour's MAC now (None: not usable or gone): the next hops
    /// through it are rewritten, and the host's own entry follows.
    fn set_neighbour(&mut self, key: NeighKey, mac: Option<[u8; 6]>, fixed: bool) -> Result<()> {
        if !self.neighbours.set(key, mac, fixed) {
            return Ok(());
        }
        let (oif, ip) = key;
        self.refresh_nexthops(
            |k| matches!(k, NhKey::Gateway { oif: o, gw, .. } if *o == oif && *gw == ip),
        )?;
        match ip {
            IpAddr::V4(v) => self.sync((u32::from(v), 32)),
            IpAddr::V6(v) => self.sync((u128::from(v), 128)),
        }
    }

    /// The neighbours the fast path sent to since the last call (the next
    /// hops it marked used, marks cleared), but for PERMANENT and NOARP
    /// ones, which the kernel does not confirm (and from which NTF_USE
    /// takes PERMANENT away on this kernel, found by testing): the kernel is to hear that
    /// they are in use (NTF_USE), as when it forwards to them itself, so
    /// that it confirms them (a STALE entry is probed, and fails when the
    /// host is gone) and does not collect them as unused.
    pub fn neighbours_in_use(&mut self) -> Vec<(u32, IpAddr)> {
        let mut out = Vec::new();
        for (k, id) in self.nh.matching(|k| matches!(k, NhKey::Gateway { .. })) {
            if let NhKey::Gateway { oif, gw, .. } = k {
                if self.dp.take_nexthop_used(id) && !self.neighbours.is_fixed(&(oif, gw)) {
                    out.push((oif, gw));
                }
            }
        }
        out
    }

    /// The next hop of host `a`'s own entry in `table`: the host itself,
    /// when the route the kernel takes to it there (the longest prefix
    /// holding it) is a connected network out of the interface its
    /// neighbour entry is on; with that network's length, which a view's
    /// `suppress_prefixlength` judges. The kernel then sends to the
    /// neighbour's MAC, and so does the fast path; a route through a
    /// gateway over it, or no usable neighbour, and the host has no entry
    /// of its own. (A tenant's table, or a VRF's, holds its own connected
    /// networks: their hosts get entries in its FIB.)
    fn attached<K: PerFamily>(&self, a: K, table: u32) -> Option<(NhKey, u8)> {
        let ip = ip_of(a);
        if !self.neighbours.is_host(ip) {
            return None;
        }
        match K::of(&self.families).routes.covering(a, table)? {
            (NhKey::Device { oif, mtu }, len) if self.neighbours.mac(&(oif, ip)).is_some() => {
                Some((NhKey::Gateway { oif, gw: ip, mtu }, len))
            }
            _ => None,
        }
    }

    /// Rewrites the entries of the next hops `which` selects.
    fn refresh_nexthops(&mut self, which: impl Fn(&NhKey) -> bool) -> Result<()> {
        for (k, id) in self.nh.matching(which) {
            let entry = nh_view!(self).entry(&self.nh, &k);
            self.dp.set_nexthop(id, &entry)?;
            self.counts.nexthop_updates += 1;
        }
        Ok(())
    }

    /// The id of a next hop, creating (and writing) it the first time.
    fn nexthop_id(&mut self, k: &NhKey) -> Result<u32> {
        let view = nh_view!(self);
        self.nh.id(k, &view, &mut self.dp)
    }

    fn route(&mut self, update: Option<RouteUpdate>) -> Result<()> {
        let Some(u) = update else { return Ok(()) };
        if let (Some(a), Some(seen)) = (u.local_address, &mut self.seen) {
            seen.local4.insert(a);
        }
        match u.prefix {
            Prefix::V4(a, len) => {
                if let Some(a) = u.local_address {
                    self.local_source(a, !u.gone)?;
                }
                self.route_in((a, len), u.candidate, u.gone)
            }
            Prefix::V6(a, len) => self.route_in((a, len), u.candidate, u.gone),
        }
    }

    fn route_in<K: PerFamily>(&mut self, key: (K, u8), c: Candidate, gone: bool) -> Result<()> {
        if let Some(seen) = &mut self.seen {
            K::seen(seen).insert((key, c.table, c.priority));
        }
        K::of_mut(&mut self.families).routes.update(key, c, gone);
        self.sync(key)
    }

    /// One of the router's own IPv4 addresses added or removed.
    fn local_source(&mut self, a: u32, local: bool) -> Result<()> {
        match self.local4.set(a, local) {
            Some(w) => self.dp.set_local_sources(w, self.local4.word(w)),
            None => Ok(()),
        }
    }

    /// Puts prefix `key` in the FIB as the kernel has it now; a host
    /// prefix may be an attached host's entry, and the hosts under a
    /// shorter one follow it (it may be, or stop being, their connected
    /// network, or come between them and it).
    fn sync<K: PerFamily>(&mut self, key: (K, u8)) -> Result<()> {
        let host = if key.1 == K::BITS {
            self.attached(key.0, TABLE_MAIN).map(|h| h.0)
        } else {
            None
        };
        let best = host
            .or_else(|| K::of(&self.families).routes.best(&key, TABLE_MAIN))
            .map(|k| self.resolve(k));
        let id = best.map(|k| self.nexthop_id(&k)).transpose()?;
        let family = K::of_mut(&mut self.families);
        match install(&mut self.dp, 0, &mut family.fib, &mut self.counts, key, id)? {
            Some(block) => {
                family.waiting.insert(key);
                family.blocks.insert(block);
            }
            None => {
                family.waiting.remove(&key);
            }
        }
        for view in K::of(&self.families).others.views() {
            self.sync_other(key, view)?;
        }
        if key.1 < K::BITS {
            for a in self.neighbours.hosts_within(key) {
                self.sync((a, K::BITS))?;
            }
        }
        Ok(())
    }
}

impl<D: Dataplane> Mirror<D> {
    /// Fills the FIB of a view just given a slot with its table's routes,
    /// all at once (shortest first, copied into the slot whole: no packet
    /// reads it before an interface's entry names it). A table the FIB
    /// cannot hold whole goes in route by route, its overflows the
    /// kernel's.
    fn fill_view<K: PerFamily>(&mut self, view: View) -> Result<()> {
        let Some(slot) = K::of(&self.families).others.slot_of(view) else {
            return Ok(());
        };
        self.dp.open_table(K::BITS == 128, slot)?;
        let mut keys = K::of(&self.families).routes.prefixes_in(view.table);
        // And the entries of its connected networks' hosts.
        let hosts = self.neighbours.hosts_within((K::from_u128(0), 0));
        keys.extend(hosts.into_iter().map(|a| (a, K::BITS)));
        keys.sort_unstable();
        keys.dedup();
        let mut rows = Vec::with_capacity(keys.len());
        for &key in &keys {
            if let Some(id) = self.view_nexthop(key, view)? {
                rows.push((key.0, key.1, id));
            }
        }
        let t = K::of_mut(&mut self.families)
            .others
            .get_mut(view)
            .expect("placed");
        if t.fib.bulk_load(&rows).is_ok() {
            self.counts.routes_installed += rows.len() as u64;
            return self.dp.load_fib(slot, &t.fib);
        }
        // The part that went in, copied; the rest route by route.
        self.dp.load_fib(slot, &t.fib)?;
        for key in keys {
            self.sync_other(key, view)?;
        }
        Ok(())
    }

    /// The next-hop id prefix `key` has in view `view`, None if the table
    /// has no route for it: its route in that table, the local table's
    /// over it; a route through gateways the view refuses a throw.
    fn view_nexthop<K: PerFamily>(&mut self, key: (K, u8), view: View) -> Result<Option<u32>> {
        // A host's own entry, as in main: refused by the length of the
        // connected network the kernel finds it in.
        let host = match key.1 == K::BITS {
            true => self.attached(key.0, view.table),
            false => None,
        };
        let (found, len) = match host {
            Some((k, len)) => (Some(k), len),
            None => (K::of(&self.families).routes.best(&key, view.table), key.1),
        };
        let best = found.map(|k| self.resolve(k)).map(|k| match k {
            NhKey::Gateway { .. } | NhKey::Group(_) if view.refuses(len) => NhKey::Throw,
            k => match view.suppress_group {
                Some(g) => self.suppressed_by_group(k, g),
                None => k,
            },
        });
        best.map(|k| self.nexthop_id(&k)).transpose()
    }

    /// A route's next hop in a view that refuses the routes through
    /// interface group `g` (`suppress_ifgroup`): a throw if its device is
    /// in the group (an ECMP route's: all its members'); the kernel's if
    /// only some members' are (the kernel looks at the first member's,
    /// IPv6 at the one the flow takes) or the device is not known.
    fn suppressed_by_group(&self, k: NhKey, g: u32) -> NhKey {
        let group = |oif: &u32| self.links.get(oif).map(|l| l.group);
        match &k {
            NhKey::Gateway { oif, .. } | NhKey::Device { oif, .. } => match group(oif) {
                Some(x) if x == g => NhKey::Throw,
                Some(_) => k,
                None => NhKey::Unsupported,
            },
            NhKey::Group(members) => {
                let groups: Vec<Option<u32>> = members
                    .iter()
                    .map(|(m, _)| match m {
                        NhKey::Gateway { oif, .. } => group(oif),
                        _ => None,
                    })
                    .collect();
                if groups.iter().all(|x| *x == Some(g)) {
                    NhKey::Throw
                } else if groups.iter().all(|x| x.is_some_and(|x| x != g)) {
                    k
                } else {
                    NhKey::Unsupported
                }
            }
            _ => k,
        }
    }

    /// Puts every route of the views that refuse routes by interface
    /// group in their FIBs again: a link changed groups.
    fn refill_group_views<K: PerFamily>(&mut self) -> Result<()> {
        let views: Vec<View> = K::of(&self.families)
            .others
            .views()
            .into_iter()
            .filter(|v| v.suppress_group.is_some())
            .collect();
        for view in views {
            for key in K::of(&self.families).routes.prefixes_in(view.table) {
                self.sync_other(key, view)?;
            }
        }
        Ok(())
    }

    /// Puts prefix `key` in the FIB of view `view` (not main's, one with
    /// a slot) as the kernel has it there: its route in that table, the
    /// local table's over it; a route through gateways the view refuses
    /// (`suppress_prefixlength`) a throw, so that the walk goes on. (The
    /// kernel refuses any route its lookup returns without an error; those
    /// the fast path leaves to the kernel stay the kernel's, which refuses
    /// or not. Hosts on connected networks get entries of their own in
    /// main's FIB only: elsewhere the connected route's packets go to the
    /// kernel.)
    fn sync_other<K: PerFamily>(&mut self, key: (K, u8), view: View) -> Result<()> {
        let id = self.view_nexthop(key, view)?;
        let Some(t) = K::of_mut(&mut self.families).others.get_mut(view) else {
            return Ok(());
        };
        install(&mut self.dp, t.slot, &mut t.fib, &mut self.counts, key, id).map(drop)
    }
}

/// The entry of one of the kernel's next hops: what the kernel does with
/// the packets names the reason they pass for (abi/router.h).
fn kernel_nexthop(k: &NhKey) -> Nexthop {
    let why = match k {
        NhKey::Unreachable => NH_UNREACHABLE,
        NhKey::OnLink => NH_ONLINK,
        NhKey::Kernel => 0,
        _ => NH_UNSUPPORTED,
    };
    Nexthop {
        flags: NH_VALID | NH_KERNEL | why,
        ..Default::default()
    }
}

/// The keys of `held` a dump did not show.
fn unseen<'a, K: Copy + Eq + std::hash::Hash + 'a>(
    held: impl Iterator<Item = &'a K>,
    seen: &HashSet<K>,
) -> Vec<K> {
    held.filter(|k| !seen.contains(k)).copied().collect()
}

/// Puts `key` in the FIB with next hop `id` (or takes it out) and pushes
/// the writes. A route the FIB cannot hold sends its whole first-level
/// block to the kernel instead: slower, never wrong.
fn install<K: Key, D: Dataplane>(
    dp: &mut D,
    slot: usize,
    fib: &mut Fib<K>,
    counts: &mut Counts,
    (addr, len): (K, u8),
    id: Option<u32>,
) -> Result<Option<K>> {
    let result = match id {
        Some(id) if fib.get(addr, len) == Some(id) => return Ok(None),
        Some(id) => fib.insert(addr, len, id).map(|w| (w, true)),
        None if fib.get(addr, len).is_some() => fib.remove(addr, len).map(|w| (w, false)),
        None => return Ok(None),
    };
    match result {
        Ok((w, added)) => {
            dp.apply_fib(slot, fib, &w)?;
            if added {
                counts.routes_installed += 1;
            } else {
                counts.routes_removed += 1;
            }
            Ok(None)
        }
        Err(FibError::TableFull { .. }) => {
            let first = fib.shape().first;
            let table = if K::BITS == 128 {
                limits::Table::Fib6
            } else {
                limits::Table::Fib4
            };
            let what = format!(
                "route {} (with its /{first} block)",
                linerate_fib::dump::show(addr, len)
            );
            counts.full.left_out(table, &what);
            let w = fib
                .insert(addr.mask(first), first, UNSUPPORTED_NH)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            dp.apply_fib(slot, fib, &w)?;
            Ok(Some(addr.mask(first)))
        }
        Err(e) => Err(anyhow::anyhow!(
            "{}: {e}",
            linerate_fib::dump::show(addr, len)
        )),
    }
}
