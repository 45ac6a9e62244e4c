//! What the fast path's verdict cache holds (docs/firewall-fast-path.md):
//! a forwarded packet's key with only what the ruleset reads, and the
//! entry the control plane judges for it with [`crate::eval::judge`].
//!
//! A key keeps a field only if some rule reads it (addresses, interfaces,
//! protocol, the transport bytes at the offsets rules read); the others
//! are zero, so that packets the ruleset cannot tell apart share one
//! entry. The invariant the cache rests on, tested below: a packet and
//! the packet rebuilt from its key get the same judgement.
use crate::eval::{judge, Judgement, Packet, Verdict};
use crate::ruleset::{Field, Filter, Step};

/// The verdict cache's key: the fast path's layout.
pub use linerate_dataplane::layout::{FlowKey, FW_CT_REPLY as CT_REPLY, TRANSPORT_BYTES};

/// What a family's ruleset reads of a packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reads {
    pub iif: bool,
    pub oif: bool,
    pub saddr: bool,
    pub daddr: bool,
    pub l4proto: bool,
    pub nexthdr: bool,
    /// The transport header's bytes read, one flag each.
    pub transport: [bool; TRANSPORT_BYTES],
    /// The packet's connection: `ct state`, `ct direction`.
    pub ct: bool,
}

impl Reads {
    /// What `f` reads; None if it reads a transport byte past
    /// [`TRANSPORT_BYTES`].
    pub fn of(f: &Filter) -> Option<Reads> {
        Reads::default().with_rules(f.chains.iter().flat_map(|c| &c.rules))
    }

    /// These reads and what `rules` read; None past [`TRANSPORT_BYTES`].
    pub fn with_rules<'a>(
        mut self,
        rules: impl IntoIterator<Item = &'a crate::ruleset::Rule>,
    ) -> Option<Reads> {
        for rule in rules {
            for s in &rule.steps {
                let key = match s {
                    Step::Test(t) => &t.key,
                    Step::Vmap { key, .. } => key,
                    Step::Counter | Step::Verdict(_) => continue,
                };
                for field in key {
                    self.add(*field)?;
                }
            }
        }
        Some(self)
    }

    fn add(&mut self, f: Field) -> Option<()> {
        let mut bytes = |offset: u8, len: usize| -> Option<()> {
            let end = offset as usize + len;
            if end > TRANSPORT_BYTES {
                return None;
            }
            self.transport[offset as usize..end]
                .iter_mut()
                .for_each(|b| *b = true);
            Some(())
        };
        match f {
            Field::Iif | Field::Iifname => self.iif = true,
            Field::Oif | Field::Oifname => self.oif = true,
            Field::Saddr4 | Field::Saddr6 => self.saddr = true,
            Field::Daddr4 | Field::Daddr6 => self.daddr = true,
            Field::L4proto => self.l4proto = true,
            Field::IpProtocol | Field::Ip6Nexthdr => self.nexthdr = true,
            // The family is in every key.
            Field::Nfproto => {}
            Field::CtState | Field::CtDirection => self.ct = true,
            Field::Transport8 { proto, offset } => {
                self.l4proto |= proto.is_some();
                bytes(offset, 1)?
            }
            Field::Transport16 { proto, offset } => {
                self.l4proto |= proto.is_some();
                bytes(offset, 2)?
            }
            Field::Transport32 { proto, offset } => {
                self.l4proto |= proto.is_some();
                bytes(offset, 4)?
            }
        }
        Some(())
    }

    /// One past the last transport byte read (0: none).
    pub fn transport_end(&self) -> usize {
        self.transport.iter().rposition(|b| *b).map_or(0, |i| i + 1)
    }
}

fn addr_bytes(a: u128, ipv6: bool) -> [u8; 16] {
    let mut b = [0u8; 16];
    if ipv6 {
        b = a.to_be_bytes();
    } else {
        b[..4].copy_from_slice(&(a as u32).to_be_bytes());
    }
    b
}

fn addr_of(b: &[u8; 16], ipv6: bool) -> u128 {
    if ipv6 {
        u128::from_be_bytes(*b)
    } else {
        u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as u128
    }
}

