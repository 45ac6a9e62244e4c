//! The kernel features this host's kernel lacks, in a VM that runs
//! Debian's own kernel (linerate_testkit::vm; ../shared/DESIGN.md section
//! 9): what linerate reads of VLAN subinterfaces and VRF devices there.
//! Needs root, qemu and the VM's kernel (scripts/setup.sh installs both);
//! without them each test says why and passes. Software emulation: slow,
//! and for correctness only.
use linerate_testkit::vm;
use serde_json::Value;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

/// The VM's kernel, or None after saying why there is none.
fn kernel() -> Option<vm::Kernel> {
    match vm::kernel() {
        Ok(k) => Some(k),
        Err(why) => {
            eprintln!("skipped: no VM here: {why}");
            None
        }
    }
}

/// The guest boots Debian's kernel with this machine's userland and the
/// project's binary, loads the modules this host lacks, and makes VLAN
/// subinterfaces (802.1Q and 802.1ad) and a VRF as the kernel would
/// anywhere; `linerate tune` reads them there.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_vm_has_vlans_and_vrfs_and_runs_linerate() {
    let Some(k) = kernel() else { return };
    let script = format!(
        "set -e\n\
         modprobe -a veth 8021q vrf\n\
         uname -r\n\
         ip link add v0 type veth peer name v1\n\
         ip link add link v0 name v0.10 type vlan id 10\n\
         ip link add link v0 name v0.20 type vlan proto 802.1ad id 20\n\
         ip link add red type vrf table 10\n\
         ip link set v0.10 master red\n\
         ip -d link show v0.10\n\
         ip -d link show v0.20\n\
         ip -d link show red\n\
         echo TUNE\n\
         {BIN} tune -i v0.10 --json\n"
    );
    let ran = k.run(&script, Duration::from_secs(600)).unwrap();
    assert_eq!(ran.status, 0, "{}\n{}", ran.output, ran.console);
    let out = &ran.output;
    assert!(out.starts_with(&k.version), "{out}");
    for want in [
        "vlan protocol 802.1Q id 10",
        "vlan protocol 802.1ad id 20",
        "vrf table 10",
        "master red",
    ] {
        assert!(out.contains(want), "{want}: {out}");
    }
    let (_, json) = out.split_once("TUNE\n").unwrap();
    let findings: Value = serde_json::from_str(json).unwrap();
    let forwarding = findings
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["scope"] == "v0.10" && f["check"] == "IPv4 forwarding")
        .unwrap();
    assert_eq!(forwarding["current"], "0", "{forwarding}");
}

/// The lab's VLAN configuration (scenarios/vlan.toml: the DUT's ports as
/// trunks, the seeds' "VLAN tagging") runs where the kernel has 802.1Q:
/// the kernel and linerate each forward the tagged frames, linerate in
/// its fast path. (Figures under emulation mean nothing: that it runs,
/// and where the frames went.)
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_lab_runs_its_vlan_configuration() {
    let Some(k) = kernel() else { return };
    let scenario = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/vlan.toml");
    let script = format!(
        "set -e\n\
         modprobe -a veth 8021q nfnetlink nf_tables nf_conntrack\n\
         {BIN} lab run {scenario} --repeat 1 --out /run/vlan-lab --name lrt-vlanlab > /dev/null 2> /run/lab.log || {{ cat /run/lab.log; exit 1; }}\n\
         echo RESULTS\n\
         cat /run/vlan-lab/results.json\n"
    );
    let ran = k.run(&script, Duration::from_secs(900)).unwrap();
    assert_eq!(ran.status, 0, "{}\n{}", ran.output, ran.console);
    let (_, json) = ran.output.split_once("RESULTS\n").unwrap();
    let results: Value = serde_json::from_str(json).unwrap();
    let runs = results["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{results}");
    for r in runs {
        let rx = r["received_pps"].as_f64().unwrap_or(0.0);
        assert!(rx > 0.0, "{} forwarded the tagged frames: {r}", r["dut"]);
    }
    // linerate's: in its fast path, none of them passed for their tag.
    let fast = &runs[1]["fast_path"];
    assert!(fast["forwarded"].as_u64().unwrap_or(0) > 0, "{fast}");
    assert!(fast.get("pass_vlan").is_none(), "{fast}");
}
