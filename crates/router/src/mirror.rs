//! The kernel's forwarding state as the fast path needs it, kept from
//! rtnetlink messages, and pushed into the fast path's maps as it changes.
//!
//! What is mirrored: links (MAC, MTU, up), neighbours (MAC when usable),
//! routes of the main and local tables (local wins, then the lowest
//! metric). A plain unicast route through a gateway gets a next hop that
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
//! it changes. Other routing tables are not mirrored: where a policy
//! rule may route a packet by one (crate::policy), or an interface is
//! enslaved (to a VRF, a bridge), the family passes from that interface.
use crate::ecmp;
use crate::fastpath::FastPath;
use crate::ids::IdPool;
use crate::layout::{
    Nexthop, NhGroup, IFACE_FORWARD4, IFACE_FORWARD6, IFACE_NETFILTER4, IFACE_NETFILTER6,
    IFACE_POLICY4, IFACE_POLICY6, IFACE_RPF_LOOSE, IFACE_RPF_STRICT, IFACE_TC, IFACE_XMIT_SG,
    NH_GROUP, NH_KERNEL, NH_RESOLVED, NH_TC, NH_VALID, ROUTER_NEXTHOPS, ROUTER_NH_GROUPS,
};
use crate::local::LocalSources;
use crate::netconf::{Netconf, IFINDEX_ALL};
use crate::netfilter::Hooks;
use crate::netlink::Change;
use crate::nhobj::{NhMessage, NhObject};
use crate::policy::Policy;
use crate::tc::TcHooks;
use crate::xdp_features::XdpXmit;
use anyhow::Result;
use linerate_fib::{Fib, FibError, Key, Shape};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteMessage, RouteMetric, RouteNextHop,
    RouteNextHopFlags, RouteType,
};
use netlink_packet_route::rule::RuleMessage;
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const TABLE_MAIN: u32 = 254;
const TABLE_LOCAL: u32 = 255;
/// The next hop that hands packets to the kernel.
pub const KERNEL_NH: u32 = 1;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Link {
    mac: [u8; 6],
    mtu: u32,
    up: bool,
    /// A port of another device (a VRF, a bridge): the kernel routes what
    /// arrives here, if at all, as that device.
    enslaved: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NhKey {
    Kernel,
    Gateway {
        oif: u32,
        gw: IpAddr,
        mtu: Option<u32>,
    },
    /// A unicast route with no gateway: a connected network (`ip route add
    /// P dev D`, or an address's prefix). The kernel's, but for the hosts
    /// on it whose neighbour is known (`Mirror::attached`).
    Device {
        oif: u32,
        mtu: Option<u32>,
    },
    /// An ECMP route: its members (`Gateway`s) and their weights, sorted.
    Group(Vec<(NhKey, u32)>),
    /// Through nexthop object `id`: a candidate's next hop, resolved to one
    /// of the above when the route is synced.
    Object {
        id: u32,
        mtu: Option<u32>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Candidate {
    table: u32,
    priority: u32,
    nh: NhKey,
}

/// What happened, for logs and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub routes_installed: u64,
    pub routes_removed: u64,
    pub nexthop_updates: u64,
    /// Routes the FIB could not hold: their block goes to the kernel.
    pub overflows: u64,
}

/// What a dump showed: everything else the mirror holds is stale.
#[derive(Default)]
struct Seen {
    links: HashSet<u32>,
    neigh: HashSet<(u32, IpAddr)>,
    objects: HashSet<u32>,
    /// Prefix, table and metric: a route's identity.
    routes4: HashSet<((u32, u8), u32, u32)>,
    routes6: HashSet<((u128, u8), u32, u32)>,
    local4: HashSet<u32>,
    /// The rules, all of them: they replace the mirror's at the end.
    policy: Policy,
}

pub struct Mirror {
    fp: FastPath,
    links: HashMap<u32, Link>,
    /// Link names: policy rules name their input interface.
    names: HashMap<u32, String>,
    neigh: HashMap<(u32, IpAddr), [u8; 6]>,
    /// The usable neighbours again, by address: the hosts a route change
    /// may give or take a host entry (a range of this set).
    hosts: BTreeSet<(IpAddr, u32)>,
    /// Usable neighbours the kernel does not confirm (PERMANENT, NOARP):
    /// never reported in use (NTF_USE takes PERMANENT away).
    fixed: HashSet<(u32, IpAddr)>,
    routes4: HashMap<(u32, u8), Vec<Candidate>>,
    routes6: HashMap<(u128, u8), Vec<Candidate>>,
    fib4: Fib<u32>,
    fib6: Fib<u128>,
    nh_ids: HashMap<NhKey, u32>,
    /// ECMP groups by key: their index in the nh_groups map.
    groups: HashMap<NhKey, u32>,
    /// The kernel's nexthop objects, by id.
    objects: HashMap<u32, NhObject>,
    nh_pool: IdPool,
    group_pool: IdPool,
    /// Some route went to the kernel for want of a free id: sync the
    /// routes again once ids come back.
    starved: bool,
    /// During a resync: what the dump has shown so far.
    seen: Option<Seen>,
    /// The router's own interfaces (its program is attached to them), with
    /// the MAC the fast path takes frames to as addressed to the router.
    ingress: BTreeMap<u32, [u8; 6]>,
    /// What the kernel forwards (netconf): IPv4 by ingress interface, IPv6
    /// for the namespace. Unknown is off: never forward what the kernel
    /// would not.
    forward4: HashMap<u32, bool>,
    forward6: bool,
    /// The router's interfaces with IPv6 off (disable_ipv6, or no IPv6
    /// configuration): the kernel drops IPv6 arriving there.
    ipv6_off: HashSet<u32>,
    /// Netfilter sees forwarded IPv4, IPv6 (crate::netfilter): the kernel
    /// forwards that family, so that its hooks are not bypassed.
    netfilter: Hooks,
    /// What tc does on the router's interfaces (crate::tc): what comes in
    /// where it acts on ingress, and what would leave where it acts on
    /// egress, the kernel forwards.
    tc: BTreeMap<u32, TcHooks>,
    /// What the router's interfaces take as XDP redirect targets
    /// (crate::xdp_features); one not known is taken to send single
    /// buffers only.
    xmit: BTreeMap<u32, XdpXmit>,
    /// IPv4 rp_filter by interface, and conf.all's.
    rp_filter: HashMap<u32, u8>,
    rp_filter_all: u8,
    /// The routing policy (ip rule): which interfaces' transit packets the
    /// kernel routes by the main table alone.
    policy: Policy,
    /// The router's own IPv4 addresses (the local table's /32 local
    /// routes): frames from them pass.
    local4: LocalSources,
    pub counts: Counts,
}

impl Mirror {
    pub fn new(fp: FastPath) -> Result<Self> {
        let kernel = Nexthop {
            flags: NH_VALID | NH_KERNEL,
            ..Default::default()
        };
        fp.set_nexthop(KERNEL_NH, &kernel)?;
        let mut nh_ids = HashMap::new();
        nh_ids.insert(NhKey::Kernel, KERNEL_NH);
        let ipv6 = fp.ipv6_layout().shape();
        Ok(Mirror {
            fp,
            links: HashMap::new(),
            names: HashMap::new(),
            neigh: HashMap::new(),
            hosts: BTreeSet::new(),
            fixed: HashSet::new(),
            routes4: HashMap::new(),
            routes6: HashMap::new(),
            fib4: Fib::new(Shape::IPV4),
            fib6: Fib::new(ipv6),
            nh_ids,
            groups: HashMap::new(),
            objects: HashMap::new(),
            nh_pool: IdPool::new(KERNEL_NH + 1, ROUTER_NEXTHOPS),
            group_pool: IdPool::new(0, ROUTER_NH_GROUPS),
            starved: false,
            seen: None,
            ingress: BTreeMap::new(),
            forward4: HashMap::new(),
            forward6: false,
            ipv6_off: HashSet::new(),
            netfilter: Hooks::default(),
            tc: BTreeMap::new(),
            xmit: BTreeMap::new(),
            rp_filter: HashMap::new(),
            rp_filter_all: 0,
            // Until a dump says otherwise (a mirror fed by hand).
            policy: Policy::kernel_default(),
            local4: LocalSources::default(),
            counts: Counts::default(),
        })
    }

    pub fn fast_path(&self) -> &FastPath {
        &self.fp
    }

    /// Applies one message from a dump or a notification.
    pub fn apply(&mut self, msg: &RouteNetlinkMessage) -> Result<()> {
        match msg {
            RouteNetlinkMessage::NewLink(l) => self.link(l, false),
            RouteNetlinkMessage::DelLink(l) => self.link(l, true),
            RouteNetlinkMessage::NewNeighbour(n) => self.neighbour(n, false),
            RouteNetlinkMessage::DelNeighbour(n) => self.neighbour(n, true),
            RouteNetlinkMessage::NewRoute(r) => self.route(r, false),
            RouteNetlinkMessage::DelRoute(r) => self.route(r, true),
            RouteNetlinkMessage::NewRule(r) => {
                self.rule(r);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Brings the mirror to a full dump of the kernel's state after
    /// notifications were lost: applies it, then drops every link,
    /// neighbour, nexthop object and route the dump no longer has (the
    /// kernel deleted them while nobody was listening).
    pub fn resync(&mut self, dump: &[Change]) -> Result<()> {
        self.seen = Some(Seen::default());
        let applied: Result<()> = dump.iter().try_for_each(|c| self.apply_change(c));
        let seen = self.seen.take().unwrap_or_default();
        applied?;
        for id in unseen(&self.objects, &seen.objects) {
            self.nexthop_object(&NhMessage {
                id,
                gone: true,
                object: NhObject::Kernel,
            })?;
        }
        for key in unseen(&self.neigh, &seen.neigh) {
            self.set_neighbour(key, None)?;
        }
        for index in unseen(&self.links, &seen.links) {
            self.links.remove(&index);
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
        for k in drop_unseen_routes(&mut self.routes4, &seen.routes4) {
            self.sync4(k)?;
        }
        for k in drop_unseen_routes(&mut self.routes6, &seen.routes6) {
            self.sync6(k)?;
        }
        if seen.policy != self.policy {
            self.policy = seen.policy;
            self.push_all_ingress()?;
        }
        Ok(())
    }

    /// A policy rule of a dump. Notifications of rules are not applied one
    /// by one (crate::policy): the caller reloads them whole (set_rules).
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
        let all: Vec<u32> = self.ingress.keys().copied().collect();
        all.into_iter().try_for_each(|i| self.push_ingress(i))
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

    /// A forwarding or rp_filter setting: the router's interfaces it
    /// concerns forward in the fast path only the families the kernel
    /// forwards there, and filter as the kernel does (or pass).
    pub fn netconf(&mut self, n: &Netconf) -> Result<()> {
        let i = n.ifindex;
        match (n.ipv6, n.forwarding) {
            (false, Some(on)) if i > 0 => {
                self.forward4.insert(i as u32, on);
            }
            (true, Some(on)) if i == IFINDEX_ALL => self.forward6 = on,
            // conf.all of IPv4 is applied to every interface, which is
            // notified on its own; IPv6's per-interface setting is not
            // what the kernel checks; defaults change nothing now.
            _ => {}
        }
        match (n.ipv6, n.rp_filter) {
            (false, Some(rp)) if i > 0 => {
                self.rp_filter.insert(i as u32, rp);
            }
            (false, Some(rp)) if i == IFINDEX_ALL => self.rp_filter_all = rp,
            _ => {}
        }
        // An interface's IPv4 settings go with its IPv4 configuration; an
        // IPv6 one going (a rename, an MTU below 1280) leaves them be.
        if n.gone && i > 0 && !n.ipv6 {
            self.forward4.remove(&(i as u32));
            self.rp_filter.remove(&(i as u32));
        }
        if i > 0 {
            self.push_ingress(i as u32)
        } else {
            self.push_all_ingress()
        }
    }

    /// Writes one of the router's interfaces to the fast path: its MAC and
    /// the families the kernel forwards from it by the main table (those it
    /// forwards otherwise are marked as routed by policy).
    fn push_ingress(&mut self, ifindex: u32) -> Result<()> {
        let Some(&mac) = self.ingress.get(&ifindex) else {
            return Ok(());
        };
        let name = self.names.get(&ifindex).map(String::as_str);
        let enslaved = self.links.get(&ifindex).is_some_and(|l| l.enslaved);
        let by_main = |ipv6| !enslaved && self.policy.main_only(ipv6, name);
        let tc_in = self.tc.get(&ifindex).is_some_and(|t| !t.ingress.is_empty());
        // Where the kernel forwards a family, the first of these that
        // holds names why the fast path leaves it to the kernel.
        let family = |ipv6: bool, policy, netfilter, nf_hooks: &Vec<String>, forward| {
            if !by_main(ipv6) {
                policy
            } else if tc_in {
                IFACE_TC
            } else if !nf_hooks.is_empty() {
                netfilter
            } else {
                forward
            }
        };
        let mut flags = 0;
        if self.forward4.get(&ifindex) == Some(&true) {
            flags |= family(
                false,
                IFACE_POLICY4,
                IFACE_NETFILTER4,
                &self.netfilter.ipv4,
                IFACE_FORWARD4,
            );
        }
        if self.forward6 && !self.ipv6_off.contains(&ifindex) {
            flags |= family(
                true,
                IFACE_POLICY6,
                IFACE_NETFILTER6,
                &self.netfilter.ipv6,
                IFACE_FORWARD6,
            );
        }
        let rp = self.rp_filter.get(&ifindex).copied().unwrap_or(0);
        flags |= match rp.max(self.rp_filter_all) {
            0 => 0,
            1 => IFACE_RPF_STRICT,
            _ => IFACE_RPF_LOOSE,
        };
        let xmit = self.xmit(ifindex);
        if xmit.multibuf {
            flags |= IFACE_XMIT_SG;
        }
        self.fp.set_interface(ifindex, mac, flags, xmit.redirect)
    }

    /// What interface `ifindex` takes as an XDP redirect target.
    pub fn xmit(&self, ifindex: u32) -> XdpXmit {
        self.xmit.get(&ifindex).copied().unwrap_or(XdpXmit::UNKNOWN)
    }

    /// What the router's interfaces take as XDP redirect targets
    /// (crate::xdp_features): an interface that does not take redirected
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
        let through = |l: &Vec<Candidate>| {
            l.iter()
                .any(|c| matches!(c.nh, NhKey::Object { id, .. } if affected.contains(&id)))
        };
        let v4: Vec<(u32, u8)> = self
            .routes4
            .iter()
            .filter(|(_, l)| through(l))
            .map(|(k, _)| *k)
            .collect();
        let v6: Vec<(u128, u8)> = self
            .routes6
            .iter()
            .filter(|(_, l)| through(l))
            .map(|(k, _)| *k)
            .collect();
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
            let dead =
                |c: &Candidate| matches!(c.nh, NhKey::Object { id, .. } if gone.contains(&id));
            for k in &v4 {
                if let Some(l) = self.routes4.get_mut(k) {
                    l.retain(|c| !dead(c));
                }
            }
            for k in &v6 {
                if let Some(l) = self.routes6.get_mut(k) {
                    l.retain(|c| !dead(c));
                }
            }
        } else {
            self.objects.insert(n.id, n.object.clone());
        }
        for k in v4 {
            self.sync4(k)?;
        }
        for k in v6 {
            self.sync6(k)?;
        }
        Ok(())
    }

    /// What a candidate's next hop is now: an object's gateway or group,
    /// the kernel's if the object is unknown or not one the fast path
    /// takes.
    fn resolve(&self, k: NhKey) -> NhKey {
        let (id, mtu) = match k {
            NhKey::Object { id, mtu } => (id, mtu),
            NhKey::Device { .. } => return NhKey::Kernel,
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
                        None => return NhKey::Kernel,
                    }
                }
                members_key(keys)
            }
            o => gateway(o).unwrap_or(NhKey::Kernel),
        }
    }

    /// Lets freed FIB groups be reused: call a grace period after the
    /// writes that freed them.
    /// Next-hop and group ids freed by a sweep come back at the same time;
    /// routes that went without are synced again.
    pub fn release_quarantine(&mut self) -> Result<()> {
        self.fib4.release_quarantine();
        self.fib6.release_quarantine();
        let freed = self.nh_pool.release() | self.group_pool.release();
        // Starved or not, the next shortage sweeps again.
        if std::mem::take(&mut self.starved) && freed {
            let v4: Vec<(u32, u8)> = self.routes4.keys().copied().collect();
            let v6: Vec<(u128, u8)> = self.routes6.keys().copied().collect();
            for k in v4 {
                self.sync4(k)?;
            }
            for k in v6 {
                self.sync6(k)?;
            }
        }
        Ok(())
    }

    /// Frees every next hop and group no route uses any more (the FIB's
    /// entries, and the members of the groups they use): run when ids run
    /// out, which churn (routes replaced, ECMP members coming and going)
    /// gets to. The ids come back after the grace period.
    fn sweep(&mut self) {
        let mut used: HashSet<u32> = self.fib4.routes().map(|r| r.2).collect();
        used.extend(self.fib6.routes().map(|r| r.2));
        let members: Vec<u32> = self
            .nh_ids
            .iter()
            .filter(|(k, id)| matches!(k, NhKey::Group(_)) && used.contains(id))
            .flat_map(|(k, _)| match k {
                NhKey::Group(m) => m
                    .iter()
                    .filter_map(|(g, _)| self.nh_ids.get(g).copied())
                    .collect(),
                _ => Vec::new(),
            })
            .collect();
        used.extend(members);
        let unused: Vec<(NhKey, u32)> = self
            .nh_ids
            .iter()
            .filter(|(_, id)| **id != KERNEL_NH && !used.contains(id))
            .map(|(k, &id)| (k.clone(), id))
            .collect();
        for (k, id) in unused {
            self.nh_ids.remove(&k);
            self.nh_pool.retire(id);
            if let Some(g) = self.groups.remove(&k) {
                self.group_pool.retire(g);
            }
        }
        // Groups whose next hop never got an id.
        let orphans: Vec<NhKey> = self
            .groups
            .keys()
            .filter(|k| !self.nh_ids.contains_key(*k))
            .cloned()
            .collect();
        for k in orphans {
            let g = self.groups.remove(&k).unwrap();
            self.group_pool.retire(g);
        }
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

    /// Whether IPv6 is on for interface `ifindex` (crate::netconf::
    /// ipv6_enabled): where it is off, IPv6 passes (the kernel drops it).
    pub fn set_ipv6_enabled(&mut self, ifindex: u32, on: bool) -> Result<()> {
        let changed = if on {
            self.ipv6_off.remove(&ifindex)
        } else {
            self.ipv6_off.insert(ifindex)
        };
        if changed {
            self.push_ingress(ifindex)?;
        }
        Ok(())
    }

    /// Whether netfilter sees forwarded IPv4 and IPv6 (crate::netfilter):
    /// where it does, the family passes, and the kernel forwards it
    /// through its hooks.
    pub fn set_netfilter(&mut self, hooks: Hooks) -> Result<()> {
        if self.netfilter == hooks {
            return Ok(());
        }
        self.netfilter = hooks;
        self.push_all_ingress()
    }

    /// What tc does on the router's interfaces (crate::tc), those where
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
            if ingress {
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
                self.fp.remove_interface(index)
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

    pub fn routes(&self) -> (usize, usize) {
        (self.fib4.len(), self.fib6.len())
    }

    fn link(&mut self, l: &LinkMessage, gone: bool) -> Result<()> {
        // AF_BRIDGE messages are about a bridge's port (its state in the
        // bridge; a "deletion" when it leaves the bridge), not the link.
        if l.header.interface_family == AddressFamily::Bridge {
            return Ok(());
        }
        let index = l.header.index;
        if let Some(seen) = &mut self.seen {
            seen.links.insert(index);
        }
        if gone {
            self.links.remove(&index);
            self.names.remove(&index);
        } else {
            let mut link = Link {
                up: l.header.flags.contains(LinkFlags::Up)
                    && l.header.flags.contains(LinkFlags::LowerUp),
                ..Default::default()
            };
            let mut name = None;
            for a in &l.attributes {
                match a {
                    LinkAttribute::Address(m) if m.len() == 6 => link.mac.copy_from_slice(m),
                    LinkAttribute::Mtu(m) => link.mtu = *m,
                    LinkAttribute::Controller(c) => link.enslaved = *c != 0,
                    LinkAttribute::IfName(n) => name = Some(n),
                    _ => {}
                }
            }
            let renamed = name.is_some_and(|n| self.names.get(&index) != Some(n));
            if let Some(n) = name.filter(|_| renamed) {
                self.names.insert(index, n.clone());
            }
            if self.links.get(&index) == Some(&link) && !renamed {
                return Ok(());
            }
            self.links.insert(index, link);
        }
        self.follow_ingress(index)?;
        self.refresh_nexthops(|k| matches!(k, NhKey::Gateway { oif, .. } if *oif == index))
    }

    fn neighbour(&mut self, n: &NeighbourMessage, gone: bool) -> Result<()> {
        let mut ip = None;
        let mut mac = None;
        for a in &n.attributes {
            match a {
                NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => {
                    ip = Some(IpAddr::V4(*v4))
                }
                NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => {
                    ip = Some(IpAddr::V6(*v6))
                }
                NeighbourAttribute::LinkLayerAddress(m) if m.len() == 6 => {
                    let mut x = [0u8; 6];
                    x.copy_from_slice(m);
                    mac = Some(x);
                }
                _ => {}
            }
        }
        let Some(ip) = ip else { return Ok(()) };
        let key = (n.header.ifindex, ip);
        if let Some(seen) = &mut self.seen {
            seen.neigh.insert(key);
        }
        // The kernel forwards with REACHABLE, STALE, DELAY, PROBE,
        // PERMANENT and NOARP entries; not with INCOMPLETE or FAILED.
        let usable = matches!(
            n.header.state,
            NeighbourState::Reachable
                | NeighbourState::Stale
                | NeighbourState::Delay
                | NeighbourState::Probe
                | NeighbourState::Permanent
                | NeighbourState::Noarp
        );
        let mac = match (gone, usable, mac) {
            (false, true, Some(m)) => Some(m),
            _ => None,
        };
        if mac.is_some()
            && matches!(
                n.header.state,
                NeighbourState::Permanent | NeighbourState::Noarp
            )
        {
            self.fixed.insert(key);
        } else {
            self.fixed.remove(&key);
        }
        self.set_neighbour(key, mac)
    }

    /// A neighbour's MAC now (None: not usable or gone): the next hops
    /// through it are rewritten, and the host's own entry follows.
    fn set_neighbour(&mut self, key: (u32, IpAddr), mac: Option<[u8; 6]>) -> Result<()> {
        let before = match mac {
            Some(m) => self.neigh.insert(key, m),
            None => self.neigh.remove(&key),
        };
        if before == mac {
            return Ok(());
        }
        let (oif, ip) = key;
        if mac.is_none() {
            self.fixed.remove(&key);
        }
        if mac.is_some() && !link_local(ip) {
            self.hosts.insert((ip, oif));
        } else {
            self.hosts.remove(&(ip, oif));
        }
        self.refresh_nexthops(
            |k| matches!(k, NhKey::Gateway { oif: o, gw, .. } if *o == oif && *gw == ip),
        )?;
        match ip {
            IpAddr::V4(v) => self.sync4((u32::from(v), 32)),
            IpAddr::V6(v) => self.sync6((u128::from(v), 128)),
        }
    }

    /// The neighbours the fast path sent to since the last call (the next
    /// hops it marked used, marks cleared), but for PERMANENT and NOARP
    /// ones, which the kernel does not confirm (and from which NTF_USE
    /// takes PERMANENT away on this kernel, found by testing): the kernel is to hear that
    /// they are in use (NTF_USE), as when it forwards to them itself, so
    /// that it confirms them (a STALE entry is probed, and fails when the
    /// host is gone) and does not collect them as unused.
    pub fn neighbours_in_use(&self) -> Vec<(u32, IpAddr)> {
        let mut out = Vec::new();
        for (k, &id) in &self.nh_ids {
            if let NhKey::Gateway { oif, gw, .. } = k {
                if self.fp.take_nexthop_used(id) && !self.fixed.contains(&(*oif, *gw)) {
                    out.push((*oif, *gw));
                }
            }
        }
        out
    }

    /// The next hop of host `ip`'s own entry: the host itself, when the
    /// route the kernel takes to it (the longest prefix `routes` holds) is
    /// a connected network out of the interface its neighbour entry is on.
    /// The kernel then sends to the neighbour's MAC, and so does the fast
    /// path; a route through a gateway over it, or no usable neighbour,
    /// and the host has no entry of its own.
    fn attached<K: Key>(&self, routes: &HashMap<(K, u8), Vec<Candidate>>, a: K) -> Option<NhKey> {
        let ip = ip_of(a);
        if !self.hosts.range((ip, 0)..=(ip, u32::MAX)).any(|_| true) {
            return None;
        }
        let covering = (0..=K::BITS)
            .rev()
            .find_map(|len| best(routes.get(&(a.mask(len), len))))?;
        match covering {
            NhKey::Device { oif, mtu } if self.neigh.contains_key(&(oif, ip)) => {
                Some(NhKey::Gateway { oif, gw: ip, mtu })
            }
            _ => None,
        }
    }

    /// The hosts with a usable neighbour inside prefix `(a, len)`.
    fn hosts_within<K: Key>(&self, (a, len): (K, u8)) -> Vec<K> {
        let host_bits = (u128::MAX >> (128 - K::BITS as u32))
            .checked_shr(len as u32)
            .unwrap_or(0);
        let last = K::from_u128(a.to_u128() | host_bits);
        let mut out: Vec<K> = self
            .hosts
            .range((ip_of(a), 0)..=(ip_of(last), u32::MAX))
            .map(|(ip, _)| key_of(*ip))
            .collect();
        out.dedup();
        out
    }

    /// Rewrites the entries of the next hops `which` selects.
    fn refresh_nexthops(&mut self, which: impl Fn(&NhKey) -> bool) -> Result<()> {
        let keys: Vec<(NhKey, u32)> = self
            .nh_ids
            .iter()
            .filter(|(k, _)| which(k))
            .map(|(k, &i)| (k.clone(), i))
            .collect();
        for (k, id) in keys {
            let entry = self.nexthop_entry(&k);
            self.fp.set_nexthop(id, &entry)?;
            self.counts.nexthop_updates += 1;
        }
        Ok(())
    }

    fn nexthop_entry(&self, k: &NhKey) -> Nexthop {
        match k {
            // (Objects are resolved before they get an id.)
            NhKey::Kernel | NhKey::Object { .. } | NhKey::Device { .. } => Nexthop {
                flags: NH_VALID | NH_KERNEL,
                ..Default::default()
            },
            NhKey::Group(_) => Nexthop {
                ifindex: self.groups.get(k).copied().unwrap_or_default(),
                flags: NH_VALID | NH_GROUP,
                ..Default::default()
            },
            NhKey::Gateway { oif, gw, mtu } => {
                let link = self.links.get(oif).copied().unwrap_or_default();
                let dmac = self.neigh.get(&(*oif, *gw)).copied();
                let mut flags = NH_VALID;
                if self.tc.get(oif).is_some_and(|t| !t.egress.is_empty()) {
                    flags |= NH_TC;
                } else if link.up && dmac.is_some() {
                    flags |= NH_RESOLVED;
                }
                let mtu = mtu
                    .unwrap_or(link.mtu)
                    .min(link.mtu.max(1))
                    .min(u16::MAX as u32);
                Nexthop {
                    ifindex: *oif,
                    mtu: mtu as u16,
                    flags,
                    used: 0,
                    dmac: dmac.unwrap_or_default(),
                    smac: link.mac,
                }
            }
        }
    }

    /// The id of a next hop, creating (and writing) it the first time.
    fn nexthop_id(&mut self, k: &NhKey) -> Result<u32> {
        if let Some(&id) = self.nh_ids.get(k) {
            return Ok(id);
        }
        if let NhKey::Group(members) = k {
            if !self.groups.contains_key(k) && !self.add_group(k, members)? {
                return Ok(KERNEL_NH);
            }
        }
        let Some(id) = self.nh_pool.take() else {
            // Out of next-hop entries: the kernel forwards this route
            // until the sweep's ids come back.
            self.starve();
            return Ok(KERNEL_NH);
        };
        let entry = self.nexthop_entry(k);
        self.fp.set_nexthop(id, &entry)?;
        self.nh_ids.insert(k.clone(), id);
        Ok(id)
    }

    /// Out of ids: sweep the unused ones (back after the grace period) and
    /// remember to sync the routes again then.
    fn starve(&mut self) {
        if !self.starved {
            self.starved = true;
            self.sweep();
        }
    }

    /// Writes the buckets of a new ECMP group, its members' next hops
    /// first. False if the fast path cannot hold it (too many members,
    /// groups or next hops): the kernel forwards that route.
    fn add_group(&mut self, k: &NhKey, members: &[(NhKey, u32)]) -> Result<bool> {
        let weights: Vec<u32> = members.iter().map(|m| m.1).collect();
        let Some(counts) = ecmp::bucket_counts(&weights) else {
            return Ok(false);
        };
        let mut ids = Vec::with_capacity(members.len());
        for (m, _) in members {
            ids.push(self.nexthop_id(m)?);
        }
        if ids.contains(&KERNEL_NH) {
            return Ok(false);
        }
        let Some(index) = self.group_pool.take() else {
            self.starve();
            return Ok(false);
        };
        let group = NhGroup {
            bucket: ecmp::buckets(&ids, &counts),
        };
        self.fp.set_nh_group(index, &group)?;
        self.groups.insert(k.clone(), index);
        Ok(true)
    }

    fn route(&mut self, r: &RouteMessage, gone: bool) -> Result<()> {
        if r.header.flags.contains(RouteFlags::Cloned) {
            return Ok(()); // IPv6 route cache entries
        }
        let mut table = r.header.table as u32;
        let (mut dst, mut gw, mut oif, mut priority, mut mtu) = (None, None, None, 0, None);
        let (mut multipath, mut nh_object) = (None, None);
        for a in &r.attributes {
            match a {
                RouteAttribute::Table(t) => table = *t,
                RouteAttribute::Destination(d) => dst = route_addr(d),
                RouteAttribute::Gateway(g) => gw = route_addr(g),
                RouteAttribute::Oif(o) => oif = Some(*o),
                RouteAttribute::Priority(p) => priority = *p,
                RouteAttribute::MultiPath(hops) => multipath = Some(hops),
                RouteAttribute::NhId(id) => nh_object = Some(*id),
                RouteAttribute::Metrics(ms) => {
                    for m in ms {
                        if let RouteMetric::Mtu(v) = m {
                            mtu = Some(*v);
                        }
                    }
                }
                _ => {}
            }
        }
        if table != TABLE_MAIN && table != TABLE_LOCAL {
            return Ok(());
        }
        let nh = match (r.header.kind, gw, oif, multipath, nh_object) {
            (RouteType::Unicast, Some(gw), Some(oif), None, None) => {
                NhKey::Gateway { oif, gw, mtu }
            }
            (RouteType::Unicast, None, Some(oif), None, None) => NhKey::Device { oif, mtu },
            (RouteType::Unicast, _, _, Some(hops), None) => group_key(hops, mtu),
            (RouteType::Unicast, _, _, _, Some(id)) => NhKey::Object { id, mtu },
            _ => NhKey::Kernel,
        };
        let cand = Candidate {
            table,
            priority,
            nh,
        };
        let len = r.header.destination_prefix_length;
        match r.header.address_family {
            AddressFamily::Inet => {
                let a = match dst {
                    Some(IpAddr::V4(v)) => u32::from(v),
                    _ => 0,
                };
                let key = (a.mask(len), len);
                if let Some(seen) = &mut self.seen {
                    seen.routes4.insert((key, cand.table, cand.priority));
                }
                if r.header.kind == RouteType::Local && len == 32 && table == TABLE_LOCAL {
                    if let Some(seen) = &mut self.seen {
                        seen.local4.insert(a);
                    }
                    self.local_source(a, !gone)?;
                }
                update_candidates(self.routes4.entry(key).or_default(), cand, gone);
                self.sync4(key)
            }
            AddressFamily::Inet6 => {
                let a = match dst {
                    Some(IpAddr::V6(v)) => u128::from(v),
                    _ => 0,
                };
                let key = (a.mask(len), len);
                if let Some(seen) = &mut self.seen {
                    seen.routes6.insert((key, cand.table, cand.priority));
                }
                let list = self.routes6.entry(key).or_default();
                // IPv6 deletes one member of a multipath route at a time
                // (`ip -6 route del P via G`), and says so with G alone.
                if !(gone && remove_sibling(list, &cand)) {
                    update_candidates(list, cand, gone);
                }
                self.sync6(key)
            }
            _ => Ok(()),
        }
    }

    /// One of the router's own IPv4 addresses added or removed.
    fn local_source(&mut self, a: u32, local: bool) -> Result<()> {
        match self.local4.set(a, local) {
            Some(w) => self.fp.set_local_sources(w, self.local4.word(w)),
            None => Ok(()),
        }
    }

    /// Puts prefix `key` in the FIB as the kernel has it now; a host
    /// prefix may be an attached host's entry, and the hosts under a
    /// shorter one follow it (it may be, or stop being, their connected
    /// network, or come between them and it).
    fn sync4(&mut self, key: (u32, u8)) -> Result<()> {
        let host = if key.1 == 32 {
            self.attached(&self.routes4, key.0)
        } else {
            None
        };
        let best = host
            .or_else(|| best(self.routes4.get(&key)))
            .map(|k| self.resolve(k));
        let id = best.map(|k| self.nexthop_id(&k)).transpose()?;
        let (fp, fib, counts) = (&self.fp, &mut self.fib4, &mut self.counts);
        install(fp, fib, counts, key, id)?;
        if key.1 < 32 {
            for a in self.hosts_within(key) {
                self.sync4((a, 32))?;
            }
        }
        Ok(())
    }

    fn sync6(&mut self, key: (u128, u8)) -> Result<()> {
        let host = if key.1 == 128 {
            self.attached(&self.routes6, key.0)
        } else {
            None
        };
        let best = host
            .or_else(|| best(self.routes6.get(&key)))
            .map(|k| self.resolve(k));
        let id = best.map(|k| self.nexthop_id(&k)).transpose()?;
        let (fp, fib, counts) = (&self.fp, &mut self.fib6, &mut self.counts);
        install(fp, fib, counts, key, id)?;
        if key.1 < 128 {
            for a in self.hosts_within(key) {
                self.sync6((a, 128))?;
            }
        }
        Ok(())
    }
}

/// An address as a FIB key's family holds it (a 32-bit key is IPv4).
fn ip_of<K: Key>(a: K) -> IpAddr {
    if K::BITS == 32 {
        IpAddr::V4(Ipv4Addr::from(a.to_u128() as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(a.to_u128()))
    }
}

fn key_of<K: Key>(ip: IpAddr) -> K {
    match ip {
        IpAddr::V4(v) => K::from_u128(u32::from(v) as u128),
        IpAddr::V6(v) => K::from_u128(u128::from(v)),
    }
}

/// fe80::/10: never forwarded (the fast path passes it), and every
/// interface has the same connected fe80::/64, so no host entries there.
fn link_local(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v) if v.segments()[0] & 0xffc0 == 0xfe80)
}

/// The keys of `held` a dump did not show.
fn unseen<K: Copy + Eq + std::hash::Hash, V>(held: &HashMap<K, V>, seen: &HashSet<K>) -> Vec<K> {
    held.keys().filter(|k| !seen.contains(k)).copied().collect()
}

/// Drops the routes (prefix, table, metric) a dump did not show; the
/// prefixes that lost one.
fn drop_unseen_routes<K: Copy + Eq + std::hash::Hash>(
    routes: &mut HashMap<K, Vec<Candidate>>,
    seen: &HashSet<(K, u32, u32)>,
) -> Vec<K> {
    let mut changed = Vec::new();
    for (k, l) in routes.iter_mut() {
        let before = l.len();
        l.retain(|c| seen.contains(&(*k, c.table, c.priority)));
        if l.len() != before {
            changed.push(*k);
        }
    }
    changed
}

fn route_addr(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v) => Some(IpAddr::V4(*v)),
        RouteAddress::Inet6(v) => Some(IpAddr::V6(*v)),
        _ => None,
    }
}

