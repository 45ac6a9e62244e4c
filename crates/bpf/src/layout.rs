//! Rust mirrors of the structs in `bpf/include/lab_maps.h`. The tests check
//! every size and offset against the BTF that clang emitted for the C side,
//! so the two definitions cannot drift apart silently.

/// Bytes of header template the generator copies on every run.
pub const GEN_TEMPLATE_MAX: usize = 96;
/// First two bytes of the payload stamp ("LR").
pub const STAMP_MAGIC: u16 = 0x4c52;
/// Size of the payload stamp (magic, stream, seq, tx_ns).
pub const STAMP_LEN: usize = 16;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GenConfig {
    pub template: [u8; GEN_TEMPLATE_MAX],
    pub family: u32,
    pub hdr_len: u32,
    pub stamp: u32,
    pub src_addr_first: u32,
    pub src_addr_count: u32,
    pub dst_addr_first: u32,
    pub dst_addr_count: u32,
    pub src_port_first: u32,
    pub src_port_count: u32,
    pub dst_port_first: u32,
    pub dst_port_count: u32,
    pub stream_base: u32,
    pub udp_csum_base: u32,
    pub _pad: u32,
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
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvCounters {
    pub packets: u64,
    pub bytes: u64,
    pub stamped: u64,
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
                hdr_len,
                stamp,
                src_addr_first,
                src_addr_count,
                dst_addr_first,
                dst_addr_count,
                src_port_first,
                src_port_count,
                dst_port_first,
                dst_port_count,
                stream_base,
                udp_csum_base,
                _pad
            ]
        );
    }

    #[test]
    fn gen_state_matches_c() {
        check_layout!(objects::GEN, "gen_state", GenState, [seq]);
    }

    #[test]
    fn recv_counters_match_c() {
        check_layout!(
            objects::RECV,
            "recv_counters",
            RecvCounters,
            [packets, bytes, stamped]
        );
    }
}
