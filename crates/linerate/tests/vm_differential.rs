//! VLAN devices and VRFs change nothing but speed: in a VM running
//! Debian's kernel (this host's has neither 802.1Q nor VRF;
//! linerate_testkit::vm), the lab's DUT gets VLAN devices on both ports
//! (802.1Q and 802.1ad), then VRF tenants with overlapping addresses, and
//! frames go out of gen0 once with the kernel forwarding alone and once
//! with `linerate route` attached. What arrives at recv0 and comes back to
//! gen0, tags included (the capture puts back those the kernel holds
//! beside the frame), must be the same frames, byte for byte.
//!
//! VLANs: to and from VLANs on one port and on the other, into a VLAN from
//! an untagged frame, out untagged, priority bits set, a tag without a
//! device, the wrong TPID, a priority tag, a second tag, TTL 1, the DUT's
//! own VLAN addresses, over a VLAN device's MTU. VRFs: two tenants on the
//! same addresses and prefixes, one whose table ends in an unreachable
//! default and one whose misses fall through to main, IPv4 and IPv6.
//!
//! Each test runs this very binary in the VM (its `*_in_the_vm` tests,
//! which do nothing outside one). Needs root, qemu and the VM's kernel
//! (scripts/setup.sh installs both); without them a test says why and
//! passes. Software emulation: slow, and for correctness only.
use linerate_host::cmd::in_netns;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::frames::{send, Seen};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");
const LAB: &str = "lrt-vlan";
const GEN: [u8; 6] = [2, 0, 0, 0, 0, 1];
const DUT_IN: [u8; 6] = [2, 0, 0, 0, 0, 2];
/// Set in the VM: `in_the_vm` runs only there.
const IN_VM: &str = "LINERATE_IN_VM";

