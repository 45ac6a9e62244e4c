//! The lab through the command line, as a user drives it: up, ping both
//! ways over IPv4 and IPv6 through the kernel DUT, status, down, and nothing
//! left behind. Needs root (CI runs as root).
use serde_json::Value;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

fn linerate(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run linerate")
}

fn ok(args: &[&str]) -> String {
    let o = linerate(args);
    assert!(
        o.status.success(),
        "linerate {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn netns_list() -> String {
    String::from_utf8(
        Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
}

fn ping(ns: &str, v6: bool, to: &str) -> bool {
    match v6 {
        true => ping_with(ns, &["-6", to]),
        false => ping_with(ns, &[to]),
    }
}

/// Two pings from namespace `ns`, `args` ending in the address.
fn ping_with(ns: &str, args: &[&str]) -> bool {
    let args: Vec<&str> = [
        "netns", "exec", ns, "ping", "-c", "2", "-i", "0.2", "-W", "2",
    ]
    .into_iter()
    .chain(args.iter().copied())
    .collect();
    Command::new("ip")
        .args(&args)
        .output()
        .unwrap()
        .status
        .success()
}

/// Removes the lab when the test ends, passed or panicked.
struct Down(&'static str);
impl Drop for Down {
    fn drop(&mut self) {
        let _ = linerate(&["lab", "down", "--name", self.0]);
    }
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn up_ping_status_down_leaves_nothing() {
    let name = "lrt-basic";
    let _down = Down(name);
    let said = ok(&["lab", "up", "--name", name]);

    // The lab's ends send complete checksums, and it says so.
    assert!(
        said.contains("checksum offload off on gen0 and recv0"),
        "{said}"
    );
    for (ns, dev) in [("lrt-basic-gen", "gen0"), ("lrt-basic-recv", "recv0")] {
        let k = Command::new("ip")
            .args(["netns", "exec", ns, "ethtool", "-k", dev])
            .output()
            .unwrap();
        let k = String::from_utf8(k.stdout).unwrap();
        assert!(k.contains("tx-checksumming: off"), "{dev}: {k}");
    }

    // Through the DUT, both directions, both families.
    assert!(
        ping("lrt-basic-gen", false, "198.19.0.1"),
        "gen -> recv over IPv4"
    );
    assert!(
        ping("lrt-basic-recv", false, "198.18.0.1"),
        "recv -> gen over IPv4"
    );
    assert!(
        ping("lrt-basic-gen", true, "2001:2:0:8000::1"),
        "gen -> recv over IPv6"
    );
    assert!(
        ping("lrt-basic-recv", true, "2001:2::1"),
        "recv -> gen over IPv6"
    );

    let s: Value = serde_json::from_str(&ok(&["lab", "status", "--name", name, "--json"])).unwrap();
    assert_eq!(s["name"], name);
    assert_eq!(s["namespaces"]["gen"], "lrt-basic-gen");
    assert_eq!(s["namespaces"]["dut"], "lrt-basic-dut");
    assert_eq!(s["namespaces"]["recv"], "lrt-basic-recv");
    assert_eq!(s["interfaces"]["gen"], "gen0");
    assert_eq!(s["interfaces"]["dut_in"], "dut0");
    assert_eq!(s["interfaces"]["dut_out"], "dut1");
    assert_eq!(s["interfaces"]["recv"], "recv0");
    assert_eq!(s["dut_forwarding"]["ipv4"], true);
    let links = s["links"].as_array().unwrap();
    assert_eq!(links.len(), 4);
    for l in links {
        assert_eq!(l["operstate"], "UP", "{l}");
    }
    // The pings crossed dut0 in both directions.
    let dut_in = links.iter().find(|l| l["role"] == "dut_in").unwrap();
    assert!(
        dut_in["rx_packets"].as_u64().unwrap() >= 4 && dut_in["tx_packets"].as_u64().unwrap() >= 4,
        "{dut_in}"
    );
    // The DUT's NAPI thread was pinned and is alive.
    assert!(s["napi_threads"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["alive"] == true));
    assert!(!s["napi_threads"].as_array().unwrap().is_empty());

    // A second `up` changes nothing.
    let again = ok(&["lab", "up", "--name", name]);
    assert!(again.contains("already up"), "{again}");
    let s2: Value =
        serde_json::from_str(&ok(&["lab", "status", "--name", name, "--json"])).unwrap();
    assert_eq!(s2["links"][0]["ifindex"], s["links"][0]["ifindex"]);
    assert_eq!(s2["napi_threads"], s["napi_threads"]);

    let text = ok(&["lab", "status", "--name", name]);
    assert!(
        text.contains("dut0@dut") && text.contains("198.19.0.254/24"),
        "{text}"
    );

    ok(&["lab", "down", "--name", name]);
    let left = netns_list();
    assert!(!left.contains("lrt-basic"), "namespaces left: {left}");
    // The veths lived only in the lab's namespaces: none in the host's.
    let host_links = String::from_utf8(
        Command::new("ip")
            .args(["-o", "link"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    for dev in ["gen0", "dut0", "dut1", "recv0"] {
        assert!(
            !host_links.contains(&format!(" {dev}@")) && !host_links.contains(&format!(" {dev}:")),
            "{dev} left"
        );
    }
    // And the lab is gone for linerate too.
    let o = linerate(&["lab", "status", "--name", name]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no lab named lrt-basic"));
}

/// A lab with a second generator port: what the generator's sockets send
/// from the port's addresses goes out of it and comes into the DUT by
/// dut2, both families; the DUT routes the answers back to it; status
/// shows its two links.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_second_port_carries_what_is_sent_from_its_addresses() {
    let name = "lrt-ports2";
    let _down = Down(name);
    let said = ok(&["lab", "up", "--name", name, "--gen-ports", "2"]);
    assert!(said.contains("second port: gen1 -> dut2"), "{said}");
    let from = |src: &str, to: &str| ping_with("lrt-ports2-gen", &["-I", src, to]);
    assert!(
        from("198.18.128.1", "198.19.0.1"),
        "IPv4 by the second port"
    );
    assert!(
        from("2001:2:0:4000::1", "2001:2:0:8000::1"),
        "IPv6 by the second port"
    );
    let status = || -> Value {
        serde_json::from_str(&ok(&["lab", "status", "--name", name, "--json"])).unwrap()
    };
    let rx = |s: &Value, role: &str| {
        let l = s["links"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["role"] == role)
            .cloned();
        l.unwrap_or_else(|| panic!("no {role} in {s}"))["rx_packets"]
            .as_u64()
            .unwrap()
    };
    let s = status();
    assert_eq!(s["links"].as_array().unwrap().len(), 6, "{s}");
    assert_eq!(s["interfaces"]["dut_port2"], "dut2");
    assert!(rx(&s, "dut_port2") >= 4, "{s}");
    // The first port still carries the rest; the second only its own
    // (and the odd IPv6 link-local frame: fewer than the ten pings).
    let before = (rx(&s, "dut_in"), rx(&s, "dut_port2"));
    for _ in 0..5 {
        assert!(ping("lrt-ports2-gen", false, "198.19.0.1"));
    }
    let s = status();
    assert!(rx(&s, "dut_in") >= before.0 + 10, "{s}");
    assert!(rx(&s, "dut_port2") < before.1 + 10, "{s}");
    assert_eq!(
        s["napi_threads"].as_array().unwrap().len(),
        2,
        "dut0's and dut2's"
    );
    ok(&["lab", "down", "--name", name]);
    assert!(!netns_list().contains(name));
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn force_rebuilds_and_two_labs_coexist() {
    let _a = Down("lrt-a");
    let _b = Down("lrt-b");
    ok(&["lab", "up", "--name", "lrt-a"]);
    ok(&["lab", "up", "--name", "lrt-b", "--queues", "2"]);
    assert!(ping("lrt-a-gen", false, "198.19.0.1"));
    assert!(ping("lrt-b-gen", false, "198.19.0.1"));
    let b: Value =
        serde_json::from_str(&ok(&["lab", "status", "--name", "lrt-b", "--json"])).unwrap();
    assert_eq!(b["links"][0]["rx_queues"], 2);
    assert_eq!(
        b["napi_threads"].as_array().unwrap().len(),
        2,
        "one NAPI thread per queue"
    );
    let out = ok(&["lab", "up", "--name", "lrt-a", "--force"]);
    assert!(out.contains("lab lrt-a up"), "{out}");
    ok(&["lab", "down", "--name", "lrt-a"]);
    assert!(
        ping("lrt-b-gen", false, "198.19.0.1"),
        "removing one lab leaves the other working"
    );
    ok(&["lab", "down", "--name", "lrt-b"]);
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_name_clash_fails_cleanly_and_builds_nothing() {
    let _d = Down("lrt-clash");
    Command::new("ip")
        .args(["netns", "add", "lrt-clash-dut"])
        .status()
        .unwrap();
    let o = linerate(&["lab", "up", "--name", "lrt-clash"]);
    let _ = Command::new("ip")
        .args(["netns", "del", "lrt-clash-dut"])
        .status();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "one-line error: {err}");
    assert!(
        err.contains("lrt-clash-dut already exists") && err.contains("--name"),
        "{err}"
    );
    assert!(
        !netns_list().contains("lrt-clash-gen"),
        "nothing half-built"
    );
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn bad_arguments_are_refused_before_anything_is_built() {
    for (args, field) in [
        (vec!["lab", "up", "--name", "bad name"], "--name"),
        (
            vec!["lab", "up", "--name", "lrt-q", "--queues", "0"],
            "--queues",
        ),
        (
            vec!["lab", "up", "--name", "lrt-q", "--dut-cpu", "999"],
            "--dut-cpu",
        ),
        (
            vec!["lab", "up", "--name", "lrt-q", "--gen-ports", "3"],
            "--gen-ports",
        ),
    ] {
        let o = linerate(&args);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(field), "{args:?}: {err}");
    }
    assert!(!netns_list().contains("lrt-q"));
    let o = linerate(&["lab", "down", "--name", "lrt-never-built"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no lab named lrt-never-built"));
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn traffic_through_the_kernel_dut_and_xdp_detaches_on_exit() {
    let name = "lrt-traffic";
    let _down = Down(name);
    ok(&["lab", "up", "--name", name]);
    // A receiver for 3 seconds, a generator for 1 second meanwhile.
    let recv = Command::new(BIN)
        .args([
            "recv",
            "--netns",
            "lrt-traffic-recv",
            "-i",
            "recv0",
            "-t",
            "3",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let s: Value = serde_json::from_str(&ok(&["lab", "status", "--name", name, "--json"])).unwrap();
    let recv_link = s["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["role"] == "recv")
        .unwrap()
        .clone();
    assert_eq!(recv_link["xdp"][0]["name"], "lab_recv", "{recv_link}");
    assert_eq!(recv_link["xdp"][0]["mode"], "native");

    let g: Value = serde_json::from_str(&ok(&[
        "gen",
        "--netns",
        "lrt-traffic-gen",
        "-i",
        "gen0",
        "-n",
        "20000",
        // Paced: an unpaced burst can find dut0's NAPI thread asleep and
        // overflow its 256-frame ring before it wakes (docs/search.md).
        "-R",
        "100000",
        "--cpu",
        "0",
        "--json",
    ]))
    .unwrap();
    // -n counts frames built; what the wire did not take (the kernel DUT's
    // veth ring overflows under a burst) is reported apart, not as sent.
    let sent = g["sent_packets"].as_u64().unwrap();
    assert_eq!(sent + g["xmit_errors"].as_u64().unwrap(), 20000, "{g}");
    assert_eq!(g["mode"], "xdp");

    let out = recv.wait_with_output().unwrap();
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let got = r["received_packets"].as_u64().unwrap();
    let stamped = r["stamped_packets"].as_u64().unwrap();
    // The kernel forwards what it can of the 20k frames (a few may find the
    // ring full); what arrives from the generator carries its stamp. The
    // rest is the kernel's own chatter (IPv6 ND/MLD), a handful of frames.
    assert!(
        stamped > 1000 && stamped <= sent,
        "received {stamped} stamped frames of {sent}"
    );
    // One stream (one generator CPU), numbered from 0: what did not arrive
    // between the first and the last received is lost; the kernel neither
    // duplicates nor reorders here.
    let lost = r["lost"].as_u64().unwrap();
    assert!(lost <= 20000 - stamped, "lost {lost}, received {stamped}");
    assert_eq!(r["duplicated"], 0, "{r}");
    assert_eq!(r["streams"].as_array().unwrap().len(), 1, "{r}");
    let lat = &r["latency_ns"];
    assert!(
        lat["min"].as_u64().unwrap() > 0
            && lat["min"].as_f64().unwrap() <= lat["p50"].as_f64().unwrap()
            && lat["p50"].as_f64().unwrap() <= lat["p99"].as_f64().unwrap()
            && lat["p99"].as_f64().unwrap() <= lat["max"].as_f64().unwrap(),
        "{lat}"
    );
    assert!(
        got >= stamped && got - stamped < 50,
        "received {got}, stamped {stamped}"
    );

    // The receiver exited: its BPF link is gone, so is the program.
    let s: Value = serde_json::from_str(&ok(&["lab", "status", "--name", name, "--json"])).unwrap();
    for l in s["links"].as_array().unwrap() {
        assert!(l["xdp"].as_array().unwrap().is_empty(), "XDP left on {l}");
    }
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn not_root_is_a_one_line_error() {
    // runuser (util-linux) drops to an unprivileged user, who may not be
    // able to reach the build directory (say, under /root): run a copy.
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.path().join("linerate");
    std::fs::copy(BIN, &bin).unwrap();
    let o = Command::new("runuser")
        .args([
            "-u",
            "nobody",
            "--",
            bin.to_str().unwrap(),
            "lab",
            "up",
            "--name",
            "lrt-nobody",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("needs root"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!netns_list().contains("lrt-nobody"));
}
