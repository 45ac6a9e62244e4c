//! linerate fed by the real BGP daemons (`linerate bench bgp`): a BIRD
//! peer announces, withdraws and re-announces a table of IPv4 and IPv6
//! prefixes to the DUT's BIRD (plain routes) or FRR (next-hop objects),
//! under traffic. Every sampled change the kernel made reaches the fast
//! path, both families, no notification is lost, and once settled every
//! frame to the table arrives (announced) or none does (withdrawn). How
//! fast is the bench's to measure, not this test's. Needs root, and
//! Debian's bird2 and frr (scripts/setup.sh installs them).
use serde_json::Value;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

/// One lab at a time: on two cores they would measure each other.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn bench_bgp(speaker: &str) -> Value {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let o = Command::new(BIN)
        .args([
            "bench",
            "bgp",
            "--speaker",
            speaker,
            "--routes",
            "20000",
            "--routes6",
            "5000",
            "--samples",
            "200",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    // Nothing left behind: namespaces, daemons.
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&ns.stdout).contains("lrbgp"),
        "the lab was left behind"
    );
    let daemons = Command::new("pgrep")
        .args(["-f", "linerate-bgp"])
        .output()
        .unwrap();
    assert!(
        daemons.stdout.is_empty(),
        "daemons left running: {}",
        String::from_utf8_lossy(&daemons.stdout)
    );
    r
}

fn check(r: &Value, speaker: &str) {
    assert_eq!(r["speaker"], speaker, "{r}");
    assert_eq!(
        (r["routes"].as_u64(), r["routes6"].as_u64()),
        (Some(20000), Some(5000))
    );
    assert_eq!(r["overflows"], 0, "{r}");
    for k in ["median", "p99", "max"] {
        assert!(r["lag_ms"][k].as_f64().is_some(), "{r}");
    }
    let phases = r["phases"].as_array().unwrap();
    let kinds: Vec<&str> = phases.iter().map(|p| p["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["announce", "withdraw", "reannounce"]);
    for p in phases {
        for fam in ["ipv4", "ipv6"] {
            let f = &p[fam];
            assert_eq!(f["samples"], 200, "{} {fam}: {p}", p["kind"]);
            assert_eq!(f["never"], 0, "{} {fam}: {p}", p["kind"]);
            assert_eq!(f["unheard"], 0, "{} {fam}: {p}", p["kind"]);
        }
        assert!(p["during"]["offered"].as_u64().unwrap() > 0, "{p}");
        for settled in ["settled_ipv4", "settled_ipv6"] {
            let [offered, refused, received] =
                ["offered", "refused", "received"].map(|k| p[settled][k].as_u64().unwrap());
            assert!(offered > 0, "{settled}: {p}");
            if p["kind"] == "withdraw" {
                assert_eq!(received, 0, "forwarded to a withdrawn table: {p}");
            } else {
                // Every frame the DUT took arrives; its ring may refuse a
                // few while the daemons still hold its cores, not more.
                assert_eq!(received, offered - refused, "{settled} lost frames: {p}");
                assert!(
                    refused * 100 <= offered,
                    "{settled}: the DUT refused frames: {p}"
                );
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn bird_plain_routes_announced_withdrawn_and_reannounced_are_followed_under_traffic() {
    check(&bench_bgp("bird"), "bird");
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn frr_nexthop_object_routes_announced_withdrawn_and_reannounced_are_followed_under_traffic() {
    check(&bench_bgp("frr"), "frr");
}
