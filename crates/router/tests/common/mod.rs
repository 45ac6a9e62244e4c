//! What the router's integration tests share: the router program on the
//! two ends of a veth pair in a scratch namespace. Needs root.
use linerate_bpf::loader::{XdpAttachment, XdpMode};
use linerate_host::cmd::ip;
use linerate_host::netns::NetnsGuard;
use linerate_router::fastpath::FastPath;
use linerate_router::layout::{IFACE_FORWARD4, IFACE_FORWARD6, REASONS};
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
    #[allow(dead_code)] // not every test binary asks
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

/// The fast path's verdict on frame `f` arriving on `ingress`, the
/// reason counter it moved, and the destination MAC it left with.
#[allow(dead_code)] // not every test binary asks
pub fn verdict(m: &Mirror, ingress: u32, f: &[u8]) -> (XdpAction, &'static str, [u8; 6]) {
    let before = m.fast_path().counters(ingress).unwrap();
    let (v, out) = m.fast_path().run(f, ingress).unwrap();
    let after = m.fast_path().counters(ingress).unwrap();
    // The counter that moved by this one frame (its packets and bytes).
    let r = (0..REASONS.len())
        .find(|&i| {
            after.packets[i] == before.packets[i] + 1
                && after.bytes[i] == before.bytes[i] + f.len() as u64
        })
        .unwrap();
    (v, REASONS[r], out[0..6].try_into().unwrap())
}

/// Where frame `f` went: the MAC it was forwarded to, or why it passed.
#[allow(dead_code)]
pub fn path(m: &Mirror, ingress: u32, f: &[u8]) -> Result<[u8; 6], &'static str> {
    match verdict(m, ingress, f) {
        (XdpAction::Redirect, _, mac) => Ok(mac),
        (_, reason, _) => Err(reason),
    }
}

/// A UDP frame to the router's ingress MAC from `src` to `dst`.
#[allow(dead_code)]
pub fn frame_between(src: std::net::IpAddr, dst: std::net::IpAddr) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], MAC_IN);
    let b = match (src, dst) {
        (std::net::IpAddr::V4(s), std::net::IpAddr::V4(d)) => b.ipv4(s.octets(), d.octets(), 64),
        (std::net::IpAddr::V6(s), std::net::IpAddr::V6(d)) => b.ipv6(s.octets(), d.octets(), 64),
        _ => unreachable!(),
    };
    let mut f = Vec::new();
    b.udp(1, 2).write(&mut f, &[0u8; 18]).unwrap();
    f
}
