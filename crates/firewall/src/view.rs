//! `linerate firewall`'s view: the kernel's nftables ruleset as linerate
//! reads it, per IP family (the filter base chains a forwarded packet
//! crosses in the kernel's order and its nat chains, or what keeps the
//! family in the kernel,
//! named by table, chain and rule handle); and where `linerate route`
//! runs, what its fast path judges and counted by rule, beside the
//! kernel's own counters (crate::listing).
use crate::listing::Rule;
use crate::ruleset::{Action, Filter, Hook, Judged, Ruleset};
use linerate_dataplane::record::FirewallRecord;
use serde_json::{json, Value};

/// A line onto a String.
macro_rules! say {
    ($o:expr, $($arg:tt)*) => {{
        use std::fmt::Write;
        let _ = writeln!($o, $($arg)*);
    }};
}

/// The view of `ruleset` with its rules' counters (`rules`), and the
/// running router's firewall record if one runs for `record`; as text or
/// (`json`) JSON.
pub fn render(
    ruleset: &Ruleset,
    rules: &[Rule],
    router: Option<&FirewallRecord>,
    record: &str,
    json: bool,
) -> String {
    let families = [("IPv4", &ruleset.ipv4), ("IPv6", &ruleset.ipv6)];
    if json {
        let mut out = serde_json::Map::new();
        for (i, (name, judged)) in families.iter().enumerate() {
            let mut f = family_json(judged);
            if let Some(r) = &router {
                f["fast_path_judges"] = json!(r.judged[i]);
                f["fast_path_refused"] = json!(r.refused[i]);
            }
            out.insert(name.to_lowercase(), f);
        }
        out.insert("router_running".into(), json!(router.is_some()));
        out.insert("rules".into(), rules_json(rules));
        return serde_json::to_string_pretty(&Value::Object(out)).expect("JSON of plain values")
            + "\n";
    }
    let mut o = String::new();
    for (name, judged) in families {
        match judged {
            Ok(f) if f.is_empty() => {
                say!(o, "{name}: no filter chain on the forwarding path")
            }
            Ok(f) => {
                say!(
                    o,
                    "{name}: within the subset linerate reads: {}, {}, {}",
                    count(f.base.len(), "base chain"),
                    count(f.rules(), "rule"),
                    count(f.sets.len(), "named set")
                );
                for b in &f.base {
                    let c = &f.chains[b.chain];
                    say!(
                        o,
                        "  {} priority {}: table {} chain {} (policy {}), {}",
                        hook(b.hook),
                        b.priority,
                        c.table,
                        c.name,
                        policy(&b.policy),
                        count(c.rules.len(), "rule")
                    );
                }
                for n in &f.nat {
                    say!(
                        o,
                        "  nat: table {} chain {} (a connection's first packets; then its conntrack entry's mapping)",
                        n.table,
                        n.name
                    );
                }
            }
            Err(why) => {
                say!(
                    o,
                    "{name}: outside the subset linerate reads; the kernel keeps it:"
                );
                for w in why {
                    say!(o, "  {w}");
                }
            }
        }
    }
    match router {
        None => say!(
                o,
            "\nNo linerate route runs for {record}: the kernel judges everything, and its counters are all there is."
        ),
        Some(r) => {
            say!(o, "\nlinerate route (ruleset generation {}):", r.generation);
            for (i, family) in ["IPv4", "IPv6"].iter().enumerate() {
                if !r.judged[i].is_empty() {
                    say!(o, "  the fast path judges forwarded {family} by {}", r.judged[i].join(", "));
                } else if let Some(why) = &r.refused[i] {
                    say!(o, "  the kernel judges forwarded {family}: {why}");
                }
            }
            say!(o, "Rules with counters: the kernel's count what the kernel judged (a flow's first packets, what the fast path leaves to it), the fast path's the rest; together, what the kernel alone would have counted.");
            for rule in rules.iter().filter(|r| r.kernel.is_some() || r.fast_path.0 > 0) {
                let (kp, kb) = rule.kernel.unwrap_or((0, 0));
                let (fp, fb) = rule.fast_path;
                say!(
                o,
                    "  table {} chain {} handle {}: {}\n      kernel {kp} packets {kb} bytes + fast path {fp} packets {fb} bytes = {} packets {} bytes",
                    rule.table,
                    rule.chain,
                    rule.handle,
                    rule.text,
                    kp + fp,
                    kb + fb
                );
            }
        }
    }
    o
}

fn rules_json(rules: &[Rule]) -> Value {
    rules
        .iter()
        .map(|r| {
            json!({
                "table": r.table,
                "chain": r.chain,
                "handle": r.handle,
                "text": r.text,
                "kernel": r.kernel.map(|(p, b)| json!({"packets": p, "bytes": b})),
                "fast_path": {"packets": r.fast_path.0, "bytes": r.fast_path.1},
            })
        })
        .collect()
}

fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

fn hook(h: Hook) -> &'static str {
    match h {
        Hook::Prerouting => "prerouting",
        Hook::Forward => "forward",
        Hook::Postrouting => "postrouting",
    }
}

fn policy(a: &Action) -> &'static str {
    match a {
        Action::Drop => "drop",
        _ => "accept",
    }
}

fn family_json(judged: &Judged) -> Value {
    match judged {
        Ok(f) => json!({
            "read": true,
            "base_chains": base_json(f),
            "nat_chains": f.nat.iter().map(|n| json!({
                "table": n.table.to_string(),
                "chain": n.name,
            })).collect::<Vec<_>>(),
            "rules": f.rules(),
            "sets": f.sets.len(),
        }),
        Err(why) => json!({
            "read": false,
            "reasons": why.iter().map(|w| json!({
                "table": w.table.to_string(),
                "chain": w.chain,
                "handle": w.handle,
                "why": w.why,
            })).collect::<Vec<_>>(),
        }),
    }
}

fn base_json(f: &Filter) -> Vec<Value> {
    f.base
        .iter()
        .map(|b| {
            let c = &f.chains[b.chain];
            json!({
                "hook": hook(b.hook),
                "priority": b.priority,
                "table": c.table.to_string(),
                "chain": c.name,
                "policy": policy(&b.policy),
                "rules": c.rules.len(),
            })
        })
        .collect()
}
