//! VRF devices (`ip link add red type vrf table 10`, `ip link set dut0
//! master red`): tenants whose interfaces route by a table of their own.
//! The kernel routes what arrives on an interface enslaved to a VRF as
//! arriving on the VRF device (vrf_l3_rcv: its forwarding setting, the
//! policy rules' `iif`), and the l3mdev rule (`lookup [l3mdev-table]`)
//! looks the VRF's table up; a route of that table leaves by the enslaved
//! interface it names. The fast path does the same: the interface's entry
//! is routed as the VRF device (`l3`), and walks the tables the rules'
//! walk gives for it (linerate_netlink::policy::Policy::walk_in), each a
//! FIB of its own.
//!
//! Left to the kernel: a family netfilter sees (its hooks see a VRF's
//! packets twice, as the enslaved interface's and as the VRF's), reverse
//! path filtering (the kernel's check weighs the VRF and its slaves), a
//! walk past what a list of tables can say, and a VRF that is down.
use super::Mirror;
use linerate_dataplane::dataplane::Dataplane;

impl<D: Dataplane> Mirror<D> {
    /// The VRF `ifindex` is enslaved to, and its table.
    pub(super) fn vrf_of(&self, ifindex: u32) -> Option<(u32, u32)> {
        let master = self.links.get(&ifindex)?.master;
        let table = self.links.get(&master)?.vrf_table?;
        Some((master, table))
    }

    /// Why the kernel routes what arrives on `ifindex`, enslaved to VRF
    /// `vrf`, whatever the rules say; None: the rules' walk decides.
    pub(super) fn vrf_refusal(&self, ifindex: u32, vrf: u32, ipv6: bool) -> Option<&'static str> {
        if !self.links.get(&vrf).is_some_and(|l| l.up) {
            Some("its VRF is down")
        } else if !ipv6 && self.settings.rp_filter(vrf) != 0 {
            Some("reverse path filtering in a VRF")
        } else if self.netfilter_sees(ipv6) {
            Some("netfilter sees a VRF's packets as the VRF's and as its interfaces'")
        } else if ifindex == vrf {
            Some("a VRF device")
        } else {
            None
        }
    }

    /// Netfilter has hooks that see forwarded packets of the family.
    fn netfilter_sees(&self, ipv6: bool) -> bool {
        if ipv6 {
            !self.netfilter.ipv6.is_empty()
        } else {
            !self.netfilter.ipv4.is_empty()
        }
    }
}
