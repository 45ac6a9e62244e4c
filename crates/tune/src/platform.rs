//! The checks of what lies under the kernel's network stack: idle states,
//! the IOMMU, connection tracking's hash, ICMP's redirects and rate
//! limit; and, per interface, RPS and the PCIe link.
use crate::host::online_cpus;
use crate::{Class, Finding, Root, Setting, Verdict};

const CSTATES: Setting = Setting {
    check: "CPU idle states",
    class: Class::Stability,
    recommended: "exit latency <= 2 us",
    why: "a core in a deep idle state takes tens of microseconds to wake for the next frame, and drops meanwhile (CSIT: intel_idle.max_cstate=1, or cpuidle/state*/disable)",
};

const IOMMU: Setting = Setting {
    check: "IOMMU",
    class: Class::Speed,
    recommended: "none, or passthrough",
    why: "a translated IOMMU maps every receive buffer for DMA (DPDK's and the NIC vendors' guides: iommu=pt)",
};

const CONNTRACK_HASH: Setting = Setting {
    check: "connection tracking hash",
    class: Class::Speed,
    recommended: "buckets >= max / 4",
    why: "every lookup walks a bucket's chain: the kernel's default is a bucket an entry, and raising nf_conntrack_max alone lengthens the chains (nf_conntrack-sysctl.rst)",
};

const REDIRECTS: Setting = Setting {
    check: "ICMP redirects sent",
    class: Class::Correctness,
    recommended: "the operator's call",
    why: "a frame routed back out of the interface it came in goes to the kernel either way, which redirects its sender unless 0 (the seeds' first tip turns them off for FreeBSD's fast path)",
};

const ICMP_RATE: Setting = Setting {
    check: "ICMP error rate limit",
    class: Class::Correctness,
    recommended: "the operator's call",
    why: "TTL-expired and unreachable errors are the kernel's, limited per host and in all (icmp_ratelimit ms, icmp_msgs_per_sec): traceroute through the router sees them",
};

const ECMP_HASH: Setting = Setting {
    check: "ECMP hash (IPv4)",
    class: Class::Speed,
    recommended: "0 (addresses)",
    why: "linerate's fast path spreads a multipath route's flows by their addresses, as policy 0 does (docs/mirror.md); with ports too (1), flows between two hosts stay on one path in it",
};

const RPS: Setting = Setting {
    check: "RPS",
    class: Class::Speed,
    recommended: "off with a queue a CPU",
    why: "RPS hands what XDP passes to another CPU's backlog: for fewer queues than CPUs; with a queue a CPU, a second hop for nothing (scaling.rst)",
};

const PCIE: Setting = Setting {
    check: "PCIe link",
    class: Class::Speed,
    recommended: "its maximum width and speed",
    why: "a NIC in a narrower or slower slot than it was made for cannot move line rate (lspci's LnkSta against LnkCap)",
};

/// The platform's host-wide checks.
pub fn host(root: &Root) -> Vec<Finding> {
    vec![
        cstates(root),
        iommu(root),
        conntrack_hash(root),
        REDIRECTS.read(
            root,
            "host",
            "proc/sys/net/ipv4/conf/all/send_redirects".into(),
            |_| false,
        ),
        icmp_rate(root),
        ECMP_HASH.read(
            root,
            "host",
            "proc/sys/net/ipv4/fib_multipath_hash_policy".into(),
            |v| v == "0",
        ),
    ]
    .into_iter()
    .map(|mut f| {
        // Said for the record, not judged.
        if f.check == REDIRECTS.check && f.verdict == Verdict::Change {
            f.verdict = Verdict::Report;
        }
        f
    })
    .collect()
}

/// The deepest idle state any online CPU may enter, by exit latency.
fn cstates(root: &Root) -> Finding {
    let read = "sys/devices/system/cpu/cpu*/cpuidle/state*/{name,latency,disable}".to_string();
    let cpus = match online_cpus(root) {
        Ok(c) => c,
        Err(e) => return CSTATES.found("host", read, None, Verdict::Unread(e)),
    };
    let mut deepest: Option<(u64, String)> = None;
    for cpu in cpus {
        let dir = format!("sys/devices/system/cpu/cpu{cpu}/cpuidle");
        for state in root.list(&dir).iter().filter(|s| s.starts_with("state")) {
            let at = |f: &str| root.read(&format!("{dir}/{state}/{f}"));
            if at("disable").as_deref() == Ok("1") {
                continue;
            }
            let Ok(latency) = at("latency").and_then(|l| {
                l.parse::<u64>()
                    .map_err(|_| format!("{dir}/{state}/latency: not a number"))
            }) else {
                continue;
            };
            if deepest.as_ref().is_none_or(|d| latency > d.0) {
                deepest = Some((latency, at("name").unwrap_or_else(|_| state.clone())));
            }
        }
    }
    match deepest {
        None => CSTATES.found(
            "host",
            read,
            None,
            Verdict::Unread("no cpuidle states (the kernel or the hypervisor idles)".into()),
        ),
        Some((latency, name)) => CSTATES.found(
            "host",
            read,
            Some(format!("{name}, {latency} us")),
            match latency <= 2 {
                true => Verdict::Good,
                false => Verdict::Change,
            },
        ),
    }
}

