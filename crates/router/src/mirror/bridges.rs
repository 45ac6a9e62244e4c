//! Bridges: their ports' states and flags, their FDBs, and what the fast
//! path does with them. A frame for the bridge's MAC on one of the
//! router's ports is routed as the bridge (its port's entry says so); a
//! route out of a bridge leaves by the port the FDB holds its neighbour's
//! MAC behind; and a frame for another MAC is bridged in XDP when the
//! kernel's bridge would forward it by the FDB alone (bpf/router/router.bpf.c
//! bridge_frame). Learning and ageing stay the kernel's: the fast path
//! bridges a frame only when the FDB holds its source behind the port it
//! came in by, and the entries it bridged from are refreshed in the kernel
//! ([`Mirror::fdb_in_use`], NTF_USE), as the kernel's learning from those
//! frames would refresh them.
//!
//! What the fast path bridges is decided per bridge and per port
//! (`bridge_refusal`, `port_refusal`): anything by which the kernel's
//! bridge treats a unicast frame otherwise than by the FDB (VLAN
//! filtering, a port's isolation, locking or neighbour suppression, a
//! promiscuous bridge, netfilter chains that see bridged frames, tc on a
//! port, a learning limit) leaves the frames to the kernel.
use super::decode::{self, PortInfo};
use super::{Mirror, NhKey};
use anyhow::Result;
use linerate_dataplane::dataplane::Dataplane;
use linerate_dataplane::layout::{
    FdbEntry, FdbKey, BRIDGE_LEARN, BRIDGE_NF4, BRIDGE_NF6, BRIDGE_NF_TAGGED, BRIDGE_PORT,
    FDB_TO_PORT,
};
use std::collections::{HashMap, HashSet};

impl<D: Dataplane> Mirror<D> {
    /// A bridge port's state and flags (None: it left the bridge).
    pub(super) fn bridge_port(&mut self, update: Option<(u32, Option<PortInfo>)>) -> Result<()> {
        let Some((index, info)) = update else {
            return Ok(());
        };
        let was = match info {
            Some(p) => self.ports.insert(index, p),
            None => self.ports.remove(&index),
        };
        if was != info {
            self.push_ingress(index)?;
            self.refresh_bridge_nexthops(None)?;
        }
        Ok(())
    }

    /// A bridge's FDB entry: the next hops out of that bridge are written
    /// again (the port they leave by may have changed), and the entry the
    /// fast path bridges by.
    pub(super) fn fdb_entry(&mut self, update: Option<decode::FdbUpdate>) -> Result<()> {
        let Some(u) = update else { return Ok(()) };
        let key = (u.bridge, u.mac);
        if let Some(seen) = &mut self.seen {
            seen.fdb.insert(key);
        }
        let was = match u.port {
            Some(p) => self.fdb.insert(key, p),
            None => self.fdb.remove(&key),
        };
        if was != u.port {
            self.refresh_bridge_nexthops(Some(u.bridge))?;
            let want = u.port.and_then(|p| self.wanted_fdb(u.bridge, p));
            self.write_fdb(FdbKey::new(u.bridge, u.mac), want)?;
        }
        Ok(())
    }

    /// Rewrites the next hops out of bridge `bridge` (None: of every
    /// bridge).
    pub(super) fn refresh_bridge_nexthops(&mut self, bridge: Option<u32>) -> Result<()> {
        let bridges: HashSet<u32> = self
            .links
            .iter()
            .filter(|(i, l)| l.bridge && bridge.is_none_or(|b| b == **i))
            .map(|(i, _)| *i)
            .collect();
        self.refresh_nexthops(|k| matches!(k, NhKey::Gateway { oif, .. } if bridges.contains(oif)))
    }

    /// The bridge interface `ifindex` is a port of, if it is one.
    pub(super) fn bridge_of(&self, ifindex: u32) -> Option<u32> {
        let master = self.links.get(&ifindex)?.master;
        self.links.get(&master).filter(|m| m.bridge).map(|_| master)
    }

