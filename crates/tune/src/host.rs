//! The host-wide checks.
use crate::{Class, Finding, Root, Setting, Verdict};

const IPV4_FORWARDING: Setting = Setting {
    check: "IPv4 forwarding",
    class: Class::Correctness,
    recommended: "1",
    why: "without it the kernel forwards nothing, and linerate forwards only what the kernel would (ip-sysctl.rst)",
};

const IPV6_FORWARDING: Setting = Setting {
    check: "IPv6 forwarding",
    class: Class::Correctness,
    recommended: "1",
    why: "as IPv4's; `all` sets every interface's, and the router's own address autoconfiguration stops (ip-sysctl.rst)",
};

const RP_FILTER_ALL: Setting = Setting {
    check: "reverse-path filter (all)",
    class: Class::Speed,
    recommended: "0 or 2",
    why: "the kernel checks the stricter of `all` and the interface's; strict (1) is kept in the fast path, and what it cannot decide there goes to the kernel (docs/mirror.md)",
};

const NEIGHBOURS: Setting = Setting {
    check: "neighbour table (gc_thresh3)",
    class: Class::Correctness,
    recommended: "twice the neighbours",
    why: "past gc_thresh3 the kernel refuses new neighbours: next hops stay unresolved (ip-sysctl.rst, neigh)",
};

const CONNTRACK: Setting = Setting {
    check: "connection tracking table",
    class: Class::Correctness,
    recommended: "count under 80% of max",
    why: "a full table drops new connections (nf_conntrack-sysctl.rst); linerate's connection cache is sized from nf_conntrack_max",
};

const GOVERNOR: Setting = Setting {
    check: "CPU frequency governor",
    class: Class::Stability,
    recommended: "performance",
    why: "a governor that follows the load moves the rate between runs (FD.io CSIT's host setup)",
};

const SMT: Setting = Setting {
    check: "SMT (hyper-threading)",
    class: Class::Speed,
    recommended: "a lab run decides",
    why: "the references disagree (the seeds and CSIT turn it off, tuned's network-throughput keeps it): `linerate lab run` with and without",
};

const TURBO: Setting = Setting {
    check: "turbo",
    class: Class::Stability,
    recommended: "a lab run decides",
    why: "faster, but a CPU's turbo varies with the others' load and its heat (CSIT turns it off for stable figures)",
};

const IRQBALANCE: Setting = Setting {
    check: "irqbalance",
    class: Class::Stability,
    recommended: "not running",
    why: "it moves the receive queues' interrupts off the CPUs they were pinned to (scaling.rst; docs/control-plane-load.md)",
};

const MITIGATIONS: Setting = Setting {
    check: "CPU vulnerability mitigations",
    class: Class::Speed,
    recommended: "the operator's call",
    why: "said for the record: mitigations cost system calls and the kernel's path, not XDP's",
};

const SQUEEZE: Setting = Setting {
    check: "softnet time squeeze",
    class: Class::Stability,
    recommended: "0",
    why: "NAPI stopped with frames left (budget or time spent): raise net.core.netdev_budget(_usecs) (scaling.rst)",
};

/// The host's checks.
pub fn check(root: &Root) -> Vec<Finding> {
    let is = |want: &'static str| move |v: &str| v == want;
    vec![
        IPV4_FORWARDING.read(root, "host", "proc/sys/net/ipv4/ip_forward".into(), is("1")),
        IPV6_FORWARDING.read(
            root,
            "host",
            "proc/sys/net/ipv6/conf/all/forwarding".into(),
            is("1"),
        ),
        RP_FILTER_ALL.read(
            root,
            "host",
            "proc/sys/net/ipv4/conf/all/rp_filter".into(),
            |v| v == "0" || v == "2",
        ),
        neighbours(root),
        conntrack(root),
        governor(root),
        smt(root),
        turbo(root),
        irqbalance(root),
        mitigations(root),
        squeeze(root),
    ]
}

/// gc_thresh3 against the neighbours the kernel holds now (IPv4's).
fn neighbours(root: &Root) -> Finding {
    let rel = "proc/sys/net/ipv4/neigh/default/gc_thresh3";
    let read = format!("{rel}, proc/net/arp");
    let thresh = match root.read(rel).map(|v| v.parse::<u64>()) {
        Ok(Ok(n)) => n,
        Ok(Err(_)) => {
            return NEIGHBOURS.found("host", read, None, Verdict::Unread("not a number".into()))
        }
        Err(e) => return NEIGHBOURS.found("host", read, None, Verdict::Unread(e)),
    };
    let held = match root.read("proc/net/arp") {
        Ok(t) => t.lines().skip(1).count() as u64,
        Err(e) => {
            return NEIGHBOURS.found("host", read, Some(thresh.to_string()), Verdict::Unread(e))
        }
    };
    let verdict = if held * 2 <= thresh {
        Verdict::Good
    } else {
        Verdict::Change
    };
    NEIGHBOURS.found(
        "host",
        read,
        Some(format!("{thresh} ({held} held)")),
        verdict,
    )
}

/// nf_conntrack_count against nf_conntrack_max, where conntrack is loaded.
fn conntrack(root: &Root) -> Finding {
    let dir = "proc/sys/net/netfilter";
    let read = format!("{dir}/nf_conntrack_max, nf_conntrack_count");
    if !root.exists(&format!("{dir}/nf_conntrack_max")) {
        return CONNTRACK.found("host", read, Some("not loaded".into()), Verdict::Good);
    }
    let num = |name: &str| root.number(&format!("{dir}/{name}"));
    match (num("nf_conntrack_max"), num("nf_conntrack_count")) {
        (Ok(max), Ok(count)) => CONNTRACK.found(
            "host",
            read,
            Some(format!("{count} of {max}")),
            if count * 5 < max * 4 {
                Verdict::Good
            } else {
                Verdict::Change
            },
        ),
        (Err(e), _) | (_, Err(e)) => CONNTRACK.found("host", read, None, Verdict::Unread(e)),
    }
}

