//! The router program on the two ends of a veth pair in a scratch
//! namespace (needs root), and the plane the mirror's tests write to (the
//! model, and the program beside it with root).
use anyhow::Result;
use linerate_bpf::loader::{XdpAttachment, XdpMode};
use linerate_dataplane::dataplane::Dataplane;
use linerate_dataplane::fastpath::FastPath;
use linerate_dataplane::layout::{
    FdbEntry, FdbKey, Iface, Nexthop, NhGroup, PolicyRule, VlanKey, IFACE_FORWARD4, IFACE_FORWARD6,
    REASONS,
};
use linerate_dataplane::model::Model;
use linerate_fib::{Fib, Key, Write};
use linerate_host::cmd::ip;
use linerate_host::netns::NetnsGuard;
use linerate_router::mirror::Mirror;

/// The router's MAC on the ingress (first) and egress (second) veth.
pub const MAC_IN: [u8; 6] = [2, 0, 0, 0, 0, 2];
pub const MAC_OUT: [u8; 6] = [2, 0, 0, 0, 0, 3];

struct Scratch(String);
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = ip(None, &["netns", "del", &self.0]);
    }
}

/// The calling thread inside namespace `lrt-<tag>-<pid>`, which holds the
/// veth pair `<dev>0`/`<dev>1` with the router program attached and both
/// declared its interfaces. Dropped in field order: detach, leave the
/// namespace, delete it; `fp` is the caller's to keep or hand on, and must
/// be dropped before this.
pub struct ScratchPair {
    _links: Vec<XdpAttachment>,
    pub if0: u32,
    pub if1: u32,
    /// The namespace's name.
    pub ns: String,
    _guard: NetnsGuard,
    _scratch: Scratch,
}

pub fn scratch_pair(tag: &str, dev: &str) -> (ScratchPair, FastPath) {
    let ns = format!("lrt-{tag}-{}", std::process::id());
    ip(None, &["netns", "add", &ns]).unwrap();
    let scratch = Scratch(ns.clone());
    // No IPv6 on the pair: the kernel's router solicitations and MLD
    // reports would arrive through the program beside the frames a test
    // runs, and move the reason counters it reads.
    for k in [
        "net.ipv6.conf.all.disable_ipv6=1",
        "net.ipv6.conf.default.disable_ipv6=1",
    ] {
        linerate_host::cmd::in_netns(&ns, "sysctl", &["-qw", k]).unwrap();
    }
    let (d0, d1) = (format!("{dev}0"), format!("{dev}1"));
    ip(
        Some(&ns),
        &["link", "add", &d0, "type", "veth", "peer", "name", &d1],
    )
    .unwrap();
    for d in [&d0, &d1] {
        ip(Some(&ns), &["link", "set", d, "up"]).unwrap();
    }
    let guard = NetnsGuard::enter(&ns).unwrap();
    let (if0, if1) = (
        linerate_bpf::loader::ifindex(&d0).unwrap(),
        linerate_bpf::loader::ifindex(&d1).unwrap(),
    );
    let fp = FastPath::load().unwrap();
    // BPF_PROG_RUN takes an ingress device only if its RX queue is
    // registered for XDP, which a veth does when a program is attached.
    let links: Vec<XdpAttachment> = [&d0, &d1]
        .iter()
        .map(|d| XdpAttachment::attach(&fp.program().unwrap(), d, XdpMode::Native).unwrap())
        .collect();
    let both = IFACE_FORWARD4 | IFACE_FORWARD6;
    fp.add_interface(if0, MAC_IN, both).unwrap();
    fp.add_interface(if1, MAC_OUT, both).unwrap();
    let pair = ScratchPair {
        _links: links,
        if0,
        if1,
        ns: ns.clone(),
        _guard: guard,
        _scratch: scratch,
    };
    (pair, fp)
}

pub use linerate_bpf::test_run::XdpAction;

/// What the mirror's tests write to: the in-memory model of the fast
/// path, and with root (the `privileged` feature) the BPF program's maps
/// beside it, written alike. Every verdict is then taken from both, and
/// they must agree on the action, the reason and every byte: the contract
/// that lets the model stand for the program in tests without root.
pub struct TestPlane {
    pub model: Model,
    real: Option<FastPath>,
    /// Every write the mirror made, by kind (what a change cost).
    pub writes: Writes,
    /// A frame and its ingress run whenever a table's FIB is opened (about
    /// to be filled), and the verdicts it had then: what packets meet
    /// while a table fills.
    pub probe: Option<(Vec<u8>, u32)>,
    pub probed: Vec<(XdpAction, &'static str)>,
}

/// Writes to the fast path, counted by kind: FIB entries one by one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Writes {
    pub interfaces: usize,
    pub nexthops: usize,
    pub groups: usize,
    pub local_sources: usize,
    pub fib_entries: usize,
}

