//! `linerate firewall`: the kernel's nftables ruleset as linerate reads it
//! (linerate_firewall), per IP family: the filter base chains a forwarded
//! packet crosses in the kernel's order, or what keeps the family in the
//! kernel, named by table, chain and rule handle.
use anyhow::{Context, Result};
use linerate_firewall::ruleset::{Action, Filter, Hook, Judged};
use serde_json::{json, Value};

pub fn run(a: crate::cli::FirewallArgs) -> Result<()> {
    linerate_host::privilege::require_root("linerate firewall")?;
    let ruleset = {
        let _in = match &a.netns {
            Some(ns) => Some(
                linerate_host::netns::NetnsGuard::enter(ns)
                    .with_context(|| format!("--netns {ns}"))?,
            ),
            None => None,
        };
        linerate_firewall::read_current()?
    };
    let families = [("IPv4", &ruleset.ipv4), ("IPv6", &ruleset.ipv6)];
    if a.json {
        let mut out = serde_json::Map::new();
        for (name, judged) in families {
            out.insert(name.to_lowercase(), family_json(judged));
        }
        println!("{}", serde_json::to_string_pretty(&Value::Object(out))?);
        return Ok(());
    }
    for (name, judged) in families {
        match judged {
            Ok(f) if f.is_empty() => {
                println!("{name}: no filter chain on the forwarding path")
            }
            Ok(f) => {
                println!(
                    "{name}: within the subset linerate reads: {}, {}, {}",
                    count(f.base.len(), "base chain"),
                    count(f.rules(), "rule"),
                    count(f.sets.len(), "named set")
                );
                for b in &f.base {
                    let c = &f.chains[b.chain];
                    println!(
                        "  {} priority {}: table {} chain {} (policy {}), {}",
                        hook(b.hook),
                        b.priority,
                        c.table,
                        c.name,
                        policy(&b.policy),
                        count(c.rules.len(), "rule")
                    );
                }
            }
            Err(why) => {
                println!("{name}: outside the subset linerate reads; the kernel keeps it:");
                for w in why {
                    println!("  {w}");
                }
            }
        }
    }
    Ok(())
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