/// An IOMMU the kernel registered, and whether the command line puts it
/// in passthrough.
fn iommu(root: &Root) -> Finding {
    let read = "sys/class/iommu, proc/cmdline".to_string();
    if !root.exists("sys/class/iommu") {
        return IOMMU.found("host", read, None, Verdict::Unread("not present".into()));
    }
    // (A copied tree keeps the empty class in git with a dot-file; sysfs
    // has none.)
    let units: Vec<String> = root
        .list("sys/class/iommu")
        .into_iter()
        .filter(|u| !u.starts_with('.'))
        .collect();
    if units.is_empty() {
        return IOMMU.found("host", read, Some("none".into()), Verdict::Good);
    }
    let cmdline = match root.read("proc/cmdline") {
        Ok(c) => c,
        Err(e) => return IOMMU.found("host", read, None, Verdict::Unread(e)),
    };
    let passthrough = cmdline
        .split_whitespace()
        .any(|w| w == "iommu=pt" || w == "iommu.passthrough=1");
    IOMMU.found(
        "host",
        read,
        Some(format!(
            "{} unit(s), {}",
            units.len(),
            if passthrough {
                "passthrough"
            } else {
                "translated"
            }
        )),
        match passthrough {
            true => Verdict::Good,
            false => Verdict::Change,
        },
    )
}

/// nf_conntrack_buckets against nf_conntrack_max, where conntrack is
/// loaded.
fn conntrack_hash(root: &Root) -> Finding {
    let dir = "proc/sys/net/netfilter";
    let read = format!("{dir}/nf_conntrack_buckets, nf_conntrack_max");
    if !root.exists(&format!("{dir}/nf_conntrack_max")) {
        return CONNTRACK_HASH.found("host", read, Some("not loaded".into()), Verdict::Good);
    }
    let num = |name: &str| root.number(&format!("{dir}/{name}"));
    match (num("nf_conntrack_buckets"), num("nf_conntrack_max")) {
        (Ok(buckets), Ok(max)) => CONNTRACK_HASH.found(
            "host",
            read,
            Some(format!("{buckets} buckets for {max}")),
            match buckets * 4 >= max {
                true => Verdict::Good,
                false => Verdict::Change,
            },
        ),
        (Err(e), _) | (_, Err(e)) => CONNTRACK_HASH.found("host", read, None, Verdict::Unread(e)),
    }
}

fn icmp_rate(root: &Root) -> Finding {
    let (a, b) = (
        "proc/sys/net/ipv4/icmp_ratelimit",
        "proc/sys/net/ipv4/icmp_msgs_per_sec",
    );
    let read = format!("{a}, {b}");
    match (root.read(a), root.read(b)) {
        (Ok(ms), Ok(per_sec)) => ICMP_RATE.found(
            "host",
            read,
            Some(format!("{ms} ms a host, {per_sec}/s in all")),
            Verdict::Report,
        ),
        (Err(e), _) | (_, Err(e)) => ICMP_RATE.found("host", read, None, Verdict::Unread(e)),
    }
}

/// The platform's checks of interface `name`.
pub fn iface(root: &Root, name: &str) -> Vec<Finding> {
    vec![rps(root, name), pcie(root, name)]
}

/// The receive queues whose rps_cpus names a CPU.
fn rps(root: &Root, name: &str) -> Finding {
    let dir = format!("sys/class/net/{name}/queues");
    let read = format!("{dir}/rx-*/rps_cpus");
    let mut on = Vec::new();
    let queues: Vec<String> = root
        .list(&dir)
        .into_iter()
        .filter(|q| q.starts_with("rx-"))
        .collect();
    if queues.is_empty() {
        return RPS.found(name, read, None, Verdict::Unread("no queues listed".into()));
    }
    for q in &queues {
        match root.read(&format!("{dir}/{q}/rps_cpus")) {
            Ok(mask) if mask.chars().any(|c| c != '0' && c != ',') => on.push(q.clone()),
            Ok(_) => {}
            Err(e) => return RPS.found(name, read, None, Verdict::Unread(format!("{q}: {e}"))),
        }
    }
    let current = match on.is_empty() {
        true => "off".to_string(),
        false => format!("on: {}", on.join(", ")),
    };
    RPS.found(
        name,
        read,
        Some(current),
        match on.is_empty() {
            true => Verdict::Good,
            false => Verdict::Report,
        },
    )
}

