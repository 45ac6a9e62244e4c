//! VLAN devices on the router's ports (`ip link add link dut0 name
//! dut0.10 type vlan id 10`). The kernel hands a tagged frame to the VLAN
//! device its port and tag name (vlan_do_receive), tag popped, and routes
//! it as arriving there: that device's settings, rules, firewall names.
//! The fast path does the same from the device's entry (its key the port,
//! TPID and id; bpf/router/router.bpf.c route_frame); what it cannot hold
//! it leaves to the kernel, tag and all:
//!
//! - a device that is down (the kernel drops its frames), on a device
//!   that is not one of the router's ports (a VLAN on a VLAN: QinQ), on a
//!   bridge's port (the port's entry says so: tagged frames pass), itself
//!   a bridge's port, of id 0, whose parent is in another namespace, or
//!   past the devices the fast path holds (counted: `vlan_devices`; taken
//!   back when one goes);
//! - every frame of a port whose driver strips tags on receive
//!   (`rx-vlan-offload on`), once VLAN devices are on it: XDP sees a
//!   stripped frame untagged, its tag only in the driver's metadata, and
//!   cannot tell it from the port's own.
//!
//! A route out of a VLAN device leaves by its parent with the device's tag
//! pushed (the next hop's `tag`, priority 0 as the default egress map
//! gives it); a device with an egress QoS map tags by the packet's
//! priority, which the fast path does not know: its next hops are the
//! kernel's ([`egress`]).
use super::Mirror;
use anyhow::Result;
use linerate_dataplane::dataplane::Dataplane;
use linerate_dataplane::layout::{
    VlanKey, ETH_P_8021AD, ETH_P_8021Q, ROUTER_VLANS, ROUTER_VLAN_PORTS,
};
use std::collections::BTreeSet;

/// How a next hop leaves by a VLAN device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Egress {
    /// By this port, with this tag pushed.
    Tagged(u32, [u8; 4]),
    /// Not by the fast path.
    Kernel,
}

impl<D: Dataplane> Mirror<D> {
    /// The key of VLAN device `dev` if the fast path routes the frames
    /// tagged for it.
    pub(super) fn routed_vlan(&self, dev: u32) -> Option<VlanKey> {
        let v = self.links.get(&dev)?.vlan?;
        self.vlan_refusal(dev)
            .is_none()
            .then(|| VlanKey::new(v.parent, v.tpid, v.id))
    }

