//! A named set's elements as nf_tables holds them (NFTA_SET_ELEM_*),
//! turned into [`Atom`]s. `nft -j list ruleset` takes 14 s to print a
//! set of a million addresses here; the kernel dumps the same elements
//! over netlink in a fraction of that (linerate_netlink::nft_elements), so
//! the reader takes the ruleset from `nft -j -t` (sets without their
//! elements) and the elements from netlink.
use crate::ruleset::{Action, Atom, Field};
use anyhow::{bail, Result};

/// One element as nf_tables holds it (linerate_netlink reads them).
pub use linerate_netlink::nft_elements::{RawElement, RawVerdict};

pub const NF_DROP: i32 = 0;
pub const NF_ACCEPT: i32 = 1;
pub const NFT_CONTINUE: i32 = -1;
pub const NFT_JUMP: i32 = -3;
pub const NFT_GOTO: i32 = -4;
pub const NFT_RETURN: i32 = -5;

/// The action a verdict map's element gives; `chain` finds a jump's or
/// goto's target chain by name (None: not one the reader has).
pub fn action(v: &RawVerdict, chain: &mut dyn FnMut(&str) -> Option<usize>) -> Result<Action> {
    Ok(match v.code {
        NF_ACCEPT => Action::Accept,
        NF_DROP => Action::Drop,
        NFT_CONTINUE => Action::Continue,
        NFT_RETURN => Action::Return,
        NFT_JUMP | NFT_GOTO => {
            let Some(name) = v.chain.as_deref() else {
                bail!("a jump without its target");
            };
            let Some(i) = chain(name) else {
                bail!("a jump to chain {name:?}, not read");
            };
            if v.code == NFT_JUMP {
                Action::Jump(i)
            } else {
                Action::Goto(i)
            }
        }
        other => bail!("the verdict code {other}"),
    })
}

/// Bytes a field's value takes in a key, and whether in host order (the
/// interface indexes; the others are in network order).
fn width(f: Field) -> Option<(usize, bool)> {
    Some(match f {
        Field::Iif | Field::Oif | Field::CtState => (4, true),
        Field::Saddr4 | Field::Daddr4 | Field::Transport32 { .. } => (4, false),
        Field::Saddr6 | Field::Daddr6 => (16, false),
        Field::Transport16 { .. } => (2, false),
        Field::Nfproto
        | Field::L4proto
        | Field::IpProtocol
        | Field::Ip6Nexthdr
        | Field::Transport8 { .. }
        | Field::CtDirection => (1, false),
        // Names (and their wildcards) are read from nft's text.
        Field::Iifname | Field::Oifname => return None,
    })
}

/// The key's fields' values.
fn values(key: &[Field], bytes: &[u8]) -> Result<Vec<u128>> {
    let mut out = Vec::with_capacity(key.len());
    let (mut at, mut last_end) = (0, 0);
    for &f in key {
        let Some((w, host)) = width(f) else {
            bail!("a key of interface names");
        };
        let Some(b) = bytes.get(at..at + w) else {
            bail!("a key of {} bytes for fields of {}", bytes.len(), key.len());
        };
        let mut v: u128 = 0;
        if host {
            for (i, x) in b.iter().enumerate() {
                v |= (*x as u128) << (8 * i);
            }
        } else {
            for x in b {
                v = v << 8 | *x as u128;
            }
        }
        out.push(v);
        last_end = at + w;
        at += w.div_ceil(4) * 4;
    }
    // The last field padded or not (a set of one field keeps its width).
    if bytes.len() != at && bytes.len() != last_end {
        bail!("a key of {} bytes for fields taking {at}", bytes.len());
    }
    Ok(out)
}

/// The elements of a set of key `key` (`interval`: flagged so), in the
/// kernel's order, each with its verdict for a map.
pub fn decode(
    key: &[Field],
    interval: bool,
    raw: &[RawElement],
) -> Result<Vec<(Vec<Atom>, Option<RawVerdict>)>> {
    if raw.iter().any(|e| e.catchall) {
        bail!("a catch-all element");
    }
    let mut out = Vec::with_capacity(raw.len());
    let rbtree = interval && raw.iter().all(|e| e.key_end.is_none());
    if !rbtree {
        for e in raw {
            if e.interval_end {
                bail!("an interval's end beside ranges");
            }
            let lo = values(key, &e.key)?;
            let hi = match &e.key_end {
                Some(end) => values(key, end)?,
                None => lo.clone(),
            };
            let atoms = lo
                .iter()
                .zip(&hi)
                .map(|(l, h)| {
                    if l > h {
                        bail!("a range from {l} down to {h}");
                    }
                    Ok(Atom::Range(*l, *h))
                })
                .collect::<Result<Vec<_>>>()?;
            out.push((atoms, e.verdict.clone()));
        }
        return Ok(out);
    }
    // An rbtree: each interval a start and, unless it runs to the field's
    // last value, an end one past it.
    if key.len() != 1 {
        bail!("interval boundaries for a concatenation");
    }
    let points = boundaries(key, raw, |v| Ok(v.clone()))?;
    Ok(ranges_from(&points, crate::read::width_max(key[0]))?
        .into_iter()
        .map(|(lo, hi, verdict)| (vec![Atom::Range(lo, hi)], verdict))
        .collect())
}

/// One boundary of an interval set as the kernel's rbtree keeps it: a
/// value, and whether an interval starts there or ends there (one past
/// its last value). At one value an end sorts first: adjacent intervals
/// are an end and a start at the same value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Boundary {
    pub value: u128,
    pub start: bool,
}

