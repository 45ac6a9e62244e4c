//! Rust mirrors of the structs in `bpf/include/abi/lab.h`. The tests check
//! every size and offset against the BTF that clang emitted for the C side,
//! so the two definitions cannot drift apart silently.

/// Bytes of header template the generator copies on every run.
pub const GEN_TEMPLATE_MAX: usize = 64;
/// Frame sizes one generator configuration cycles through.
pub const GEN_SIZES_MAX: usize = 16;
/// The parts a generator's traffic may mix, and the slots of a mix's round.
pub const GEN_PARTS: usize = 4;
pub const GEN_MIX_SLOTS: usize = 32;
/// First two bytes of the payload stamp ("LR").
pub const STAMP_MAGIC: u16 = 0x4c52;
/// Size of the payload stamp (magic, stream, seq, low 32 bits of tx_ns).
pub const STAMP_LEN: usize = 12;
/// Streams the receiver tracks (stream ids 0..RECV_STREAMS).
pub const RECV_STREAMS: u32 = 256;
pub const RECV_WINDOW_WORDS: usize = 16;
pub const RECV_LAT_BUCKETS: usize = 512;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GenSize {
    pub frame_len: u16,
    pub ip_len: u16,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GenConfig {
    pub template: [u8; GEN_TEMPLATE_MAX],
    pub family: u32,
    pub src_addr_first: u32,
    pub src_addr_count: u32,
    pub dst_addr_first: u32,
    pub dst_addr_count: u32,
    pub src_port_first: u32,
    pub src_port_count: u32,
    pub dst_port_first: u32,
    pub dst_port_count: u32,
    pub stream_base: u32,
    pub size_count: u32,
    pub flags: u32,
    pub sizes: [GenSize; GEN_SIZES_MAX],
    pub rate_pps: u64,
    pub start_ns: u64,
    pub stop_ns: u64,
    pub clock_every: u32,
    pub l4: u32,
    pub tcp_phase: u32,
    pub tcp_from: u32,
    pub tcp_stride: u32,
    pub tcp_steps: u32,
    pub tcp_lag: u32,
    pub tcp_min_gap_ns: u32,
    pub mix_count: u32,
    pub clear_to: u32,
    pub mix: [u8; GEN_MIX_SLOTS],
    /// Bytes between the IP header and the UDP header (abi/lab.h).
    pub l3_extra: u32,
    /// The VLAN tag pushed on every frame, as on the wire (0: none).
    pub vlan_tag: u32,
    /// The interface this part's frames leave by (0: the generator's).
    pub out_ifindex: u32,
}

impl Default for GenConfig {
    fn default() -> Self {
        // SAFETY: plain old data, all-zero is a valid value.
        unsafe { std::mem::zeroed() }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GenState {
    pub seq: u64,
    pub bytes: u64,
    pub held: u64,
    pub after_stop: u64,
    pub limit: u64,
    pub last_ns: u64,
    pub sport_off: u32,
    pub saddr_off: u32,
    pub dport_off: u32,
    pub daddr_off: u32,
    pub size_idx: u32,
    pub clock_runs: u32,
    pub clock_ns: u64,
    pub cycle: u32,
    pub sport_first: u32,
    pub sport_count: u32,
    pub slot: u32,
    pub round: u64,
    pub mix_slot: u32,
    pub _pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvCounters {
    pub packets: u64,
    pub bytes: u64,
    pub stamped: u64,
    pub bad_stream: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvStream {
    pub received: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub late: u64,
    pub span: u64,
    pub first: u32,
    pub max: u32,
    pub seen: u32,
    pub _pad: u32,
    pub tag: [u32; RECV_WINDOW_WORDS],
    pub bits: [u64; RECV_WINDOW_WORDS],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RecvLatency {
    pub count: u64,
    pub sum_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub hist: [u64; RECV_LAT_BUCKETS],
}

/// `GenConfig::flags`: each frame's destination address and port drawn at
/// random from their ranges (pkt-gen's -Z); the source's (pkt-gen's -z).
pub const GEN_RANDOM_DST: u32 = 1;
pub const GEN_RANDOM_SRC: u32 = 2;

/// `GenConfig::tcp_phase` (bpf/include/abi/lab.h): which segment of each
/// connection a run sends.
pub const GEN_TCP_SYN: u32 = 1;
pub const GEN_TCP_DATA: u32 = 2;
pub const GEN_TCP_FIN: u32 = 3;
pub const GEN_TCP_LAST_ACK: u32 = 4;
/// Short connections: every frame a step of one (SYN, data, FIN, last ACK).
pub const GEN_TCP_CHURN: u32 = 5;
pub const GEN_TCP_STEPS_MIN: u32 = 4;
/// The answering receiver's initial sequence number is the SYN's plus this.
pub const LAB_TCP_ISN_GAP: u32 = 0x4000_0000;
/// The window scale and MSS both ends advertise.
pub const LAB_TCP_WSCALE: u8 = 14;
pub const LAB_TCP_MSS: u16 = 1460;
/// The receiver acknowledges each segment that crosses a multiple of
/// 2^this bytes of its connection's data (and the first).
pub const LAB_TCP_ACK_SHIFT: u32 = 20;

/// bpf/include/abi/lab.h `struct recv_watch`.
pub const RECV_WATCH: u32 = 4;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvWatch {
    pub mac: [u8; 6],
    pub _pad: u16,
    pub first_tx: u32,
    pub last_tx: u32,
    pub packets: u64,
}

impl Default for RecvLatency {
    fn default() -> Self {
        // SAFETY: plain old data, all-zero is a valid value.
        unsafe { std::mem::zeroed() }
    }
}

/// Plain-old-data structs that can be viewed as map bytes.
///
/// # Safety
/// Implementors are `#[repr(C)]`, have no padding that matters and accept
/// any bit pattern.
pub unsafe trait Pod: Copy + Default {
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: Pod guarantees a plain #[repr(C)] value.
        unsafe {
            std::slice::from_raw_parts(
                self as *const Self as *const u8,
                std::mem::size_of::<Self>(),
            )
        }
    }
    /// Reads a value from map bytes; `None` when the length does not match.
    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        (bytes.len() == std::mem::size_of::<Self>())
            // SAFETY: length checked; any bit pattern is valid for Pod.
            .then(|| unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const Self) })
    }
}
unsafe impl Pod for GenConfig {}
unsafe impl Pod for GenState {}
unsafe impl Pod for RecvCounters {}
unsafe impl Pod for RecvStream {}
unsafe impl Pod for RecvLatency {}
unsafe impl Pod for RecvWatch {}
unsafe impl Pod for u32 {}
unsafe impl Pod for u64 {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf_layout::struct_layout;
    use crate::objects;
    use std::mem::{offset_of, size_of};

    macro_rules! check_layout {
        ($obj:expr, $cname:literal, $ty:ty, [$($field:ident),* $(,)?]) => {{
            let l = struct_layout($obj, $cname).expect(concat!("BTF for struct ", $cname));
            assert_eq!(l.size, size_of::<$ty>(), "size of struct {}", $cname);
            let expect: Vec<(String, usize)> =
                vec![$((stringify!($field).to_string(), offset_of!($ty, $field))),*];
            assert_eq!(l.members, expect, "members of struct {}", $cname);
        }};
    }

    #[test]
    fn gen_config_matches_c() {
        check_layout!(
            objects::GEN,
            "gen_config",
            GenConfig,
            [
                template,
                family,
                src_addr_first,
                src_addr_count,
                dst_addr_first,
                dst_addr_count,
                src_port_first,
                src_port_count,
                dst_port_first,
                dst_port_count,
                stream_base,
                size_count,
                flags,
                sizes,
                rate_pps,
                start_ns,
                stop_ns,
                clock_every,
                l4,
                tcp_phase,
                tcp_from,
                tcp_stride,
                tcp_steps,
                tcp_lag,
                tcp_min_gap_ns,
                mix_count,
                clear_to,
                mix,
                l3_extra,
                vlan_tag,
                out_ifindex
            ]
        );
        check_layout!(objects::GEN, "gen_size", GenSize, [frame_len, ip_len]);
    }

    #[test]
    fn gen_state_matches_c() {
        check_layout!(
            objects::GEN,
            "gen_state",
            GenState,
            [
                seq,
                bytes,
                held,
                after_stop,
                limit,
                last_ns,
                sport_off,
                saddr_off,
                dport_off,
                daddr_off,
                size_idx,
                clock_runs,
                clock_ns,
                cycle,
                sport_first,
                sport_count,
                slot,
                round,
                mix_slot,
                _pad
            ]
        );
    }

    #[test]
    fn recv_structs_match_c() {
        check_layout!(
            objects::RECV,
            "recv_counters",
            RecvCounters,
            [packets, bytes, stamped, bad_stream]
        );
        check_layout!(
            objects::RECV,
            "recv_stream",
            RecvStream,
            [received, duplicated, reordered, late, span, first, max, seen, _pad, tag, bits]
        );
        check_layout!(
            objects::RECV,
            "recv_latency",
            RecvLatency,
            [count, sum_ns, min_ns, max_ns, hist]
        );
        check_layout!(
            objects::RECV,
            "recv_watch",
            RecvWatch,
            [mac, _pad, first_tx, last_tx, packets]
        );
    }
}