impl TestPlane {
    /// The model alone, interfaces `if0` (MAC_IN) and `if1` (MAC_OUT)
    /// forwarding both families, as scratch_pair declares them.
    pub fn model(if0: u32, if1: u32) -> Self {
        let mut model = Model::new(linerate_fib::Ipv6Layout::default());
        let both = IFACE_FORWARD4 | IFACE_FORWARD6;
        model
            .set_interface(&Iface::new(if0, MAC_IN, both), true)
            .unwrap();
        model
            .set_interface(&Iface::new(if1, MAC_OUT, both), true)
            .unwrap();
        TestPlane {
            model,
            real: None,
            writes: Writes::default(),
            probe: None,
            probed: Vec::new(),
        }
    }

    /// The model beside `fp`, the program on scratch pair `if0`, `if1`.
    pub fn twin(fp: FastPath, if0: u32, if1: u32) -> Self {
        TestPlane {
            real: Some(fp),
            ..Self::model(if0, if1)
        }
    }

    /// Whether the BPF program is there too.
    pub fn has_program(&self) -> bool {
        self.real.is_some()
    }

    /// The verdict on frame `f` arriving on `ingress`: the model's, which
    /// the program's must equal when it is there.
    pub fn run(&self, f: &[u8], ingress: u32) -> (XdpAction, &'static str, Vec<u8>) {
        self.run_entered(f, ingress, false)
    }

    /// [`TestPlane::run`] with the frame given first to the other
    /// single-buffer program than the ingress's own (FastPath::
    /// run_other_entry): the same verdict by another way in.
    pub fn run_other_entry(&self, f: &[u8], ingress: u32) -> (XdpAction, &'static str, Vec<u8>) {
        self.run_entered(f, ingress, true)
    }

    fn run_entered(
        &self,
        f: &[u8],
        ingress: u32,
        other: bool,
    ) -> (XdpAction, &'static str, Vec<u8>) {
        let v = self.model.run(f, ingress);
        let model = (v.action, v.reason, v.frame);
        if let Some(fp) = &self.real {
            let program = program_verdict_entered(fp, ingress, f, other);
            assert_eq!(program, model, "the BPF program and the model disagree");
        }
        model
    }
}

impl Dataplane for TestPlane {
    fn ipv6_layout(&self) -> linerate_fib::Ipv6Layout {
        self.model.ipv6_layout()
    }
    fn set_interface(&mut self, ifc: &Iface, egress: bool) -> Result<()> {
        self.writes.interfaces += 1;
        if let Some(fp) = &mut self.real {
            Dataplane::set_interface(fp, ifc, egress)?;
        }
        self.model.set_interface(ifc, egress)
    }
    fn remove_interface(&mut self, i: u32) -> Result<()> {
        self.writes.interfaces += 1;
        if let Some(fp) = &mut self.real {
            Dataplane::remove_interface(fp, i)?;
        }
        self.model.remove_interface(i)
    }
    fn set_vlan_interface(&mut self, key: &VlanKey, ifc: Option<&Iface>) -> Result<bool> {
        self.writes.interfaces += 1;
        let model = self.model.set_vlan_interface(key, ifc)?;
        if let Some(fp) = &mut self.real {
            let real = Dataplane::set_vlan_interface(fp, key, ifc)?;
            assert_eq!(
                real, model,
                "the program and the model hold the same VLAN devices"
            );
        }
        Ok(model)
    }
    fn set_nexthop(&mut self, id: u32, nh: &Nexthop) -> Result<()> {
        self.writes.nexthops += 1;
        if let Some(fp) = &mut self.real {
            Dataplane::set_nexthop(fp, id, nh)?;
        }
        self.model.set_nexthop(id, nh)
    }
    fn take_nexthop_used(&mut self, id: u32) -> bool {
        let used = self.model.take_nexthop_used(id);
        if let Some(fp) = &mut self.real {
            assert_eq!(
                Dataplane::take_nexthop_used(fp, id),
                used,
                "next hop {id}'s mark"
            );
        }
        used
    }
    fn set_fdb(&mut self, key: &FdbKey, entry: Option<&FdbEntry>) -> Result<bool> {
        let placed = self.model.set_fdb(key, entry)?;
        if let Some(fp) = &mut self.real {
            assert_eq!(
                Dataplane::set_fdb(fp, key, entry)?,
                placed,
                "room for {key:?}"
            );
        }
        Ok(placed)
    }
    fn take_fdb_used(&mut self) -> Result<Vec<FdbKey>> {
        let used = self.model.take_fdb_used()?;
        if let Some(fp) = &mut self.real {
            let mut real = Dataplane::take_fdb_used(fp)?;
            real.sort();
            assert_eq!(real, used, "the FDB's marks");
        }
        Ok(used)
    }
    fn set_nh_group(&mut self, index: u32, g: &NhGroup) -> Result<()> {
        self.writes.groups += 1;
        if let Some(fp) = &mut self.real {
            Dataplane::set_nh_group(fp, index, g)?;
        }
        self.model.set_nh_group(index, g)
    }
    fn set_local_sources(&mut self, index: u32, word: u64) -> Result<()> {
        self.writes.local_sources += 1;
        if let Some(fp) = &mut self.real {
            Dataplane::set_local_sources(fp, index, word)?;
        }
        self.model.set_local_sources(index, word)
    }
    fn load_fib<K: Key>(&mut self, slot: usize, fib: &Fib<K>) -> Result<()> {
        self.writes.fib_entries += fib.len();
        if let Some(fp) = &mut self.real {
            Dataplane::load_fib(fp, slot, fib)?;
        }
        self.model.load_fib(slot, fib)
    }
    fn set_policy_program(&mut self, program: u16, steps: &[PolicyRule]) -> Result<()> {
        if let Some(fp) = &mut self.real {
            Dataplane::set_policy_program(fp, program, steps)?;
        }
        self.model.set_policy_program(program, steps)
    }
    fn open_table(&mut self, ipv6: bool, slot: usize) -> Result<()> {
        if let Some(fp) = &mut self.real {
            Dataplane::open_table(fp, ipv6, slot)?;
        }
        self.model.open_table(ipv6, slot)?;
        if let Some((f, ingress)) = &self.probe {
            let (action, reason, _) = self.run(f, *ingress);
            self.probed.push((action, reason));
        }
        Ok(())
    }
    fn apply_fib<K: Key>(&mut self, slot: usize, fib: &Fib<K>, writes: &[Write]) -> Result<()> {
        self.writes.fib_entries += writes.len();
        if let Some(fp) = &mut self.real {
            Dataplane::apply_fib(fp, slot, fib, writes)?;
        }
        self.model.apply_fib(slot, fib, writes)
    }
}

