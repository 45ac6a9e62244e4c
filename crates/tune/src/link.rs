//! The checks of an interface's driver and its XDP state: what
//! [`Driver`] said, judged, with the MTU, the CPUs and the interrupts
//! read from the root's files.
use crate::ethtool::{xdp_feature, Asked, Driver, XdpMode};
use crate::host::online_cpus;
use crate::{Class, Finding, Root, Setting, Verdict};

const XDP_MODE: Setting = Setting {
    check: "XDP mode",
    class: Class::Speed,
    recommended: "native",
    why: "generic XDP runs after the kernel has built the frame's skb, the cost native XDP exists to save (`linerate route --mode native`)",
};

const XDP_TARGET: Setting = Setting {
    check: "XDP redirect target",
    class: Class::Correctness,
    recommended: "ndo-xmit",
    why: "the kernel drops a frame redirected to a device without ndo-xmit, so linerate passes those to the kernel; veth and virtio_net have it only while an XDP program is attached (a veth: to its peer, or GRO on)",
};

const MULTIBUF: Setting = Setting {
    check: "XDP multi-buffer",
    class: Class::Speed,
    recommended: "MTU <= 1500, or rx-sg and ndo-xmit-sg",
    why: "above 1500 linerate attaches its multi-buffer program; without rx-sg the driver refuses it, without ndo-xmit-sg large frames go to the kernel",
};

const TX_CHANNELS: Setting = Setting {
    check: "transmit channels",
    class: Class::Correctness,
    recommended: ">= the CPUs",
    why: "an XDP redirect sends on the queue of the CPU that redirects: mlx5 drops what CPUs past its channels send, ixgbe and i40e refuse the program (ethtool -L)",
};

const TX_CHANNELS_VETH: Setting = Setting {
    check: "transmit channels",
    class: Class::Speed,
    recommended: "the peer's receive queues",
    why: "a veth puts a frame redirected to it on its peer's receive queue of the sending CPU, modulo the peer's queues: those decide, in the peer's namespace",
};

const LRO: Setting = Setting {
    check: "LRO",
    class: Class::Correctness,
    recommended: "off",
    why: "merged frames cannot be forwarded as received: the kernel turns LRO off when forwarding, and drivers refuse XDP with it on",
};

const GRO: Setting = Setting {
    check: "GRO",
    class: Class::Speed,
    recommended: "measure",
    why: "the references disagree: GRO batches the kernel's path, costs every frame a merge attempt, and on a veth also gives it NAPI (docs/tuning.md)",
};

const TSO: Setting = Setting {
    check: "TSO",
    class: Class::Speed,
    recommended: "either",
    why: "only what the router itself sends is segmented; forwarded GRO packets are re-segmented whatever it is (the seeds turn it off with LRO)",
};

const VLAN_STRIP: Setting = Setting {
    check: "VLAN tag stripping",
    class: Class::Correctness,
    recommended: "off where VLANs arrive",
    why: "XDP sees a stripped frame untagged, its tag only in the driver's metadata (ethtool -K rxvlan off)",
};

const RINGS: Setting = Setting {
    check: "ring sizes",
    class: Class::Speed,
    recommended: "measure",
    why: "the references disagree: larger rings absorb bursts, smaller ones stay in cache (XDP paper: 1024 against 256 on mlx5)",
};

const PAUSE: Setting = Setting {
    check: "flow control",
    class: Class::Speed,
    recommended: "off",
    why: "pause frames stop the sender for every flow when one queue is full (the seeds: flow control off)",
};

const COALESCE: Setting = Setting {
    check: "interrupt coalescing",
    class: Class::Stability,
    recommended: "measure",
    why: "adaptive coalescing moves with the load, so a figure moves with it; fixed values trade latency for frames a poll",
};

const RSS: Setting = Setting {
    check: "RSS hash (UDP/IPv4)",
    class: Class::Speed,
    recommended: "sdfn",
    why: "hashed on addresses alone, every flow between two hosts lands on one queue (ethtool -N rx-flow-hash udp4 sdfn)",
};

const IRQS: Setting = Setting {
    check: "queue interrupts",
    class: Class::Speed,
    recommended: "one CPU each, spread",
    why: "two queues interrupting one CPU while another has none halve what both carry (scaling.rst; irqbalance off, smp_affinity_list)",
};

const RXH_IP_SRC: u64 = 1 << 4;
const RXH_IP_DST: u64 = 1 << 5;
const RXH_L4_B_0_1: u64 = 1 << 6;
const RXH_L4_B_2_3: u64 = 1 << 7;
const SINGLE_BUFFER_MTU: u32 = 1500;

