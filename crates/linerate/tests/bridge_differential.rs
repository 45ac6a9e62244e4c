//! linerate's bridging changes nothing but speed: a script of frames and
//! bridge changes runs through a bridge of three ports (br0: p0, p1, p2,
//! hosts on h0, h1, h2) once with the kernel's bridge alone and once with
//! `linerate route` on the three ports; what every host receives must be
//! the same frames, byte for byte, as many times. The script: hosts heard
//! by broadcast, known unicast of several kinds both ways, unknown
//! unicast, multicast, frames for the bridge itself (an ICMP echo) and for
//! a port's own MAC, a frame for a host behind the port it came in by, a
//! MAC moving port (and a frame to it 50 ms after the first from its new
//! port), a port blocking, then learning, then forwarding again, a static
//! entry, and ageing shortened to 2 s: two hosts exchanging a frame each
//! way every 100 ms for 4 s keep their entries (the fast path carries
//! their frames and refreshes them in the kernel), a silent host's entry
//! ages out. Needs root.
use etherparse::PacketBuilder;
use linerate_host::cmd::{in_netns, ip, mac_text};
use linerate_host::netns::NetnsGuard;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::frames::capture;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");
const HOSTS: [&str; 3] = ["h0", "h1", "h2"];
const MAC_BR: [u8; 6] = [2, 0, 0, 0, 1, 0];
const MAC_P1: [u8; 6] = [2, 0, 0, 0, 1, 2];
const A: [u8; 6] = [2, 0, 0, 0, 0xa, 0];
const B: [u8; 6] = [2, 0, 0, 0, 0xb, 0];
const D: [u8; 6] = [2, 0, 0, 0, 0xd, 0];
const E: [u8; 6] = [2, 0, 0, 0, 0xe, 0];
const F: [u8; 6] = [2, 0, 0, 0, 0xf, 0];
const UNKNOWN: [u8; 6] = [2, 0, 0, 0, 0x99, 0];
/// Every frame of the script carries it and a number: what the hosts
/// receive is compared for these frames only.
const TAG: &[u8; 8] = b"LRBRIDGE";

/// The namespaces of one run: the bridge's, the hosts'.
struct Topology {
    dut: String,
    hosts: String,
}

impl Drop for Topology {
    fn drop(&mut self) {
        for ns in [&self.dut, &self.hosts] {
            let _ = ip(None, &["netns", "del", ns]);
        }
    }
}

/// `linerate route` on the bridge's ports, stopped when dropped (before
/// the namespaces, declared after them), a failing test's too.
struct Route(std::process::Child);