/// The plane of a mirror test: with the `privileged` feature the program
/// on a scratch pair `<dev>0`/`<dev>1` beside the model (the pair to drop
/// after the plane), else the model alone on interfaces 2 and 3.
pub fn test_plane(tag: &str, dev: &str) -> (Option<ScratchPair>, TestPlane, u32, u32) {
    if cfg!(feature = "privileged") {
        let (pair, fp) = scratch_pair(tag, dev);
        let (if0, if1) = (pair.if0, pair.if1);
        (Some(pair), TestPlane::twin(fp, if0, if1), if0, if1)
    } else {
        (None, TestPlane::model(2, 3), 2, 3)
    }
}

/// The program's verdict on frame `f` arriving on `ingress`, the reason
/// counter it moved, and the frame as it left.
pub fn program_verdict(
    fp: &FastPath,
    ingress: u32,
    f: &[u8],
) -> (XdpAction, &'static str, Vec<u8>) {
    program_verdict_entered(fp, ingress, f, false)
}

/// [`program_verdict`], through the other single-buffer program if
/// `other`.
fn program_verdict_entered(
    fp: &FastPath,
    ingress: u32,
    f: &[u8],
    other: bool,
) -> (XdpAction, &'static str, Vec<u8>) {
    let before = fp.counters(ingress).unwrap();
    let (v, out) = if other {
        fp.run_other_entry(f, ingress)
    } else {
        fp.run(f, ingress)
    }
    .unwrap();
    let after = fp.counters(ingress).unwrap();
    // The counter that moved by this one frame (its packets and bytes;
    // a tagged frame routed as its VLAN device is counted without the
    // tag, as the device counts it).
    let tagged = f.len() >= 18 && matches!(u16::from_be_bytes([f[12], f[13]]), 0x8100 | 0x88a8);
    let r = (0..REASONS.len())
        .find(|&i| {
            let bytes = after.bytes[i] - before.bytes[i];
            after.packets[i] == before.packets[i] + 1
                && (bytes == f.len() as u64 || tagged && bytes + 4 == f.len() as u64)
        })
        .unwrap();
    (v, REASONS[r], out)
}

/// The verdict on frame `f` arriving on `ingress` (TestPlane::run), the
/// reason, and the destination MAC it left with.
pub fn verdict(
    m: &Mirror<TestPlane>,
    ingress: u32,
    f: &[u8],
) -> (XdpAction, &'static str, [u8; 6]) {
    let (v, r, out) = m.fast_path().run(f, ingress);
    (v, r, out[0..6].try_into().unwrap())
}

/// Where frame `f` went: the MAC it was forwarded to, or why it passed.
pub fn path(m: &Mirror<TestPlane>, ingress: u32, f: &[u8]) -> Result<[u8; 6], &'static str> {
    match verdict(m, ingress, f) {
        (XdpAction::Redirect, _, mac) => Ok(mac),
        (_, reason, _) => Err(reason),
    }
}
