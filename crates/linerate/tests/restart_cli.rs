//! Restarting the router under traffic (issue 26), measured by `linerate
//! bench restart` in its own lab, at a rate the fast path holds: a new
//! `linerate route` taking over, and one from another binary (a copy of
//! this one: the test cannot rebuild), lose no frame (the receiver's
//! sequence numbers), hand none to the kernel (the DUT's ForwDatagrams
//! stay still), and the fast path counts every frame the receiver got, in
//! the same counters map. kill -9 then a start: the kernel forwards
//! meanwhile, and the new router counts in a new map. A control trial
//! with no restart runs in the same lab. Needs root.
use serde_json::Value;
use std::process::Command;

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn restarts_that_take_over_lose_nothing_and_kill_9_falls_back_to_the_kernel() {
    let o = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args([
            "bench",
            "restart",
            "--ways",
            "none,takeover,upgrade,service,kill9",
        ])
        .args(["-R", "20000", "-t", "2.5", "--at", "1", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let trials: Value = serde_json::from_slice(&o.stdout).unwrap();
    let trials = trials.as_array().unwrap();
    assert_eq!(trials.len(), 5, "{trials:#?}");
    let n = |t: &Value, k: &str| t[k].as_u64().unwrap();
    for t in trials {
        // About 50,000 frames each, some perhaps refused by the
        // generator's own ring (never sent: not lost).
        assert!(n(t, "sent") > 40_000, "{t:#}");
        assert_eq!(n(t, "received") + n(t, "lost"), n(t, "sent"), "{t:#}");
        assert_eq!(n(t, "duplicated"), 0, "{t:#}");
    }
    // The control, a takeover, an upgrade, systemctl restart: nothing lost,
    // nothing to the kernel, every frame counted in the same map.
    for t in &trials[..4] {
        assert_eq!(n(t, "lost"), 0, "{t:#}");
        assert_eq!(n(t, "kernel_forwarded"), 0, "{t:#}");
        assert_eq!(n(t, "fast_path_forwarded"), n(t, "received"), "{t:#}");
        assert_eq!(t["same_counters"], true, "{t:#}");
    }
    for t in &trials[1..4] {
        let said = t["said"].to_string();
        assert!(
            said.contains("took over the fast path of linerate"),
            "{said}"
        );
    }
    // systemctl restart: the stopped router left its offer, counters and
    // links in the (played) service manager's store.
    assert_eq!(trials[3]["way"], "service");
    assert_eq!(
        trials[3]["stored"],
        serde_json::json!([
            "linerate-offer",
            "linerate-stats",
            "linerate-link-dut0",
            "linerate-link-dut1"
        ])
    );
    // kill -9: the kernel forwards until the new router is in. What it
    // loses is what sat in dut0's XDP ring when the program went (the
    // kernel frees that ring on detaching, drivers/net/veth.c
    // veth_napi_del: 256 frames at most): never more.
    let k = &trials[4];
    assert_eq!(k["way"], "kill9");
    assert!(n(k, "kernel_forwarded") > 0, "{k:#}");
    assert!(n(k, "lost") <= 256, "{k:#}");
    assert_eq!(
        n(k, "kernel_forwarded") + n(k, "fast_path_forwarded"),
        n(k, "received"),
        "{k:#}"
    );
    assert_eq!(k["same_counters"], false, "{k:#}");
}
