//! Next hops and ECMP groups by what they are (`NhKey`), and the ids they
//! have in the fast path's tables: handed out on first use, written
//! before any route points at them, swept when ids run out, and given
//! again only after a grace period (crate::ids).
use super::limits::{Overflows, Table};
use crate::ecmp;
use crate::ids::IdPool;
use anyhow::Result;
use linerate_dataplane::dataplane::Dataplane;
use linerate_dataplane::layout::{
    Nexthop, NhGroup, NH_GROUP_BUCKETS, ROUTER_NEXTHOPS, ROUTER_NH_GROUPS,
};
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

/// The next hop that hands packets to the kernel, for the router.
pub const KERNEL_NH: u32 = 1;
/// The kernel's other next hops, by what it does with the packets
/// (abi/router.h): unreachable routes', main's connected hosts without a
/// neighbour entry here, the routes the fast path does not carry.
pub const UNREACHABLE_NH: u32 = linerate_dataplane::layout::NH_ID_UNREACHABLE;
pub const ONLINK_NH: u32 = linerate_dataplane::layout::NH_ID_ONLINK;
pub const UNSUPPORTED_NH: u32 = linerate_dataplane::layout::NH_ID_UNSUPPORTED;
/// The ids before this one are the fixed ones above.
const FIRST_FREE_NH: u32 = UNSUPPORTED_NH + 1;

/// The next hop of `throw` routes: a miss in its table, the fast path's
/// walk of an interface's tables going on to the next (its entry is never
/// written: with main's table alone, the kernel's).
pub const THROW_NH: u32 = linerate_dataplane::layout::NH_ID_THROW;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NhKey {
    /// For the router: local, broadcast, anycast, multicast routes.
    Kernel,
    /// An unreachable, prohibit or blackhole route: the kernel answers
    /// with an ICMP error or drops.
    Unreachable,
    /// Main's connected network, to a host whose neighbour entry the fast
    /// path does not hold (the kernel resolves it).
    OnLink,
    /// A route the fast path does not carry: its next hops, another
    /// table's connected network, a FIB block that did not fit.
    Unsupported,
    /// A `throw` route: the kernel's rules walk on to the next table.
    Throw,
    Gateway {
        oif: u32,
        gw: IpAddr,
        mtu: Option<u32>,
    },
    /// A unicast route with no gateway: a connected network (`ip route add
    /// P dev D`, or an address's prefix). The kernel's, but for the hosts
    /// on it whose neighbour is known (crate::mirror's attached hosts).
    Device { oif: u32, mtu: Option<u32> },
    /// An ECMP route: its members (`Gateway`s) and their weights, sorted.
    Group(Vec<(NhKey, u32)>),
    /// Through nexthop object `id`: a candidate's next hop, resolved to one
    /// of the above when the route is synced.
    Object { id: u32, mtu: Option<u32> },
}

/// One member is a plain next hop, none the kernel's, more a group.
pub fn members_key(mut members: Vec<(NhKey, u32)>) -> NhKey {
    match members.len() {
        0 => NhKey::Unsupported,
        1 => members.pop().unwrap().0,
        _ => {
            members.sort();
            NhKey::Group(members)
        }
    }
}

/// The ids of next hops and groups in use.
pub struct NhIds {
    ids: HashMap<NhKey, u32>,
    /// ECMP groups by key: their index in the nh_groups map.
    groups: HashMap<NhKey, u32>,
    nh_pool: IdPool,
    group_pool: IdPool,
    /// Some route went to the kernel for want of a free id: sync the
    /// routes again once ids come back.
    starved: bool,
    /// Next hops and groups left to the kernel for want of room.
    pub full: Overflows,
}

impl Default for NhIds {
    fn default() -> Self {
        let mut ids = HashMap::new();
        ids.insert(NhKey::Kernel, KERNEL_NH);
        ids.insert(NhKey::Throw, THROW_NH);
        ids.insert(NhKey::Unreachable, UNREACHABLE_NH);
        ids.insert(NhKey::OnLink, ONLINK_NH);
        ids.insert(NhKey::Unsupported, UNSUPPORTED_NH);
        NhIds {
            ids,
            groups: HashMap::new(),
            nh_pool: IdPool::new(FIRST_FREE_NH, ROUTER_NEXTHOPS),
            group_pool: IdPool::new(0, ROUTER_NH_GROUPS),
            starved: false,
            full: Overflows::default(),
        }
    }
}

impl NhIds {
    /// Next hops with an id.
    pub fn count(&self) -> usize {
        self.ids.len()
    }

    /// The group index of ECMP next hop `k`, once it has one.
    pub fn group_index(&self, k: &NhKey) -> Option<u32> {
        self.groups.get(k).copied()
    }

    /// The next hops `which` selects, with their ids.
    pub fn matching(&self, which: impl Fn(&NhKey) -> bool) -> Vec<(NhKey, u32)> {
        self.ids
            .iter()
            .filter(|(k, _)| which(k))
            .map(|(k, &i)| (k.clone(), i))
            .collect()
    }

