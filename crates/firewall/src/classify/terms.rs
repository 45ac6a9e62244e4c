//! A family's filter flattened into terms: each a conjunction of
//! conditions on key fields and an action, in the order nf_tables would
//! reach them. The first term whose conditions hold, from a cursor, is
//! what the packet meets next; counting terms go on to the term after
//! them, skips move the cursor forward (the end of a chain reached by
//! `return`, of a base chain by `accept`), the rest decide.
//!
//! How the chain walk of crate::eval maps onto it: a regular chain reached
//! by `jump` is laid out in place, its terms carrying the jumping rule's
//! conditions, and its end falls through to the rule after the jump; one
//! reached by `goto` likewise, followed by a skip (on the same conditions)
//! to where the chain that went there would have returned; `return`
//! skips to that place; a base chain's end is its policy. A verdict map
//! is one alternative per element. A test of a concatenation is one
//! alternative per element too. The kernel's jump stack (16 deep) is
//! kept: a jump past it is the kernel's, as it is in nf_tables.
use super::values::{domain, KeyField, Source, Values, IFACES};
use crate::ruleset::{ct_state, Action, Atom, Field, Filter, Hook, Step, Test};
pub use linerate_dataplane::fwc::Act;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::sync::Arc;

/// The conditions of a term, by key field: the values allowed (a field
/// not named allows every value). A rule names a few fields: kept sorted
/// inline, not in a tree of allocations (10,000 rules' terms are laid out
/// again at each ruleset change).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Conditions(SmallVec<[(KeyField, Values); 3]>);

impl Conditions {
    pub fn new() -> Conditions {
        Conditions::default()
    }

    pub fn get(&self, field: &KeyField) -> Option<&Values> {
        self.at(field).ok().map(|i| &self.0[i].1)
    }

    pub fn insert(&mut self, field: KeyField, values: Values) {
        match self.at(&field) {
            Ok(i) => self.0[i].1 = values,
            Err(i) => self.0.insert(i, (field, values)),
        }
    }

    pub fn remove(&mut self, field: &KeyField) -> Option<Values> {
        self.at(field).ok().map(|i| self.0.remove(i).1)
    }

    /// The fields named, in order.
    pub fn keys(&self) -> impl Iterator<Item = &KeyField> {
        self.0.iter().map(|(k, _)| k)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&KeyField, &Values)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn at(&self, field: &KeyField) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.cmp(field))
    }
}

impl<'a> IntoIterator for &'a Conditions {
    type Item = (&'a KeyField, &'a Values);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (KeyField, Values)>,
        fn(&'a (KeyField, Values)) -> (&'a KeyField, &'a Values),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl FromIterator<(KeyField, Values)> for Conditions {
    fn from_iter<I: IntoIterator<Item = (KeyField, Values)>>(items: I) -> Conditions {
        let mut c = Conditions::new();
        for (k, v) in items {
            c.insert(k, v);
        }
        c
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Term {
    /// Shared with the memo's (crate::classify::Memo): a rule laid out
    /// before is not copied.
    pub when: Arc<Conditions>,
    pub act: Act,
}

/// Why a filter is not flattened (the fast path then keeps it in its
/// verdict cache, and the kernel judges what the cache lacks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// More terms than the classifier holds.
    TooManyTerms(usize),
    /// A test the conditions cannot say: a negated concatenation, or
    /// statements after a verdict map of a concatenation.
    Shape(&'static str),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::TooManyTerms(n) => write!(f, "more than {n} terms"),
            Refused::Shape(why) => f.write_str(why),
        }
    }
}

/// The most pieces a test of a concatenation is cut into (its elements,
/// less the earlier ones, or what a negated one leaves).
const MAX_ALTERNATIVES: usize = 256;

/// The jump stack of nf_tables (NFT_JUMP_STACK_SIZE).
const JUMP_STACK: usize = 16;

/// A skip's target before it is known: a label, resolved once the terms
/// are laid out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pending {
    Act(Act),
    SkipTo(usize),
}

