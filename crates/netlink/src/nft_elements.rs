//! A named nftables set's elements, dumped from the kernel over netlink
//! (NFT_MSG_GETSETELEM): what the firewall reads instead of nft's JSON for
//! sets (linerate_firewall::raw_elements), which nft takes seconds to
//! print when they hold a million elements.
use crate::netfilter::{family_name, nfproto, NFNL_SUBSYS_NFTABLES};
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

const NFT_MSG_NEWSETELEM: u16 = 12;
const NFT_MSG_GETSETELEM: u16 = 13;
const NFT_MSG_DELSETELEM: u16 = 14;
const NFT_MSG_NEWGEN: u16 = 15;

const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
const NFTA_SET_ELEM_LIST_SET: u16 = 2;
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
    let Some(family) = nfproto(&table.family) else {
        bail!("no nftables family {:?}", table.family);
    };
    let mut body = vec![family, 0, 0, 0];
    body.extend(attribute(NFTA_SET_ELEM_LIST_TABLE, &nul(&table.name)));
    body.extend(attribute(NFTA_SET_ELEM_LIST_SET, &nul(set)));
    let kind = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETSETELEM;
    let msgs = match raw_dump_on(NETLINK_NETFILTER, kind, &body, "nftables set elements")? {
        Ok(m) => m,
        Err(errno) => bail!(
            "the elements of set {set} of table {table}: {}",
            std::io::Error::from_raw_os_error(errno)
        ),
    };
    let mut out = Vec::new();
    for m in &msgs {
        elements_of(m, &mut out)?;
    }
    Ok(out)
}

/// What an nf_tables notification says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NftEvent {
    /// Elements added to (or removed from) a set.
    Elements(ElementChange),
    /// A transaction ended (NFT_MSG_NEWGEN): the changes before it are
    /// the kernel's now, all together.
    Committed,
    /// Anything else (tables, chains, rules, sets, objects): the ruleset
    /// must be read again.
    Other,
}

/// A change of a named set's elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElementChange {
    pub add: bool,
    pub table: TableId,
    pub set: String,
    pub elements: Vec<RawElement>,
}

/// One notification (netlink header included).
pub fn event(m: &[u8]) -> Result<NftEvent> {
    let msg = Message::new_checked(m)?;
    let kind = msg.kind();
    if kind >> 8 != NFNL_SUBSYS_NFTABLES {
        return Ok(NftEvent::Other);
    }
    let add = match kind & 0xff {
        NFT_MSG_NEWGEN => return Ok(NftEvent::Committed),
        NFT_MSG_NEWSETELEM => true,
        NFT_MSG_DELSETELEM => false,
        _ => return Ok(NftEvent::Other),
    };
    let body = msg.body("nftables set elements", 4)?;
    let Some(family) = family_name(body.byte(0)) else {
        return Ok(NftEvent::Other);
    };
    let (mut table, mut set) = (String::new(), String::new());
    for a in body.attributes() {
        let a = a?;
        match a.kind {
            NFTA_SET_ELEM_LIST_TABLE => table = a.text(),
            NFTA_SET_ELEM_LIST_SET => set = a.text(),
            _ => {}
        }
    }
    let mut elements = Vec::new();
    elements_in(&body, &mut elements)?;
    Ok(NftEvent::Elements(ElementChange {
        add,
        table: TableId {
            family: family.to_string(),
            name: table,
        },
        set,
        elements,
    }))
}

fn nul(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

/// The elements of one NFT_MSG_NEWSETELEM (netlink header included).
fn elements_of(m: &[u8], out: &mut Vec<RawElement>) -> Result<()> {
    let m = Message::new_checked(m)?;
    if m.kind() != (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWSETELEM {
        return Ok(());
    }
    elements_in(&m.body("nftables set elements", 4)?, out)
}

fn elements_in(body: &crate::wire::Body, out: &mut Vec<RawElement>) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::request;

    fn nested(kind: u16, inner: &[u8]) -> Vec<u8> {
        attribute(kind | 0x8000, inner)
    }

    /// NFT_MSG_NEWSETELEM (or DEL) of inet table `t`, set `s`, one element
    /// of key `key` with `flags`.
    fn setelem(del: bool, key: &[u8], flags: u32) -> Vec<u8> {
        let mut el = nested(NFTA_SET_ELEM_KEY, &attribute(NFTA_DATA_VALUE, key));
        el.extend(attribute(NFTA_SET_ELEM_FLAGS, &flags.to_be_bytes()));
        let list = nested(NFTA_SET_ELEM_LIST_ELEMENTS, &nested(NFTA_LIST_ELEM, &el));
        let mut body = vec![1, 0, 0, 0];
        body.extend(attribute(NFTA_SET_ELEM_LIST_TABLE, b"t\0"));
        body.extend(attribute(NFTA_SET_ELEM_LIST_SET, b"s\0"));
        body.extend(list);
        let kind = if del {
            NFT_MSG_DELSETELEM
        } else {
            NFT_MSG_NEWSETELEM
        };
        request((NFNL_SUBSYS_NFTABLES << 8) | kind, 0, 0, &body)
    }

    #[test]
    fn notifications_say_what_changed() {
        let got = event(&setelem(false, &[0, 80], 0)).unwrap();
        assert_eq!(
            got,
            NftEvent::Elements(ElementChange {
                add: true,
                table: TableId {
                    family: "inet".into(),
                    name: "t".into()
                },
                set: "s".into(),
                elements: vec![RawElement {
                    key: vec![0, 80],
                    ..Default::default()
                }],
            })
        );
        let NftEvent::Elements(del) = event(&setelem(true, &[10, 0, 0, 0], 1)).unwrap() else {
            panic!("not elements");
        };
        assert!(!del.add && del.elements[0].interval_end);
        let gen = request((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWGEN, 0, 0, &[0; 4]);
        assert_eq!(event(&gen).unwrap(), NftEvent::Committed);
        // NFT_MSG_NEWRULE: the ruleset is read again.
        let rule = request((NFNL_SUBSYS_NFTABLES << 8) | 6, 0, 0, &[1, 0, 0, 0]);
        assert_eq!(event(&rule).unwrap(), NftEvent::Other);
        // Cut short or malformed: an error, which the firewall thread
        // takes for "read it all again".
        let whole = setelem(false, &[0, 80], 0);
        let mut cut = whole[..whole.len() - 6].to_vec();
        let len = cut.len() as u32;
        cut[0..4].copy_from_slice(&len.to_ne_bytes());
        assert!(event(&cut).is_err());
        assert!(event(&[1, 2, 3]).is_err());
    }
}