/// The next hop of a multipath route: its members through gateways,
/// weighted (RTNH_F_DEAD members left out, as the kernel does). A member
/// without a gateway (a device route), or through an IPv4 gateway of an
/// IPv6 route, makes the route the kernel's.
fn group_key(hops: &[RouteNextHop], mtu: Option<u32>) -> NhKey {
    let mut members = Vec::new();
    for h in hops {
        if h.flags.contains(RouteNextHopFlags::Dead) {
            continue;
        }
        let gw = h.attributes.iter().find_map(|a| match a {
            RouteAttribute::Gateway(g) => route_addr(g),
            _ => None,
        });
        match gw {
            Some(gw) if h.interface_index != 0 => {
                let oif = h.interface_index;
                members.push((NhKey::Gateway { oif, gw, mtu }, h.hops as u32 + 1));
            }
            _ => return NhKey::Kernel,
        }
    }
    members_key(members)
}

/// One member is a plain next hop, none the kernel's, more a group.
fn members_key(mut members: Vec<(NhKey, u32)>) -> NhKey {
    match members.len() {
        0 => NhKey::Kernel,
        1 => members.pop().unwrap().0,
        _ => {
            members.sort();
            NhKey::Group(members)
        }
    }
}

/// For an IPv6 delete naming one gateway: takes that member out of the
/// multipath route with the same table and metric. False if there is no
/// such member (the whole route goes, as for IPv4).
fn remove_sibling(list: &mut [Candidate], c: &Candidate) -> bool {
    let NhKey::Gateway { oif, gw, .. } = &c.nh else {
        return false;
    };
    let Some(x) = list
        .iter_mut()
        .find(|x| x.table == c.table && x.priority == c.priority)
    else {
        return false;
    };
    let NhKey::Group(members) = &x.nh else {
        return false;
    };
    let is_it =
        |k: &NhKey| matches!(k, NhKey::Gateway { oif: o, gw: g, .. } if o == oif && g == gw);
    if !members.iter().any(|(k, _)| is_it(k)) {
        return false;
    }
    let rest = members.iter().filter(|(k, _)| !is_it(k)).cloned().collect();
    x.nh = members_key(rest);
    true
}