/// The device's PCIe link against what it can do, where it is a PCIe
/// function (a virtio device's link is its parent's).
fn pcie(root: &Root, name: &str) -> Finding {
    let base = [
        format!("sys/class/net/{name}/device"),
        format!("sys/class/net/{name}/device/.."),
    ]
    .into_iter()
    .find(|b| root.exists(&format!("{b}/current_link_width")));
    let Some(base) = base else {
        return PCIE.found(
            name,
            format!("sys/class/net/{name}/device/current_link_width"),
            Some("not a PCIe link".into()),
            Verdict::Report,
        );
    };
    let read = format!("{base}/{{current,max}}_link_{{width,speed}}");
    let at = |f: &str| root.read(&format!("{base}/{f}"));
    match (
        at("current_link_width"),
        at("max_link_width"),
        at("current_link_speed"),
        at("max_link_speed"),
    ) {
        (Ok(w), Ok(mw), Ok(s), Ok(ms)) => PCIE.found(
            name,
            read,
            Some(format!("x{w} {s} (of x{mw} {ms})")),
            match w == mw && s == ms {
                true => Verdict::Good,
                false => Verdict::Change,
            },
        ),
        (Err(e), ..) | (_, Err(e), ..) | (.., Err(e), _) | (.., Err(e)) => {
            PCIE.found(name, read, None, Verdict::Unread(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &std::path::Path, rel: &str, v: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, v).unwrap();
    }

    fn get<'a>(all: &'a [Finding], check: &str) -> (Option<&'a str>, &'a Verdict) {
        let f = all.iter().find(|f| f.check == check).unwrap();
        (f.current.as_deref(), &f.verdict)
    }

    /// A server as CSIT would not have it: deep idle states, a translated
    /// IOMMU, conntrack's max raised alone, a NIC in a narrow slot, RPS
    /// on; then its deep idle state disabled.
    #[test]
    fn a_server_left_as_installed_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for (rel, v) in [
            ("sys/devices/system/cpu/online", "0-1"),
            ("sys/class/iommu/dmar0/x", ""),
            ("proc/cmdline", "ro quiet intel_iommu=on"),
            ("proc/sys/net/netfilter/nf_conntrack_max", "2000000"),
            ("proc/sys/net/netfilter/nf_conntrack_buckets", "262144"),
            ("proc/sys/net/ipv4/conf/all/send_redirects", "1"),
            ("proc/sys/net/ipv4/icmp_ratelimit", "1000"),
            ("proc/sys/net/ipv4/icmp_msgs_per_sec", "1000"),
            ("proc/sys/net/ipv4/fib_multipath_hash_policy", "1"),
            ("sys/class/net/p0/queues/rx-0/rps_cpus", "0"),
            ("sys/class/net/p0/queues/rx-1/rps_cpus", "00000003"),
            ("sys/class/net/p0/device/current_link_width", "4"),
            ("sys/class/net/p0/device/max_link_width", "8"),
            (
                "sys/class/net/p0/device/current_link_speed",
                "8.0 GT/s PCIe",
            ),
            ("sys/class/net/p0/device/max_link_speed", "8.0 GT/s PCIe"),
        ] {
            write(d, rel, v);
        }
        let states = [
            ("state0", "POLL", "0"),
            ("state1", "C1", "2"),
            ("state2", "C6", "133"),
        ];
        for cpu in ["cpu0", "cpu1"] {
            for (state, name, latency) in states {
                let at = format!("sys/devices/system/cpu/{cpu}/cpuidle/{state}");
                write(d, &format!("{at}/name"), name);
                write(d, &format!("{at}/latency"), latency);
                write(d, &format!("{at}/disable"), "0");
            }
        }
        let r = Root::at(d);
        let all: Vec<Finding> = host(&r).into_iter().chain(iface(&r, "p0")).collect();
        assert_eq!(
            get(&all, "CPU idle states"),
            (Some("C6, 133 us"), &Verdict::Change)
        );
        assert_eq!(
            get(&all, "IOMMU"),
            (Some("1 unit(s), translated"), &Verdict::Change)
        );
        assert_eq!(
            get(&all, "connection tracking hash"),
            (Some("262144 buckets for 2000000"), &Verdict::Change)
        );
        assert_eq!(
            get(&all, "ICMP redirects sent"),
            (Some("1"), &Verdict::Report)
        );
        assert_eq!(get(&all, "RPS"), (Some("on: rx-1"), &Verdict::Report));
        assert_eq!(get(&all, "ECMP hash (IPv4)"), (Some("1"), &Verdict::Change));
        assert_eq!(
            get(&all, "PCIe link"),
            (
                Some("x4 8.0 GT/s PCIe (of x8 8.0 GT/s PCIe)"),
                &Verdict::Change
            )
        );
        for cpu in ["cpu0", "cpu1"] {
            write(
                d,
                &format!("sys/devices/system/cpu/{cpu}/cpuidle/state2/disable"),
                "1",
            );
        }
        assert_eq!(
            get(&host(&r), "CPU idle states"),
            (Some("C1, 2 us"), &Verdict::Good)
        );
    }
}