/// The checks of interface `name`'s driver.
pub fn check(root: &Root, name: &str, d: &Driver) -> Vec<Finding> {
    let cpus = online_cpus(root).map(|c| c.len() as u32);
    let mtu = root.read(&format!("sys/class/net/{name}/mtu"));
    let on_off = |b: bool| if b { "on" } else { "off" }.to_string();
    let asked = "ethtool";
    let is_veth = d.name == Asked::Said("veth".into());
    let mut out = vec![
        judge(&XDP_MODE, name, "bpf_xdp_query", &d.xdp_mode, |m| {
            let v = match m {
                XdpMode::Native => Verdict::Good,
                XdpMode::None => Verdict::Report,
                _ => Verdict::Change,
            };
            (format!("{m:?}").to_lowercase(), v)
        }),
        judge(
            &XDP_TARGET,
            name,
            "netdev xdp_features",
            &d.xdp_features,
            |b| (feature_names(*b), good(b & xdp_feature::NDO_XMIT != 0)),
        ),
        multibuf(name, mtu, &d.xdp_features),
        tx_channels(name, d, cpus, is_veth),
        judge(&LRO, name, asked, &d.offloads, |o| {
            (on_off(o.lro), good(!o.lro))
        }),
        judge(&GRO, name, asked, &d.offloads, |o| {
            (on_off(o.gro), Verdict::Measure)
        }),
        judge(&TSO, name, asked, &d.offloads, |o| {
            (on_off(o.tso), Verdict::Report)
        }),
        judge(&VLAN_STRIP, name, asked, &d.offloads, |o| {
            (on_off(o.rx_vlan_strip), Verdict::Report)
        }),
        judge(&RINGS, name, asked, &d.rings, |r| {
            (
                format!("rx {}/{} tx {}/{}", r.rx, r.max_rx, r.tx, r.max_tx),
                Verdict::Measure,
            )
        }),
        judge(&PAUSE, name, asked, &d.pause, |p| {
            (
                format!("rx {} tx {}", on_off(p.rx), on_off(p.tx)),
                good(!p.rx && !p.tx),
            )
        }),
        judge(&COALESCE, name, asked, &d.coalesce, |c| {
            (
                format!(
                    "rx {} us {} frames, adaptive {}",
                    c.rx_usecs,
                    c.rx_frames,
                    on_off(c.adaptive_rx)
                ),
                Verdict::Measure,
            )
        }),
        judge(&RSS, name, asked, &d.rss_udp4, |b| {
            let want = RXH_IP_SRC | RXH_IP_DST | RXH_L4_B_0_1 | RXH_L4_B_2_3;
            let queues = match &d.channels {
                Asked::Said(c) => c.rx + c.combined,
                _ => 2,
            };
            match queues {
                0 | 1 => (format!("{}, one queue", rxh_letters(*b)), Verdict::Report),
                _ => (rxh_letters(*b), good(b & want == want)),
            }
        }),
        crate::irq::check(root, name, &IRQS),
    ];
    // What the driver has no operation for is said as such: nothing to
    // change where the feature is one to avoid (pause frames).
    for f in out.iter_mut() {
        if f.current.as_deref() == Some(UNSUPPORTED) && f.check == PAUSE.check {
            f.verdict = Verdict::Good;
        }
    }
    out
}

const UNSUPPORTED: &str = "not in this driver";

fn good(ok: bool) -> Verdict {
    match ok {
        true => Verdict::Good,
        false => Verdict::Change,
    }
}

/// A finding from one thing asked: `judged` gives the value as shown and
/// the verdict; a driver without the operation says so (Report), one that
/// could not be asked is Unread.
fn judge<T>(
    s: &Setting,
    scope: &str,
    read: &str,
    asked: &Asked<T>,
    judged: impl Fn(&T) -> (String, Verdict),
) -> Finding {
    match asked {
        Asked::Said(v) => {
            let (current, verdict) = judged(v);
            s.found(scope, read.to_string(), Some(current), verdict)
        }
        Asked::Unsupported => s.found(
            scope,
            read.to_string(),
            Some(UNSUPPORTED.into()),
            Verdict::Report,
        ),
        Asked::Failed(e) => s.found(scope, read.to_string(), None, Verdict::Unread(e.clone())),
    }
}