/// A route is known by its table and metric (the kernel's identity for a
/// prefix); a new one replaces, a deleted one goes.
fn update_candidates(list: &mut Vec<Candidate>, c: Candidate, gone: bool) {
    list.retain(|x| !(x.table == c.table && x.priority == c.priority));
    if !gone {
        list.push(c);
    }
}

/// The local table wins, then the lowest metric.
fn best(list: Option<&Vec<Candidate>>) -> Option<NhKey> {
    list?
        .iter()
        .min_by_key(|c| (c.table != TABLE_LOCAL, c.priority))
        .map(|c| c.nh.clone())
}

/// Puts `key` in the FIB with next hop `id` (or takes it out) and pushes
/// the writes. A route the FIB cannot hold sends its whole first-level
/// block to the kernel instead: slower, never wrong.
fn install<K: Key>(
    fp: &FastPath,
    fib: &mut Fib<K>,
    counts: &mut Counts,
    (addr, len): (K, u8),
    id: Option<u32>,
) -> Result<()> {
    let result = match id {
        Some(id) if fib.get(addr, len) == Some(id) => return Ok(()),
        Some(id) => fib.insert(addr, len, id).map(|w| (w, true)),
        None if fib.get(addr, len).is_some() => fib.remove(addr, len).map(|w| (w, false)),
        None => return Ok(()),
    };
    match result {
        Ok((w, added)) => {
            fp.apply(fib, &w)?;
            if added {
                counts.routes_installed += 1;
            } else {
                counts.routes_removed += 1;
            }
            Ok(())
        }
        Err(FibError::TableFull { .. }) => {
            counts.overflows += 1;
            let first = fib.shape().first;
            eprintln!(
                "linerate route: the FIB is full; {} goes to the kernel with its /{first} block",
                linerate_fib::dump::show(addr, len)
            );
            let w = fib
                .insert(addr.mask(first), first, KERNEL_NH)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            fp.apply(fib, &w)
        }
        Err(e) => Err(anyhow::anyhow!(
            "{}: {e}",
            linerate_fib::dump::show(addr, len)
        )),
    }
}
