//! nf_tables' change notifications (NFNLGRP_NFTABLES) as the firewall
//! follows them: set elements added or removed (applied in place), rules
//! added or removed (their chain's order read back from the kernel,
//! [`rule_handles`]), the end of a transaction; anything else has the
//! ruleset read again.
use crate::netfilter::{family_name, NFNL_SUBSYS_NFTABLES};
use crate::nft_elements::{
    dump_in, elements_in, RawElement, TableId, NFTA_SET_ELEM_LIST_SET, NFTA_SET_ELEM_LIST_TABLE,
    NFT_MSG_NEWSETELEM,
};
use crate::wire::Message;
use anyhow::{bail, Result};

const NFT_MSG_NEWRULE: u16 = 6;
const NFT_MSG_GETRULE: u16 = 7;
const NFT_MSG_DELRULE: u16 = 8;
const NFT_MSG_NEWSET: u16 = 9;
const NFT_MSG_DELSET: u16 = 11;
const NFT_MSG_DELSETELEM: u16 = 14;
const NFT_MSG_NEWGEN: u16 = 15;

const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_RULE_HANDLE: u16 = 3;
const NFTA_RULE_EXPRESSIONS: u16 = 4;
const NFTA_RULE_POSITION: u16 = 6;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_EXPR_NAME: u16 = 1;
const NFTA_EXPR_DATA: u16 = 2;
const NFTA_LOOKUP_SET: u16 = 1;
const NLM_F_APPEND: u16 = 0x800;
const NFTA_SET_NAME: u16 = 2;
const NFTA_SET_FLAGS: u16 = 3;
const NFTA_GEN_ID: u16 = 1;
const NFT_SET_ANONYMOUS: u32 = 1;
/// The ruleset changed while the kernel dumped it (NLM_F_DUMP_INTR).
const NLM_F_DUMP_INTR: u16 = 0x10;

/// What an nf_tables notification says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NftEvent {
    /// Elements added to (or removed from) a set.
    Elements(ElementChange),
    /// A rule added or removed.
    Rule(RuleChange),
    /// An anonymous set made or removed (the inline `{ ... }` of a rule
    /// added or removed in the same transaction).
    AnonymousSet,
    /// A transaction ended (NFT_MSG_NEWGEN): the changes before it are
    /// the kernel's now, all together, as generation `generation`.
    Committed { generation: u32 },
    /// Anything else (tables, chains, named sets, objects): the ruleset
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

/// A rule added to (or removed from) a chain, by its handle, and where
/// an added rule went as the kernel says it (nf_tables_rule_notify): after
/// rule `position` when it is neither first nor last in its chain; else
/// last if `append` (the request appended, or replaced a rule, which
/// keeps its handle), first if not. Rules added in one transaction are
/// all in their chain when it is notified: a rule's `position` may be one
/// notified after it (then the chain's order is read back,
/// [`rule_handles`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RuleChange {
    pub add: bool,
    pub table: TableId,
    pub chain: String,
    pub handle: u64,
    pub position: Option<u64>,
    pub append: bool,
    /// The sets its lookups read, by name (anonymous ones too), as the
    /// kernel holds the rule: what nft's text of it must name.
    pub lookups: Vec<String>,
}

