//! `linerate tune` in a lab's DUT: what it reads of the DUT's interfaces
//! is what `sysctl` and sysfs say there (read by other programs), and its
//! verdicts follow a setting changed under it. Needs root.
use serde_json::Value;
use std::process::Command;

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");
const LAB: &str = "lrt-tune";

fn in_dut(args: &[&str]) -> String {
    common::lab::run_in(&format!("{LAB}-dut"), args)
}

fn tune() -> Vec<Value> {
    let out = in_dut(&[BIN, "tune", "-i", "dut0,dut1", "--json"]);
    serde_json::from_str::<Value>(&out)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn finding<'a>(all: &'a [Value], scope: &str, check: &str) -> &'a Value {
    all.iter()
        .find(|f| f["scope"] == scope && f["check"] == check)
        .unwrap_or_else(|| panic!("no {scope} {check} in {all:?}"))
}

/// Every lab's DUT port is dut0, and its NAPI threads are told apart by
/// name only (`napi/dut0-*`), which pgrep sees across namespaces: one lab
/// at a time, or the oracle counts another test's thread.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn what_tune_reads_is_what_the_dut_has() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _down = common::lab::up(LAB);
    let sysctl = |key: &str| in_dut(&["sysctl", "-n", key]).trim().to_string();
    let all = tune();
    for (scope, check, key) in [
        ("host", "IPv4 forwarding", "net.ipv4.ip_forward".to_string()),
        (
            "host",
            "IPv6 forwarding",
            "net.ipv6.conf.all.forwarding".into(),
        ),
        (
            "host",
            "reverse-path filter (all)",
            "net.ipv4.conf.all.rp_filter".into(),
        ),
        (
            "dut0",
            "IPv4 forwarding",
            "net.ipv4.conf.dut0.forwarding".into(),
        ),
        (
            "dut1",
            "IPv6 forwarding",
            "net.ipv6.conf.dut1.forwarding".into(),
        ),
    ] {
        let f = finding(&all, scope, check);
        let want = sysctl(&key);
        assert_eq!(f["current"], want.as_str(), "{key}: {f}");
        let good = match check {
            "reverse-path filter (all)" => want == "0" || want == "2",
            _ => want == "1",
        };
        assert_eq!(f["verdict"] == "good", good, "{f}");
    }
    // Said for the record, as sysctl says them.
    assert_eq!(
        finding(&all, "host", "ICMP redirects sent")["current"],
        sysctl("net.ipv4.conf.all.send_redirects").as_str()
    );
    assert_eq!(
        finding(&all, "host", "ICMP error rate limit")["current"],
        format!(
            "{} ms a host, {}/s in all",
            sysctl("net.ipv4.icmp_ratelimit"),
            sysctl("net.ipv4.icmp_msgs_per_sec")
        )
        .as_str()
    );
    // The lab's DUT forwards both families.
    assert_eq!(finding(&all, "dut0", "IPv4 forwarding")["verdict"], "good");
    let queues = in_dut(&["ls", "/sys/class/net/dut0/queues"]);
    let rx = queues
        .split_whitespace()
        .filter(|q| q.starts_with("rx-"))
        .count();
    let cpus = std::thread::available_parallelism().unwrap().get();
    let q = finding(&all, "dut0", "receive queues");
    assert_eq!(q["current"], format!("{rx} ({cpus} CPUs)").as_str(), "{q}");

    // A strict reverse-path filter on dut1 alone: dut1's changes, dut0's
    // does not.
    in_dut(&["sysctl", "-qw", "net.ipv4.conf.dut1.rp_filter=1"]);
    let all = tune();
    let all_rp = sysctl("net.ipv4.conf.all.rp_filter");
    let dut1 = finding(&all, "dut1", "reverse-path filter");
    assert_eq!(
        dut1["current"],
        format!("{} (all {all_rp}, own 1)", all_rp.as_str().max("1")).as_str(),
        "{dut1}"
    );
    assert_eq!(dut1["verdict"], "change");
    let dut0 = finding(&all, "dut0", "reverse-path filter");
    assert_eq!(dut0["verdict"] == "good", all_rp != "1", "{dut0}");
    // An interface the DUT lacks is said, not guessed.
    let out = in_dut(&[BIN, "tune", "-i", "nosuch0", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    let missing = finding(v.as_array().unwrap(), "nosuch0", "interface");
    assert_eq!(
        missing["verdict"]["unread"], "no such interface",
        "{missing}"
    );
}

/// `--fix` then `--revert` in a lab's DUT with forwarding off (as a
/// fresh machine has it) and one interface's IPv6 forwarding off: the fix
/// turns forwarding on everywhere (tune then finds it good), and the
/// revert leaves every interface setting of both families, which the
/// kernel changes beside the switches, exactly as `sysctl -a` showed
/// before.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_fix_then_its_revert_leaves_every_value_as_it_was() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _down = common::lab::up(LAB_FIX);
    let ns = format!("{LAB_FIX}-dut");
    let run = |args: &[&str]| common::lab::run_in(&ns, args);
    run(&["sysctl", "-qw", "net.ipv4.ip_forward=0"]);
    run(&["sysctl", "-qw", "net.ipv6.conf.dut1.forwarding=0"]);
    let settings = || run(&["sysctl", "-a", "-r", r"^net\.ipv[46]\.(conf\.|ip_forward)"]);
    let before = settings();
    assert!(
        before.contains("net.ipv4.conf.dut0.forwarding = 0"),
        "{before}"
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    let path = file.path().to_str().unwrap();
    let fixed: Value = serde_json::from_str(&run(&[
        BIN,
        "tune",
        "-i",
        "dut0,dut1",
        "--fix",
        path,
        "--json",
    ]))
    .unwrap();
    for f in fixed.as_array().unwrap() {
        if f["check"].as_str().unwrap().ends_with("forwarding") {
            assert_eq!(f["verdict"], "good", "{f}");
        }
    }
    assert_ne!(settings(), before);
    run(&[BIN, "tune", "--revert", path]);
    assert_eq!(settings(), before);
    // A file that is no record is refused, naming it, and changes nothing.
    std::fs::write(file.path(), "{}").unwrap();
    let out = Command::new("ip")
        .args(["netns", "exec", &ns, BIN, "tune", "--revert", path])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains(path) && err.contains("not a record"),
        "{err}"
    );
    assert_eq!(settings(), before);
}