    /// The id of next hop `k`, creating it the first time: `entry` says
    /// (ctx) what to write for a key, and a group's members and buckets are
    /// written before it. UNSUPPORTED_NH when the fast path cannot hold it.
    pub fn id<D: Dataplane>(&mut self, k: &NhKey, ctx: &dyn NhContext, dp: &mut D) -> Result<u32> {
        if let Some(&id) = self.ids.get(k) {
            return Ok(id);
        }
        if let NhKey::Group(members) = k {
            if !self.groups.contains_key(k) && !self.add_group(k, members, ctx, dp)? {
                return Ok(UNSUPPORTED_NH);
            }
        }
        let Some(id) = self.nh_pool.take() else {
            // Out of next-hop entries: the kernel forwards this route
            // until the sweep's ids come back.
            self.starve(ctx);
            self.full
                .left_out(Table::Nexthops, &format!("next hop {k:?}"));
            return Ok(UNSUPPORTED_NH);
        };
        dp.set_nexthop(id, &ctx.entry(self, k))?;
        self.ids.insert(k.clone(), id);
        Ok(id)
    }

    /// Writes the buckets of a new ECMP group, its members' next hops
    /// first. False if the fast path cannot hold it (too many members,
    /// groups or next hops): the kernel forwards that route.
    fn add_group<D: Dataplane>(
        &mut self,
        k: &NhKey,
        members: &[(NhKey, u32)],
        ctx: &dyn NhContext,
        dp: &mut D,
    ) -> Result<bool> {
        let weights: Vec<u32> = members.iter().map(|m| m.1).collect();
        let Some(counts) = ecmp::bucket_counts(&weights) else {
            if members.len() > NH_GROUP_BUCKETS {
                let what = format!("an ECMP route of {} members", members.len());
                self.full.left_out(Table::GroupMembers, &what);
            }
            return Ok(false);
        };
        let mut ids = Vec::with_capacity(members.len());
        for (m, _) in members {
            ids.push(self.id(m, ctx, dp)?);
        }
        if ids.iter().any(|&id| id < FIRST_FREE_NH) {
            return Ok(false);
        }
        let Some(index) = self.group_pool.take() else {
            self.starve(ctx);
            let what = format!("an ECMP group of {} members", members.len());
            self.full.left_out(Table::Groups, &what);
            return Ok(false);
        };
        let group = NhGroup {
            bucket: ecmp::buckets(&ids, &counts),
        };
        dp.set_nh_group(index, &group)?;
        self.groups.insert(k.clone(), index);
        Ok(true)
    }

    /// Out of ids: sweep the unused ones (back after the grace period) and
    /// remember to sync the routes again then.
    fn starve(&mut self, ctx: &dyn NhContext) {
        if !self.starved {
            self.starved = true;
            self.sweep(ctx.ids_in_fibs());
        }
    }

    /// Frees every next hop and group no route uses any more (`used`: the
    /// ids the FIBs hold; then the members of the groups they use): run
    /// when ids run out, which churn (routes replaced, ECMP members coming
    /// and going) gets to. The ids come back after the grace period.
    fn sweep(&mut self, mut used: HashSet<u32>) {
        let members: Vec<u32> = self
            .ids
            .iter()
            .filter(|(k, id)| matches!(k, NhKey::Group(_)) && used.contains(id))
            .flat_map(|(k, _)| match k {
                NhKey::Group(m) => m
                    .iter()
                    .filter_map(|(g, _)| self.ids.get(g).copied())
                    .collect(),
                _ => Vec::new(),
            })
            .collect();
        used.extend(members);
        let unused: Vec<(NhKey, u32)> = self
            .ids
            .iter()
            .filter(|(_, id)| **id >= FIRST_FREE_NH && !used.contains(id))
            .map(|(k, &id)| (k.clone(), id))
            .collect();
        for (k, id) in unused {
            self.ids.remove(&k);
            self.nh_pool.retire(id);
            if let Some(g) = self.groups.remove(&k) {
                self.group_pool.retire(g);
            }
        }
        // Groups whose next hop never got an id.
        let orphans: Vec<NhKey> = self
            .groups
            .keys()
            .filter(|k| !self.ids.contains_key(*k))
            .cloned()
            .collect();
        for k in orphans {
            let g = self.groups.remove(&k).unwrap();
            self.group_pool.retire(g);
        }
    }

    /// Ends the grace period of swept ids; called a grace period after
    /// the last change, so that while routes wait for ids, what no FIB
    /// uses now (`used`: ctx.ids_in_fibs()) has not been read since and
    /// is swept and freed at once. True if routes went to the kernel for
    /// want of ids and ids came back: sync them all again. Until then
    /// they wait: each route removed is a chance.
    pub fn release(&mut self, used: impl FnOnce() -> HashSet<u32>) -> bool {
        if self.starved {
            self.sweep(used());
        }
        let freed = self.nh_pool.release() | self.group_pool.release();
        if self.starved && freed {
            self.starved = false;
            return true;
        }
        false
    }
}

/// What the ids need to know of the rest of the mirror.
pub trait NhContext {
    /// The entry to write for next hop `k`.
    fn entry(&self, ids: &NhIds, k: &NhKey) -> Nexthop;
    /// The next-hop ids the FIBs hold.
    fn ids_in_fibs(&self) -> HashSet<u32>;
}