/// An interval set's boundaries, each start with its verdict (maps).
pub type Boundaries<V> = std::collections::BTreeMap<Boundary, Option<V>>;

/// A one-field interval set's elements as the kernel's boundaries, each
/// start's verdict (maps) turned by `verdict`.
pub fn boundaries<V>(
    key: &[Field],
    raw: &[RawElement],
    mut verdict: impl FnMut(&RawVerdict) -> Result<V>,
) -> Result<Boundaries<V>> {
    let mut b = Boundaries::new();
    for e in raw {
        let (value, end) = boundary(key, e)?;
        let v = e.verdict.as_ref().map(&mut verdict).transpose()?;
        b.insert(Boundary { value, start: !end }, v);
    }
    Ok(b)
}

/// A notified element of a one-field interval set as the boundary it is.
pub fn boundary(key: &[Field], e: &RawElement) -> Result<(u128, bool)> {
    if e.catchall || e.key_end.is_some() || key.len() != 1 {
        bail!("not an interval boundary");
    }
    Ok((values(key, &e.key)?[0], e.interval_end))
}

/// The intervals boundaries make, as the rbtree looks a value up: the
/// greatest boundary at or below it decides, a start matches and an end
/// does not. An end with no interval open marks a gap (nft puts one at 0
/// before a first interval that starts later); a start while one is open
/// ends that one.
pub fn ranges_from<V: Clone>(
    points: &Boundaries<V>,
    max: u128,
) -> Result<Vec<(u128, u128, Option<V>)>> {
    let mut out = Vec::new();
    let mut open: Option<(u128, Option<V>)> = None;
    for (b, verdict) in points {
        if let Some((start, was)) = open.take() {
            if b.value == start {
                bail!("two interval boundaries at {}", b.value);
            }
            out.push((start, b.value - 1, was));
        }
        if b.start {
            open = Some((b.value, verdict.clone()));
        }
    }
    if let Some((start, verdict)) = open {
        out.push((start, max, verdict));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn el(key: &[u8], end: bool) -> RawElement {
        RawElement {
            key: key.to_vec(),
            interval_end: end,
            ..Default::default()
        }
    }

    #[test]
    fn keys_are_read_by_their_fields() {
        let port = Field::Transport16 {
            proto: Some(6),
            offset: 2,
        };
        // ipv4_addr . inet_service: 10.0.0.1 . 80, the port padded to 4.
        let raw = [el(&[10, 0, 0, 1, 0, 80, 0, 0], false)];
        let got = decode(&[Field::Saddr4, port], false, &raw).unwrap();
        assert_eq!(got[0].0, vec![Atom::value(0x0a00_0001), Atom::value(80)]);
        // iif in host order.
        let got = decode(&[Field::Iif], false, &[el(&7u32.to_ne_bytes(), false)]).unwrap();
        assert_eq!(got[0].0, vec![Atom::value(7)]);
        // A concatenation of ranges: key and inclusive end.
        let mut r = el(&[10, 0, 0, 0, 0, 80, 0, 0], false);
        r.key_end = Some(vec![10, 0, 0, 255, 0, 90, 0, 0]);
        let got = decode(&[Field::Saddr4, port], true, &[r]).unwrap();
        assert_eq!(
            got[0].0,
            vec![Atom::Range(0x0a00_0000, 0x0a00_00ff), Atom::Range(80, 90)]
        );
        assert!(decode(&[Field::Saddr4], false, &[el(&[1, 2, 3], false)]).is_err());
        assert!(decode(&[Field::Iifname], false, &[el(&[0; 16], false)]).is_err());
    }

    #[test]
    fn interval_boundaries_pair_into_ranges() {
        // 10.0.0.0/24, 10.1.0.5, 240.0.0.0-255.255.255.255, in the
        // kernel's (descending) order.
        let raw = [
            el(&[240, 0, 0, 0], false),
            el(&[10, 1, 0, 6], true),
            el(&[10, 1, 0, 5], false),
            el(&[10, 0, 1, 0], true),
            el(&[10, 0, 0, 0], false),
        ];
        let ranges = |raw: &[RawElement]| -> Vec<Vec<Atom>> {
            decode(&[Field::Daddr4], true, raw)
                .unwrap()
                .into_iter()
                .map(|e| e.0)
                .collect()
        };
        assert_eq!(
            ranges(&raw),
            vec![
                vec![Atom::Range(0x0a00_0000, 0x0a00_00ff)],
                vec![Atom::value(0x0a01_0005)],
                vec![Atom::Range(0xf000_0000, 0xffff_ffff)],
            ]
        );
        // An end before the first interval marks a gap: nothing.
        let gap = [
            el(&[0, 0, 0, 0], true),
            el(&[10, 0, 0, 1], false),
            el(&[10, 0, 0, 2], true),
        ];
        assert_eq!(ranges(&gap), vec![vec![Atom::value(0x0a00_0001)]]);
        // Adjacent intervals: an end and a start at one value.
        let adjacent = [
            el(&[10, 0, 0, 1], false),
            el(&[10, 0, 0, 3], true),
            el(&[10, 0, 0, 3], false),
            el(&[10, 0, 0, 5], true),
        ];
        assert_eq!(
            ranges(&adjacent),
            vec![
                vec![Atom::Range(0x0a00_0001, 0x0a00_0002)],
                vec![Atom::Range(0x0a00_0003, 0x0a00_0004)]
            ]
        );
    }
}
