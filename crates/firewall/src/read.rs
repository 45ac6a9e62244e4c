//! `nft -j list ruleset` (libnftables-json(5)) into [`Ruleset`].
//!
//! Read as JSON values, object by object, not through the `nftables`
//! crate's typed schema: that crate fails the whole parse on a verdict
//! map's elements as nft 1.0.6 prints them (`[[22, {"accept": null}]]`;
//! github.com/namib-project/nftables-rs/issues/237, open) and on any construct it does not model,
//! where linerate must name the one rule it cannot compile and judge the
//! other family still. What is not understood here is never guessed: the
//! family (both, for an inet table) is the kernel's, with the table, chain
//! and handle said.
use crate::raw_elements::RawElement;
use crate::ruleset::*;
use crate::symbols::{self, Kind};
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// The ruleset of the calling thread's network namespace, with its
/// interface indexes.
pub fn read_current() -> Result<Ruleset> {
    parse(&nft_json(&["-j", "list", "ruleset"])?, &if_index)
}

/// Where a named set's elements come from: (table, set name) -> the
/// kernel's elements (crates/router's netlink dump).
pub type ElementSource<'a> = &'a dyn Fn(&TableId, &str) -> Result<Vec<RawElement>>;

/// The ruleset as [`read_current`] reads it, but the named sets'
/// elements from `elements` rather than from nft's JSON (`nft -j -t`:
/// printing a million elements takes nft seconds).
pub fn read_current_with(elements: ElementSource) -> Result<Ruleset> {
    parse_with(
        &nft_json(&["-j", "-t", "list", "ruleset"])?,
        &if_index,
        Some(elements),
    )
}

