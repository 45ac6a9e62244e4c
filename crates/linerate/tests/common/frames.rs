//! Frames sent into a lab and captured where they arrive: what the
//! differential tests compare, byte for byte.
#![allow(dead_code)] // not every test binary uses all
use linerate_host::netns::NetnsGuard;
use linerate_testkit::frames::ETH_LEN;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Frames arriving on `dev` of namespace `ns` until `stop` (not the ones it sends).
pub fn capture(
    ns: String,
    dev: &'static str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<Vec<u8>>> {
    capture_on(ns, dev, stop, false)
}

/// Frames arriving on `dev` of namespace `ns` until `stop`, and with
/// `outgoing` those it sends too. A VLAN tag the kernel took out of the
/// frame (into the skb's metadata, as it does on receive, or as a veth
/// with tx-vlan-offload sends it) is put back where it was on the wire,
/// as libpcap does from PACKET_AUXDATA.
pub fn capture_on(
    ns: String,
    dev: &'static str,
    stop: Arc<AtomicBool>,
    outgoing: bool,
) -> std::thread::JoinHandle<Vec<Vec<u8>>> {
    std::thread::spawn(move || {
        let _in = NetnsGuard::enter(&ns).unwrap();
        let idx = linerate_bpf::loader::ifindex(dev).unwrap();
        // SAFETY: plain socket calls on a descriptor we own.
        unsafe {
            let proto = (libc::ETH_P_ALL as u16).to_be();
            let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, proto as i32);
            assert!(fd >= 0);
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = proto;
            sll.sll_ifindex = idx as i32;
            assert_eq!(
                libc::bind(
                    fd,
                    &sll as *const _ as *const libc::sockaddr,
                    std::mem::size_of_val(&sll) as u32
                ),
                0
            );
            let on: libc::c_int = 1;
            assert_eq!(
                libc::setsockopt(
                    fd,
                    libc::SOL_PACKET,
                    libc::PACKET_AUXDATA,
                    &on as *const _ as *const libc::c_void,
                    std::mem::size_of_val(&on) as u32,
                ),
                0
            );
            let tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 100_000,
            };
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const _ as *const libc::c_void,
                std::mem::size_of_val(&tv) as u32,
            );
            let mut out = Vec::new();
            let mut buf = vec![0u8; 65536];
            let mut control = [0u64; 16];
            while !stop.load(Ordering::SeqCst) {
                let mut from: libc::sockaddr_ll = std::mem::zeroed();
                let mut iov = libc::iovec {
                    iov_base: buf.as_mut_ptr() as *mut libc::c_void,
                    iov_len: buf.len(),
                };
                let mut msg: libc::msghdr = std::mem::zeroed();
                msg.msg_name = &mut from as *mut _ as *mut libc::c_void;
                msg.msg_namelen = std::mem::size_of_val(&from) as u32;
                msg.msg_iov = &mut iov;
                msg.msg_iovlen = 1;
                msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
                msg.msg_controllen = std::mem::size_of_val(&control);
                let n = libc::recvmsg(fd, &mut msg, 0);
                if n <= 0 || (!outgoing && from.sll_pkttype == libc::PACKET_OUTGOING) {
                    continue;
                }
                let mut f = buf[..n as usize].to_vec();
                if let Some(tag) = aux_tag(&msg) {
                    if f.len() >= 12 {
                        f.splice(12..12, tag);
                    }
                }
                out.push(f);
            }
            libc::close(fd);
            out
        }
    })
}

/// The VLAN tag (TPID, TCI, as on the wire) PACKET_AUXDATA says the
/// kernel holds beside a received frame, if any.
///
/// # Safety
/// `msg` is a msghdr recvmsg filled.
unsafe fn aux_tag(msg: &libc::msghdr) -> Option<[u8; 4]> {
    let mut c = libc::CMSG_FIRSTHDR(msg);
    while !c.is_null() {
        if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == libc::PACKET_AUXDATA {
            let aux = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::tpacket_auxdata);
            if aux.tp_status & libc::TP_STATUS_VLAN_VALID == 0 {
                return None;
            }
            let tpid = if aux.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                aux.tp_vlan_tpid
            } else {
                0x8100
            };
            let mut t = [0u8; 4];
            t[..2].copy_from_slice(&tpid.to_be_bytes());
            t[2..].copy_from_slice(&aux.tp_vlan_tci.to_be_bytes());
            return Some(t);
        }
        c = libc::CMSG_NXTHDR(msg, c);
    }
    None
}

/// A frame's VLAN tags taken out: the tags (as on the wire) and the
/// frame without them.
fn untagged(f: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut tags = Vec::new();
    let mut f = f.to_vec();
    while f.len() >= 18 && matches!(u16::from_be_bytes([f[12], f[13]]), 0x8100 | 0x88a8) {
        tags.extend(f.drain(12..16));
    }
    (tags, f)
}