    /// The interface the kernel routes what arrives on `ifindex` as:
    /// itself, the bridge it is a port of, or the VRF it is enslaved to
    /// (crate::mirror::vrfs).
    pub(super) fn l3_of(&self, ifindex: u32) -> u32 {
        self.bridge_of(ifindex)
            .or_else(|| self.vrf_of(ifindex).map(|(dev, _)| dev))
            .unwrap_or(ifindex)
    }

    /// The router's interfaces and VLAN devices routed as `l3` (a bridge,
    /// a VRF, or one of them itself).
    pub(super) fn routed_as(&self, l3: u32) -> Vec<u32> {
        let ports = self.ingress.keys().copied();
        let vlans = self.ingress.keys().flat_map(|&p| self.vlans_on(p));
        ports
            .chain(vlans)
            .filter(|&i| self.l3_of(i) == l3)
            .collect()
    }

    /// The router's interfaces that are ports of bridge `bridge`.
    pub(super) fn ports_of(&self, bridge: u32) -> Vec<u32> {
        self.ingress
            .keys()
            .copied()
            .filter(|&p| self.bridge_of(p) == Some(bridge))
            .collect()
    }

    pub(super) fn name_of(&self, ifindex: u32) -> String {
        self.names
            .get(&ifindex)
            .cloned()
            .unwrap_or_else(|| ifindex.to_string())
    }

    /// Why the kernel bridges every frame between bridge `bridge`'s
    /// ports; None: the fast path bridges between those `port_refusal`
    /// clears.
    fn bridge_refusal(&self, bridge: u32) -> Option<String> {
        let b = self.links.get(&bridge)?;
        let name = self.name_of(bridge);
        if bridge > linerate_dataplane::fdb::MAX_BRIDGE {
            return Some(format!(
                "{name}'s index {bridge} is above {}, which the fast path's FDB keys hold",
                linerate_dataplane::fdb::MAX_BRIDGE
            ));
        }
        if b.vlan_filtering {
            return Some(format!("{name} filters VLANs"));
        }
        if b.promisc {
            return Some(format!(
                "{name} is promiscuous: it passes up a copy of what it forwards"
            ));
        }
        if b.fdb_max_learned != 0 {
            return Some(format!(
                "{name} limits its learned entries (fdb_max_learned {}), which entries refreshed as used would leave",
                b.fdb_max_learned
            ));
        }
        if let Some(c) = self.netfilter.bridged.first() {
            return Some(format!("netfilter sees what {name} forwards ({c})"));
        }
        let mut special: Vec<(u32, &str)> = self
            .ports
            .iter()
            .filter(|(p, _)| self.bridge_of(**p) == Some(bridge))
            .filter_map(|(p, i)| i.special.map(|s| (*p, s)))
            .collect();
        special.sort();
        if let Some((p, flag)) = special.first() {
            return Some(format!("its port {} is {flag}", self.name_of(*p)));
        }
        None
    }

    /// Why the fast path does not bridge from or to port `port` of a
    /// bridge; None: it does, if its bridge's frames are bridged at all.
    fn port_refusal(&self, port: u32) -> Option<String> {
        let name = self.name_of(port);
        if !self.ingress.contains_key(&port) {
            return Some(format!("{name} is not one of the router's interfaces"));
        }
        match self.ports.get(&port) {
            Some(p) if p.state == decode::BR_STATE_FORWARDING => {}
            Some(p) => return Some(format!("{name} is not forwarding (STP state {})", p.state)),
            None => return Some(format!("{name}'s state is not known")),
        }
        if !self.links.get(&port).is_some_and(|l| l.up) {
            return Some(format!("{name} is down"));
        }
        if self
            .tc
            .get(&port)
            .is_some_and(|t| !t.ingress.is_empty() || !t.egress.is_empty())
        {
            return Some(format!("tc acts on {name}"));
        }
        None
    }