/// xdp_features as the netdev spec names them, or "none".
pub fn feature_names(bits: u64) -> String {
    let names: Vec<&str> = xdp_feature::NAMES
        .iter()
        .filter(|(b, _)| bits & b != 0)
        .map(|(_, n)| *n)
        .collect();
    match names.is_empty() {
        true => "none".into(),
        false => names.join(","),
    }
}

/// RXH_* bits as ethtool's letters (m v t s d f n).
fn rxh_letters(bits: u64) -> String {
    let letters: String = [
        (1 << 1, 'm'),
        (1 << 2, 'v'),
        (1 << 3, 't'),
        (RXH_IP_SRC, 's'),
        (RXH_IP_DST, 'd'),
        (RXH_L4_B_0_1, 'f'),
        (RXH_L4_B_2_3, 'n'),
    ]
    .iter()
    .filter(|(b, _)| bits & b != 0)
    .map(|(_, c)| *c)
    .collect();
    match letters.is_empty() {
        true => "none".into(),
        false => letters,
    }
}

/// The MTU against what a single buffer holds and what the driver does
/// with several.
fn multibuf(name: &str, mtu: Result<String, String>, features: &Asked<u64>) -> Finding {
    let read = format!("sys/class/net/{name}/mtu, netdev xdp_features");
    let mtu = match mtu.and_then(|m| m.parse::<u32>().map_err(|_| format!("MTU {m:?}"))) {
        Ok(m) => m,
        Err(e) => return MULTIBUF.found(name, read, None, Verdict::Unread(e)),
    };
    if mtu <= SINGLE_BUFFER_MTU {
        return MULTIBUF.found(
            name,
            read,
            Some(format!("MTU {mtu}: single buffer")),
            Verdict::Good,
        );
    }
    let sg = xdp_feature::RX_SG | xdp_feature::NDO_XMIT_SG;
    match features {
        Asked::Said(b) => MULTIBUF.found(
            name,
            read,
            Some(format!("MTU {mtu}: {}", feature_names(*b))),
            good(b & sg == sg),
        ),
        Asked::Unsupported => MULTIBUF.found(
            name,
            read,
            Some(format!("MTU {mtu}")),
            Verdict::Unread("the kernel has no netdev family to say".into()),
        ),
        Asked::Failed(e) => MULTIBUF.found(name, read, None, Verdict::Unread(e.clone())),
    }
}