const LAB_FIX: &str = "lrt-tunefix";

/// What `ethtool` says of the DUT's veths: one word of `ethtool -k`'s
/// line for `feature`.
fn ethtool_feature(iface: &str, feature: &str) -> String {
    let out = common::lab::run_in(&format!("{LAB_DRIVER}-dut"), &["ethtool", "-k", iface]);
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("{feature}:")))
        .unwrap_or_else(|| panic!("no {feature} in {out}"));
    line.split_whitespace().nth(1).unwrap().to_string()
}

/// What tune asks a driver is what `ethtool` (another program, asking
/// the same kernel) says; its verdicts follow GRO turned on and the XDP
/// program attached natively, then generically, by `linerate route`.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn what_tune_asks_the_driver_is_what_ethtool_says() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _down = common::lab::up(LAB_DRIVER);
    let ns = format!("{LAB_DRIVER}-dut");
    let tune = || -> Vec<Value> {
        let out = common::lab::run_in(&ns, &[BIN, "tune", "-i", "dut0,dut1", "--json"]);
        serde_json::from_str::<Value>(&out)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    };
    let all = tune();
    for (check, feature) in [
        ("GRO", "generic-receive-offload"),
        ("LRO", "large-receive-offload"),
        ("TSO", "tcp-segmentation-offload"),
        ("VLAN tag stripping", "rx-vlan-offload"),
    ] {
        for iface in ["dut0", "dut1"] {
            let f = finding(&all, iface, check);
            assert_eq!(
                f["current"],
                ethtool_feature(iface, feature).as_str(),
                "{f}"
            );
        }
    }
    // Channels: "Current hardware settings" of `ethtool -l`, TX's line.
    let l = common::lab::run_in(&ns, &["ethtool", "-l", "dut1"]);
    let current = l.split("Current hardware settings:").nth(1).unwrap();
    let tx: String = current
        .lines()
        .find(|l| l.starts_with("TX:"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .into();
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert_eq!(
        finding(&all, "dut1", "transmit channels")["current"],
        format!("{tx} ({cpus} CPUs)").as_str()
    );
    // A veth has no rings: ethtool is refused, tune says so.
    let g = Command::new("ip")
        .args(["netns", "exec", &ns, "ethtool", "-g", "dut0"])
        .output()
        .unwrap();
    assert!(!g.status.success());
    assert_eq!(
        finding(&all, "dut0", "ring sizes")["current"],
        "not in this driver"
    );
    assert_eq!(finding(&all, "dut0", "XDP mode")["current"], "none");
    // The lab's DUT polls dut0 in a NAPI thread pinned to its CPU: as
    // pgrep and taskset see it.
    let mut threads: Vec<String> = common::lab::run_in(&ns, &["pgrep", "-l", "^napi/dut0-"])
        .lines()
        .map(|l| {
            let (pid, comm) = l.trim().split_once(' ').unwrap();
            let affinity = common::lab::run_in(&ns, &["taskset", "-pc", pid]);
            let cpu = affinity.trim().rsplit(' ').next().unwrap().to_string();
            format!("{comm} on CPU {cpu}")
        })
        .collect();
    threads.sort();
    let napi = finding(&all, "dut0", "threaded NAPI");
    assert_eq!(
        napi["current"],
        format!("on: {}", threads.join(", ")).as_str(),
        "{napi}"
    );
    assert_eq!(napi["verdict"], "good");

    common::lab::run_in(&ns, &["ethtool", "-K", "dut0", "gro", "on"]);
    let all = tune();
    assert_eq!(finding(&all, "dut0", "GRO")["current"], "on");
    {
        let _router = common::lab::start_router(LAB_DRIVER);
        let all = tune();
        for iface in ["dut0", "dut1"] {
            let f = finding(&all, iface, "XDP mode");
            assert_eq!(
                (&f["current"], &f["verdict"]),
                (&"native".into(), &"good".into()),
                "{f}"
            );
        }
    }
    let _router = common::lab::start_router_with(LAB_DRIVER, &["--mode", "generic"]);
    let f = finding(&tune(), "dut0", "XDP mode").clone();
    assert_eq!(
        (&f["current"], &f["verdict"]),
        (&"generic".into(), &"change".into()),
        "{f}"
    );
}

const LAB_DRIVER: &str = "lrt-tunedrv";
