//! A named nftables set's elements, dumped from the kernel over netlink
//! (NFT_MSG_GETSETELEM): what the firewall reads instead of nft's JSON for
//! sets (linerate_firewall::raw_elements), which nft takes seconds to
//! print when they hold a million elements.
use crate::netfilter::{nfproto, NFNL_SUBSYS_NFTABLES};
use crate::socket::raw_dump_on;
use crate::wire::{attribute, Message};
use anyhow::{bail, Result};
use netlink_sys::protocols::NETLINK_NETFILTER;

/// A table by family and name ("inet filter").
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId {
    pub family: String,
    pub name: String,
}

impl std::fmt::Display for TableId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.family, self.name)
    }
}

/// One element: its key's bytes (each field of a concatenation takes a
/// multiple of 4 bytes), the inclusive end of a concatenation of ranges,
/// whether it is the end of an interval (an rbtree's boundary, exclusive),
/// a verdict map's verdict.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawElement {
    pub key: Vec<u8>,
    pub key_end: Option<Vec<u8>>,
    pub interval_end: bool,
    /// The catch-all element (`*`).
    pub catchall: bool,
    pub verdict: Option<RawVerdict>,
}

/// NFTA_VERDICT_CODE and, for a jump or goto, NFTA_VERDICT_CHAIN.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawVerdict {
    pub code: i32,
    pub chain: Option<String>,
}

pub(crate) const NFT_MSG_NEWSETELEM: u16 = 12;
const NFT_MSG_GETSETELEM: u16 = 13;

pub(crate) const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
pub(crate) const NFTA_SET_ELEM_LIST_SET: u16 = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_SET_ELEM_KEY: u16 = 1;
const NFTA_SET_ELEM_DATA: u16 = 2;
const NFTA_SET_ELEM_FLAGS: u16 = 3;
const NFTA_SET_ELEM_TIMEOUT: u16 = 4;
const NFTA_SET_ELEM_KEY_END: u16 = 10;
const NFTA_DATA_VALUE: u16 = 1;
const NFTA_DATA_VERDICT: u16 = 2;
const NFTA_VERDICT_CODE: u16 = 1;
const NFTA_VERDICT_CHAIN: u16 = 2;
const NFT_SET_ELEM_INTERVAL_END: u32 = 1;
const NFT_SET_ELEM_CATCHALL: u32 = 2;

/// The elements of set `set` of `table`, in the calling thread's network
/// namespace.
pub fn dump(table: &TableId, set: &str) -> Result<Vec<RawElement>> {
    let msgs = dump_in(
        table,
        NFT_MSG_GETSETELEM,
        [
            (NFTA_SET_ELEM_LIST_TABLE, &table.name),
            (NFTA_SET_ELEM_LIST_SET, set),
        ],
        &format!("the elements of set {set} of table {table}"),
    )?;
    let mut out = Vec::new();
    for m in &msgs {
        elements_of(m, &mut out)?;
    }
    Ok(out)
}

/// The messages of an nf_tables dump (`get`, an NFT_MSG_GET* of table
/// `table`'s family) filtered by two string attributes (the table's name,
/// and the object's), in the calling thread's network namespace; an error
/// names `what`.
pub(crate) fn dump_in(
    table: &TableId,
    get: u16,
    attrs: [(u16, &str); 2],
    what: &str,
) -> Result<Vec<Vec<u8>>> {
    let Some(family) = nfproto(&table.family) else {
        bail!("no nftables family {:?}", table.family);
    };
    let mut body = vec![family, 0, 0, 0];
    for (kind, value) in attrs {
        body.extend(attribute(kind, &nul(value)));
    }
    let kind = (NFNL_SUBSYS_NFTABLES << 8) | get;
    match raw_dump_on(NETLINK_NETFILTER, kind, &body, what)? {
        Ok(m) => Ok(m),
        Err(errno) => bail!("{what}: {}", std::io::Error::from_raw_os_error(errno)),
    }
}

fn nul(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

/// The elements of one NFT_MSG_NEWSETELEM (netlink header included).
pub(crate) fn elements_of(m: &[u8], out: &mut Vec<RawElement>) -> Result<()> {
    let m = Message::new_checked(m)?;
    if m.kind() != (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWSETELEM {
        return Ok(());
    }
    elements_in(&m.body("nftables set elements", 4)?, out)
}

pub(crate) fn elements_in(body: &crate::wire::Body, out: &mut Vec<RawElement>) -> Result<()> {
    for a in body.attributes() {
        let a = a?;
        if a.kind != NFTA_SET_ELEM_LIST_ELEMENTS {
            continue;
        }
        for e in a.nested_attributes() {
            let e = e?;
            if e.kind == NFTA_LIST_ELEM {
                out.push(element(e.value)?);
            }
        }
    }
    Ok(())
}

/// One NFTA_LIST_ELEM's attributes.
fn element(attrs: &[u8]) -> Result<RawElement> {
    let mut el = RawElement::default();
    let value = |a: &crate::wire::Attr| -> Result<Vec<u8>> {
        for d in a.nested_attributes() {
            let d = d?;
            if d.kind == NFTA_DATA_VALUE {
                return Ok(d.value.to_vec());
            }
        }
        bail!("a set element's key without its value")
    };
    for a in crate::wire::Attrs::new(attrs) {
        let a = a?;
        match a.kind {
            NFTA_SET_ELEM_KEY => el.key = value(&a)?,
            NFTA_SET_ELEM_KEY_END => el.key_end = Some(value(&a)?),
            NFTA_SET_ELEM_FLAGS => {
                let f = a.be32()?;
                el.interval_end = f & NFT_SET_ELEM_INTERVAL_END != 0;
                el.catchall = f & NFT_SET_ELEM_CATCHALL != 0;
            }
            NFTA_SET_ELEM_TIMEOUT => bail!("a set element with a timeout"),
            NFTA_SET_ELEM_DATA => {
                for d in a.nested_attributes() {
                    let d = d?;
                    if d.kind == NFTA_DATA_VERDICT {
                        let mut v = RawVerdict {
                            code: 0,
                            chain: None,
                        };
                        for x in d.nested_attributes() {
                            let x = x?;
                            match x.kind {
                                NFTA_VERDICT_CODE => v.code = x.be32()? as i32,
                                NFTA_VERDICT_CHAIN => v.chain = Some(x.text()),
                                _ => {}
                            }
                        }
                        el.verdict = Some(v);
                    } else if d.kind == NFTA_DATA_VALUE {
                        bail!("a map to values, not verdicts");
                    }
                }
            }
            _ => {}
        }
    }
    Ok(el)
}