/// The terms of `f` (a family's filter, `ipv6` its family), interface
/// names by index (`name`), at most `max` terms.
pub fn terms(
    f: &Filter,
    ipv6: bool,
    name: &dyn Fn(u32) -> String,
    max: usize,
) -> Result<Vec<Term>, Refused> {
    terms_with(f, ipv6, name, max, &Memo::default()).map(|(t, _)| t)
}

/// [`terms`], the rules `memo` laid out before (in an earlier generation
/// of the family) taken from it rather than laid out again; with the memo
/// of this generation's.
pub fn terms_with(
    f: &Filter,
    ipv6: bool,
    name: &dyn Fn(u32) -> String,
    max: usize,
    memo: &Memo,
) -> Result<(Vec<Term>, Memo), Refused> {
    let offsets = crate::cache::chain_offsets(f);
    let mut b = Builder {
        f,
        ipv6,
        name,
        max,
        offsets,
        out: Vec::new(),
        labels: Vec::new(),
        memo,
        next: Memo(FxHashMap::with_capacity_and_hasher(
            memo.0.len(),
            Default::default(),
        )),
    };
    let mut base_ends = Vec::new();
    for (k, base) in f.base.iter().enumerate() {
        let policy = b.label();
        let end = b.label();
        base_ends.push(end);
        let last = k + 1 == f.base.len();
        let accept = if last {
            Pending::Act(Act::Accept)
        } else {
            Pending::SkipTo(end)
        };
        let frame = Frame {
            hook: base.hook,
            depth: 0,
            ret: policy,
            accept,
        };
        b.chain(base.chain, &Conditions::new(), &frame)?;
        b.place(policy);
        let policy_act = match base.policy {
            Action::Drop => Pending::Act(Act::Drop),
            _ => accept,
        };
        b.push(Conditions::new(), policy_act)?;
        b.place(end);
    }
    if f.base.is_empty() {
        b.push(Conditions::new(), Pending::Act(Act::Accept))?;
    }
    let next = std::mem::take(&mut b.next);
    Ok((b.finish(), next))
}

/// Rules as they were laid out, by table handle and rule handle: a rule
/// of a base chain (under no conditions) whose steps read no named set and
/// jump nowhere lays out the same terms in every generation, but for its
/// counter id and where `accept` and `return` go, for as long as it is the
/// same rule (its identity: a rule replaced under its handle is another). 10,000 rules are laid
/// out in about 10 ms; a rule inserted among them need not cost that.
#[derive(Clone, Debug, Default)]
pub struct Memo(FxHashMap<(u64, u64), Arc<Laid>>);

#[derive(Debug)]
struct Laid {
    hook: Hook,
    /// The rule's identity (crate::ruleset::Identity): its steps are the
    /// same while it is.
    rule: u64,
    terms: Vec<(Arc<Conditions>, Template)>,
}

/// A laid out rule's action, apart from where the rule is.
#[derive(Clone, Copy, Debug)]
enum Template {
    /// Counts at the rule's counter.
    Count,
    /// The frame's `accept`.
    Accept,
    /// Skips to where the frame's `return` goes.
    Return,
    /// Decides (drop, or the kernel's).
    Act(Act),
}

impl Template {
    fn of(p: Pending, id: u32, frame: &Frame) -> Option<Template> {
        match p {
            Pending::Act(Act::Count(c)) if c == id => Some(Template::Count),
            p if p == frame.accept => Some(Template::Accept),
            Pending::SkipTo(l) if l == frame.ret => Some(Template::Return),
            Pending::Act(a @ (Act::Drop | Act::Kernel)) => Some(Template::Act(a)),
            _ => None,
        }
    }

    fn pending(self, id: u32, frame: &Frame) -> Pending {
        match self {
            Template::Count => Pending::Act(Act::Count(id)),
            Template::Accept => frame.accept,
            Template::Return => Pending::SkipTo(frame.ret),
            Template::Act(a) => Pending::Act(a),
        }
    }
}

