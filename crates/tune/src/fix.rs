//! `linerate tune --fix FILE` and `--revert FILE`: the changes that are
//! safe to make at runtime (forwarding on, the performance governor),
//! written with a record of every value they may change, kernel side
//! effects included, so that a revert puts each back exactly.
//!
//! The kernel changes more than the file written: `ip_forward` sets
//! every IPv4 interface's forwarding, the default's, and `all`'s
//! accept_redirects (net/ipv4/devinet.c, inet_forward_change), and
//! IPv6's `all/forwarding` every interface's and the default's
//! (addrconf_forward_change). So the record holds all of those, and a
//! revert writes the two switches first and every other value after,
//! as it was. (The kernel also turns LRO off on every device as IPv4
//! forwarding goes on, a feature no file holds: not reverted.)
use crate::{Finding, Root, Verdict};
use serde::{Deserialize, Serialize};

/// The values a fix may change, as they were before it.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub values: Vec<(String, String)>,
}

/// The switches whose writes reset others: written first on a revert.
const SWITCHES: [&str; 2] = [
    "proc/sys/net/ipv4/ip_forward",
    "proc/sys/net/ipv6/conf/all/forwarding",
];

/// The writes that fix `f` (none: not one a fix makes).
pub fn writes_of(root: &Root, f: &Finding) -> Vec<(String, String)> {
    if f.verdict != Verdict::Change {
        return Vec::new();
    }
    match f.check {
        "IPv4 forwarding" | "IPv6 forwarding" => vec![(f.read.clone(), "1".into())],
        "CPU frequency governor" => crate::host::online_cpus(root)
            .unwrap_or_default()
            .into_iter()
            .map(|c| {
                (
                    format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"),
                    "performance".into(),
                )
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Every value the writes may change, the kernel's side effects
/// included: the switches, and each interface's forwarding (and
/// `all`'s accept_redirects) in both families.
fn touched(root: &Root, writes: &[(String, String)]) -> Vec<String> {
    let mut paths: Vec<String> = SWITCHES.iter().map(|s| s.to_string()).collect();
    for family in ["ipv4", "ipv6"] {
        for dev in root.list(&format!("proc/sys/net/{family}/conf")) {
            paths.push(format!("proc/sys/net/{family}/conf/{dev}/forwarding"));
        }
    }
    paths.push("proc/sys/net/ipv4/conf/all/accept_redirects".into());
    paths.extend(writes.iter().map(|w| w.0.clone()));
    paths.sort();
    paths.dedup();
    paths.retain(|p| root.exists(p));
    paths
}

/// Writes `value` to `rel` under `root`.
fn write(root: &Root, rel: &str, value: &str) -> Result<(), String> {
    std::fs::write(root.path(rel), format!("{value}\n")).map_err(|e| format!("{rel}: {e}"))
}

/// Records the values `findings`' fixes may change, then makes them.
/// Nothing is written if the record cannot be saved (`save`).
pub fn fix(
    root: &Root,
    findings: &[Finding],
    save: impl FnOnce(&Record) -> Result<(), String>,
) -> Result<Vec<(String, String)>, String> {
    let writes: Vec<(String, String)> = findings.iter().flat_map(|f| writes_of(root, f)).collect();
    let mut record = Record::default();
    for p in touched(root, &writes) {
        record.values.push((p.clone(), root.read(&p)?));
    }
    save(&record)?;
    // The switches first: what they reset, the writes after set.
    let mut ordered = writes.clone();
    ordered.sort_by_key(|w| !SWITCHES.contains(&w.0.as_str()));
    for (p, v) in &ordered {
        write(root, p, v)?;
    }
    Ok(ordered)
}

/// Puts back every value of `record`: the switches first, then each
/// other value that differs; then checks each reads as recorded.
pub fn revert(root: &Root, record: &Record) -> Result<usize, String> {
    let mut written = 0;
    let (switches, others): (Vec<_>, Vec<_>) = record
        .values
        .iter()
        .partition(|(p, _)| SWITCHES.contains(&p.as_str()));
    for (p, v) in switches.into_iter().chain(others) {
        if root.read(p)? != *v {
            write(root, p, v)?;
            written += 1;
        }
    }
    let differ: Vec<&str> = record
        .values
        .iter()
        .filter(|(p, v)| root.read(p).as_ref() != Ok(v))
        .map(|(p, _)| p.as_str())
        .collect();
    match differ.is_empty() {
        true => Ok(written),
        false => Err(format!(
            "not as recorded after the revert: {}",
            differ.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy of the fixtures' tree, writable.
    fn tree() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let from = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/debian12-veth");
        let status = std::process::Command::new("cp")
            .args(["-a", &format!("{from}/."), dir.path().to_str().unwrap()])
            .status()
            .unwrap();
        assert!(status.success());
        let root = Root::at(dir.path());
        (dir, root)
    }

    /// On a copied tree (files: no kernel side effects), a fix writes
    /// only what the findings say to change, switches first, and the
    /// revert puts every recorded value back.
    #[test]
    fn a_fix_writes_what_changes_and_a_revert_puts_it_back() {
        let (_dir, root) = tree();
        let ifaces = ["tv0".to_string(), "tv1".to_string()];
        let before = crate::check(&root, &ifaces, &|_| crate::Driver::unasked("a copied tree"));
        let mut saved = None;
        let written = fix(&root, &before, |r| {
            saved = Some(r.values.clone());
            Ok(())
        })
        .unwrap();
        assert_eq!(
            written,
            [
                (
                    "proc/sys/net/ipv6/conf/all/forwarding".to_string(),
                    "1".to_string()
                ),
                ("proc/sys/net/ipv6/conf/tv0/forwarding".into(), "1".into()),
                ("proc/sys/net/ipv6/conf/tv1/forwarding".into(), "1".into()),
            ]
        );
        let saved = Record {
            values: saved.unwrap(),
        };
        assert!(saved
            .values
            .contains(&("proc/sys/net/ipv4/ip_forward".into(), "1".into())));
        let after = crate::check(&root, &ifaces, &|_| crate::Driver::unasked("a copied tree"));
        let forwarding: Vec<&Verdict> = after
            .iter()
            .filter(|f| f.check.ends_with("forwarding"))
            .map(|f| &f.verdict)
            .collect();
        assert!(forwarding.iter().all(|v| **v == Verdict::Good), "{after:?}");
        assert_eq!(revert(&root, &saved).unwrap(), 3);
        assert_eq!(
            crate::check(&root, &ifaces, &|_| crate::Driver::unasked("a copied tree")),
            before
        );
        // Reverted twice: nothing left to write.
        assert_eq!(revert(&root, &saved).unwrap(), 0);
    }

    /// A record that cannot be saved: nothing written.
    #[test]
    fn nothing_is_written_without_its_record() {
        let (_dir, root) = tree();
        let before = crate::check(&root, &[], &|_| crate::Driver::unasked("a copied tree"));
        let e = fix(&root, &before, |_| Err("disk full".into())).unwrap_err();
        assert_eq!(e, "disk full");
        assert_eq!(
            crate::check(&root, &[], &|_| crate::Driver::unasked("a copied tree")),
            before
        );
    }
}
