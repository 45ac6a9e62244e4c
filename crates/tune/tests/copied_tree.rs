//! The checks on a procfs and sysfs tree copied from a machine
//! (tests/data/debian12-veth/README says how): each finding's value is
//! the copied file's, and its verdict the one its recommendation gives
//! that value, worked out here by hand.
use linerate_tune::{check, table, Class, Driver, Finding, Root, Verdict};

/// A copied tree has no driver to ask.
fn unasked(_: &str) -> Driver {
    Driver::unasked("a copied tree")
}

fn checked(root: &Root, ifaces: &[String]) -> Vec<Finding> {
    check(root, ifaces, &unasked)
}

fn root() -> Root {
    Root::at(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/debian12-veth"
    ))
}

/// (scope, check) -> (current, verdict).
fn found(ifaces: &[&str]) -> Vec<(String, &'static str, Option<String>, Verdict, Class)> {
    let ifaces: Vec<String> = ifaces.iter().map(|s| s.to_string()).collect();
    checked(&root(), &ifaces)
        .into_iter()
        .map(|f| (f.scope, f.check, f.current, f.verdict, f.class))
        .collect()
}

fn one<'a>(
    all: &'a [(String, &'static str, Option<String>, Verdict, Class)],
    scope: &str,
    check: &str,
) -> (Option<&'a str>, &'a Verdict) {
    let f = all
        .iter()
        .find(|f| f.0 == scope && f.1 == check)
        .unwrap_or_else(|| panic!("no finding {scope} {check}"));
    (f.2.as_deref(), &f.3)
}

#[test]
fn the_hosts_settings_are_read_and_judged() {
    let all = found(&[]);
    let unread = |why: &str| Verdict::Unread(why.to_string());
    assert_eq!(
        one(&all, "host", "IPv4 forwarding"),
        (Some("1"), &Verdict::Good)
    );
    assert_eq!(
        one(&all, "host", "IPv6 forwarding"),
        (Some("0"), &Verdict::Change)
    );
    assert_eq!(
        one(&all, "host", "reverse-path filter (all)"),
        (Some("0"), &Verdict::Good)
    );
    // An empty ARP table (its header only) and the default threshold.
    assert_eq!(
        one(&all, "host", "neighbour table (gc_thresh3)"),
        (Some("1024 (0 held)"), &Verdict::Good)
    );
    assert_eq!(
        one(&all, "host", "connection tracking table"),
        (Some("0 of 262144"), &Verdict::Good)
    );
    // A virtual machine: no cpufreq, no turbo control; SMT not supported.
    assert_eq!(
        one(&all, "host", "CPU frequency governor"),
        (
            None,
            &unread("CPU 0 has no cpufreq (a virtual machine, or the firmware sets the frequency)")
        )
    );
    assert_eq!(
        one(&all, "host", "SMT (hyper-threading)"),
        (Some("notsupported"), &Verdict::Measure)
    );
    assert!(matches!(
        one(&all, "host", "turbo"),
        (None, Verdict::Unread(_))
    ));
    // The namespace's pid 1 is not irqbalance.
    assert_eq!(
        one(&all, "host", "irqbalance"),
        (Some("not running"), &Verdict::Good)
    );
    // Two of the nineteen files say "Mitigation: ...".
    assert_eq!(
        one(&all, "host", "CPU vulnerability mitigations"),
        (Some("2 of 19 on"), &Verdict::Report)
    );
    // Third column, hex, of two CPUs' lines: 0x1 + 0xed.
    assert_eq!(
        one(&all, "host", "softnet time squeeze"),
        (Some("238"), &Verdict::Change)
    );
    // The platform's: haltpoll's idle state is the deepest (1 us); no
    // IOMMU registered; conntrack's default hash, a bucket an entry;
    // redirects and the ICMP limits as the kernel sets them.
    assert_eq!(
        one(&all, "host", "CPU idle states"),
        (Some("haltpoll idle, 1 us"), &Verdict::Good)
    );
    assert_eq!(one(&all, "host", "IOMMU"), (Some("none"), &Verdict::Good));
    assert_eq!(
        one(&all, "host", "connection tracking hash"),
        (Some("262144 buckets for 262144"), &Verdict::Good)
    );
    assert_eq!(
        one(&all, "host", "ICMP redirects sent"),
        (Some("1"), &Verdict::Report)
    );
    assert_eq!(
        one(&all, "host", "ICMP error rate limit"),
        (Some("1000 ms a host, 1000/s in all"), &Verdict::Report)
    );
    assert_eq!(
        one(&all, "host", "ECMP hash (IPv4)"),
        (Some("0"), &Verdict::Good)
    );
    assert_eq!(all.len(), 17);
}