/// Whether a rule's terms depend on nothing but its steps and its place:
/// tests of inline values, counters and verdicts that stay in the chain.
fn memoizable(steps: &[Step]) -> bool {
    steps.iter().all(|s| match s {
        Step::Test(t) => matches!(t.against, crate::ruleset::Against::Inline(_)),
        Step::Counter => true,
        Step::Verdict(a) => matches!(
            a,
            Action::Accept | Action::Drop | Action::Kernel | Action::Continue | Action::Return
        ),
        Step::Vmap { .. } => false,
    })
}

/// Where a chain instance is: its hook, its jump depth, where its
/// `return` goes, and what `accept` does there.
struct Frame {
    hook: Hook,
    depth: usize,
    ret: usize,
    accept: Pending,
}

struct Builder<'a> {
    f: &'a Filter,
    ipv6: bool,
    name: &'a dyn Fn(u32) -> String,
    max: usize,
    offsets: Vec<usize>,
    out: Vec<(Arc<Conditions>, Pending)>,
    /// Labels' term positions, once placed.
    labels: Vec<Option<usize>>,
    /// Rules laid out before, and those laid out now.
    memo: &'a Memo,
    next: Memo,
}

impl Builder<'_> {
    fn label(&mut self) -> usize {
        self.labels.push(None);
        self.labels.len() - 1
    }

    fn place(&mut self, label: usize) {
        self.labels[label] = Some(self.out.len());
    }

    fn push(&mut self, when: Conditions, act: Pending) -> Result<(), Refused> {
        self.push_shared(Arc::new(when), act)
    }

    fn push_shared(&mut self, when: Arc<Conditions>, act: Pending) -> Result<(), Refused> {
        if self.out.len() >= self.max {
            return Err(Refused::TooManyTerms(self.max));
        }
        self.out.push((when, act));
        Ok(())
    }

    fn finish(self) -> Vec<Term> {
        let labels = self.labels;
        self.out
            .into_iter()
            .map(|(when, p)| Term {
                when,
                act: match p {
                    Pending::Act(a) => a,
                    Pending::SkipTo(l) => Act::Skip(labels[l].expect("every label placed") as u32),
                },
            })
            .collect()
    }

    /// Lays out chain `c` under conditions `when` in `frame`.
    fn chain(&mut self, c: usize, when: &Conditions, frame: &Frame) -> Result<(), Refused> {
        let chain = &self.f.chains[c];
        for (r, rule) in chain.rules.iter().enumerate() {
            let id = (self.offsets[c] + r) as u32;
            if !when.is_empty() {
                self.rule(&rule.steps, id, when.clone(), frame)?;
                continue;
            }
            // Only a rule that may be memoized is in the memo.
            let key = (chain.table_handle, rule.handle);
            let before = self.memo.0.get(&key);
            if let Some(laid) = before.filter(|l| l.hook == frame.hook && l.rule == rule.identity.0)
            {
                for (c, t) in &laid.terms {
                    self.push_shared(c.clone(), t.pending(id, frame))?;
                }
                self.next.0.insert(key, laid.clone());
                continue;
            }
            if !memoizable(&rule.steps) {
                self.rule(&rule.steps, id, Conditions::new(), frame)?;
                continue;
            }
            let start = self.out.len();
            self.rule(&rule.steps, id, Conditions::new(), frame)?;
            let terms: Option<Vec<_>> = self.out[start..]
                .iter()
                .map(|(c, p)| Template::of(*p, id, frame).map(|t| (c.clone(), t)))
                .collect();
            if let Some(terms) = terms {
                let laid = Laid {
                    hook: frame.hook,
                    rule: rule.identity.0,
                    terms,
                };
                self.next.0.insert(key, Arc::new(laid));
            }
        }
        Ok(())
    }

    /// Lays out a rule's steps from the start, under `when` (every
    /// alternative of the tests so far).
    fn rule(
        &mut self,
        steps: &[Step],
        id: u32,
        when: Conditions,
        frame: &Frame,
    ) -> Result<(), Refused> {
        let Some((step, rest)) = steps.split_first() else {
            return Ok(());
        };
        match step {
            Step::Test(t) => {
                for alt in self.test(t, frame.hook)? {
                    if let Some(w) = conjoin(&when, &alt) {
                        self.rule(rest, id, w, frame)?;
                    }
                }
                Ok(())
            }
            Step::Counter => {
                self.push(when.clone(), Pending::Act(Act::Count(id)))?;
                self.rule(rest, id, when, frame)
            }
            Step::Verdict(a) => self.verdict(a, &when, frame),
            Step::Vmap { key, mask, map } => {
                let e = self.f.set(map);
                let readers = self.readers(key, *mask, frame.hook);
                let one = readers.len() == 1;
                // Each element an alternative in order: a lookup gives
                // the first element a key is in. On one field an element
                // is what the earlier ones leave of it; on more, earlier
                // elements that decide come first, which is the same,
                // but one that goes on (`continue`) cannot be said.
                let mut earlier = Values::empty();
                let mut continuing = Values::empty();
                for (i, atoms) in e.keys.iter().enumerate() {
                    let goes_on = matches!(e.verdicts[i], Action::Continue);
                    let alt = if one {
                        let held = self.holds(&readers[0], &atoms[0]).minus(&earlier);
                        earlier = earlier.union(&self.holds(&readers[0], &atoms[0]));
                        if goes_on {
                            continuing = continuing.union(&held);
                            continue;
                        }
                        self.condition(&readers[0], held)
                    } else {
                        if goes_on {
                            return Err(Refused::Shape(
                                "a verdict map of a concatenation with `continue`",
                            ));
                        }
                        // Less the earlier elements: an element's verdict
                        // may go on (a jump), so none may overlap.
                        let Some(mine) = self.element(&readers, atoms) else {
                            continue;
                        };
                        let mut pieces = vec![mine];
                        for earlier in &e.keys[..i] {
                            if let Some(c) = self.element(&readers, earlier) {
                                pieces = pieces.iter().flat_map(|b| self.subtract(b, &c)).collect();
                            }
                        }
                        if pieces.len() > MAX_ALTERNATIVES {
                            return Err(Refused::Shape("a concatenation of too many pieces"));
                        }
                        for piece in pieces {
                            if let Some(w) = conjoin(&when, &piece) {
                                self.verdict(&e.verdicts[i], &w, frame)?;
                            }
                        }
                        continue;
                    };
                    if let Some(w) = alt.and_then(|alt| conjoin(&when, &alt)) {
                        self.verdict(&e.verdicts[i], &w, frame)?;
                    }
                }
                if rest.is_empty() {
                    return Ok(());
                }
                if !one {
                    return Err(Refused::Shape(
                        "statements after a verdict map of a concatenation",
                    ));
                }
                // The rest of the rule: in no element, or in one that goes
                // on (a lacking key ends the rule).
                let reader = &readers[0];
                let goes_on = self.present(reader).minus(&earlier).union(&continuing);
                match self
                    .condition(reader, goes_on)
                    .and_then(|c| conjoin(&when, &c))
                {
                    Some(w) => self.rule(rest, id, w, frame),
                    None => Ok(()),
                }
            }
        }
    }

    /// A verdict reached under `when`.
    fn verdict(&mut self, a: &Action, when: &Conditions, frame: &Frame) -> Result<(), Refused> {
        match a {
            Action::Accept => self.push(when.clone(), frame.accept),
            Action::Drop => self.push(when.clone(), Pending::Act(Act::Drop)),
            Action::Kernel => self.push(when.clone(), Pending::Act(Act::Kernel)),
            // The rest of the rule is skipped: nothing to lay out.
            Action::Continue => Ok(()),
            Action::Return => self.push(when.clone(), Pending::SkipTo(frame.ret)),
            Action::Jump(t) => {
                if frame.depth >= JUMP_STACK {
                    return self.push(when.clone(), Pending::Act(Act::Kernel));
                }
                let back = self.label();
                let inner = Frame {
                    hook: frame.hook,
                    depth: frame.depth + 1,
                    ret: back,
                    accept: frame.accept,
                };
                self.chain(*t, when, &inner)?;
                self.place(back);
                Ok(())
            }
            Action::Goto(t) => {
                let inner = Frame {
                    hook: frame.hook,
                    depth: frame.depth,
                    ret: frame.ret,
                    accept: frame.accept,
                };
                self.chain(*t, when, &inner)?;
                // Its end returns where this chain would have.
                self.push(when.clone(), Pending::SkipTo(frame.ret))
            }
        }
    }

    /// A test's alternatives: the conditions under which it holds, one
    /// set per element of a concatenation (one for a single field);
    /// none if it never holds.
    fn test(&self, t: &Test, hook: Hook) -> Result<Vec<Conditions>, Refused> {
        let e = self.f.set(&t.against);
        let readers = self.readers(&t.key, t.mask, hook);
        if let [reader] = readers.as_slice() {
            // One field: the elements' union, or what it leaves.
            let mut member = Values::empty();
            for atoms in &e.keys {
                member = member.union(&self.holds(reader, &atoms[0]));
            }
            let allowed = if t.negate {
                self.present(reader).minus(&member)
            } else {
                member
            };
            return Ok(self.condition(reader, allowed).into_iter().collect());
        }
        let elements: Vec<Conditions> = e
            .keys
            .iter()
            .filter_map(|atoms| self.element(&readers, atoms))
            .collect();
        // The rest of the rule is laid out once per alternative, so they
        // must not overlap: each is its element less the earlier ones.
        // Negated: what every field present allows, less every element.
        let (start, take) = if t.negate {
            let mut present = Conditions::new();
            for reader in &readers {
                let Some(c) = self.condition(reader, self.present(reader)) else {
                    return Ok(vec![]);
                };
                match conjoin(&present, &c) {
                    Some(p) => present = p,
                    None => return Ok(vec![]),
                }
            }
            (vec![present], elements)
        } else {
            (vec![], elements)
        };
        let mut alts = start;
        for (i, e) in take.iter().enumerate() {
            if t.negate {
                alts = alts.iter().flat_map(|b| self.subtract(b, e)).collect();
            } else {
                let mut pieces = vec![e.clone()];
                for earlier in &take[..i] {
                    pieces = pieces
                        .iter()
                        .flat_map(|b| self.subtract(b, earlier))
                        .collect();
                }
                alts.extend(pieces);
            }
            if alts.len() > MAX_ALTERNATIVES {
                return Err(Refused::Shape("a concatenation of too many pieces"));
            }
        }
        Ok(alts)
    }

    /// `b` less `e`: disjoint pieces, cut one field at a time (a field a
    /// set of conditions does not name allows its whole domain).
    fn subtract(&self, b: &Conditions, e: &Conditions) -> Vec<Conditions> {
        let mut rest = b.clone();
        let mut out = Vec::new();
        for (field, allowed) in e {
            let mine = rest
                .get(field)
                .cloned()
                .unwrap_or_else(|| domain(field, self.ipv6));
            let outside = mine.minus(allowed);
            let inside = mine.intersect(allowed);
            if inside.is_empty() {
                return vec![b.clone()];
            }
            if !outside.is_empty() {
                let mut piece = rest.clone();
                piece.insert(*field, outside);
                out.push(piece);
            }
            rest.insert(*field, inside);
        }
        out
    }

    /// The conditions under which `reader` reads a value in `allowed`
    /// (its own conditions too); None if it never does.
    fn condition(&self, reader: &Reader, allowed: Values) -> Option<Conditions> {
        let mut c = reader.statics.clone();
        match reader.field {
            Some(field) => {
                let merged = c
                    .remove(&field)
                    .map_or(allowed.clone(), |s| s.intersect(&allowed));
                if merged.is_empty() {
                    return None;
                }
                c.insert(field, merged);
            }
            // A fixed value: it holds or not.
            None if allowed.is_empty() => return None,
            None => {}
        }
        Some(c)
    }

    /// An element's conditions over several fields; None if it never
    /// holds.
    fn element(&self, readers: &[Reader], atoms: &[Atom]) -> Option<Conditions> {
        let mut c = Conditions::new();
        for (reader, atom) in readers.iter().zip(atoms) {
            let one = self.condition(reader, self.holds(reader, atom))?;
            c = conjoin(&c, &one)?;
        }
        Some(c)
    }

    /// The values of the reader's key field at which it reads a value the
    /// atom holds: for a fixed value, everything or nothing (a single
    /// stand-in value, [`FIXED`]).
    fn holds(&self, reader: &Reader, atom: &Atom) -> Values {
        let matches = |v: &Value| match (atom, v) {
            (Atom::Range(lo, hi), Value::Num(n)) => lo <= n && n <= hi,
            (Atom::Name(s), Value::Name(n)) => s == n,
            (Atom::NamePrefix(s), Value::Name(n)) => n.starts_with(s.as_str()),
            _ => false,
        };
        match &reader.read {
            Read::Fixed(v) => match v {
                Some(v) if matches(v) => Values::value(FIXED),
                _ => Values::empty(),
            },
            Read::Num => {
                let field = reader.field.expect("a number has a key field");
                match atom {
                    Atom::Range(lo, hi) => {
                        let top = field.source.max(self.ipv6);
                        if *lo > top {
                            Values::empty()
                        } else {
                            Values::range(*lo, (*hi).min(top))
                        }
                    }
                    _ => Values::empty(),
                }
            }
            Read::Name => {
                let mut v = Values::empty();
                for i in 0..IFACES as u32 {
                    if matches(&Value::Name((self.name)(i))) {
                        v = v.union(&Values::value(i as u128));
                    }
                }
                v
            }
            Read::Ct(f, mask) => {
                let mut v = Values::empty();
                for b in 0..=0xffu8 {
                    if let Some(n) = ct_value(*f, b) {
                        let n = mask.map_or(n, |m| n & m);
                        if matches(&Value::Num(n)) {
                            v = v.union(&Values::value(b as u128));
                        }
                    }
                }
                v
            }
        }
    }

    /// The values of the reader's key field at which the packet has the
    /// field (a negated test holds only there).
    fn present(&self, reader: &Reader) -> Values {
        match &reader.read {
            Read::Fixed(Some(_)) => Values::value(FIXED),
            Read::Fixed(None) => Values::empty(),
            Read::Num => {
                let field = reader.field.expect("a number has a key field");
                Values::range(0, field.source.max(self.ipv6))
            }
            Read::Name => Values::range(0, IFACES - 1),
            Read::Ct(f, _) => {
                let mut v = Values::empty();
                for b in 0..=0xffu8 {
                    if ct_value(*f, b).is_some() {
                        v = v.union(&Values::value(b as u128));
                    }
                }
                v
            }
        }
    }

    /// How each field of a test's key is read from a key, at `hook`.
    fn readers(&self, key: &[Field], mask: Option<u128>, hook: Hook) -> Vec<Reader> {
        key.iter()
            .map(|f| {
                let mut statics = Conditions::new();
                let plain = |s| Some(KeyField { source: s, mask });
                let (field, read) = match *f {
                    Field::Nfproto => (
                        None,
                        Read::Fixed(Some(Value::Num(masked(
                            if self.ipv6 { 10 } else { 2 },
                            mask,
                        )))),
                    ),
                    // Before routing the output interface is index 0, the
                    // empty name.
                    Field::Oif if hook == Hook::Prerouting => {
                        (None, Read::Fixed(Some(Value::Num(masked(0, mask)))))
                    }
                    Field::Oifname if hook == Hook::Prerouting => {
                        (None, Read::Fixed(Some(Value::Name(String::new()))))
                    }
                    Field::Iif => (plain(Source::Iif), Read::Num),
                    Field::Oif => (plain(Source::Oif), Read::Num),
                    Field::Iifname => (Some(KeyField::plain(Source::Iif)), Read::Name),
                    Field::Oifname => (Some(KeyField::plain(Source::Oif)), Read::Name),
                    Field::L4proto => (plain(Source::L4proto), Read::Num),
                    Field::IpProtocol if !self.ipv6 => (plain(Source::Nexthdr), Read::Num),
                    Field::Ip6Nexthdr if self.ipv6 => (plain(Source::Nexthdr), Read::Num),
                    Field::Saddr4 if !self.ipv6 => (plain(Source::Saddr), Read::Num),
                    Field::Daddr4 if !self.ipv6 => (plain(Source::Daddr), Read::Num),
                    Field::Saddr6 if self.ipv6 => (plain(Source::Saddr), Read::Num),
                    Field::Daddr6 if self.ipv6 => (plain(Source::Daddr), Read::Num),
                    // The other family's: lacking.
                    Field::IpProtocol
                    | Field::Ip6Nexthdr
                    | Field::Saddr4
                    | Field::Daddr4
                    | Field::Saddr6
                    | Field::Daddr6 => (None, Read::Fixed(None)),
                    Field::Transport8 { proto, offset }
                    | Field::Transport16 { proto, offset }
                    | Field::Transport32 { proto, offset } => {
                        if let Some(p) = proto {
                            statics
                                .insert(KeyField::plain(Source::L4proto), Values::value(p as u128));
                        }
                        let len = match f {
                            Field::Transport8 { .. } => 1,
                            Field::Transport16 { .. } => 2,
                            _ => 4,
                        };
                        (plain(Source::Transport { offset, len }), Read::Num)
                    }
                    Field::CtState | Field::CtDirection => {
                        (Some(KeyField::plain(Source::Ct)), Read::Ct(*f, mask))
                    }
                };
                Reader {
                    field,
                    read,
                    statics,
                }
            })
            .collect()
    }
}