/// Transmit channels (tx + combined) against the online CPUs.
fn tx_channels(name: &str, d: &Driver, cpus: Result<u32, String>, veth: bool) -> Finding {
    let s = if veth {
        &TX_CHANNELS_VETH
    } else {
        &TX_CHANNELS
    };
    let cpus = match cpus {
        Ok(c) => c,
        Err(e) => return s.found(name, "ethtool -l".into(), None, Verdict::Unread(e)),
    };
    judge(s, name, "ethtool -l", &d.channels, |c| {
        let tx = c.tx + c.combined;
        let verdict = match veth {
            true => Verdict::Report,
            false => good(tx >= cpus),
        };
        (format!("{tx} ({cpus} CPUs)"), verdict)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethtool::{Channels, Coalesce, Offloads, Pause, Rings};

    /// A tree with two CPUs and an interface of MTU `mtu`.
    fn root(mtu: u32) -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let w = |rel: &str, v: &str| {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, v).unwrap();
        };
        w("sys/devices/system/cpu/online", "0-1\n");
        w("sys/class/net/p0/mtu", &format!("{mtu}\n"));
        w("proc/interrupts", "           CPU0       CPU1\n");
        let root = Root::at(dir.path());
        (dir, root)
    }

    /// A NIC as mlx5 shows itself with one channel, tuned the seeds' way
    /// otherwise.
    fn nic() -> Driver {
        Driver {
            name: Asked::Said("mlx5_core".into()),
            offloads: Asked::Said(Offloads {
                gro: true,
                lro: false,
                tso: true,
                rx_vlan_strip: true,
            }),
            channels: Asked::Said(Channels {
                rx: 0,
                tx: 0,
                combined: 1,
                max_rx: 0,
                max_tx: 0,
                max_combined: 8,
            }),
            rings: Asked::Said(Rings {
                rx: 1024,
                tx: 1024,
                max_rx: 8192,
                max_tx: 8192,
            }),
            pause: Asked::Said(Pause {
                autoneg: false,
                rx: true,
                tx: false,
            }),
            coalesce: Asked::Said(Coalesce {
                rx_usecs: 8,
                rx_frames: 128,
                adaptive_rx: true,
            }),
            rss_udp4: Asked::Said(RXH_IP_SRC | RXH_IP_DST),
            xdp_mode: Asked::Said(XdpMode::Native),
            xdp_features: Asked::Said(0x7),
        }
    }

    fn verdict<'a>(all: &'a [Finding], check: &str) -> (&'a Verdict, Option<&'a str>) {
        let f = all.iter().find(|f| f.check == check).unwrap();
        (&f.verdict, f.current.as_deref())
    }

    #[test]
    fn a_nic_with_fewer_channels_than_cpus_and_pause_frames_is_told() {
        let (_d, r) = root(1500);
        let all = check(&r, "p0", &nic());
        assert_eq!(
            verdict(&all, "transmit channels"),
            (&Verdict::Change, Some("1 (2 CPUs)"))
        );
        assert_eq!(
            all.iter()
                .find(|f| f.check == "transmit channels")
                .unwrap()
                .class,
            Class::Correctness
        );
        assert_eq!(
            verdict(&all, "flow control"),
            (&Verdict::Change, Some("rx on tx off"))
        );
        assert_eq!(
            verdict(&all, "RSS hash (UDP/IPv4)"),
            (&Verdict::Report, Some("sd, one queue"))
        );
        assert_eq!(verdict(&all, "XDP mode"), (&Verdict::Good, Some("native")));
        assert_eq!(
            verdict(&all, "XDP redirect target"),
            (&Verdict::Good, Some("basic,redirect,ndo-xmit"))
        );
        assert_eq!(
            verdict(&all, "XDP multi-buffer"),
            (&Verdict::Good, Some("MTU 1500: single buffer"))
        );
        assert_eq!(verdict(&all, "GRO"), (&Verdict::Measure, Some("on")));
        assert_eq!(
            verdict(&all, "ring sizes"),
            (&Verdict::Measure, Some("rx 1024/8192 tx 1024/8192"))
        );
        assert_eq!(verdict(&all, "LRO"), (&Verdict::Good, Some("off")));
    }

    #[test]
    fn jumbo_frames_need_both_scatter_gather_bits() {
        let (_d, r) = root(9000);
        let mut d = nic();
        let all = check(&r, "p0", &d);
        assert_eq!(
            verdict(&all, "XDP multi-buffer"),
            (&Verdict::Change, Some("MTU 9000: basic,redirect,ndo-xmit"))
        );
        d.xdp_features = Asked::Said(0x67);
        let all = check(&r, "p0", &d);
        assert_eq!(verdict(&all, "XDP multi-buffer").0, &Verdict::Good);
    }

    #[test]
    fn generic_xdp_no_target_and_lro_are_changes() {
        let (_d, r) = root(1500);
        let mut d = nic();
        d.xdp_mode = Asked::Said(XdpMode::Generic);
        d.xdp_features = Asked::Said(xdp_feature::BASIC | xdp_feature::REDIRECT);
        d.offloads = Asked::Said(Offloads {
            gro: false,
            lro: true,
            tso: false,
            rx_vlan_strip: false,
        });
        d.channels = Asked::Said(Channels {
            rx: 0,
            tx: 0,
            combined: 2,
            max_rx: 0,
            max_tx: 0,
            max_combined: 8,
        });
        let all = check(&r, "p0", &d);
        assert_eq!(
            verdict(&all, "RSS hash (UDP/IPv4)"),
            (&Verdict::Change, Some("sd"))
        );
        assert_eq!(verdict(&all, "transmit channels").0, &Verdict::Good);
        for c in ["XDP mode", "XDP redirect target", "LRO"] {
            assert_eq!(verdict(&all, c).0, &Verdict::Change, "{c}");
        }
    }

    #[test]
    fn what_a_driver_lacks_is_said_and_what_was_not_asked_is_unread() {
        let (_d, r) = root(1500);
        let mut d = Driver::unasked("a copied tree");
        d.pause = Asked::Unsupported;
        d.rings = Asked::Unsupported;
        let all = check(&r, "p0", &d);
        assert_eq!(
            verdict(&all, "flow control"),
            (&Verdict::Good, Some(UNSUPPORTED))
        );
        assert_eq!(
            verdict(&all, "ring sizes"),
            (&Verdict::Report, Some(UNSUPPORTED))
        );
        assert_eq!(
            verdict(&all, "LRO"),
            (&Verdict::Unread("a copied tree".into()), None)
        );
        assert_eq!(rxh_letters(0xf0), "sdfn");
        assert_eq!(feature_names(0), "none");
    }
}
