//! The kernel's per-receive-queue frame counts of an interface, for
//! interfaces linerate is not attached to (a kernel DUT, a generator, a
//! NIC seen from the host). Drivers name their per-queue counters in
//! `ethtool -S` (read by its ioctl: crate::ethtool) each in their own way;
//! the names below are the common ones. The interface's totals come from
//! its link statistics.
use crate::cmd::ip;
use anyhow::{anyhow, Result};

/// How one driver family names a receive queue's frame counter: the text
/// before the queue number and after it (`rx_queue_` 3 `_packets`).
struct Naming {
    before: &'static str,
    after: &'static str,
    drivers: &'static str,
}

/// In order of preference: the first naming with any counter wins.
const NAMINGS: &[Naming] = &[
    Naming {
        before: "rx_queue_",
        after: "_packets",
        drivers: "virtio_net, ixgbe, i40e, ice, igb, hv_netvsc",
    },
    Naming {
        before: "rx",
        after: "_packets",
        drivers: "mlx5, mlx4",
    },
    Naming {
        before: "queue_",
        after: "_rx_cnt",
        drivers: "ena",
    },
    Naming {
        before: "rx-",
        after: ".rx_packets",
        drivers: "sfc",
    },
    // veth counts a queue's frames only where NAPI carries them (GRO on or
    // an XDP program attached), which is how the lab runs it.
    Naming {
        before: "rx_queue_",
        after: "_xdp_packets",
        drivers: "veth",
    },
];

/// Frames received per queue, by queue index, as `ethtool -S` reported
/// them, and which naming they were read by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RxQueues {
    pub queues: Vec<u64>,
    pub drivers: &'static str,
}

/// A driver's per-queue counter named `before`N`after`, by queue N (a
/// queue without a line reads 0); empty when no name matches.
pub fn by_queue(pairs: &[(String, u64)], before: &str, after: &str) -> Vec<u64> {
    let mut queues: Vec<u64> = Vec::new();
    for (name, value) in pairs {
        let Some(q) = name
            .strip_prefix(before)
            .and_then(|r| r.strip_suffix(after))
            .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|d| d.parse::<usize>().ok())
            .filter(|q| *q < 4096)
        else {
            continue;
        };
        if queues.len() <= q {
            queues.resize(q + 1, 0);
        }
        queues[q] = *value;
    }
    queues
}

/// The per-queue receive counters among a driver's statistics; None when
/// no known naming matches one.
pub fn per_queue(pairs: &[(String, u64)]) -> Option<RxQueues> {
    NAMINGS.iter().find_map(|n| {
        let queues = by_queue(pairs, n.before, n.after);
        (!queues.is_empty()).then_some(RxQueues {
            queues,
            drivers: n.drivers,
        })
    })
}