/// A value a field has, as the evaluator compares it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Value {
    Num(u128),
    Name(String),
}

/// How a ruleset field is read from a key.
enum Read {
    /// The key field's number (masked) compared with the elements.
    Num,
    /// The name of the interface the key field's index is.
    Name,
    /// The connection byte read as `ct state` or `ct direction` (masked).
    Ct(Field, Option<u128>),
    /// A value the hook or the family fixes (None: the packet lacks it).
    Fixed(Option<Value>),
}

/// A ruleset field as the classifier reads it: from which key field (None
/// for a fixed value), how, and the conditions reading it needs (a
/// transport field's protocol).
struct Reader {
    field: Option<KeyField>,
    read: Read,
    statics: Conditions,
}

/// The one value a fixed field's conditions are over: it holds or not,
/// and no key field stands for it.
const FIXED: u128 = 0;

fn masked(n: u128, mask: Option<u128>) -> u128 {
    mask.map_or(n, |m| n & m)
}

/// A connection field's value for the key's connection byte `b` (None:
/// the packet lacks it), as crate::eval reads it from the packet the key
/// stands for.
fn ct_value(f: Field, b: u8) -> Option<u128> {
    let state = (b & !linerate_dataplane::layout::FW_CT_REPLY) as u32;
    let reply = b & linerate_dataplane::layout::FW_CT_REPLY != 0;
    match f {
        Field::CtState => Some(state as u128),
        Field::CtDirection => match state {
            ct_state::ESTABLISHED | ct_state::RELATED | ct_state::NEW => Some(reply as u128),
            _ => None,
        },
        _ => None,
    }
}

/// The conditions of both, None if some field allows nothing.
fn conjoin(a: &Conditions, b: &Conditions) -> Option<Conditions> {
    let mut c = a.clone();
    for (k, v) in b {
        match c.at(k) {
            Ok(i) => {
                let merged = c.0[i].1.intersect(v);
                if merged.is_empty() {
                    return None;
                }
                c.0[i].1 = merged;
            }
            Err(i) => {
                if v.is_empty() {
                    return None;
                }
                c.0.insert(i, (*k, v.clone()));
            }
        }
    }
    Some(c)
}