/// A key from a packet and back: what the evaluator's side knows of the
/// fast path's key.
pub trait KeyOf {
    /// The key of `p` (not a later fragment: the fast path passes those)
    /// under a ruleset that reads `r`.
    fn of(p: &Packet, r: &Reads) -> Self;
    /// The packet the key stands for; `name` gives an interface's name by
    /// its index.
    fn packet(&self, name: &dyn Fn(u32) -> String) -> Packet;
}

impl KeyOf for FlowKey {
    fn of(p: &Packet, r: &Reads) -> FlowKey {
        let end = r.transport_end();
        let mut transport = [0u8; TRANSPORT_BYTES];
        for (i, b) in p.transport.iter().take(end).enumerate() {
            if r.transport[i] {
                transport[i] = *b;
            }
        }
        FlowKey {
            saddr: if r.saddr {
                addr_bytes(p.saddr, p.ipv6)
            } else {
                [0; 16]
            },
            daddr: if r.daddr {
                addr_bytes(p.daddr, p.ipv6)
            } else {
                [0; 16]
            },
            iif: if r.iif { p.iif } else { 0 },
            oif: if r.oif { p.oif } else { 0 },
            transport,
            transport_len: p.transport.len().min(end) as u8,
            l4proto: if r.l4proto { p.l4proto } else { 0 },
            nexthdr: if r.nexthdr { p.nexthdr } else { 0 },
            ipv6: p.ipv6 as u8,
            ct: if r.ct {
                p.ct_state as u8 | if p.ct_reply { CT_REPLY } else { 0 }
            } else {
                0
            },
            pad: [0; 3],
        }
    }

    fn packet(&self, name: &dyn Fn(u32) -> String) -> Packet {
        let ipv6 = self.ipv6 != 0;
        Packet {
            ipv6,
            iif: self.iif,
            iifname: name(self.iif),
            oif: self.oif,
            oifname: name(self.oif),
            saddr: addr_of(&self.saddr, ipv6),
            daddr: addr_of(&self.daddr, ipv6),
            l4proto: self.l4proto,
            nexthdr: self.nexthdr,
            later_fragment: false,
            transport: self.transport[..self.transport_len as usize].to_vec(),
            ct_state: (self.ct & !CT_REPLY) as u32,
            ct_reply: self.ct & CT_REPLY != 0,
        }
    }
}

/// Counter slots an entry holds; a packet reaching more counters is left
/// to the kernel.
pub const ENTRY_COUNTERS: usize = 4;

/// What the fast path does with a key's packets: the verdict, and the
/// rules whose counters they reach, by id: the rule's chain's offset
/// ([`chain_offsets`]) plus its place in the chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub verdict: Verdict,
    pub counters: Vec<u16>,
}

/// Each chain's first rule id: the rules of the chains before it.
pub fn chain_offsets(f: &Filter) -> Vec<usize> {
    let mut offsets = Vec::with_capacity(f.chains.len());
    let mut n = 0;
    for c in &f.chains {
        offsets.push(n);
        n += c.rules.len();
    }
    offsets
}

/// The entry for a key: the evaluator's judgement of the packet it stands
/// for. Rules past u16 ids or more counters than an entry holds: the
/// kernel's.
pub fn entry(f: &Filter, key: &FlowKey, name: &dyn Fn(u32) -> String) -> Entry {
    let j: Judgement = judge(f, &key.packet(name));
    let offsets = chain_offsets(f);
    let ids: Option<Vec<u16>> = j
        .counted
        .iter()
        .map(|(c, r)| u16::try_from(offsets[*c] + r).ok())
        .collect();
    match ids {
        Some(ids) if ids.len() <= ENTRY_COUNTERS || j.verdict == Verdict::Kernel => Entry {
            verdict: j.verdict,
            counters: if j.verdict == Verdict::Kernel {
                vec![]
            } else {
                ids
            },
        },
        _ => Entry {
            verdict: Verdict::Kernel,
            counters: vec![],
        },
    }
}