/// One notification (netlink header included).
pub fn event(m: &[u8]) -> Result<NftEvent> {
    let msg = Message::new_checked(m)?;
    let kind = msg.kind();
    if kind >> 8 != NFNL_SUBSYS_NFTABLES {
        return Ok(NftEvent::Other);
    }
    let kind = kind & 0xff;
    let body = msg.body("an nf_tables notification", 4)?;
    let family = family_name(body.byte(0));
    match (kind, family) {
        (NFT_MSG_NEWGEN, _) => {
            let mut generation = None;
            for a in body.attributes() {
                let a = a?;
                if a.kind == NFTA_GEN_ID {
                    generation = Some(a.be32()?);
                }
            }
            match generation {
                Some(generation) => Ok(NftEvent::Committed { generation }),
                None => bail!("a new generation without its id"),
            }
        }
        (NFT_MSG_NEWSETELEM | NFT_MSG_DELSETELEM, Some(family)) => {
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
                add: kind == NFT_MSG_NEWSETELEM,
                table: table_id(family, table),
                set,
                elements,
            }))
        }
        (NFT_MSG_NEWRULE | NFT_MSG_DELRULE, Some(family)) => {
            let (mut table, mut chain) = (String::new(), String::new());
            let (mut handle, mut position) = (None, None);
            let mut lookups = Vec::new();
            for a in body.attributes() {
                let a = a?;
                match a.kind {
                    NFTA_RULE_TABLE => table = a.text(),
                    NFTA_RULE_CHAIN => chain = a.text(),
                    NFTA_RULE_HANDLE => handle = Some(u64::from_be_bytes(a.bytes::<8>()?)),
                    NFTA_RULE_POSITION => position = Some(u64::from_be_bytes(a.bytes::<8>()?)),
                    NFTA_RULE_EXPRESSIONS => lookups = lookups_in(&a)?,
                    _ => {}
                }
            }
            let Some(handle) = handle else {
                bail!("a rule notification without its handle");
            };
            Ok(NftEvent::Rule(RuleChange {
                add: kind == NFT_MSG_NEWRULE,
                table: table_id(family, table),
                chain,
                handle,
                position,
                append: msg.flags() & NLM_F_APPEND != 0,
                lookups,
            }))
        }
        // A set made says whether it is anonymous; one removed says only
        // its name, which for an anonymous set nft (and iptables-nft)
        // make `__set%d` or `__map%d`.
        (NFT_MSG_NEWSET | NFT_MSG_DELSET, Some(_)) => {
            for a in body.attributes() {
                let a = a?;
                let anonymous = match a.kind {
                    NFTA_SET_FLAGS => kind == NFT_MSG_NEWSET && a.be32()? & NFT_SET_ANONYMOUS != 0,
                    NFTA_SET_NAME => {
                        kind == NFT_MSG_DELSET
                            && ["__set", "__map"].iter().any(|p| a.text().starts_with(p))
                    }
                    _ => false,
                };
                if anonymous {
                    return Ok(NftEvent::AnonymousSet);
                }
            }
            Ok(NftEvent::Other)
        }
        _ => Ok(NftEvent::Other),
    }
}

/// The sets the lookup expressions of NFTA_RULE_EXPRESSIONS read.
fn lookups_in(exprs: &crate::wire::Attr) -> Result<Vec<String>> {
    let mut sets = Vec::new();
    for e in exprs.nested_attributes() {
        let e = e?;
        if e.kind != NFTA_LIST_ELEM {
            continue;
        }
        let (mut name, mut data) = (String::new(), None);
        for a in e.nested_attributes() {
            let a = a?;
            match a.kind {
                NFTA_EXPR_NAME => name = a.text(),
                NFTA_EXPR_DATA => data = Some(a),
                _ => {}
            }
        }
        if let ("lookup", Some(data)) = (name.as_str(), data) {
            for a in data.nested_attributes() {
                let a = a?;
                if a.kind == NFTA_LOOKUP_SET {
                    sets.push(a.text());
                }
            }
        }
    }
    Ok(sets)
}

fn table_id(family: &str, name: String) -> TableId {
    TableId {
        family: family.to_string(),
        name,
    }
}

/// A chain's rules as the kernel holds them: their handles in order, and
/// the generation they are of (its low 16 bits, nfgenmsg's resource id,
/// which each rule's message carries; None for an empty chain).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleHandles {
    pub generation: Option<u16>,
    pub handles: Vec<u64>,
}