    /// What the fast path bridges of what arrives on port `port` for
    /// another MAC than its bridge's, and whether it checks and refreshes
    /// the sources of what it routes from there (BRIDGE_*; 0: neither).
    pub(super) fn bridging_flags(&self, port: u32) -> u16 {
        let Some(bridge) = self.bridge_of(port) else {
            return 0;
        };
        // (A bridge limiting what it learns: no refresh, see bridge_refusal.
        // A port not forwarding: nothing is routed from it anyway.)
        let learns = self
            .ports
            .get(&port)
            .is_some_and(|p| p.learning && p.state == decode::BR_STATE_FORWARDING)
            && self
                .links
                .get(&bridge)
                .is_some_and(|b| b.fdb_max_learned == 0);
        let learn = if learns { BRIDGE_LEARN } else { 0 };
        if self.bridge_refusal(bridge).is_some() || self.port_refusal(port).is_some() {
            return learn;
        }
        let [nf4, nf6] = self.br_netfilter_families(bridge);
        let tagged = (nf4 || nf6) && self.netfilter.br_netfilter.is_some_and(|b| b.tagged);
        BRIDGE_PORT
            | learn
            | if nf4 { BRIDGE_NF4 } else { 0 }
            | if nf6 { BRIDGE_NF6 } else { 0 }
            | if tagged { BRIDGE_NF_TAGGED } else { 0 }
    }

    /// Whether br_netfilter passes what bridge `bridge` forwards of IPv4,
    /// IPv6 through hooks that are there.
    fn br_netfilter_families(&self, bridge: u32) -> [bool; 2] {
        let Some(brnf) = self.netfilter.br_netfilter else {
            return [false; 2];
        };
        let own = self.links.get(&bridge).map_or([false; 2], |b| b.nf_call);
        let hooked = [
            !self.netfilter.ipv4.is_empty(),
            !self.netfilter.ipv6.is_empty(),
        ];
        [0, 1].map(|f| (brnf.call[f] || own[f]) && hooked[f])
    }

    /// The entry the fast path holds for a MAC behind port `port` of
    /// bridge `bridge`: None for a bridge with none of the router's
    /// interfaces among its ports (no frame of it is seen).
    fn wanted_fdb(&self, bridge: u32, port: u32) -> Option<FdbEntry> {
        if self.ports_of(bridge).is_empty() || bridge > linerate_dataplane::fdb::MAX_BRIDGE {
            return None;
        }
        let to_port = self.bridge_refusal(bridge).is_none() && self.port_refusal(port).is_none();
        Some(FdbEntry {
            port,
            mtu: self
                .links
                .get(&port)
                .map_or(0, |l| l.mtu.min(u16::MAX as u32) as u16),
            flags: if to_port { FDB_TO_PORT } else { 0 },
            used: 0,
        })
    }

    /// Writes an FDB entry if it changes (None: removes it). A MAC the
    /// fast path has no room for (its set full) is left out: frames to and
    /// from it are the kernel's.
    fn write_fdb(&mut self, key: FdbKey, want: Option<FdbEntry>) -> Result<()> {
        let have = self.fdb_written.get(&key).copied();
        if have == want {
            return Ok(());
        }
        if !self.dp.set_fdb(&key, want.as_ref())? {
            if self.fdb_left_out.insert(key) {
                let mac: Vec<String> = key.mac.iter().map(|b| format!("{b:02x}")).collect();
                let what = format!("MAC {} on bridge {}", mac.join(":"), key.bridge);
                self.counts.full.left_out(super::limits::Table::Fdb, &what);
            }
            return Ok(());
        }
        self.fdb_left_out.remove(&key);
        match want {
            Some(e) => {
                self.fdb_written.insert(key, e);
            }
            None => {
                self.fdb_written.remove(&key);
                // A slot freed: the MACs left out may fit now.
                let left: Vec<FdbKey> = self.fdb_left_out.iter().copied().collect();
                for k in left {
                    let want = self
                        .fdb
                        .get(&(k.bridge, k.mac))
                        .and_then(|&p| self.wanted_fdb(k.bridge, p));
                    self.write_fdb(k, want)?;
                }
            }
        }
        Ok(())
    }

