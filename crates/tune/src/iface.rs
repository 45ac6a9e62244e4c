//! The checks of one interface.
use crate::host::online_cpus;
use crate::{Class, Finding, Root, Setting, Verdict};

const PRESENT: Setting = Setting {
    check: "interface",
    class: Class::Correctness,
    recommended: "present",
    why: "the interfaces named with -i are those linerate forwards between",
};

const IPV4_FORWARDING: Setting = Setting {
    check: "IPv4 forwarding",
    class: Class::Correctness,
    recommended: "1",
    why: "the kernel forwards nothing that arrives on an interface without it, and so neither does linerate (writing ip_forward sets every interface's)",
};

const IPV6_FORWARDING: Setting = Setting {
    check: "IPv6 forwarding",
    class: Class::Correctness,
    recommended: "1",
    why: "as IPv4's, per interface (ip-sysctl.rst)",
};

const RP_FILTER: Setting = Setting {
    check: "reverse-path filter",
    class: Class::Speed,
    recommended: "0 or 2",
    why: "the stricter of `all` and this interface's applies; strict (1) is kept in the fast path, what it cannot decide goes to the kernel (docs/mirror.md)",
};

const QUEUES: Setting = Setting {
    check: "receive queues",
    class: Class::Speed,
    recommended: "the CPUs, or one fewer",
    why: "each queue is polled on one CPU: fewer leave CPUs idle (the seeds: queues = cores); one fewer frees a CPU for the control plane (docs/control-plane-load.md)",
};

const NAPI: Setting = Setting {
    check: "threaded NAPI",
    class: Class::Speed,
    recommended: "a lab run decides",
    why: "a NAPI thread pinned to a CPU of its own polls there, a softirq where the interrupt (a veth: the sender) ran; this lab proved no difference (docs/tuning.md)",
};

/// The checks of interface `name`.
pub fn check(root: &Root, name: &str) -> Vec<Finding> {
    if !root.exists(&format!("sys/class/net/{name}")) {
        let read = format!("sys/class/net/{name}");
        return vec![PRESENT.found(
            name,
            read,
            None,
            Verdict::Unread("no such interface".into()),
        )];
    }
    let is_one = |v: &str| v == "1";
    vec![
        IPV4_FORWARDING.read(
            root,
            name,
            format!("proc/sys/net/ipv4/conf/{name}/forwarding"),
            is_one,
        ),
        IPV6_FORWARDING.read(
            root,
            name,
            format!("proc/sys/net/ipv6/conf/{name}/forwarding"),
            is_one,
        ),
        rp_filter(root, name),
        queues(root, name),
        napi(root, name),
    ]
}

/// Threaded NAPI (`threaded`) and the CPUs its `napi/NAME-ID` threads may
/// run on.
fn napi(root: &Root, name: &str) -> Finding {
    let rel = format!("sys/class/net/{name}/threaded");
    let read = format!("{rel}, proc/*/comm, proc/*/status");
    match root.read(&rel).as_deref() {
        Ok("0") => NAPI.found(name, read, Some("off".into()), Verdict::Measure),
        Ok(_) => {
            let prefix = format!("napi/{name}-");
            let mut threads = Vec::new();
            for pid in root.list("proc") {
                if !pid.bytes().all(|b| b.is_ascii_digit()) {
                    continue;
                }
                let Ok(comm) = root.read(&format!("proc/{pid}/comm")) else {
                    continue;
                };
                if !comm.starts_with(&prefix) {
                    continue;
                }
                let cpus = root
                    .read(&format!("proc/{pid}/status"))
                    .ok()
                    .and_then(|st| {
                        st.lines()
                            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                            .map(|v| v.trim().to_string())
                    })
                    .unwrap_or_else(|| "?".into());
                threads.push((comm, cpus));
            }
            threads.sort();
            if threads.is_empty() {
                return NAPI.found(
                    name,
                    read,
                    Some("on, no thread (no NAPI on this device yet)".into()),
                    Verdict::Report,
                );
            }
            let pinned = threads.iter().all(|(_, c)| c.parse::<u32>().is_ok());
            let current = threads
                .iter()
                .map(|(t, c)| format!("{t} on CPU {c}"))
                .collect::<Vec<_>>()
                .join(", ");
            NAPI.found(
                name,
                read,
                Some(format!("on: {current}")),
                match pinned {
                    true => Verdict::Good,
                    false => Verdict::Measure,
                },
            )
        }
        Err(e) => NAPI.found(name, read, None, Verdict::Unread(e.clone())),
    }
}

/// The stricter of `all`'s and the interface's (the kernel's
/// IN_DEV_RPFILTER: the larger value).
fn rp_filter(root: &Root, name: &str) -> Finding {
    let (all, own) = (
        "proc/sys/net/ipv4/conf/all/rp_filter".to_string(),
        format!("proc/sys/net/ipv4/conf/{name}/rp_filter"),
    );
    let read = format!("{all}, {own}");
    let num = |rel: &str| {
        root.read(rel)
            .and_then(|v| v.parse::<u8>().map_err(|_| format!("{rel}: not a number")))
    };
    match (num(&all), num(&own)) {
        (Ok(a), Ok(o)) => {
            let applied = a.max(o);
            RP_FILTER.found(
                name,
                read,
                Some(format!("{applied} (all {a}, own {o})")),
                match applied {
                    0 | 2 => Verdict::Good,
                    _ => Verdict::Change,
                },
            )
        }
        (Err(e), _) | (_, Err(e)) => RP_FILTER.found(name, read, None, Verdict::Unread(e)),
    }
}

/// Receive queues against online CPUs.
fn queues(root: &Root, name: &str) -> Finding {
    let dir = format!("sys/class/net/{name}/queues");
    let rx = root
        .list(&dir)
        .iter()
        .filter(|q| q.starts_with("rx-"))
        .count();
    let read = format!("{dir}/rx-*, sys/devices/system/cpu/online");
    let cpus = match online_cpus(root) {
        Ok(c) => c.len(),
        Err(e) => return QUEUES.found(name, read, None, Verdict::Unread(e)),
    };
    if rx == 0 {
        return QUEUES.found(name, read, None, Verdict::Unread("no queues listed".into()));
    }
    QUEUES.found(
        name,
        read,
        Some(format!("{rx} ({cpus} CPUs)")),
        match rx + 1 >= cpus {
            true => Verdict::Good,
            false => Verdict::Change,
        },
    )
}
