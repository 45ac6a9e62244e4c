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
/// `outgoing` those it sends too.
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
            while !stop.load(Ordering::SeqCst) {
                let mut from: libc::sockaddr_ll = std::mem::zeroed();
                let mut len = std::mem::size_of_val(&from) as u32;
                let n = libc::recvfrom(
                    fd,
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    0,
                    &mut from as *mut _ as *mut libc::sockaddr,
                    &mut len,
                );
                if n > 0 && (outgoing || from.sll_pkttype != libc::PACKET_OUTGOING) {
                    out.push(buf[..n as usize].to_vec());
                }
            }
            libc::close(fd);
            out
        }
    })
}

pub fn is_chatter(f: &[u8]) -> bool {
    let et = u16::from_be_bytes([f[12], f[13]]);
    match et {
        0x0806 => true,
        0x86dd => {
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
/// masquerades others' packets, which must arrive as they are).
pub fn normalise(mut f: Vec<u8>) -> Vec<u8> {
    let ours =
        |src: [u8; 4]| [[198, 18, 0, 254], [198, 19, 0, 254], [198, 19, 0, 1]].contains(&src);
    let is_ipv4 = etherparse::Ethernet2Header::from_slice(&f)
        .is_ok_and(|(e, _)| e.ether_type == etherparse::EtherType::IPV4);
    if !is_ipv4 {
        return f;
    }
    let Ok((mut h, _)) = etherparse::Ipv4Header::from_slice(&f[ETH_LEN..]) else {
        return f;
    };
    if ours(h.source) && h.protocol == etherparse::IpNumber::ICMP {
        let len = h.header_len();
        h.identification = 0;
        h.header_checksum = 0;
        f[ETH_LEN..ETH_LEN + len].copy_from_slice(&h.to_bytes());
    }
    f
}

pub type Seen = BTreeMap<(String, Vec<u8>), usize>;

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
