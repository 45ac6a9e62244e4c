//! Following nf_tables' notifications: each gathered into the
//! transaction it belongs to, transactions committed since the last
//! generation gathered into a batch, and what a batch needs to be applied
//! in place (linerate_firewall::compile::Compiled::apply): the new order of each
//! chain it changed, and the rules it added as nft printed them
//! (crate::monitor). A batch that changed anything else (tables, chains,
//! named sets, objects) has the ruleset read whole.
use crate::monitor::{RuleKey, RuleMonitor};
use anyhow::Result;
use linerate_firewall::compile::{ChainRules, Compiled};
use linerate_netlink::nft_events::{ElementChange, NftEvent, RuleChange};
use std::collections::BTreeSet;
use std::time::Duration;

/// nf_tables' notifications of one transaction, or of several committed
/// since the last generation published.
#[derive(Debug, Default)]
pub struct Batch {
    pub elements: Vec<ElementChange>,
    /// Per transaction that changed rules, its rule changes in order.
    pub rules: Vec<Vec<RuleChange>>,
    /// Anything else changed (the ruleset is to be read again).
    pub other: bool,
    /// The kernel's generation after the last transaction committed
    /// (None: none yet).
    pub generation: Option<u32>,
    /// The time spent on these notifications so far.
    pub busy: Duration,
}

impl Batch {
    /// Adds transaction `t`, committed as the kernel's generation
    /// `generation`.
    fn join(&mut self, t: Batch, generation: u32) {
        self.elements.extend(t.elements);
        self.rules
            .extend(t.rules.into_iter().filter(|r| !r.is_empty()));
        self.other |= t.other;
        self.generation = Some(generation);
    }

    /// Rules added and removed.
    pub fn rule_changes(&self) -> usize {
        self.rules.iter().map(Vec::len).sum()
    }

    /// Set elements added and removed.
    pub fn element_changes(&self) -> usize {
        self.elements.iter().map(|c| c.elements.len()).sum()
    }
}

/// The notifications as they come: the transaction being notified, and
/// the batch of those committed.
#[derive(Debug, Default)]
pub struct Notifications {
    txn: Batch,
    pub committed: Batch,
}

impl Notifications {
    /// Takes in one notification (an error: one that does not decode,
    /// which has the ruleset read again).
    pub fn take(&mut self, event: Result<NftEvent>) {
        match event {
            Ok(NftEvent::Elements(c)) => self.txn.elements.push(c),
            Ok(NftEvent::Rule(r)) => match self.txn.rules.first_mut() {
                Some(rules) => rules.push(r),
                None => self.txn.rules.push(vec![r]),
            },
            Ok(NftEvent::AnonymousSet) => {}
            Ok(NftEvent::Committed { generation }) => {
                let t = std::mem::take(&mut self.txn);
                self.committed.join(t, generation)
            }
            // Read again once committed; the generation in force judges
            // until the next is whole.
            Ok(NftEvent::Other) | Err(_) => self.txn.other = true,
        }
    }

    /// The batch committed so far, if any transaction was, taken.
    pub fn take_committed(&mut self) -> Option<(u32, Batch)> {
        let generation = self.committed.generation?;
        Some((generation, std::mem::take(&mut self.committed)))
    }

    /// Forgets everything (notifications were lost: the ruleset is read
    /// whole).
    pub fn clear(&mut self) {
        *self = Notifications::default();
    }
}

/// How long to wait for nft to print the rules a transaction added (it
/// prints within milliseconds of the notification): past it, the ruleset
/// is read whole.
const MONITOR_WAIT: Duration = Duration::from_millis(250);

/// What batch `b` (the kernel at `generation`) needs to be applied in
/// place to `compiled`: the chains it changed (none if it changed only
/// elements). Err: the ruleset is to be read again, and why (None: it
/// changed more than rules and elements). `refused`: why the fast path
/// judges nothing of a family, if it does not (a rule changed may be the
/// one refused).
pub fn in_place(
    compiled: &Compiled,
    b: &Batch,
    generation: u32,
    monitor: Option<&mut RuleMonitor>,
    refused: Option<&str>,
) -> Result<Vec<ChainRules>, Option<String>> {
    if b.other {
        return Err(None);
    }
    if b.rules.is_empty() {
        return Ok(Vec::new());
    }
    if let Some(why) = refused {
        return Err(Some(format!(
            "a rule changed where the fast path judges nothing ({why})"
        )));
    }
    let Some(monitor) = monitor.filter(|m| m.running()) else {
        return Err(Some("nft monitor is not running".into()));
    };
    let chains = chain_rules(compiled, &b.rules, generation, monitor);
    // nft 1.0.6's monitor forgets the sets a rule deleted read (it takes
    // them for the rule's anonymous ones), and prints later rules reading
    // them without: started again, it reads them anew.
    let forgets = b.rules.iter().flatten();
    if forgets
        .filter(|r| !r.add)
        .any(|r| !named_sets(&r.lookups).is_empty())
    {
        monitor.restart();
    }
    chains.map_err(Some)
}