/// The kernels' own ARP, ND, MLD and IGMP, tagged or not.
pub fn is_chatter(f: &[u8]) -> bool {
    let (_, f) = untagged(f);
    if f.len() < 24 {
        return false;
    }
    let et = u16::from_be_bytes([f[12], f[13]]);
    match et {
        0x0806 => true,
        0x86dd if f.len() > 54 => {
            // ICMPv6 ND (133-137) and MLD (130-132, 143), after a plain header or hop-by-hop.
            let (nh, off) = if f[20] == 0 {
                (f[54], 54 + 8)
            } else {
                (f[20], 54)
            };
            nh == 58 && f.len() > off && matches!(f[off], 130..=137 | 143)
        }
        0x0800 => f[23] == 2, // IGMP
        _ => false,
    }
}

/// Zeroes the IPv4 ID and header checksum of the errors the DUT or the
/// receiver originates (ICMP from their addresses: the DUT's also
/// masquerades others' packets, which must arrive as they are), tagged
/// or not.
pub fn normalise(f: Vec<u8>) -> Vec<u8> {
    let ours = |src: [u8; 4]| {
        [[198, 18, 0, 254], [198, 19, 0, 254], [198, 19, 0, 1]].contains(&src)
            // (The VLANs of crates/linerate/tests/vm_differential.rs.)
            || matches!(src, [10, 0 | 1, _, 254] | [10, 1, _, 1])
    };
    let (tags, mut f) = untagged(&f);
    let is_ipv4 = etherparse::Ethernet2Header::from_slice(&f)
        .is_ok_and(|(e, _)| e.ether_type == etherparse::EtherType::IPV4);
    if is_ipv4 {
        if let Ok((mut h, _)) = etherparse::Ipv4Header::from_slice(&f[ETH_LEN..]) {
            if ours(h.source) && h.protocol == etherparse::IpNumber::ICMP {
                let len = h.header_len();
                h.identification = 0;
                h.header_checksum = 0;
                f[ETH_LEN..ETH_LEN + len].copy_from_slice(&h.to_bytes());
            }
        }
    }
    f.splice(12..12, tags);
    f
}

pub type Seen = BTreeMap<(String, Vec<u8>), usize>;

/// Asserts that the kernel alone and linerate delivered the same frames,
/// the same number of times each; else says which each delivered that
/// the other did not (hex, the first `shown` bytes), and `context`.
pub fn assert_same(kernel: &Seen, linerate: &Seen, shown: usize, context: &str) {
    let only = |a: &Seen, b: &Seen| -> Vec<String> {
        a.iter()
            .filter(|(k, n)| b.get(*k) != Some(n))
            .map(|((dev, f), n)| {
                let hex: String = f[..shown.min(f.len())]
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                format!("{dev} x{n}: {} bytes, {hex}", f.len())
            })
            .collect()
    };
    assert!(
        kernel == linerate,
        "kernel only:\n{}\nlinerate only:\n{}\n{context}",
        only(kernel, linerate).join("\n"),
        only(linerate, kernel).join("\n")
    );
}

/// Sends `frames` out of lab `lab`'s gen0, `gap` apart, and returns what
/// arrived at recv0 and gen0 until `settle` after the last.
pub fn send(lab: &str, frames: Vec<Vec<u8>>, gap: Duration, settle: Duration) -> Seen {
    let stop = Arc::new(AtomicBool::new(false));
    let at_recv = capture(format!("{lab}-recv"), "recv0", stop.clone());
    let at_gen = capture(format!("{lab}-gen"), "gen0", stop.clone());
    std::thread::sleep(Duration::from_millis(300));
    {
        let _in = NetnsGuard::enter(&format!("{lab}-gen")).unwrap();
        let sock = linerate_traffic::afpacket::PacketSocket::open(
            linerate_bpf::loader::ifindex("gen0").unwrap(),
        )
        .unwrap();
        for f in frames {
            let mut b = vec![f.clone()];
            sock.send_batch(&mut b, &[f.len()]).unwrap();
            std::thread::sleep(gap);
        }
    }
    std::thread::sleep(settle);
    stop.store(true, Ordering::SeqCst);
    collect(at_recv, at_gen)
}

/// What the captures at recv0 and gen0 saw, chatter left out, the
/// errors the ends originate normalised.
pub fn collect(
    at_recv: std::thread::JoinHandle<Vec<Vec<u8>>>,
    at_gen: std::thread::JoinHandle<Vec<Vec<u8>>>,
) -> Seen {
    let mut seen = Seen::new();
    for (name, h) in [("recv0", at_recv), ("gen0", at_gen)] {
        for f in h.join().unwrap() {
            if !is_chatter(&f) {
                *seen.entry((name.to_string(), normalise(f))).or_default() += 1;
            }
        }
    }
    seen
}