/// The handles of chain `chain` of `table`, in order, in the calling
/// thread's network namespace (NFT_MSG_GETRULE, dumped; the kernel sends
/// each rule's expressions too, which are not read here).
pub fn rule_handles(table: &TableId, chain: &str) -> Result<RuleHandles> {
    let msgs = dump_in(
        table,
        NFT_MSG_GETRULE,
        [(NFTA_RULE_TABLE, &table.name), (NFTA_RULE_CHAIN, chain)],
        &format!("the rules of chain {chain} of table {table}"),
    )?;
    let mut generation = None;
    let mut handles = Vec::new();
    for m in &msgs {
        let m = Message::new_checked(m)?;
        if m.flags() & NLM_F_DUMP_INTR != 0 {
            bail!("the rules of chain {chain} of table {table} changed while dumped");
        }
        if m.kind() != (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWRULE {
            continue;
        }
        let body = m.body("an nf_tables rule", 4)?;
        let g = u16::from_be_bytes([body.byte(2), body.byte(3)]);
        if *generation.get_or_insert(g) != g {
            bail!("the rules of chain {chain} of table {table} dumped over two generations");
        }
        let (mut in_chain, mut handle) = (false, None);
        for a in body.attributes() {
            let a = a?;
            match a.kind {
                NFTA_RULE_CHAIN => in_chain = a.text() == chain,
                NFTA_RULE_HANDLE => handle = Some(u64::from_be_bytes(a.bytes::<8>()?)),
                _ => {}
            }
        }
        match (in_chain, handle) {
            (true, Some(h)) => handles.push(h),
            (true, None) => bail!("a rule of chain {chain} without its handle"),
            (false, _) => {}
        }
    }
    Ok(RuleHandles {
        generation,
        handles,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{attribute, request};

    // The element attributes these notifications carry (crate::nft_elements).
    const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
    const NFTA_LIST_ELEM: u16 = 1;
    const NFTA_SET_ELEM_KEY: u16 = 1;
    const NFTA_SET_ELEM_FLAGS: u16 = 3;
    const NFTA_DATA_VALUE: u16 = 1;

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
        let mut gen = vec![0; 4];
        gen.extend(attribute(NFTA_GEN_ID, &77u32.to_be_bytes()));
        let gen = request((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWGEN, 0, 0, &gen);
        assert_eq!(event(&gen).unwrap(), NftEvent::Committed { generation: 77 });
        // A rule, by its handle.
        let rule = |kind: u16, flags: u16, position: Option<u64>| {
            let mut body = vec![1, 0, 0, 0];
            body.extend(attribute(NFTA_RULE_TABLE, b"t\0"));
            body.extend(attribute(NFTA_RULE_CHAIN, b"fwd\0"));
            body.extend(attribute(NFTA_RULE_HANDLE, &9u64.to_be_bytes()));
            if let Some(p) = position {
                body.extend(attribute(NFTA_RULE_POSITION, &p.to_be_bytes()));
            }
            // ip saddr @blocked: a payload load and a lookup.
            let expr = |name: &[u8], data: Vec<u8>| {
                let mut e = attribute(NFTA_EXPR_NAME, name);
                e.extend(nested(NFTA_EXPR_DATA, &data));
                nested(NFTA_LIST_ELEM, &e)
            };
            let mut exprs = expr(b"payload\0", attribute(1, &1u32.to_be_bytes()));
            exprs.extend(expr(b"lookup\0", attribute(NFTA_LOOKUP_SET, b"blocked\0")));
            body.extend(nested(NFTA_RULE_EXPRESSIONS, &exprs));
            request((NFNL_SUBSYS_NFTABLES << 8) | kind, flags, 0, &body)
        };
        let change = |add, position, append| {
            NftEvent::Rule(RuleChange {
                add,
                table: TableId {
                    family: "inet".into(),
                    name: "t".into(),
                },
                chain: "fwd".into(),
                handle: 9,
                position,
                append,
                lookups: vec!["blocked".into()],
            })
        };
        assert_eq!(
            event(&rule(NFT_MSG_NEWRULE, 0xc00, Some(4))).unwrap(),
            change(true, Some(4), true)
        );
        assert_eq!(
            event(&rule(NFT_MSG_NEWRULE, 0x400, None)).unwrap(),
            change(true, None, false)
        );
        assert_eq!(
            event(&rule(NFT_MSG_DELRULE, 0, None)).unwrap(),
            change(false, None, false)
        );
        // A set: anonymous (a rule's inline set) or named (read again).
        let set = |flags: u32| {
            let mut body = vec![1, 0, 0, 0];
            body.extend(attribute(NFTA_SET_FLAGS, &flags.to_be_bytes()));
            request((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWSET, 0, 0, &body)
        };
        assert_eq!(
            event(&set(NFT_SET_ANONYMOUS | 2)).unwrap(),
            NftEvent::AnonymousSet
        );
        assert_eq!(event(&set(2)).unwrap(), NftEvent::Other);
        // One removed, by its name.
        let removed = |name: &[u8]| {
            let mut body = vec![1, 0, 0, 0];
            body.extend(attribute(NFTA_SET_NAME, name));
            request((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_DELSET, 0, 0, &body)
        };
        assert_eq!(
            event(&removed(b"__set3\0")).unwrap(),
            NftEvent::AnonymousSet
        );
        assert_eq!(event(&removed(b"blocked\0")).unwrap(), NftEvent::Other);
        // A chain: read again.
        let chain = request((NFNL_SUBSYS_NFTABLES << 8) | 3, 0, 0, &[1, 0, 0, 0]);
        assert_eq!(event(&chain).unwrap(), NftEvent::Other);
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