fn nft_json(args: &[&str]) -> Result<String> {
    let out = std::process::Command::new("nft")
        .args(args)
        .output()
        .with_context(|| format!("running nft {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "nft {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).context("nft's JSON is not UTF-8")
}

/// An interface's index in the calling thread's namespace.
pub fn if_index(name: &str) -> Option<u32> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: a NUL-terminated name; the call reads it only.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

/// Reads nft's JSON; `ifindex` resolves interface names (iif and oif
/// match indexes; nft prints names).
pub fn parse(json: &str, ifindex: &dyn Fn(&str) -> Option<u32>) -> Result<Ruleset> {
    parse_with(json, ifindex, None)
}

/// [`parse`], the elements of named sets nft's JSON leaves out (`-t`)
/// taken from `elements`.
pub fn parse_with(
    json: &str,
    ifindex: &dyn Fn(&str) -> Option<u32>,
    elements: Option<ElementSource>,
) -> Result<Ruleset> {
    let v: Value = serde_json::from_str(json).context("nft's JSON")?;
    let objects = v
        .get("nftables")
        .and_then(Value::as_array)
        .context("nft's JSON: no \"nftables\" array")?;
    // With their handles: a table made again gets a new one.
    let mut tables: Vec<(TableId, u64)> = Vec::new();
    let mut raw = Raw::default();
    for o in objects {
        let Some((kind, body)) = o.as_object().and_then(|m| m.iter().next()) else {
            continue;
        };
        let id = || -> Option<TableId> {
            Some(TableId {
                family: body.get("family")?.as_str()?.to_string(),
                name: body
                    .get(if kind == "table" { "name" } else { "table" })?
                    .as_str()?
                    .to_string(),
            })
        };
        match kind.as_str() {
            "table" => tables
                .extend(id().map(|t| (t, body.get("handle").and_then(Value::as_u64).unwrap_or(0)))),
            "chain" => raw
                .chains
                .push((id().context("a chain without its table")?, body)),
            "rule" => raw
                .rules
                .push((id().context("a rule without its table")?, body)),
            "set" | "map" => raw
                .sets
                .push((id().context("a set without its table")?, body)),
            // metainfo, flowtables, counters, quotas, ...: named when used.
            _ => {}
        }
    }
    let mut v4 = Family::default();
    let mut v6 = Family::default();
    for (order, (t, table_handle)) in tables.iter().enumerate() {
        let (four, six) = match t.family.as_str() {
            "ip" => (true, false),
            "ip6" => (false, true),
            "inet" => (true, true),
            "netdev" => {
                if raw
                    .chains
                    .iter()
                    .any(|(id, c)| id == t && c.get("hook").is_some())
                {
                    let why = NotCompiled {
                        table: t.clone(),
                        chain: None,
                        handle: None,
                        why: "a netdev table's chain sees the device's packets before routing"
                            .into(),
                    };
                    v4.refuse(why.clone());
                    v6.refuse(why);
                }
                continue;
            }
            // arp and bridge tables do not see routed IP packets.
            _ => continue,
        };
        let parsed = TableReader::new(t, *table_handle, &raw, ifindex, elements).read();
        for (on, fam) in [(four, &mut v4), (six, &mut v6)] {
            if on {
                fam.add(order, &parsed);
            }
        }
    }
    Ok(Ruleset {
        ipv4: v4.finish(),
        ipv6: v6.finish(),
    })
}

/// One rule of nft's JSON (`{"family", "table", "chain", "handle",
/// "expr"}`, as `nft -j monitor` prints a rule added) read into `filter`,
/// a family's filter already read: the chains it jumps to and the named
/// sets it reads must be there already (else an error: the ruleset is to
/// be read whole), as must its table.
pub fn rule_in(
    filter: &Filter,
    table: &TableId,
    rule: &Value,
    ifindex: &dyn Fn(&str) -> Option<u32>,
) -> Result<Rule> {
    let handle = rule
        .get("handle")
        .and_then(Value::as_u64)
        .context("a rule without its handle")?;
    let exprs = rule
        .get("expr")
        .and_then(Value::as_array)
        .context("a rule without its expressions")?;
    let Some(table_handle) = filter
        .chains
        .iter()
        .find(|c| &c.table == table)
        .map(|c| c.table_handle)
    else {
        bail!("table {table} is not read");
    };
    let raw = Raw::default();
    let mut r = TableReader::new(table, table_handle, &raw, ifindex, None);
    for (i, c) in filter.chains.iter().enumerate() {
        if &c.table == table {
            r.chain_index.insert(c.name.clone(), i);
        }
    }
    for (i, s) in filter.sets.iter().enumerate() {
        if &s.table == table {
            r.set_index.insert(s.name.clone(), i);
        }
    }
    let steps = r.rule(exprs)?;
    if let Some(c) = r.chains.first() {
        bail!("a jump to chain {}, not read before", c.name);
    }
    Ok(Rule::new(handle, steps))
}

#[derive(Default)]
struct Raw<'a> {
    chains: Vec<(TableId, &'a Value)>,
    rules: Vec<(TableId, &'a Value)>,
    sets: Vec<(TableId, &'a Value)>,
}

/// One table read: its base chains on the forwarding path, the chains
/// they reach, the sets those name; or why not.
type TableRead = Result<
    (
        Vec<(BaseChain, u64)>,
        Vec<Chain>,
        Vec<NamedSet>,
        Vec<NatChain>,
    ),
    Vec<NotCompiled>,
>;

#[derive(Default)]
struct Family {
    filter: Filter,
    /// Base chains with (table order, chain handle): the kernel runs equal
    /// priorities in registration order.
    order: Vec<(usize, u64)>,
    refused: Vec<NotCompiled>,
}

impl Family {
    fn refuse(&mut self, n: NotCompiled) {
        self.refused.push(n);
    }

    fn add(&mut self, table_order: usize, t: &TableRead) {
        let (base, chains, sets, nat) = match t {
            Ok(t) => t,
            Err(e) => {
                self.refused.extend(e.iter().cloned());
                return;
            }
        };
        self.filter.nat.extend(nat.iter().cloned());
        let (c0, s0) = (self.filter.chains.len(), self.filter.sets.len());
        for c in chains {
            let mut c = c.clone();
            for r in &mut c.rules {
                for s in &mut r.steps {
                    shift(s, c0, s0);
                }
            }
            self.filter.chains.push(c);
        }
        for set in sets {
            let mut set = set.clone();
            shift_verdicts(&mut set.elements, c0);
            self.filter.sets.push(set);
        }
        for (b, handle) in base {
            let mut b = b.clone();
            b.chain += c0;
            self.filter.base.push(b);
            self.order.push((table_order, *handle));
        }
    }

    /// The base chains in the kernel's order: by hook, then priority; at
    /// equal priority the chain registered last runs first (the kernel
    /// inserts a hook before those of the same priority,
    /// nf_hook_entries_grow). Within a table, registration follows the
    /// chains' handles; across tables nft does not show it (a chain added
    /// to an older table later registers after a newer table's): two
    /// tables' chains at one hook and priority keep the family in the
    /// kernel.
    fn finish(self) -> Judged {
        let mut refused = self.refused;
        let mut f = self.filter;
        let mut keyed: Vec<_> = f.base.drain(..).zip(self.order).collect();
        keyed.sort_by_key(|(b, (table, handle))| {
            (b.hook, b.priority, std::cmp::Reverse((*table, *handle)))
        });
        for w in keyed.windows(2) {
            let ((a, (ta, _)), (b, (tb, _))) = (&w[0], &w[1]);
            if a.hook == b.hook && a.priority == b.priority && ta != tb {
                let (ca, cb) = (&f.chains[a.chain], &f.chains[b.chain]);
                refused.push(NotCompiled {
                    table: cb.table.clone(),
                    chain: Some(cb.name.clone()),
                    handle: None,
                    why: format!(
                        "the same hook and priority ({:?} {}) as table {} chain {}: which runs first depends on which was registered first, which nft does not show",
                        a.hook, a.priority, ca.table, ca.name
                    ),
                });
            }
        }
        f.base = keyed.into_iter().map(|(b, _)| b).collect();
        // With NAT, a filter chain at prerouting or postrouting sees the
        // addresses before or after the mapping by its priority against
        // the nat chains'; the fast path judges by the forward chain's
        // view alone.
        if !f.nat.is_empty() {
            for b in f.base.iter().filter(|b| b.hook != Hook::Forward) {
                let c = &f.chains[b.chain];
                refused.push(NotCompiled {
                    table: c.table.clone(),
                    chain: Some(c.name.clone()),
                    handle: None,
                    why: format!(
                        "a filter chain at {:?} beside nat chains (what it sees depends on its priority against NAT's; only forward chains are judged with NAT)",
                        b.hook
                    ),
                });
            }
        }
        if let Some((base, c)) = f.ct_before_conntrack() {
            let at = &f.chains[c];
            refused.push(NotCompiled {
                table: at.table.clone(),
                chain: Some(at.name.clone()),
                handle: None,
                why: format!(
                    "reads ct from prerouting chain {} at priority {}, before conntrack's ({CONNTRACK_PRIORITY})",
                    f.chains[base.chain].name, base.priority
                ),
            });
        }
        if !refused.is_empty() {
            return Err(refused);
        }
        Ok(f)
    }
}

/// Moves a step's chain and set indexes by a table's place in its family.
fn shift(s: &mut Step, c0: usize, s0: usize) {
    let set = |a: &mut Against| {
        if let Against::Named(i) = a {
            *i += s0;
        }
    };
    let action = |a: &mut Action| {
        if let Action::Jump(i) | Action::Goto(i) = a {
            *i += c0;
        }
    };
    match s {
        Step::Test(t) => set(&mut t.against),
        Step::Verdict(a) => action(a),
        Step::Vmap { map, .. } => {
            if let Against::Inline(e) = map {
                shift_verdicts(Arc::make_mut(e), c0);
            }
            set(map)
        }
        Step::Counter => {}
    }
}

/// Moves the chains a verdict map's elements jump to by a table's place
/// in its family.
fn shift_verdicts(e: &mut Elements, c0: usize) {
    for v in &mut e.verdicts {
        if let Action::Jump(i) | Action::Goto(i) = v {
            *i += c0;
        }
    }
}

struct TableReader<'a> {
    table: &'a TableId,
    table_handle: u64,
    raw: &'a Raw<'a>,
    ifindex: &'a dyn Fn(&str) -> Option<u32>,
    elements: Option<ElementSource<'a>>,
    /// Chains read or being read, by name: their index.
    chain_index: HashMap<String, usize>,
    chains: Vec<Chain>,
    set_index: HashMap<String, usize>,
    sets: Vec<NamedSet>,
    /// Chains still to read (reached by a jump or goto).
    pending: Vec<String>,
    refused: Vec<NotCompiled>,
}

impl<'a> TableReader<'a> {
    fn new(
        table: &'a TableId,
        table_handle: u64,
        raw: &'a Raw<'a>,
        ifindex: &'a dyn Fn(&str) -> Option<u32>,
        elements: Option<ElementSource<'a>>,
    ) -> Self {
        TableReader {
            table,
            table_handle,
            raw,
            ifindex,
            elements,
            chain_index: HashMap::new(),
            chains: Vec::new(),
            set_index: HashMap::new(),
            sets: Vec::new(),
            pending: Vec::new(),
            refused: Vec::new(),
        }
    }

    fn refuse(&mut self, chain: Option<&str>, handle: Option<u64>, why: impl Into<String>) {
        self.refused.push(NotCompiled {
            table: self.table.clone(),
            chain: chain.map(str::to_string),
            handle,
            why: why.into(),
        });
    }

    fn read(mut self) -> TableRead {
        let mut base = Vec::new();
        let mut nat = Vec::new();
        let chains: Vec<&Value> = self
            .raw
            .chains
            .iter()
            .filter(|(t, _)| t == self.table)
            .map(|(_, c)| *c)
            .collect();
        for c in chains {
            let Some(hook) = c.get("hook").and_then(Value::as_str) else {
                continue; // a regular chain: read when reached
            };
            let name = c.get("name").and_then(Value::as_str).unwrap_or("?");
            let hook = match hook {
                "prerouting" => Hook::Prerouting,
                "forward" => Hook::Forward,
                "postrouting" => Hook::Postrouting,
                // Local traffic only: not the forwarding path.
                "input" | "output" => continue,
                other => {
                    self.refuse(
                        Some(name),
                        None,
                        format!("a base chain at the {other} hook"),
                    );
                    continue;
                }
            };
            match c.get("type").and_then(Value::as_str) {
                Some("filter") => {}
                // Its rules meet a connection's first packet only, which
                // the kernel sees (no established entry yet); after it the
                // entry holds the mapping.
                Some("nat") if hook != Hook::Forward => {
                    nat.push(NatChain {
                        table: self.table.clone(),
                        name: name.to_string(),
                    });
                    continue;
                }
                other => {
                    self.refuse(
                        Some(name),
                        None,
                        format!(
                            "a chain of type {} (only filter chains are compiled)",
                            other.unwrap_or("?")
                        ),
                    );
                    continue;
                }
            }
            let policy = match c.get("policy").and_then(Value::as_str).unwrap_or("accept") {
                "accept" => Action::Accept,
                "drop" => Action::Drop,
                other => {
                    self.refuse(Some(name), None, format!("policy {other}"));
                    continue;
                }
            };
            let priority = c.get("prio").and_then(Value::as_i64).unwrap_or(0) as i32;
            let handle = c.get("handle").and_then(Value::as_u64).unwrap_or(0);
            let chain = self.chain(name);
            base.push((
                BaseChain {
                    hook,
                    priority,
                    chain,
                    policy,
                },
                handle,
            ));
        }
        while let Some(name) = self.pending.pop() {
            self.read_rules(&name);
        }
        if self.refused.is_empty() {
            Ok((base, self.chains, self.sets, nat))
        } else {
            Err(self.refused)
        }
    }

    /// A chain's index; read later if new.
    fn chain(&mut self, name: &str) -> usize {
        if let Some(&i) = self.chain_index.get(name) {
            return i;
        }
        let i = self.chains.len();
        self.chains.push(Chain {
            table: self.table.clone(),
            table_handle: self.table_handle,
            name: name.to_string(),
            rules: Vec::new(),
        });
        self.chain_index.insert(name.to_string(), i);
        self.pending.push(name.to_string());
        i
    }

    fn read_rules(&mut self, name: &str) {
        let exists =
            self.raw.chains.iter().any(|(t, c)| {
                t == self.table && c.get("name").and_then(Value::as_str) == Some(name)
            });
        if !exists {
            self.refuse(Some(name), None, "a jump to a chain that is not there");
            return;
        }
        let raw = self.raw;
        let mut rules = Vec::new();
        for (t, r) in &raw.rules {
            if t != self.table || r.get("chain").and_then(Value::as_str) != Some(name) {
                continue;
            }
            let handle = r.get("handle").and_then(Value::as_u64).unwrap_or(0);
            let exprs = r
                .get("expr")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            match self.rule(&exprs) {
                Ok(steps) => rules.push(Rule::new(handle, steps)),
                Err(e) => self.refuse(Some(name), Some(handle), format!("{e:#}")),
            }
        }
        let i = self.chain_index[name];
        self.chains[i].rules = rules;
    }

    fn rule(&mut self, exprs: &[Value]) -> Result<Vec<Step>> {
        let mut steps = Vec::new();
        for e in exprs {
            let (kind, body) = e
                .as_object()
                .and_then(|m| m.iter().next())
                .context("a statement that is not an object")?;
            let step = match kind.as_str() {
                "match" => Step::Test(self.test(body)?),
                "counter" => match body {
                    Value::Null | Value::Object(_) => Step::Counter,
                    _ => bail!("a named counter"),
                },
                "accept" | "drop" | "continue" | "return" | "jump" | "goto" => {
                    Step::Verdict(self.verdict(e)?)
                }
                "reject" => Step::Verdict(Action::Kernel),
                "vmap" => {
                    let (key, mask) =
                        self.key(body.get("key").context("a vmap without its key")?)?;
                    let map = self.against(
                        &key,
                        body.get("data").context("a vmap without its map")?,
                        true,
                    )?;
                    Step::Vmap { key, mask, map }
                }
                other => bail!("the {other} statement is not compiled"),
            };
            steps.push(step);
        }
        Ok(steps)
    }

    fn test(&mut self, m: &Value) -> Result<Test> {
        let op = m
            .get("op")
            .and_then(Value::as_str)
            .context("a match without its operator")?;
        let (key, mut mask) = self.key(m.get("left").context("a match without its left side")?)?;
        let right = m.get("right").context("a match without its right side")?;
        let (negate, against) = match op {
            "==" => (false, self.against(&key, right, false)?),
            "!=" => (true, self.against(&key, right, false)?),
            // A bit mask's implicit match (`tcp flags syn`, `tcp flags {
            // syn, ack }`): any of the bits set.
            "in" if is_bitmask(&key) && mask.is_none() && !is_set(right) => {
                mask = Some(self.number(key[0], right)?);
                (true, Against::Inline(Arc::new(one(Atom::value(0)))))
            }
            // And none of them (`tcp flags ! syn,ack`, printed for
            // `tcp flags & (syn | ack) == 0`).
            "!" if is_bitmask(&key) && mask.is_none() && !is_set(right) => {
                mask = Some(self.number(key[0], right)?);
                (false, Against::Inline(Arc::new(one(Atom::value(0)))))
            }
            "in" => (false, self.against(&key, right, false)?),
            "<" | ">" | "<=" | ">=" => {
                let [field] = key[..] else {
                    bail!("{op} on a concatenation");
                };
                if mask.is_some() || field.is_name() {
                    bail!("{op} on a masked value or a name");
                }
                let v = self.number(field, right)?;
                let max = width_max(field);
                let (lo, hi) = match op {
                    "<" if v == 0 => (1, 0),
                    "<" => (0, v - 1),
                    "<=" => (0, v),
                    ">" if v >= max => (1, 0),
                    ">" => (v + 1, max),
                    _ => (v, max),
                };
                let e = if lo > hi {
                    Elements::default()
                } else {
                    one(Atom::Range(lo, hi))
                };
                (false, Against::Inline(Arc::new(e)))
            }
            other => bail!("the {other} operator"),
        };
        Ok(Test {
            key,
            mask,
            negate,
            against,
        })
    }

    /// A match's or a map's key: fields, and a mask on a single one.
    fn key(&mut self, left: &Value) -> Result<(Vec<Field>, Option<u128>)> {
        if let Some(parts) = left.get("concat").and_then(Value::as_array) {
            let key = parts.iter().map(field).collect::<Result<Vec<_>>>()?;
            return Ok((key, None));
        }
        if let Some([f, m]) = left.get("&").and_then(Value::as_array).map(Vec::as_slice) {
            let f = field(f)?;
            let mask = self.number(f, m)?;
            return Ok((vec![f], Some(mask)));
        }
        Ok((vec![field(left)?], None))
    }

    /// The right side of a match, or a map: a value, prefix, range,
    /// anonymous set, or `@name`.
    fn against(&mut self, key: &[Field], right: &Value, map: bool) -> Result<Against> {
        if let Some(name) = right.as_str().and_then(|s| s.strip_prefix('@')) {
            return Ok(Against::Named(self.named_set(name, key, map)?));
        }
        let items = match right.get("set") {
            Some(Value::Array(items)) => items.clone(),
            Some(one) => vec![one.clone()],
            None if map => bail!("a verdict map that is neither a set nor @named"),
            None => vec![right.clone()],
        };
        Ok(Against::Inline(Arc::new(self.elements(key, &items, map)?)))
    }

    fn named_set(&mut self, name: &str, key: &[Field], map: bool) -> Result<usize> {
        if let Some(&i) = self.set_index.get(name) {
            return Ok(i);
        }
        let raw = self.raw;
        let (_, set) = raw
            .sets
            .iter()
            .find(|(t, s)| t == self.table && s.get("name").and_then(Value::as_str) == Some(name))
            .with_context(|| format!("set @{name} is not in the table"))?;
        let flags: Vec<&str> = match set.get("flags") {
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            Some(Value::String(s)) => vec![s.as_str()],
            _ => vec![],
        };
        if let Some(f) = flags.iter().find(|f| matches!(**f, "timeout" | "dynamic")) {
            bail!("set @{name} is {f}: the kernel's packets change it");
        }
        if set.get("timeout").is_some() {
            bail!("set @{name}'s elements time out");
        }
        if map && set.get("map").and_then(Value::as_str) != Some("verdict") {
            bail!("map @{name} is not a verdict map");
        }
        let items = match set.get("elem") {
            Some(Value::Array(a)) => a.clone(),
            Some(v) => vec![v.clone()],
            None => vec![],
        };
        let interval = flags.contains(&"interval");
        let (elements, boundaries) = match self.elements {
            // Left out of nft's JSON (-t): the kernel's, over netlink.
            Some(source) if set.get("elem").is_none() => {
                let raw = source(self.table, name)
                    .with_context(|| format!("the elements of set @{name}"))?;
                if interval && key.len() == 1 && raw.iter().all(|e| e.key_end.is_none()) {
                    let b = crate::raw_elements::boundaries(key, &raw, |v| {
                        crate::raw_elements::action(v, &mut |name| Some(self.chain(name)))
                    })
                    .with_context(|| format!("set @{name}"))?;
                    let ranges = crate::raw_elements::ranges_from(&b, width_max(key[0]))?;
                    if map && ranges.iter().any(|r| r.2.is_none()) {
                        bail!("set @{name}: a verdict map's interval without its verdict");
                    }
                    (Elements::of_ranges(ranges), Some(b))
                } else {
                    let e = self
                        .raw_elements(key, interval, &raw)
                        .with_context(|| format!("set @{name}"))?;
                    (e, None)
                }
            }
            _ => (
                self.elements(key, &items, map)
                    .with_context(|| format!("set @{name}"))?,
                None,
            ),
        };
        let i = self.sets.len();
        self.sets.push(NamedSet {
            table: self.table.clone(),
            name: name.to_string(),
            elements,
            key: key.to_vec(),
            interval,
            map,
            boundaries: KernelBoundaries(boundaries),
        });
        self.set_index.insert(name.to_string(), i);
        Ok(i)
    }

    fn elements(&mut self, key: &[Field], items: &[Value], map: bool) -> Result<Elements> {
        let mut e = Elements::default();
        for item in items {
            let (k, verdict) = if map {
                match item.as_array().map(Vec::as_slice) {
                    Some([k, v]) => (k, Some(v)),
                    _ => bail!("a verdict map element that is not [key, verdict]"),
                }
            } else {
                (item, None)
            };
            // An element with options ({"elem": {"val": ..., "timeout": ...}}).
            if let Some(el) = k.get("elem") {
                if el.get("timeout").is_some() || el.get("expires").is_some() {
                    bail!("an element with a timeout");
                }
                bail!("an element with options");
            }
            let atoms = match k.get("concat").and_then(Value::as_array) {
                Some(parts) => {
                    if parts.len() != key.len() {
                        bail!(
                            "an element of {} parts for a key of {}",
                            parts.len(),
                            key.len()
                        );
                    }
                    key.iter()
                        .zip(parts)
                        .map(|(f, p)| self.atom(*f, p))
                        .collect::<Result<Vec<_>>>()?
                }
                None if key.len() == 1 => vec![self.atom(key[0], k)?],
                None => bail!("a single value against a concatenation"),
            };
            e.keys.push(atoms);
            if let Some(v) = verdict {
                e.verdicts.push(self.verdict(v)?);
            }
        }
        Ok(e)
    }

    /// Elements the kernel gave (crate::raw_elements).
    fn raw_elements(
        &mut self,
        key: &[Field],
        interval: bool,
        raw: &[RawElement],
    ) -> Result<Elements> {
        let mut e = Elements::default();
        for (atoms, verdict) in crate::raw_elements::decode(key, interval, raw)? {
            e.keys.push(atoms);
            if let Some(v) = verdict {
                let action = crate::raw_elements::action(&v, &mut |name| Some(self.chain(name)))?;
                e.verdicts.push(action);
            }
        }
        if !e.verdicts.is_empty() && e.verdicts.len() != e.keys.len() {
            bail!("a verdict map with elements without verdicts");
        }
        Ok(e)
    }

    fn verdict(&mut self, v: &Value) -> Result<Action> {
        let (kind, body) = v
            .as_object()
            .and_then(|m| m.iter().next())
            .context("a verdict that is not an object")?;
        Ok(match kind.as_str() {
            "accept" => Action::Accept,
            "drop" => Action::Drop,
            "continue" => Action::Continue,
            "return" => Action::Return,
            "jump" | "goto" => {
                let target = body
                    .get("target")
                    .and_then(Value::as_str)
                    .context("a jump without its target")?;
                let i = self.chain(target);
                if kind == "jump" {
                    Action::Jump(i)
                } else {
                    Action::Goto(i)
                }
            }
            other => bail!("the verdict {other}"),
        })
    }

    /// One value of `field`: a number, a symbol, an address, a prefix, a
    /// range, an interface name or pattern.
    fn atom(&mut self, f: Field, v: &Value) -> Result<Atom> {
        if f.is_name() {
            let s = v
                .as_str()
                .context("an interface name that is not a string")?;
            if s.contains('\\') {
                bail!("an escaped interface name {s:?}");
            }
            return Ok(match s.strip_suffix('*') {
                Some(p) => Atom::NamePrefix(p.to_string()),
                None => Atom::Name(s.to_string()),
            });
        }
        if let Some(p) = v.get("prefix") {
            let len = p
                .get("len")
                .and_then(Value::as_u64)
                .context("a prefix without its length")?;
            let addr = self.number(f, p.get("addr").context("a prefix without its address")?)?;
            let bits: u64 = match f {
                Field::Saddr4 | Field::Daddr4 => 32,
                Field::Saddr6 | Field::Daddr6 => 128,
                _ => bail!("a prefix of a field that is not an address"),
            };
            if len > bits {
                bail!("prefix length {len} over {bits}");
            }
            let host = if len == 0 {
                u128::MAX
            } else {
                (1u128 << (bits - len)).wrapping_sub(1)
            } & width_max(f);
            return Ok(Atom::Range(addr & !host, addr | host));
        }
        if let Some(Value::Array(r)) = v.get("range") {
            let [lo, hi] = r.as_slice() else {
                bail!("a range that is not two values");
            };
            return Ok(Atom::Range(self.number(f, lo)?, self.number(f, hi)?));
        }
        Ok(Atom::value(self.number(f, v)?))
    }

    /// A value of a numeric field, from a number or a name.
    fn number(&mut self, f: Field, v: &Value) -> Result<u128> {
        if let Some(list) = v.as_array() {
            // Flags or'ed: ["syn", "ack"].
            let mut acc = 0;
            for x in list {
                acc |= self.number(f, x)?;
            }
            return Ok(acc);
        }
        if let Some(n) = v.as_u64() {
            let n = n as u128;
            if n > width_max(f) {
                bail!("value {n} is wider than the field");
            }
            return Ok(n);
        }
        let s = v
            .as_str()
            .with_context(|| format!("a value nft printed as {v}"))?;
        let n = match f {
            Field::Saddr4 | Field::Daddr4 => {
                s.parse::<Ipv4Addr>().map(|a| u32::from(a) as u128).ok()
            }
            Field::Saddr6 | Field::Daddr6 => s.parse::<Ipv6Addr>().map(u128::from).ok(),
            Field::Iif | Field::Oif => s
                .parse::<u32>()
                .ok()
                .or_else(|| (self.ifindex)(s))
                .map(u128::from),
            _ => symbols::lookup(kind(f), s).or_else(|| s.parse::<u128>().ok()),
        };
        let n = n.with_context(|| format!("the value {s:?}"))?;
        if n > width_max(f) {
            bail!("value {s} is wider than the field");
        }
        Ok(n)
    }
}

fn tcp_flags() -> Field {
    Field::Transport8 {
        proto: Some(6),
        offset: 13,
    }
}

/// A key nft matches as a bit mask when given bare flags (`tcp flags
/// syn,ack`, `ct state established,related`): any of them set.
fn is_bitmask(key: &[Field]) -> bool {
    key == [tcp_flags()] || key == [Field::CtState]
}

fn is_set(v: &Value) -> bool {
    v.get("set").is_some() || v.as_str().is_some_and(|s| s.starts_with('@'))
}

fn one(a: Atom) -> Elements {
    Elements {
        keys: vec![vec![a]],
        ..Default::default()
    }
}

/// How a field's values are named.
fn kind(f: Field) -> Kind {
    match f {
        Field::Nfproto => Kind::Nfproto,
        Field::L4proto | Field::IpProtocol | Field::Ip6Nexthdr => Kind::Protocol,
        Field::Transport8 {
            proto: Some(6),
            offset: 13,
        } => Kind::TcpFlag,
        Field::Transport8 {
            proto: Some(1),
            offset: 0,
        } => Kind::IcmpType,
        Field::Transport8 {
            proto: Some(58),
            offset: 0,
        } => Kind::Icmpv6Type,
        Field::CtState => Kind::CtState,
        Field::CtDirection => Kind::CtDirection,
        _ => Kind::Number,
    }
}

/// The largest value of a field.
pub fn width_max(f: Field) -> u128 {
    match f {
        Field::Iif
        | Field::Oif
        | Field::Saddr4
        | Field::Daddr4
        | Field::Transport32 { .. }
        | Field::CtState => u32::MAX as u128,
        Field::Saddr6 | Field::Daddr6 => u128::MAX,
        Field::Transport16 { .. } => u16::MAX as u128,
        Field::Nfproto
        | Field::L4proto
        | Field::IpProtocol
        | Field::Ip6Nexthdr
        | Field::Transport8 { .. }
        | Field::CtDirection => u8::MAX as u128,
        Field::Iifname | Field::Oifname => 0,
    }
}

/// A match's left side: a field linerate compiles.
fn field(v: &Value) -> Result<Field> {
    if let Some(m) = v.get("meta") {
        let key = m.get("key").and_then(Value::as_str).unwrap_or("?");
        return Ok(match key {
            "iif" => Field::Iif,
            "oif" => Field::Oif,
            "iifname" => Field::Iifname,
            "oifname" => Field::Oifname,
            "nfproto" => Field::Nfproto,
            "l4proto" => Field::L4proto,
            other => bail!("meta {other} is not compiled"),
        });
    }
    if let Some(p) = v.get("payload") {
        let proto = p.get("protocol").and_then(Value::as_str);
        let name = p.get("field").and_then(Value::as_str);
        let (Some(proto), Some(name)) = (proto, name) else {
            return raw_payload(p);
        };
        let t16 = |proto, offset| Field::Transport16 { proto, offset };
        let t8 = |proto, offset| Field::Transport8 { proto, offset };
        return Ok(match (proto, name) {
            ("ip", "saddr") => Field::Saddr4,
            ("ip", "daddr") => Field::Daddr4,
            ("ip", "protocol") => Field::IpProtocol,
            ("ip6", "saddr") => Field::Saddr6,
            ("ip6", "daddr") => Field::Daddr6,
            ("ip6", "nexthdr") => Field::Ip6Nexthdr,
            ("tcp", "sport") => t16(Some(6), 0),
            ("tcp", "dport") => t16(Some(6), 2),
            ("tcp", "flags") => t8(Some(6), 13),
            ("udp", "sport") => t16(Some(17), 0),
            ("udp", "dport") => t16(Some(17), 2),
            ("th", "sport") => t16(None, 0),
            ("th", "dport") => t16(None, 2),
            ("icmp", "type") => t8(Some(1), 0),
            ("icmp", "code") => t8(Some(1), 1),
            ("icmpv6", "type") => t8(Some(58), 0),
            ("icmpv6", "code") => t8(Some(58), 1),
            (p, f) => bail!("{p} {f} is not compiled"),
        });
    }
    if let Some(ct) = v.get("ct") {
        let key = ct.get("key").and_then(Value::as_str).unwrap_or("?");
        if let Some(dir) = ct.get("dir").and_then(Value::as_str) {
            bail!("ct {dir} {key} is not compiled");
        }
        return Ok(match key {
            "state" => Field::CtState,
            "direction" => Field::CtDirection,
            other => bail!("ct {other} is not compiled (only ct state and ct direction)"),
        });
    }
    let what = v
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .unwrap_or_else(|| v.to_string());
    bail!("the {what} expression is not compiled")
}

/// A payload nft prints by offset (`@th,16,16`, as it prints a second
/// `th` match of one rule, or two merged: `@th,0,32`): bytes of the
/// transport header.
fn raw_payload(p: &Value) -> Result<Field> {
    let base = p.get("base").and_then(Value::as_str);
    let offset = p.get("offset").and_then(Value::as_u64);
    let len = p.get("len").and_then(Value::as_u64);
    match (base, offset, len) {
        (Some("th"), Some(o), Some(16)) if o % 8 == 0 && o / 8 < 60 => Ok(Field::Transport16 {
            proto: None,
            offset: (o / 8) as u8,
        }),
        (Some("th"), Some(o), Some(8)) if o % 8 == 0 && o / 8 < 60 => Ok(Field::Transport8 {
            proto: None,
            offset: (o / 8) as u8,
        }),
        (Some("th"), Some(o), Some(32)) if o % 8 == 0 && o / 8 < 60 => Ok(Field::Transport32 {
            proto: None,
            offset: (o / 8) as u8,
        }),
        _ => bail!("the raw payload {p} is not compiled"),
    }
}