/// The receive queues' counters of `ifname` in namespace `netns`.
pub fn rx_queues(netns: Option<&str>, ifname: &str) -> Result<RxQueues> {
    let stats = crate::ethtool::stats_in(netns, ifname)?;
    per_queue(&stats).ok_or_else(|| {
        anyhow!(
            "{ifname}: `ethtool -S` shows no per-queue receive counter linerate knows (it reads {})",
            NAMINGS
                .iter()
                .map(|n| format!("{}N{}", n.before, n.after))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// Frames in and out of `ifname` (its link statistics).
pub fn link_packets(netns: Option<&str>, ifname: &str) -> Result<(u64, u64)> {
    let out = ip(netns, &["-s", "-j", "link", "show", "dev", ifname])?;
    parse_link_packets(&out)
        .ok_or_else(|| anyhow!("{ifname}: `ip -s -j link` shows no packet counts"))
}

fn parse_link_packets(json: &str) -> Option<(u64, u64)> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let s = &v[0]["stats64"];
    Some((s["rx"]["packets"].as_u64()?, s["tx"]["packets"].as_u64()?))
}

/// How many receive queues `ifname` has (`ip -d -j link`'s num_rx_queues).
pub fn rx_queue_count(netns: Option<&str>, ifname: &str) -> Result<u32> {
    let out = ip(netns, &["-d", "-j", "link", "show", "dev", ifname])?;
    let v: serde_json::Value = serde_json::from_str(&out)?;
    v[0]["num_rx_queues"]
        .as_u64()
        .map(|n| n as u32)
        .ok_or_else(|| anyhow!("{ifname}: ip link shows no num_rx_queues"))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Excerpts of real drivers' `ethtool -S` output.
    const VETH: &str = "NIC statistics:
     peer_ifindex: 12
     rx_queue_0_xdp_packets: 1500
     rx_queue_0_xdp_bytes: 90000
     rx_queue_0_drops: 0
     rx_queue_0_xdp_redirect: 1500
     rx_queue_1_xdp_packets: 700
     rx_queue_1_xdp_bytes: 42000
     tx_queue_0_xdp_xmit: 0
     tx_queue_1_xdp_xmit: 0
";
    const MLX5: &str = "NIC statistics:
     rx_packets: 10
     rx_bytes: 600
     rx0_packets: 4
     rx0_bytes: 240
     rx1_packets: 6
     rx1_xdp_drop: 0
     tx0_packets: 9
";
    const IXGBE: &str = "NIC statistics:
     rx_packets: 30
     tx_queue_0_packets: 5
     tx_queue_0_bytes: 300
     rx_queue_0_packets: 10
     rx_queue_0_bytes: 600
     rx_queue_2_packets: 20
";

    fn parse(text: &str) -> Option<RxQueues> {
        let pairs: Vec<(String, u64)> = text
            .lines()
            .filter_map(|l| {
                let (name, value) = l.trim().rsplit_once(':')?;
                Some((name.trim().to_string(), value.trim().parse().ok()?))
            })
            .collect();
        per_queue(&pairs)
    }

    #[test]
    fn reads_each_drivers_naming() {
        let v = parse(VETH).unwrap();
        assert_eq!((v.queues, v.drivers), (vec![1500, 700], "veth"));
        let m = parse(MLX5).unwrap();
        assert_eq!(m.queues, vec![4, 6]);
        assert!(m.drivers.contains("mlx5"));
        // A queue without a counter line reads as 0, not as missing.
        let i = parse(IXGBE).unwrap();
        assert_eq!(i.queues, vec![10, 0, 20]);
    }

    #[test]
    fn totals_and_transmit_counters_are_not_queues() {
        assert_eq!(
            parse("NIC statistics:\n     rx_packets: 5\n     tx_queue_0_packets: 3\n"),
            None
        );
        assert_eq!(parse("no stats available\n"), None);
    }

    /// The ioctl reads what ethtool prints: a veth pair's per-queue
    /// counters (the test's own, removed after).
    #[test]
    fn a_veths_queues_by_ioctl() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let name = format!("lrtq{}", std::process::id() % 100000);
        let peer = format!("{name}p");
        crate::cmd::ip(
            None,
            &[
                "link",
                "add",
                &name,
                "numrxqueues",
                "3",
                "type",
                "veth",
                "peer",
                "name",
                &peer,
            ],
        )
        .unwrap();
        let q = rx_queues(None, &name);
        let text = crate::cmd::run("ethtool", &["-S", &name]);
        crate::cmd::ip(None, &["link", "del", &name]).unwrap();
        let q = q.unwrap();
        assert_eq!((q.queues, q.drivers), (vec![0, 0, 0], "veth"));
        if let Ok(text) = text {
            assert_eq!(parse(&text).unwrap().queues.len(), 3);
        }
    }

    #[test]
    fn link_packets_from_ip_json() {
        let j = r#"[{"ifindex":3,"ifname":"dut0","stats64":{"rx":{"bytes":6000,"packets":100,"errors":0},"tx":{"bytes":120,"packets":2,"errors":0}}}]"#;
        assert_eq!(parse_link_packets(j), Some((100, 2)));
        assert_eq!(parse_link_packets("[]"), None);
    }
}