#[test]
fn each_interfaces_settings_are_read_and_judged() {
    let all = found(&["tv0", "tv1", "eth9"]);
    // ip_forward=1 set every interface's IPv4 forwarding; IPv6's stayed.
    assert_eq!(
        one(&all, "tv0", "IPv4 forwarding"),
        (Some("1"), &Verdict::Good)
    );
    assert_eq!(
        one(&all, "tv1", "IPv4 forwarding"),
        (Some("1"), &Verdict::Good)
    );
    assert_eq!(
        one(&all, "tv0", "IPv6 forwarding"),
        (Some("0"), &Verdict::Change)
    );
    // The stricter of all's (0) and the interface's.
    assert_eq!(
        one(&all, "tv0", "reverse-path filter"),
        (Some("0 (all 0, own 0)"), &Verdict::Good)
    );
    assert_eq!(
        one(&all, "tv1", "reverse-path filter"),
        (Some("1 (all 0, own 1)"), &Verdict::Change)
    );
    // A veth's one queue, two CPUs: one fewer than the CPUs is as meant.
    assert_eq!(
        one(&all, "tv0", "receive queues"),
        (Some("1 (2 CPUs)"), &Verdict::Good)
    );
    assert_eq!(one(&all, "tv0", "RPS"), (Some("off"), &Verdict::Good));
    assert_eq!(
        one(&all, "tv1", "PCIe link"),
        (Some("not a PCIe link"), &Verdict::Report)
    );
    assert_eq!(
        one(&all, "tv0", "threaded NAPI"),
        (Some("off"), &Verdict::Measure)
    );
    assert_eq!(
        one(&all, "eth9", "interface"),
        (None, &Verdict::Unread("no such interface".into()))
    );
    let text = table(&checked(&root(), &["tv1".to_string()]));
    assert!(
        text.contains("\ntv1      reverse-path filter            1 (all 0, own 1)         0 or 2                 CHANGE   speed\n"),
        "{text}"
    );
    // A header; two lines a finding (17 the host's, 7 of tv1's files, 13
    // of its driver), three for the unread: the governor and turbo (a
    // virtual machine), and the 11 of the driver that need no file (its
    // MTU is read: a single buffer; a veth has no interrupts).
    assert_eq!(text.lines().count(), 1 + 2 * 37 + 2 + 11);
    assert!(text.contains("         not read (sys/devices/system/cpu/cpu*/cpufreq/scaling_governor): CPU 0 has no cpufreq"));
}

/// A tree that lacks what a check reads says so, for each check, and
/// guesses nothing.
#[test]
fn what_cannot_be_read_says_why() {
    let empty = tempfile::tempdir().unwrap();
    let all = checked(&Root::at(empty.path()), &[]);
    assert_eq!(all.len(), 17);
    let conntrack = ["connection tracking table", "connection tracking hash"];
    for f in &all {
        match (&f.verdict, f.check) {
            // Conntrack absent is conntrack not loaded: nothing to size.
            (Verdict::Good, c) if conntrack.contains(&c) => {
                assert_eq!(f.current.as_deref(), Some("not loaded"))
            }
            (Verdict::Unread(why), _) => assert!(!why.is_empty(), "{f:?}"),
            _ => panic!("read from nothing: {f:?}"),
        }
        if !conntrack.contains(&f.check) {
            assert_eq!(f.current, None, "{f:?}");
        }
    }
}

/// A virtio_net interface's receive interrupt, found by its device's name
/// (virtio2-input.0) and judged by the CPU it is delivered to.
#[test]
fn queue_interrupts_of_a_copied_virtio_interface() {
    let root = Root::at(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/debian12-virtio"
    ));
    let driver: Driver =
        serde_json::from_str(include_str!("data/debian12-virtio/eth0.driver.json")).unwrap();
    let all = check(&root, &["eth0".to_string()], &|_| driver.clone());
    let irq = all
        .iter()
        .find(|f| f.scope == "eth0" && f.check == "queue interrupts")
        .unwrap();
    assert_eq!(irq.current.as_deref(), Some("38:cpu 1"), "{irq:?}");
    assert_eq!(irq.verdict, Verdict::Good);
    let mtu = all.iter().find(|f| f.check == "XDP multi-buffer").unwrap();
    assert_eq!(mtu.current.as_deref(), Some("MTU 1400: single buffer"));
    // Its driver's answers (virtio_net, one queue pair, no program
    // attached), judged.
    let by = |check: &str| {
        let f = all
            .iter()
            .find(|f| f.scope == "eth0" && f.check == check)
            .unwrap();
        (f.current.as_deref(), f.verdict.clone())
    };
    for (check, current, verdict) in [
        ("XDP mode", "none", Verdict::Report),
        // 43: basic, redirect, xsk-zerocopy, rx-sg; ndo-xmit comes with
        // a program.
        (
            "XDP redirect target",
            "basic,redirect,xsk-zerocopy,rx-sg",
            Verdict::Change,
        ),
        ("transmit channels", "1 (2 CPUs)", Verdict::Change),
        ("LRO", "off", Verdict::Good),
        ("GRO", "on", Verdict::Measure),
        ("TSO", "on", Verdict::Report),
        ("VLAN tag stripping", "off", Verdict::Report),
        ("ring sizes", "rx 256/256 tx 256/256", Verdict::Measure),
        ("flow control", "not in this driver", Verdict::Good),
        (
            "interrupt coalescing",
            "rx 0 us 1 frames, adaptive off",
            Verdict::Measure,
        ),
        ("RSS hash (UDP/IPv4)", "none, one queue", Verdict::Report),
    ] {
        assert_eq!(by(check), (Some(current), verdict), "{check}");
    }
}
