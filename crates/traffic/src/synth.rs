//! Builds in Rust the frames the XDP generator builds, from the same map
//! configuration: the AF_PACKET generator sends these, and the tests check
//! the two implementations against each other byte for byte. Checksums are
//! computed here the textbook way (RFC 1071 over big-endian words), not the
//! way the BPF program does (memory-order words and precomputed parts).
use crate::frame::offsets;
use linerate_bpf::layout::{GenConfig, GenSize, STAMP_MAGIC};

/// The flow of frame `n`: source port fastest, then source address,
/// destination port, destination address (pkt-gen's order).
pub fn flow_of(c: &GenConfig, mut n: u64) -> (u32, u32, u16, u16) {
    let count = |x: u32| x.max(1) as u64;
    let sport = c
        .src_port_first
        .wrapping_add((n % count(c.src_port_count)) as u32) as u16;
    n /= count(c.src_port_count);
    let saddr = c
        .src_addr_first
        .wrapping_add((n % count(c.src_addr_count)) as u32);
    n /= count(c.src_addr_count);
    let dport = c
        .dst_port_first
        .wrapping_add((n % count(c.dst_port_count)) as u32) as u16;
    n /= count(c.dst_port_count);
    let daddr = c
        .dst_addr_first
        .wrapping_add((n % count(c.dst_addr_count)) as u32);
    (saddr, daddr, sport, dport)
}

pub fn size_of_frame(c: &GenConfig, seq: u64) -> GenSize {
    c.sizes[(seq % c.size_count.max(1) as u64) as usize]
}

/// Ones'-complement sum of big-endian 16-bit words (RFC 1071), unfolded.
fn sum_be(bytes: &[u8]) -> u32 {
    bytes
        .chunks(2)
        .map(|p| u16::from_be_bytes([p[0], *p.get(1).unwrap_or(&0)]) as u32)
        .sum()
}

fn fold(mut s: u32) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Writes frame `seq` of stream `stream` into `out` (zeroed beyond the
/// headers, at least the frame's length) and returns its length.
pub fn write_frame(c: &GenConfig, seq: u64, stream: u16, tx_ns: u32, out: &mut [u8]) -> usize {
    let v6 = c.family == 6;
    // An extension of the IP header (options, a hop-by-hop or fragment
    // header) moves the datagram; the template then ends before it.
    let extra = c.l3_extra as usize;
    let (l3, l4, pay) = offsets(v6);
    let (l4, pay) = (l4 + extra, pay + extra);
    let size = size_of_frame(c, seq);
    let len = size.frame_len as usize;
    let ip_len = size.ip_len as usize;
    let udp_len = ip_len - (l4 - l3);
    let template = if extra == 0 { l4 + 8 } else { l4 };
    out[..template].copy_from_slice(&c.template[..template]);
    out[template..len].fill(0);
    let (saddr, daddr, sport, dport) = flow_of(c, seq);
    if v6 {
        out[l3 + 4..l3 + 6].copy_from_slice(&((ip_len - 40) as u16).to_be_bytes());
        out[l3 + 20..l3 + 24].copy_from_slice(&saddr.to_be_bytes());
        out[l3 + 36..l3 + 40].copy_from_slice(&daddr.to_be_bytes());
    } else {
        out[l3 + 2..l3 + 4].copy_from_slice(&(ip_len as u16).to_be_bytes());
        out[l3 + 12..l3 + 16].copy_from_slice(&saddr.to_be_bytes());
        out[l3 + 16..l3 + 20].copy_from_slice(&daddr.to_be_bytes());
        out[l3 + 10..l3 + 12].fill(0);
        let ck = fold(sum_be(&out[l3..l4]));
        out[l3 + 10..l3 + 12].copy_from_slice(&ck.to_be_bytes());
    }
    out[l4..l4 + 2].copy_from_slice(&sport.to_be_bytes());
    out[l4 + 2..l4 + 4].copy_from_slice(&dport.to_be_bytes());
    out[l4 + 4..l4 + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    out[l4 + 6..l4 + 8].fill(0);
    if udp_len >= 8 + linerate_bpf::layout::STAMP_LEN {
        out[pay..pay + 2].copy_from_slice(&STAMP_MAGIC.to_be_bytes());
        out[pay + 2..pay + 4].copy_from_slice(&stream.to_be_bytes());
        out[pay + 4..pay + 8].copy_from_slice(&(seq as u32).to_be_bytes());
        out[pay + 8..pay + 12].copy_from_slice(&tx_ns.to_be_bytes());
    }
    // Pseudo-header: addresses, protocol, UDP length; then the datagram.
    let addrs = if v6 {
        &out[l3 + 8..l3 + 40]
    } else {
        &out[l3 + 12..l3 + 20]
    };
    let pseudo = sum_be(addrs) + 17 + udp_len as u32;
    let mut ck = fold(pseudo + sum_be(&out[l4..l4 + udp_len]));
    if ck == 0 {
        ck = 0xffff;
    }
    out[l4 + 6..l4 + 8].copy_from_slice(&ck.to_be_bytes());
    len
}

/// Recomputes the IPv4 header checksum of an Ethernet frame in place
/// (after a test edits the header).
pub fn fix_ipv4_checksum(frame: &mut [u8]) {
    let (l3, _, _) = offsets(false);
    let ihl = (frame[l3] & 15) as usize * 4;
    frame[l3 + 10..l3 + 12].fill(0);
    let ck = fold(sum_be(&frame[l3..l3 + ihl]));
    frame[l3 + 10..l3 + 12].copy_from_slice(&ck.to_be_bytes());
}