/// The chains `transactions` changed that `compiled` judges, as the
/// kernel holds them at `generation`: their handles in order (from where
/// the notifications said each rule went, else dumped), and the rules
/// added, as nft printed them.
pub fn chain_rules(
    compiled: &Compiled,
    transactions: &[Vec<RuleChange>],
    generation: u32,
    monitor: &mut RuleMonitor,
) -> Result<Vec<ChainRules>, String> {
    let touched: BTreeSet<(&linerate_firewall::ruleset::TableId, &str)> = transactions
        .iter()
        .flatten()
        .map(|r| (&r.table, r.chain.as_str()))
        .collect();
    let mut chains = Vec::with_capacity(touched.len());
    let mut wanted = Vec::new();
    for (table, chain) in touched {
        // A chain no base chain reaches changes nothing judged (a jump to
        // it is a rule added elsewhere, which reads the ruleset again).
        let Some(current) = compiled.handles(table, chain) else {
            continue;
        };
        let mine: Vec<Vec<&RuleChange>> = transactions
            .iter()
            .map(|t| {
                t.iter()
                    .filter(|r| &r.table == table && r.chain == chain)
                    .collect()
            })
            .collect();
        let handles = match crate::rule_order::after(&current, &mine) {
            Some(h) => h,
            None => {
                let now = linerate_netlink::nft_events::rule_handles(table, chain)
                    .map_err(|e| format!("{e:#}"))?;
                // A dump of a later generation would mix transactions
                // not yet notified with these (an empty chain's dump does
                // not say).
                if now.generation.is_some_and(|g| g != generation as u16) {
                    return Err(format!(
                        "the kernel's ruleset moved past generation {generation} before its rules were read"
                    ));
                }
                now.handles
            }
        };
        let added: BTreeSet<u64> = mine
            .iter()
            .flatten()
            .filter(|r| r.add)
            .map(|r| r.handle)
            .collect();
        wanted.extend(
            handles
                .iter()
                .filter(|h| added.contains(h))
                .map(|&handle| RuleKey {
                    table: table.clone(),
                    chain: chain.to_string(),
                    handle,
                }),
        );
        chains.push(ChainRules {
            table: table.clone(),
            chain: chain.to_string(),
            handles,
            added: Default::default(),
        });
    }
    if !monitor.wait_for(&wanted, MONITOR_WAIT) {
        return Err(format!(
            "nft monitor did not print the rules added within {} ms",
            MONITOR_WAIT.as_millis()
        ));
    }
    for k in wanted {
        let rule = monitor.take(&k).expect("waited for");
        // nft prints a lookup of a set it lost from its cache (see
        // in_place) as nothing at all: a rule that reads a set must name
        // it.
        let kernel = transactions
            .iter()
            .flatten()
            .rev()
            .find(|r| r.add && r.handle == k.handle && r.table == k.table && r.chain == k.chain)
            .expect("a rule added");
        if named_sets(&kernel.lookups) != named_sets_in(&rule) {
            monitor.restart();
            return Err(format!(
                "nft monitor printed rule {} of chain {} of table {} without the sets it reads ({:?}); nft monitor started again",
                k.handle, k.chain, k.table, kernel.lookups
            ));
        }
        let c = chains
            .iter_mut()
            .find(|c| c.table == k.table && c.chain == k.chain)
            .expect("a chain touched");
        c.added.insert(k.handle, rule);
    }
    Ok(chains)
}

/// The named sets of a rule's lookups, sorted (an anonymous set, nft's
/// `__set%d`, is printed inline).
fn named_sets(lookups: &[String]) -> Vec<String> {
    let mut v: Vec<String> = lookups
        .iter()
        .filter(|s| !s.starts_with("__"))
        .cloned()
        .collect();
    v.sort();
    v
}

/// The sets nft's JSON of a rule names (`"@blocked"`), sorted.
fn named_sets_in(rule: &serde_json::Value) -> Vec<String> {
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) => out.extend(s.strip_prefix('@').map(str::to_string)),
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            serde_json::Value::Object(o) => o.values().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Some(e) = rule.get("expr") {
        walk(e, &mut out);
    }
    out.sort();
    out
}