    /// Brings every FDB entry the fast path holds to what the bridges and
    /// their ports are now (after a change of a port, a bridge, tc,
    /// netfilter or the router's interfaces).
    pub(super) fn sync_fdb(&mut self) -> Result<()> {
        // (An entry depends on its bridge and port alone: each pair weighed
        // once, however many MACs are behind it.)
        let mut by_port = HashMap::new();
        let mut want: Vec<(FdbKey, Option<FdbEntry>)> = self
            .fdb
            .iter()
            .map(|(&(bridge, mac), &port)| {
                let entry = *by_port
                    .entry((bridge, port))
                    .or_insert_with(|| self.wanted_fdb(bridge, port));
                (FdbKey::new(bridge, mac), entry)
            })
            .collect();
        want.extend(
            self.fdb_written
                .keys()
                .filter(|k| !self.fdb.contains_key(&(k.bridge, k.mac)))
                .map(|k| (*k, None)),
        );
        for (key, entry) in want {
            self.write_fdb(key, entry)?;
        }
        Ok(())
    }

    /// The (port, MAC) of the FDB entries the fast path bridged frames
    /// from since the last call: the kernel is to hear of them (NTF_USE),
    /// which refreshes them as its learning from those frames would.
    pub fn fdb_in_use(&mut self) -> Result<Vec<(u32, [u8; 6])>> {
        Ok(self
            .dp
            .take_fdb_used()?
            .into_iter()
            .filter_map(|k| Some((*self.fdb.get(&(k.bridge, k.mac))?, k.mac)))
            .collect())
    }

    /// What the fast path bridges, for each bridge with the router's
    /// interfaces among its ports (`bridging on br0`): between which of
    /// them, or why the kernel bridges.
    pub fn bridging(&self) -> Vec<(String, String)> {
        let mut bridges: Vec<u32> = self
            .ingress
            .keys()
            .filter_map(|&i| self.bridge_of(i))
            .collect();
        bridges.sort();
        bridges.dedup();
        let mut out = Vec::new();
        for b in bridges {
            let key = format!("bridging on {}", self.name_of(b));
            if let Some(why) = self.bridge_refusal(b) {
                out.push((key.clone(), format!("{key}: the kernel's ({why})")));
                continue;
            }
            let (mut fast, mut kernel) = (Vec::new(), Vec::new());
            for p in self.ports_of(b) {
                match self.port_refusal(p) {
                    None => fast.push(self.name_of(p)),
                    Some(why) => kernel.push(why),
                }
            }
            fast.sort();
            kernel.sort();
            let mut line = if fast.is_empty() {
                format!("{key}: the kernel's")
            } else {
                format!(
                    "{key}: known unicast between {} in the fast path",
                    fast.join(", ")
                )
            };
            if !kernel.is_empty() {
                line += &format!("; the kernel's where {}", kernel.join(", "));
            }
            let left = self.fdb_left_out.iter().filter(|k| k.bridge == b).count();
            if left > 0 {
                line += &format!(
                    "; {left} MACs left out of the fast path's FDB (their sets full): the kernel's"
                );
            }
            let brnf = self.br_netfilter_families(b);
            for (f, family) in [(0, "IPv4"), (1, "IPv6")] {
                if brnf[f] && !fast.is_empty() {
                    let hooks = if f == 0 {
                        &self.netfilter.ipv4
                    } else {
                        &self.netfilter.ipv6
                    };
                    line += &format!(
                        "; {family} the kernel's (br_netfilter passes it through {})",
                        hooks.join(", ")
                    );
                }
            }
            out.push((key, line));
        }
        out
    }
}