impl Drop for Route {
    fn drop(&mut self) {
        // SAFETY: signalling our child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

fn topology(tag: &str) -> Topology {
    let t = Topology {
        dut: format!("lrt-{tag}-{}-dut", std::process::id()),
        hosts: format!("lrt-{tag}-{}-hosts", std::process::id()),
    };
    for ns in [&t.dut, &t.hosts] {
        ip(None, &["netns", "add", ns]).unwrap();
        // No IPv6 of their own: no neighbour discovery or MLD beside the
        // script's frames.
        for k in [
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ] {
            in_netns(ns, "sysctl", &["-qw", k]).unwrap();
        }
    }
    let dut = |args: &[&str]| ip(Some(&t.dut), args).unwrap();
    dut(&["link", "add", "br0", "type", "bridge"]);
    dut(&["link", "set", "br0", "address", &mac_text(&MAC_BR)]);
    for (i, h) in HOSTS.iter().enumerate() {
        let p = format!("p{i}");
        dut(&[
            "link", "add", &p, "type", "veth", "peer", "name", h, "netns", &t.hosts,
        ]);
        dut(&[
            "link",
            "set",
            &p,
            "address",
            &format!("02:00:00:00:01:0{}", i + 1),
        ]);
        dut(&["link", "set", &p, "master", "br0"]);
        dut(&["link", "set", &p, "up"]);
        ip(Some(&t.hosts), &["link", "set", h, "up"]).unwrap();
        // A veth takes redirected frames when its peer polls (GRO on).
        in_netns(&t.hosts, "ethtool", &["-K", h, "gro", "on"]).unwrap();
    }
    dut(&["addr", "add", "198.51.100.254/24", "dev", "br0"]);
    dut(&["link", "set", "br0", "up"]);
    dut(&[
        "neigh",
        "replace",
        "198.51.100.1",
        "lladdr",
        &mac_text(&A),
        "dev",
        "br0",
        "nud",
        "permanent",
    ]);
    t
}

/// Sends the script's frames from the hosts and makes its changes on the
/// bridge; each frame is new (its number), the same in every run.
struct Driver {
    dut: String,
    sockets: Vec<linerate_traffic::afpacket::PacketSocket>,
    next: u32,
}

impl Driver {
    fn payload(&mut self) -> Vec<u8> {
        self.next += 1;
        let mut p = TAG.to_vec();
        p.extend_from_slice(&self.next.to_be_bytes());
        p.extend_from_slice(&[0x5a; 20]);
        p
    }

    fn send(&mut self, host: usize, f: Vec<u8>) {
        let mut b = vec![f];
        let len = b[0].len();
        assert_eq!(
            self.sockets[host].send_batch(&mut b, &[len]).unwrap(),
            (1, false)
        );
    }

    /// A frame of EtherType `kind` carrying the tag.
    fn raw(&mut self, host: usize, src: [u8; 6], dst: [u8; 6], kind: u16) {
        let mut f = dst.to_vec();
        f.extend_from_slice(&src);
        f.extend_from_slice(&kind.to_be_bytes());
        f.extend(self.payload());
        self.send(host, f);
    }

    fn udp4(&mut self, host: usize, src: [u8; 6], dst: [u8; 6], to: [u8; 4]) {
        let mut f = Vec::new();
        let p = self.payload();
        PacketBuilder::ethernet2(src, dst)
            .ipv4([198, 51, 100, src[4]], to, 64)
            .udp(4000, 5000)
            .write(&mut f, &p)
            .unwrap();
        self.send(host, f);
    }

    fn udp6(&mut self, host: usize, src: [u8; 6], dst: [u8; 6]) {
        let mut f = Vec::new();
        let p = self.payload();
        let (s, d) = (
            [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, src[4]],
            [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, dst[4]],
        );
        PacketBuilder::ethernet2(src, dst)
            .ipv6(s, d, 64)
            .udp(4000, 5000)
            .write(&mut f, &p)
            .unwrap();
        self.send(host, f);
    }

    fn echo(&mut self, host: usize) {
        let mut f = Vec::new();
        let p = self.payload();
        PacketBuilder::ethernet2(A, MAC_BR)
            .ipv4([198, 51, 100, 1], [198, 51, 100, 254], 64)
            .icmpv4_echo_request(7, self.next as u16)
            .write(&mut f, &p)
            .unwrap();
        self.send(host, f);
    }

    fn bridge(&self, args: &[&str]) {
        in_netns(&self.dut, "bridge", args).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }

    fn ip(&self, args: &[&str]) {
        ip(Some(&self.dut), args).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn pause(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// The script (module doc). Hosts: A on h0, B on h1; D, E, F as below.
fn script(d: &mut Driver) {
    let (bcast, mcast4, mcast6) = (
        [0xff; 6],
        [1, 0, 0x5e, 0, 0, 0xfb],
        [0x33, 0x33, 0, 0, 0, 1],
    );
    // Heard by broadcast: the bridge learns A, B, E.
    d.raw(0, A, bcast, 0x88b5);
    d.raw(1, B, bcast, 0x88b5);
    d.raw(0, E, bcast, 0x88b5);
    pause(100);
    // Known unicast.
    for _ in 0..3 {
        d.udp4(0, A, B, [198, 51, 100, 0xb]);
        d.udp6(1, B, A);
        d.raw(0, A, B, 0x88b5);
        d.raw(1, B, A, 0x0806);
        d.raw(0, A, B, 0x8100);
    }
    // Unknown unicast, multicast: flooded.
    d.udp4(0, A, UNKNOWN, [198, 51, 100, 0x99]);
    d.udp4(0, A, mcast4, [224, 0, 0, 251]);
    d.raw(1, B, mcast6, 0x86dd);
    // For the bridge itself (an echo it answers), for a port's own MAC,
    // for a host behind the port it came in by: nothing leaves.
    d.echo(0);
    d.raw(0, A, MAC_P1, 0x88b5);
    d.raw(0, E, A, 0x88b5);
    pause(100);
    // A moves to h2: its first frame from there teaches the bridge, and a
    // frame to it 50 ms later goes there.
    d.raw(2, A, B, 0x88b5);
    pause(50);
    d.raw(1, B, A, 0x88b5);
    d.udp4(1, B, A, [198, 51, 100, 0xa]);
    // p1 blocking: nothing in or out; learning: D is learned, its frame
    // dropped; forwarding again: D is known.
    d.bridge(&["link", "set", "dev", "p1", "state", "4"]);
    d.raw(2, A, B, 0x88b5);
    d.raw(1, B, A, 0x88b5);
    d.bridge(&["link", "set", "dev", "p1", "state", "2"]);
    d.raw(1, D, A, 0x88b5);
    pause(100);
    d.bridge(&["link", "set", "dev", "p1", "state", "3"]);
    d.raw(2, A, D, 0x88b5);
    d.raw(1, B, A, 0x88b5);
    // A static entry.
    d.bridge(&["fdb", "add", &mac_text(&F), "dev", "p2", "master", "static"]);
    d.raw(2, A, F, 0x88b5);
    // Ageing 2 s: A and B exchange a frame each way every 100 ms for 4 s
    // and stay known; D, silent, ages out.
    d.ip(&["link", "set", "br0", "type", "bridge", "ageing_time", "200"]);
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(4) {
        d.raw(2, A, B, 0x88b5);
        d.raw(1, B, A, 0x88b5);
        pause(100);
    }
    d.raw(2, A, B, 0x88b5);
    d.raw(2, A, D, 0x88b5);
}

type Seen = BTreeMap<(String, Vec<u8>), usize>;

/// Zeroes what the DUT's own replies vary by between runs: an ICMP
/// packet's IPv4 ID and header checksum.
fn normalise(mut f: Vec<u8>) -> Vec<u8> {
    if f.len() > 34 && f[12..14] == [8, 0] && f[23] == 1 {
        f[18..20].fill(0);
        f[24..26].fill(0);
    }
    f
}

/// Runs the script on a fresh bridge, with `linerate route` on its ports
/// when `linerate`; what the hosts received, and the frames the fast path
/// bridged.
fn run(tag: &str, linerate: bool) -> (Seen, u64) {
    let t = topology(tag);
    let route = linerate.then(|| {
        let c = Route(
            Command::new(BIN)
                .args(["route", "--netns", &t.dut, "-i", "p0,p1,p2", "-q"])
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let at = Instant::now();
        while !std::path::Path::new(&format!("/run/linerate/routers/{}.json", t.dut)).exists() {
            assert!(
                at.elapsed() < Duration::from_secs(10),
                "route did not start"
            );
            pause(50);
        }
        c
    });
    let stop = Arc::new(AtomicBool::new(false));
    let captures: Vec<_> = HOSTS
        .iter()
        .map(|h| (h.to_string(), capture(t.hosts.clone(), h, stop.clone())))
        .collect();
    pause(300);
    {
        let _in = NetnsGuard::enter(&t.hosts).unwrap();
        let sockets = HOSTS
            .iter()
            .map(|h| {
                let i = linerate_bpf::loader::ifindex(h).unwrap();
                linerate_traffic::afpacket::PacketSocket::open(i).unwrap()
            })
            .collect();
        let mut d = Driver {
            dut: t.dut.clone(),
            sockets,
            next: 0,
        };
        script(&mut d);
    }
    pause(300);
    let bridged = route.map(|r| {
        let (_, map) = linerate_dataplane::record::open(&t.dut).unwrap();
        let n: u64 = ["p0", "p1", "p2"]
            .iter()
            .map(|p| {
                let i = {
                    let _in = NetnsGuard::enter(&t.dut).unwrap();
                    linerate_bpf::loader::ifindex(p).unwrap()
                };
                linerate_dataplane::record::read(&map, i)
                    .unwrap()
                    .packets_of("bridged")
            })
            .sum();
        drop(r);
        n
    });
    stop.store(true, Ordering::SeqCst);
    let mut seen = Seen::new();
    for (h, c) in captures {
        for f in c.join().unwrap() {
            if f.windows(TAG.len()).any(|w| w == TAG) {
                *seen.entry((h.clone(), normalise(f))).or_default() += 1;
            }
        }
    }
    (seen, bridged.unwrap_or(0))
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn bridging_delivers_what_the_kernels_bridge_delivers() {
    let (kernel, _) = run("brk", false);
    let (with_linerate, bridged) = run("brl", true);
    common::frames::assert_same(&kernel, &with_linerate, usize::MAX, "");
    // The script's deliveries: floods reach two hosts, the echo's reply
    // comes back; the 4 s exchange alone is about 80 frames.
    let total: usize = kernel.values().sum();
    assert!(total > 100, "{total} frames delivered");
    // The fast path bridged the known unicast, the exchange's among it.
    assert!(bridged >= 60, "linerate bridged {bridged} frames");
}