/// The online CPUs' numbers (`0-3,6`), read from sysfs.
pub fn online_cpus(root: &Root) -> Result<Vec<u32>, String> {
    let list = root.read("sys/devices/system/cpu/online")?;
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let bad = || format!("sys/devices/system/cpu/online: {list:?}");
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        cpus.extend(a..=b);
    }
    Ok(cpus)
}

/// Every online CPU's governor: one value if they agree.
fn governor(root: &Root) -> Finding {
    let read = "sys/devices/system/cpu/cpu*/cpufreq/scaling_governor".to_string();
    let cpus = match online_cpus(root) {
        Ok(c) => c,
        Err(e) => return GOVERNOR.found("host", read, None, Verdict::Unread(e)),
    };
    let mut seen = std::collections::BTreeSet::new();
    for c in cpus {
        match root.read(&format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor")) {
            Ok(g) => {
                seen.insert(g);
            }
            Err(_) => {
                return GOVERNOR.found(
                    "host",
                    read,
                    None,
                    Verdict::Unread(format!(
                        "CPU {c} has no cpufreq (a virtual machine, or the firmware sets the frequency)"
                    )),
                )
            }
        }
    }
    let all_performance = seen.len() == 1 && seen.contains("performance");
    let current = seen.into_iter().collect::<Vec<_>>().join(",");
    let verdict = match all_performance {
        true => Verdict::Good,
        false => Verdict::Change,
    };
    GOVERNOR.found("host", read, Some(current), verdict)
}

fn smt(root: &Root) -> Finding {
    let rel = "sys/devices/system/cpu/smt/control".to_string();
    let f = SMT.read(root, "host", rel, |_| true);
    match f.verdict {
        Verdict::Good => Finding {
            verdict: Verdict::Measure,
            ..f
        },
        _ => f,
    }
}

/// intel_pstate's no_turbo, or cpufreq's boost (AMD, acpi-cpufreq).
fn turbo(root: &Root) -> Finding {
    let pstate = "sys/devices/system/cpu/intel_pstate/no_turbo";
    let boost = "sys/devices/system/cpu/cpufreq/boost";
    let (rel, on) = if root.exists(pstate) {
        (pstate, "0")
    } else {
        (boost, "1")
    };
    match root.read(rel) {
        Ok(v) => TURBO.found(
            "host",
            rel.to_string(),
            Some(if v == on { "on" } else { "off" }.to_string()),
            Verdict::Measure,
        ),
        Err(_) => TURBO.found(
            "host",
            format!("{pstate}, {boost}"),
            None,
            Verdict::Unread(
                "no turbo control exposed (a virtual machine, or the firmware's)".into(),
            ),
        ),
    }
}

/// Whether a process named irqbalance runs.
fn irqbalance(root: &Root) -> Finding {
    let read = "proc/*/comm".to_string();
    let pids: Vec<String> = root
        .list("proc")
        .into_iter()
        .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    if pids.is_empty() {
        return IRQBALANCE.found(
            "host",
            read,
            None,
            Verdict::Unread("no processes listed".into()),
        );
    }
    let running = pids.iter().any(|p| {
        root.read(&format!("proc/{p}/comm"))
            .is_ok_and(|c| c == "irqbalance")
    });
    IRQBALANCE.found(
        "host",
        read,
        Some(if running { "running" } else { "not running" }.into()),
        match running {
            true => Verdict::Change,
            false => Verdict::Good,
        },
    )
}

/// How many of the kernel's vulnerability entries say a mitigation is on.
fn mitigations(root: &Root) -> Finding {
    let dir = "sys/devices/system/cpu/vulnerabilities";
    let names = root.list(dir);
    if names.is_empty() {
        return MITIGATIONS.found(
            "host",
            dir.into(),
            None,
            Verdict::Unread("not present".into()),
        );
    }
    let on = names
        .iter()
        .filter(|n| {
            root.read(&format!("{dir}/{n}"))
                .is_ok_and(|v| v.starts_with("Mitigation"))
        })
        .count();
    MITIGATIONS.found(
        "host",
        dir.into(),
        Some(format!("{on} of {} on", names.len())),
        Verdict::Report,
    )
}

/// The third column of softnet_stat (hex, one line a CPU), summed.
fn squeeze(root: &Root) -> Finding {
    let rel = "proc/net/softnet_stat";
    let text = match root.read(rel) {
        Ok(t) => t,
        Err(e) => return SQUEEZE.found("host", rel.into(), None, Verdict::Unread(e)),
    };
    let mut sum = 0u64;
    for line in text.lines() {
        match line
            .split_whitespace()
            .nth(2)
            .map(|h| u64::from_str_radix(h, 16))
        {
            Some(Ok(n)) => sum += n,
            _ => {
                return SQUEEZE.found(
                    "host",
                    rel.into(),
                    None,
                    Verdict::Unread(format!("a line without its third column: {line:?}")),
                )
            }
        }
    }
    SQUEEZE.found(
        "host",
        rel.into(),
        Some(sum.to_string()),
        match sum {
            0 => Verdict::Good,
            _ => Verdict::Change,
        },
    )
}