    /// Why the frames tagged for VLAN device `dev` are the kernel's, if
    /// they are.
    fn vlan_refusal(&self, dev: u32) -> Option<&'static str> {
        let link = self.links.get(&dev)?;
        let v = link.vlan?;
        Some(if v.foreign {
            "its parent is in another namespace"
        } else if !self.ingress.contains_key(&v.parent) {
            "not on one of the router's ports"
        } else if v.id == 0 || !matches!(v.tpid, ETH_P_8021Q | ETH_P_8021AD) {
            "VLAN 0 is a priority tag"
        } else if !link.up {
            "down"
        } else if link.mac == [0; 6] {
            "no address"
        } else if self.bridge_of(v.parent).is_some() {
            "on a bridge's port"
        } else if self.bridge_of(dev).is_some() {
            "a bridge's port"
        } else if self.strips_tags.contains(&v.parent) {
            "its port's driver strips tags"
        } else {
            return None;
        })
    }

    /// What the fast path does with the VLAN devices on each of the
    /// router's ports (`VLANs on dut0`), for Mirror::routing.
    pub(super) fn vlan_lines(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for &port in self.ingress.keys() {
            let devs = self.vlans_on(port);
            if devs.is_empty() {
                continue;
            }
            let name = |i: u32| self.name_of(i);
            let key = format!("VLANs on {}", name(port));
            if self.strips_tags.contains(&port) {
                let p = name(port);
                out.push((
                    key.clone(),
                    format!("{key}: the kernel's, and every frame of {p}'s (its driver strips tags, which XDP then does not see: ethtool -K {p} rxvlan off)"),
                ));
                continue;
            }
            let mut held = Vec::new();
            let mut kernels = Vec::new();
            for d in devs {
                let Some(v) = self.links.get(&d).and_then(|l| l.vlan) else {
                    continue;
                };
                let proto = if v.tpid == ETH_P_8021AD {
                    "802.1ad"
                } else {
                    "802.1Q"
                };
                let mut shown = format!("{} ({proto} {})", name(d), v.id);
                if v.egress_qos {
                    shown += ", what leaves by it the kernel's (egress-qos-map)";
                }
                let why = self.vlan_refusal(d).map(String::from).or_else(|| {
                    self.vlans_left_out.contains(&d).then(|| format!(
                        "no room: the fast path holds {ROUTER_VLANS} VLAN devices on {ROUTER_VLAN_PORTS} ports (linerate_table_overflows)"
                    ))
                });
                match why {
                    None => held.push(shown),
                    Some(why) => kernels.push(format!("{shown}: {why}")),
                }
            }
            let mut line = format!("{key}: ");
            if !held.is_empty() {
                line += &format!("{} in the fast path", held.join(", "));
            }
            if !kernels.is_empty() {
                if !held.is_empty() {
                    line += "; ";
                }
                line += &format!("the kernel's: {}", kernels.join("; "));
            }
            out.push((key, line));
        }
        out
    }

    /// The VLAN devices on port `port` (of this namespace).
    pub(super) fn vlans_on(&self, port: u32) -> BTreeSet<u32> {
        self.links
            .iter()
            .filter(|(_, l)| l.vlan.is_some_and(|v| v.parent == port && !v.foreign))
            .map(|(i, _)| *i)
            .collect()
    }

    /// Port `port` strips tags on receive and has VLAN devices on it: the
    /// fast path cannot tell what arrives there for them from its own.
    pub(super) fn hides_vlans(&self, port: u32) -> bool {
        self.strips_tags.contains(&port) && !self.vlans_on(port).is_empty()
    }

    /// Writes VLAN device `dev`'s entry, or removes it where the fast path
    /// does not route its frames (any more).
    pub(super) fn write_vlan(&mut self, dev: u32) -> Result<()> {
        let want = self.routed_vlan(dev);
        if let Some(had) = self.vlans.get(&dev).copied().filter(|k| Some(*k) != want) {
            self.dp.set_vlan_interface(&had, None)?;
            self.vlans.remove(&dev);
            // Room came back: what waited for it is taken back.
            let waiting: Vec<u32> = self.vlans_left_out.iter().copied().collect();
            for d in waiting {
                self.write_vlan(d)?;
            }
        }
        let Some(key) = want else {
            self.vlans_left_out.remove(&dev);
            return Ok(());
        };
        let mac = self.links[&dev].mac;
        let ifc = self.entry(key.ifindex, dev, mac);
        if self.dp.set_vlan_interface(&key, Some(&ifc))? {
            self.vlans.insert(dev, key);
            self.vlans_left_out.remove(&dev);
        } else if self.vlans_left_out.insert(dev) {
            let what = format!("VLAN device {}", self.name_of(dev));
            self.counts
                .full
                .left_out(super::limits::Table::VlanDevices, &what);
        }
        Ok(())
    }

    /// Writes the entries of port `port`'s VLAN devices, and removes those
    /// of devices gone from it.
    pub(super) fn write_vlans_on(&mut self, port: u32) -> Result<()> {
        let mut devs = self.vlans_on(port);
        devs.extend(
            self.vlans
                .iter()
                .filter(|(_, k)| k.ifindex == port)
                .map(|(d, _)| *d),
        );
        devs.into_iter().try_for_each(|d| self.write_vlan(d))
    }

    /// After a change of link `index`, which was (`before`) or is a VLAN
    /// device on the parent it names: its entry, and its parent's when
    /// the parent's first VLAN device came or its last went (a bridge's
    /// port, a driver stripping tags: the port's entry says whether VLAN
    /// devices are on it). Not every device of the port: a trunk of a
    /// thousand VLANs is written once, not a thousand times.
    pub(super) fn follow_vlan(&mut self, index: u32, before: Option<u32>) -> Result<()> {
        if self.place_tables()? {
            return self.write_all_ingress();
        }
        let now = self
            .links
            .get(&index)
            .and_then(|l| l.vlan)
            .map(|v| v.parent);
        for parent in [before, now].into_iter().flatten().collect::<BTreeSet<_>>() {
            let held = self.vlans_on(parent).len();
            let first = now == Some(parent) && before != now && held == 1;
            let last = now != Some(parent) && held == 0;
            if (first || last) && self.ingress.contains_key(&parent) {
                self.write_ingress(parent)?;
            }
        }
        // (Gone from a port of the router's: removed.)
        self.write_vlan(index)
    }

    /// Whether `ports` are not the ports known to strip tags.
    pub fn strips_tags_change(&self, ports: &std::collections::HashSet<u32>) -> bool {
        *ports != self.strips_tags
    }

    /// Which of the router's ports strip VLAN tags on receive (the
    /// driver's rx-vlan-offload): their VLAN devices' frames are the
    /// kernel's, and with VLAN devices on them all their frames.
    pub fn set_strips_tags(&mut self, ports: impl IntoIterator<Item = u32>) -> Result<()> {
        let now: std::collections::HashSet<u32> = ports.into_iter().collect();
        if !self.strips_tags_change(&now) {
            return Ok(());
        }
        let changed: Vec<u32> = now
            .symmetric_difference(&self.strips_tags)
            .copied()
            .collect();
        self.strips_tags = now;
        changed.into_iter().try_for_each(|p| self.push_ingress(p))
    }

    /// The VLAN devices the fast path routes frames as, with their names
    /// (IPv6 switched on or off is read by name).
    pub fn vlan_names(&self) -> Vec<(u32, String)> {
        let mut devs: Vec<u32> = self.vlans.keys().copied().collect();
        devs.sort_unstable();
        self.names_of(&devs)
    }
}

/// How a next hop out of `link` (a VLAN device) leaves, given its parent's
/// link: by the parent, tagged, when the parent is a plain device (not a
/// bridge, not another VLAN device) of this namespace and the device tags
/// every packet alike.
pub(super) fn egress(v: &super::decode::Vlan, parent: Option<&super::decode::Link>) -> Egress {
    let plain = parent.is_some_and(|p| !p.bridge && p.vlan.is_none());
    if v.foreign || v.egress_qos || v.id == 0 || !plain {
        return Egress::Kernel;
    }
    if !matches!(v.tpid, ETH_P_8021Q | ETH_P_8021AD) {
        return Egress::Kernel;
    }
    Egress::Tagged(v.parent, VlanKey::new(v.parent, v.tpid, v.id).tag())
}
