//! Reads a struct's size and member offsets from the BTF of a BPF object, to
//! check that Rust mirrors match the C definitions.
use libbpf_rs::btf::{types::MemberAttr, types::Struct, Btf, HasSize};

#[derive(Debug, PartialEq, Eq)]
pub struct StructLayout {
    pub size: usize,
    /// (member name, byte offset), in declaration order.
    pub members: Vec<(String, usize)>,
}

/// The layout of `struct name` in `object`'s BTF, or `None` if absent.
pub fn struct_layout(object: &[u8], name: &str) -> Option<StructLayout> {
    let btf = Btf::from_raw("linerate", object).ok()??;
    let s: Struct<'_> = btf.type_by_name(name)?;
    let members = s
        .iter()
        .map(|m| {
            let bits = match m.attr {
                MemberAttr::Normal { offset } => offset,
                MemberAttr::BitField { offset, .. } => offset,
            };
            (
                m.name
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                bits as usize / 8,
            )
        })
        .collect();
    Some(StructLayout {
        size: s.size(),
        members,
    })
}