/// Runs test `inner` of this binary in the VM, with the modules it needs.
fn in_vm(inner: &str, modules: &str) {
    let k = match linerate_testkit::vm::kernel() {
        Ok(k) => k,
        Err(why) => {
            eprintln!("skipped: no VM here: {why}");
            return;
        }
    };
    let me = std::env::current_exe().unwrap();
    let script = format!(
        "set -e\nmodprobe -a veth nfnetlink nf_tables nf_conntrack {modules}\n{IN_VM}=1 {} --exact {inner} --include-ignored --nocapture --test-threads 1\n",
        me.display()
    );
    let ran = k.run(&script, Duration::from_secs(1200)).unwrap();
    assert!(
        ran.output.contains("test result: ok. 1 passed"),
        "status {}:\n{}\n{}",
        ran.status,
        ran.output,
        ran.console
    );
    assert_eq!(ran.status, 0, "{}", ran.output);
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn tagged_frames_are_routed_as_the_kernel_routes_them() {
    in_vm("vlans_in_the_vm", "8021q");
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn rules_and_the_firewall_see_vlan_devices_as_the_kernel_does() {
    in_vm("vlan_rules_in_the_vm", "8021q");
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn vrf_tenants_are_routed_as_the_kernel_routes_them() {
    in_vm("vrfs_in_the_vm", "8021q vrf");
}

/// In the VM (IN_VM set), or says it is not and passes.
fn in_the_vm() -> bool {
    let there = std::env::var_os(IN_VM).is_some();
    if !there {
        eprintln!("skipped: not in the VM");
    }
    there
}

fn linerate(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().unwrap()
}

struct Down;
impl Drop for Down {
    fn drop(&mut self) {
        let _ = linerate(&["lab", "down", "--name", LAB]);
    }
}

/// `cmd` in namespace `ns` (a shell line).
fn sh(ns: &str, cmd: &str) {
    in_netns(ns, "sh", &["-ec", cmd]).unwrap_or_else(|e| panic!("{ns}: {cmd}: {e:#}"));
}

/// The lab's three namespaces with VLAN devices: on the DUT, 802.1Q 10
/// and 802.1ad 20 on dut0 (10.0.10/24, 10.0.20/24), 802.1Q 30 and
/// 802.1ad 40 on dut1 (10.1.30/24, MTU 1300, and 10.1.40/24); the
/// generator and the receiver on the same VLANs; 198.51.100/24 and
/// 2001:db8:100::/48 routed to the receiver over VLAN 30, 203.0.113/24
/// over VLAN 40. Tag offloads off on the veths: a tag travels in the
/// frame, where XDP sees it.
fn vlans_up() {
    let (gen, dut, recv) = (
        format!("{LAB}-gen"),
        format!("{LAB}-dut"),
        format!("{LAB}-recv"),
    );
    let dev = |parent: &str, id: u32, proto: &str, net: &str, host: u32| {
        format!(
            "ip link add link {parent} name {parent}.{id} type vlan proto {proto} id {id}\n\
             ip addr add 10.{net}.{id}.{host}/24 dev {parent}.{id}\n\
             ip addr add 2001:db8:{id}::{host}/64 dev {parent}.{id} nodad\n\
             ip link set {parent}.{id} up\n"
        )
    };
    let offloads = |d: &str| {
        format!("ethtool -K {d} rxvlan off txvlan off rx-vlan-stag-hw-parse off tx-vlan-stag-hw-insert off\n")
    };
    sh(
        &dut,
        &format!(
            "{}{}{}{}{}{}ip link set dut1.30 mtu 1300\n\
             ip route add 198.51.100.0/24 via 10.1.30.1\n\
             ip route add 203.0.113.0/24 via 10.1.40.1\n\
             ip -6 route add 2001:db8:100::/48 via 2001:db8:30::1\n",
            offloads("dut0"),
            offloads("dut1"),
            dev("dut0", 10, "802.1Q", "0", 254),
            dev("dut0", 20, "802.1ad", "0", 254),
            dev("dut1", 30, "802.1Q", "1", 254),
            dev("dut1", 40, "802.1ad", "1", 254),
        ),
    );
    sh(
        &gen,
        &format!(
            "{}{}{}",
            offloads("gen0"),
            dev("gen0", 10, "802.1Q", "0", 1),
            dev("gen0", 20, "802.1ad", "0", 1),
        ),
    );
    sh(
        &recv,
        &format!(
            "{}{}{}ip route add 10.0.0.0/16 via 10.1.30.254\n\
             ip -6 route add 2001:db8::/40 via 2001:db8:30::254\n",
            offloads("recv0"),
            dev("recv0", 30, "802.1Q", "1", 1),
            dev("recv0", 40, "802.1ad", "1", 1),
        ),
    );
    // Every error the DUT and the receiver owe is sent.
    for ns in [&dut, &recv] {
        sh(
            ns,
            "sysctl -qw net.ipv4.icmp_ratelimit=0 net.ipv6.icmp.ratelimit=0",
        );
    }
}

/// A UDP frame from the generator's address on `vlan` (0: untagged) to
/// `dst`, tagged `tag` (TPID, TCI) if some.
fn udp(src: &str, dst: &str, ttl: u8, payload: usize, tag: Option<(u16, u16)>) -> Vec<u8> {
    let mut f = Vec::new();
    let b = etherparse::PacketBuilder::ethernet2(GEN, DUT_IN);
    let b = match (src.parse().unwrap(), dst.parse().unwrap()) {
        (std::net::IpAddr::V4(s), std::net::IpAddr::V4(d)) => b.ipv4(s.octets(), d.octets(), ttl),
        (std::net::IpAddr::V6(s), std::net::IpAddr::V6(d)) => b.ipv6(s.octets(), d.octets(), ttl),
        _ => panic!("{src} and {dst}: one family"),
    };
    b.udp(4000, 5000)
        .write(&mut f, &vec![0x5a; payload])
        .unwrap();
    if let Some((tpid, tci)) = tag {
        let mut t = tpid.to_be_bytes().to_vec();
        t.extend(tci.to_be_bytes());
        f.splice(12..12, t);
    }
    f
}

/// The tagged corpus, and how many of its frames the fast path forwards.
fn corpus() -> (Vec<Vec<u8>>, u64) {
    let q = |vid| Some((0x8100, vid));
    let ad = |vid| Some((0x88a8, vid));
    let forwarded = vec![
        // VLAN 10 to VLAN 30 (802.1Q both), to VLAN 40 (802.1ad), to the
        // receiver's untagged network.
        udp("10.0.10.1", "198.51.100.9", 64, 18, q(10)),
        udp("10.0.10.1", "198.51.100.9", 64, 600, q(10)),
        udp("10.0.10.1", "203.0.113.9", 64, 18, q(10)),
        udp("10.0.10.1", "198.19.10.1", 64, 18, q(10)),
        // VLAN 20 (802.1ad) to VLAN 30; VLAN 10 to VLAN 20, the same port.
        udp("10.0.20.1", "198.51.100.9", 64, 18, ad(20)),
        udp("10.0.10.1", "10.0.20.1", 64, 18, q(10)),
        // Untagged into VLAN 30.
        udp("198.18.0.1", "198.51.100.9", 64, 18, None),
        // Priority 5 and DEI on VLAN 10: routed as VLAN 10, out with 0.
        udp("10.0.10.1", "198.51.100.9", 64, 18, Some((0x8100, 0xb00a))),
        // IPv6 over VLANs.
        udp("2001:db8:10::1", "2001:db8:100::9", 64, 18, q(10)),
        udp("2001:db8:20::1", "2001:db8:100::9", 64, 200, ad(20)),
        // To the receiver on VLAN 30, a host on a connected network: port
        // unreachable back, through the DUT, tagged both ways.
        udp("10.0.10.1", "10.1.30.1", 64, 18, q(10)),
    ];
    let n = forwarded.len() as u64;
    let mut c = forwarded;
    let mut qinq = udp("10.0.10.1", "198.51.100.9", 64, 18, ad(20));
    qinq.splice(16..16, [0x81, 0x00, 0x00, 0x0a]);
    c.extend([
        // No device of VLAN 11 on dut0; 802.1ad 10 is not 802.1Q 10; VLAN
        // 30 is dut1's.
        udp("10.0.10.1", "198.51.100.9", 64, 18, q(11)),
        udp("10.0.10.1", "198.51.100.9", 64, 18, ad(10)),
        udp("10.0.10.1", "198.51.100.9", 64, 18, q(30)),
        // A priority tag: routed as dut0, by the kernel.
        udp("198.18.0.1", "198.51.100.9", 64, 18, Some((0x8100, 0xa000))),
        // A second tag inside VLAN 20.
        qinq,
        // TTL 1, the DUT's own addresses, over VLAN 30's MTU (1300) with
        // DF: errors back, tagged.
        udp("10.0.10.1", "198.51.100.9", 1, 18, q(10)),
        udp("10.0.10.1", "10.0.10.254", 64, 18, q(10)),
        udp("10.0.10.1", "10.1.30.254", 64, 18, q(10)),
        udp("10.0.10.1", "198.51.100.9", 64, 1350, q(10)),
        udp("2001:db8:10::1", "2001:db8:100::9", 1, 18, q(10)),
        udp("2001:db8:10::1", "2001:db8:100::9", 64, 1300, q(10)),
    ]);
    (c, n)
}

fn send_corpus(frames: Vec<Vec<u8>>) -> Seen {
    send(
        LAB,
        frames,
        Duration::from_millis(50),
        Duration::from_millis(3000),
    )
}

/// What the fast path must have done with a corpus, by the DUT's
/// counters: frames forwarded from dut0, from dut1, and passed from dut0
/// as tagged frames it does not route.
struct Expect {
    forwarded: u64,
    back: u64,
    pass_vlan: u64,
}

/// The differential: `frames` sent once with the kernel alone, once with
/// `linerate route` on dut0 and dut1; the same frames must arrive, and
/// the fast path must have done what `expect` says.
fn differential(frames: Vec<Vec<u8>>, expect: Expect) {
    let dut = format!("{LAB}-dut");
    // The neighbours both runs use, resolved first (a first frame to an
    // unresolved one is queued by the kernel, and passed by the fast path).
    send_corpus(frames.clone());
    let kernel = send_corpus(frames.clone());

    let mut route = Command::new(BIN)
        .args(["route", "--netns", &dut, "-i", "dut0,dut1"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !std::path::Path::new(&format!("/run/linerate/routers/{dut}.json")).exists() {
        if route.try_wait().unwrap().is_some() || t.elapsed() > Duration::from_secs(90) {
            let _ = route.kill();
            let out = route.wait_with_output().unwrap();
            panic!(
                "route did not start: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // Both ports have VLAN devices: each is given the program for tagged
    // frames, which hands it the untagged ones.
    let t = Instant::now();
    while programs(&dut) != ["router_vlan", "router_vlan"] {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the ports' programs: {:?}",
            programs(&dut)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let stats = common::stats_window(&dut, "12");
    let linerate_run = send_corpus(frames);
    let st: Value = serde_json::from_slice(&stats.wait_with_output().unwrap().stdout).unwrap();
    // SAFETY: signalling our child.
    unsafe { libc::kill(route.id() as i32, libc::SIGTERM) };
    let out = route.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    let reasons = &st["interfaces"][0]["reasons"];
    let back = &st["interfaces"][1]["reasons"];
    let count = |r: &Value, what: &str| r[what]["packets"].as_u64().unwrap_or(0);
    assert_eq!(
        (
            count(reasons, "forwarded"),
            count(back, "forwarded"),
            count(reasons, "pass_vlan")
        ),
        (expect.forwarded, expect.back, expect.pass_vlan),
        "forwarded from dut0, from dut1, tagged frames passed: {reasons}\n{back}\n{said}"
    );
    common::frames::assert_same(
        &kernel,
        &linerate_run,
        usize::MAX,
        &format!("{reasons}\n{said}"),
    );
    assert!(
        kernel.len() >= expect.forwarded as usize,
        "the transit frames arrived: {kernel:?}"
    );
}

/// The names of the XDP programs on dut0 and dut1 of namespace `dut`.
fn programs(dut: &str) -> Vec<String> {
    let out = Command::new("ip")
        .args(["-n", dut, "-j", "-d", "link", "show"])
        .output()
        .unwrap();
    let links: Value = serde_json::from_slice(&out.stdout).unwrap();
    ["dut0", "dut1"]
        .iter()
        .map(|dev| {
            let l = links
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["ifname"] == *dev);
            l.and_then(|l| l["xdp"]["prog"]["name"].as_str())
                .unwrap_or("none")
                .to_string()
        })
        .collect()
}

/// The lab, up until dropped.
fn lab() -> Down {
    let up = linerate(&["lab", "up", "--name", LAB]);
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    Down
}

#[test]
#[ignore = "runs in the VM that tagged_frames_are_routed_as_the_kernel_routes_them starts"]
fn vlans_in_the_vm() {
    if !in_the_vm() {
        return;
    }
    let _down = lab();
    vlans_up();
    let (frames, forwarded) = corpus();
    differential(
        frames,
        Expect {
            forwarded,
            // The receiver's errors back, tagged: port unreachable for its
            // own address, no route for the IPv6 transit frames (it does
            // not forward).
            back: 3,
            // VLAN 11, 802.1ad 10, VLAN 30 on dut0, the priority tag, QinQ.
            pass_vlan: 5,
        },
    );
}

/// Two tenants on the DUT, VRFs red (table 10: dut0.10, dut1.30) and blue
/// (table 20: dut0.20, dut1.40), 802.1Q all, on the same addresses
/// (10.0.10.254/24 towards the generator, 10.1.30.254/24 towards the
/// receiver, and IPv6's) with the same routes (198.51.100/24 and
/// 2001:db8:100::/48 via the receiver's 10.1.30.1, 2001:db8:30::1); red's
/// table ends in an unreachable default, blue's misses fall through to
/// main. The generator and the receiver hold each tenant's address on
/// both of its VLANs.
fn vrfs_up() {
    let (gen, dut, recv) = (
        format!("{LAB}-gen"),
        format!("{LAB}-dut"),
        format!("{LAB}-recv"),
    );
    let dev = |parent: &str, id: u32, net: &str, host: u32, vrf: Option<&str>| {
        let side = if net == "0" { 10 } else { 30 };
        let master = vrf.map_or(String::new(), |v| {
            format!("ip link set {parent}.{id} master {v}\n")
        });
        format!(
            "ip link add link {parent} name {parent}.{id} type vlan id {id}\n{master}\
             ip addr add 10.{net}.{side}.{host}/24 dev {parent}.{id}\n\
             ip addr add 2001:db8:{side}::{host}/64 dev {parent}.{id} nodad\n\
             ip link set {parent}.{id} up\n"
        )
    };
    let offloads = |d: &str| format!("ethtool -K {d} rxvlan off txvlan off\n");
    sh(
        &dut,
        &format!(
            "ip link add red type vrf table 10\nip link add blue type vrf table 20\n\
             ip link set red up\nip link set blue up\n{}{}{}{}{}{}\
             ip route add 198.51.100.0/24 via 10.1.30.1 vrf red\n\
             ip route add 198.51.100.0/24 via 10.1.30.1 vrf blue\n\
             ip -6 route add 2001:db8:100::/48 via 2001:db8:30::1 vrf red\n\
             ip -6 route add 2001:db8:100::/48 via 2001:db8:30::1 vrf blue\n\
             ip route add unreachable default metric 4278198272 vrf red\n\
             ip -6 route add unreachable default metric 4278198272 vrf red\n\
             sysctl -qw net.ipv4.icmp_ratelimit=0 net.ipv6.icmp.ratelimit=0\n",
            offloads("dut0"),
            offloads("dut1"),
            dev("dut0", 10, "0", 254, Some("red")),
            dev("dut0", 20, "0", 254, Some("blue")),
            dev("dut1", 30, "1", 254, Some("red")),
            dev("dut1", 40, "1", 254, Some("blue")),
        ),
    );
    sh(
        &gen,
        &format!(
            "{}{}{}",
            offloads("gen0"),
            dev("gen0", 10, "0", 1, None),
            dev("gen0", 20, "0", 1, None),
        ),
    );
    sh(
        &recv,
        &format!(
            "{}{}{}",
            offloads("recv0"),
            dev("recv0", 30, "1", 1, None),
            dev("recv0", 40, "1", 1, None),
        ),
    );
}

#[test]
#[ignore = "runs in the VM that vrf_tenants_are_routed_as_the_kernel_routes_them starts"]
fn vrfs_in_the_vm() {
    if !in_the_vm() {
        return;
    }
    let _down = lab();
    vrfs_up();
    let red = Some((0x8100, 10));
    let blue = Some((0x8100, 20));
    let forwarded = vec![
        // The same addresses and route in each tenant: out of its VLAN.
        udp("10.0.10.1", "198.51.100.9", 64, 18, red),
        udp("10.0.10.1", "198.51.100.9", 64, 18, blue),
        udp("2001:db8:10::1", "2001:db8:100::9", 64, 18, red),
        udp("2001:db8:10::1", "2001:db8:100::9", 64, 18, blue),
        // Blue's miss falls through to main: out of dut1, untagged.
        udp("10.0.10.1", "198.19.10.1", 64, 18, blue),
        // A host on each tenant's connected network: its own entry in the
        // tenant's table, out of the tenant's VLAN.
        udp("10.0.10.1", "10.1.30.1", 64, 18, red),
        udp("10.0.10.1", "10.1.30.1", 64, 18, blue),
        udp("2001:db8:10::1", "2001:db8:30::1", 64, 18, red),
    ];
    let n = forwarded.len() as u64;
    let mut frames = forwarded;
    frames.extend([
        // Red's miss meets its unreachable default: the kernel's error.
        udp("10.0.10.1", "198.19.10.1", 64, 18, red),
        udp("2001:db8:10::1", "2001:db8:7::1", 64, 18, red),
        // TTL 1, the tenant's own addresses, main's unrouted.
        udp("10.0.10.1", "198.51.100.9", 1, 18, red),
        udp("10.0.10.1", "10.0.10.254", 64, 18, blue),
        udp("10.0.10.1", "10.1.30.254", 64, 18, red),
        udp("198.18.0.1", "198.51.100.9", 64, 18, None),
    ]);
    differential(
        frames,
        Expect {
            forwarded: n,
            back: 0,
            pass_vlan: 0,
        },
    );
}

/// The VLAN lab with a policy rule naming a VLAN device (`iif dut0.20`:
/// table 100, which sends 198.51.100/24 out of VLAN 40 rather than 30)
/// and a ruleset naming them (`iifname`, `oifname`): the rules' walk and
/// the firewall's verdicts of the fast path are the kernel's.
#[test]
#[ignore = "runs in the VM that rules_and_the_firewall_see_vlan_devices_as_the_kernel_does starts"]
fn vlan_rules_in_the_vm() {
    if !in_the_vm() {
        return;
    }
    let _down = lab();
    vlans_up();
    let dut = format!("{LAB}-dut");
    sh(
        &dut,
        "ip route add 198.51.100.0/24 via 10.1.40.1 table 100\n\
         ip rule add iif dut0.20 lookup 100 pref 100\n\
         nft -f - <<'EOF'\n\
         table inet f {\n\
           chain filter_forward {\n\
             type filter hook forward priority 0; policy accept;\n\
             iifname \"dut0.10\" oifname \"dut1.40\" drop\n\
             iifname \"dut0.10\" ip daddr 198.51.100.128/25 drop\n\
             oifname \"dut1.30\" udp dport 5001 drop\n\
           }\n\
         }\n\
         EOF\n",
    );
    let q = |vid| Some((0x8100, vid));
    let ad = |vid| Some((0x88a8, vid));
    let mut dport = udp("10.0.10.1", "198.51.100.9", 64, 18, q(10));
    dport[14 + 4 + 20 + 3] = 0x89; // 5001, its UDP checksum left as it was: the rule reads the port
    let forwarded = vec![
        // VLAN 20's by table 100: out of VLAN 40.
        udp("10.0.20.1", "198.51.100.9", 64, 18, ad(20)),
        // Accepted: VLAN 10 out of VLAN 30; untagged out of VLAN 30.
        udp("10.0.10.1", "198.51.100.9", 64, 18, q(10)),
        udp("198.18.0.1", "198.51.100.9", 64, 18, None),
    ];
    let mut frames = forwarded.clone();
    frames.extend([
        // Dropped: VLAN 10 to VLAN 40, to the upper half, to port 5001.
        udp("10.0.10.1", "203.0.113.9", 64, 18, q(10)),
        udp("10.0.10.1", "198.51.100.200", 64, 18, q(10)),
        dport,
    ]);
    differential(
        frames,
        Expect {
            forwarded: forwarded.len() as u64,
            back: 0,
            pass_vlan: 0,
        },
    );
}
