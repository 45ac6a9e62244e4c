//! The rules nft prints as the kernel adds them (`nft -j monitor rules`,
//! one JSON object a line), kept by table, chain and handle until the
//! firewall thread takes them. A rule added is read from here rather than
//! from a listing of the whole ruleset: nft lists 10,000 rules in about
//! 0.3 s of CPU, and prints one as it is added in microseconds. The
//! thread learns from its own notifications which rules a transaction
//! added, and waits here for their text; what does not come in time
//! (nft subscribed after the change, or lost notifications) has the
//! ruleset read whole.
use anyhow::{Context, Result};
use linerate_firewall::ruleset::TableId;
use serde_json::Value;
use std::collections::HashMap;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// A rule by where the kernel holds it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RuleKey {
    pub table: TableId,
    pub chain: String,
    pub handle: u64,
}

/// How long a rule printed is kept for the thread to take: a rule of a
/// chain the firewall does not judge is never taken.
const KEEP: Duration = Duration::from_secs(30);

/// How long a start waits for nft to subscribe (it reads the ruleset
/// first: about 0.1 s for 10,000 rules).
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(2);

/// Whether process `pid` has a NETLINK_NETFILTER socket in
/// NFNLGRP_NFTABLES, in the calling thread's network namespace
/// (/proc/net/netlink: a socket's port id is its process's pid, its
/// groups a bit mask).
fn subscribed(pid: u32) -> bool {
    let Ok(text) = std::fs::read_to_string("/proc/thread-self/net/netlink") else {
        return false;
    };
    let group = 1u32 << (linerate_netlink::netfilter::NFNLGRP_NFTABLES - 1);
    text.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3
            && f[1] == "12"
            && f[2] == pid.to_string()
            && u32::from_str_radix(f[3], 16).is_ok_and(|g| g & group != 0)
    })
}

pub struct RuleMonitor {
    child: Child,
    out: ChildStdout,
    /// What nft printed after the last whole line.
    partial: Vec<u8>,
    rules: HashMap<RuleKey, (Instant, Value)>,
    ended: bool,
}

impl RuleMonitor {
    /// Starts `nft -j monitor rules` in the calling thread's network
    /// namespace.
    pub fn start() -> Result<RuleMonitor> {
        let mut command = Command::new("nft");
        command
            .args(["-j", "monitor", "rules"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        // SAFETY: prctl only, between fork and exec. nft ends with the
        // thread that started it, were the router killed.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command.spawn().context("running nft -j monitor rules")?;
        let out = child.stdout.take().context("nft monitor's output")?;
        // Until nft has joined nf_tables' group, rules added are not
        // printed (and wait out MONITOR_WAIT): a start waits for it.
        let until = Instant::now() + SUBSCRIBE_WAIT;
        while !subscribed(child.id()) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: fcntl on the pipe's fd, owned by `out`.
        unsafe {
            let fd = out.as_raw_fd();
            let flags = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        Ok(RuleMonitor {
            child,
            out,
            partial: Vec::new(),
            rules: HashMap::new(),
            ended: false,
        })
    }

    /// Starts nft again (what it caches of the ruleset is no longer the
    /// kernel's): what it printed is forgotten, and it prints rules added
    /// from when it has subscribed again.
    pub fn restart(&mut self) {
        match RuleMonitor::start() {
            Ok(m) => *self = m,
            Err(e) => {
                tracing::warn!("{e:#}");
                self.ended = true;
            }
        }
    }

    /// The fd to poll for what nft prints.
    pub fn fd(&self) -> i32 {
        self.out.as_raw_fd()
    }

    /// Whether nft still runs (else nothing more will come).
    pub fn running(&self) -> bool {
        !self.ended
    }

    /// Takes in what nft printed so far, without waiting.
    pub fn read(&mut self) {
        let mut buf = [0u8; 65536];
        loop {
            match self.out.read(&mut buf) {
                Ok(0) => {
                    self.ended = true;
                    break;
                }
                Ok(n) => self.partial.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.ended = true;
                    break;
                }
            }
        }
        let now = Instant::now();
        let mut start = 0;
        while let Some(end) = self.partial[start..].iter().position(|&b| b == b'\n') {
            let line = &self.partial[start..start + end];
            start += end + 1;
            if let Some((key, rule)) = rule_added(line) {
                self.rules.insert(key, (now, rule));
            }
        }
        self.partial.drain(..start);
        self.rules
            .retain(|_, (at, _)| now.duration_since(*at) < KEEP);
    }

    /// Waits up to `limit` until every rule of `keys` was printed; whether
    /// they all were.
    pub fn wait_for(&mut self, keys: &[RuleKey], limit: Duration) -> bool {
        let until = Instant::now() + limit;
        loop {
            self.read();
            if keys.iter().all(|k| self.rules.contains_key(k)) {
                return true;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.ended {
                return false;
            }
            let mut p = libc::pollfd {
                fd: self.fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd.
            unsafe { libc::poll(&mut p, 1, left.as_millis().max(1) as i32) };
        }
    }

    /// The rule printed for `key`, taken.
    pub fn take(&mut self, key: &RuleKey) -> Option<Value> {
        self.rules.remove(key).map(|(_, v)| v)
    }

    /// Forgets every rule printed so far (the ruleset is read whole: a
    /// table made again reuses handles).
    pub fn forget(&mut self) {
        self.read();
        self.rules.clear();
    }
}

impl Drop for RuleMonitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A line of `nft -j monitor rules` that adds a rule (`add`, `insert`,
/// `replace`): where, and the rule; None for anything else.
fn rule_added(line: &[u8]) -> Option<(RuleKey, Value)> {
    let v: Value = serde_json::from_slice(line).ok()?;
    let (verb, body) = v.as_object()?.iter().next()?;
    if !matches!(verb.as_str(), "add" | "insert" | "replace") {
        return None;
    }
    let rule = body.get("rule")?;
    let key = RuleKey {
        table: TableId {
            family: rule.get("family")?.as_str()?.to_string(),
            name: rule.get("table")?.as_str()?.to_string(),
        },
        chain: rule.get("chain")?.as_str()?.to_string(),
        handle: rule.get("handle")?.as_u64()?,
    };
    Some((key, rule.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_that_add_a_rule_are_kept_by_where() {
        let line = br#"{"insert": {"rule": {"family": "inet", "table": "t", "chain": "forward", "handle": 7, "expr": [{"drop": null}]}}}"#;
        let (key, rule) = rule_added(line).unwrap();
        assert_eq!(
            key,
            RuleKey {
                table: TableId {
                    family: "inet".into(),
                    name: "t".into()
                },
                chain: "forward".into(),
                handle: 7
            }
        );
        assert_eq!(rule["expr"][0], serde_json::json!({"drop": null}));
        let delete = br#"{"delete": {"rule": {"family": "inet", "table": "t", "chain": "forward", "handle": 7, "expr": []}}}"#;
        assert!(rule_added(delete).is_none());
        assert!(rule_added(b"# not json").is_none());
        let element = br#"{"add": {"element": {"family": "inet", "table": "t", "name": "s", "elem": {"set": [1]}}}}"#;
        assert!(rule_added(element).is_none());
    }
}
