//! Restarting the router under traffic, measured by `linerate
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

mod common;

/// One at a time: a router starting beside the bench's traffic would be in
/// its measure (two cores).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn restarts_that_take_over_lose_nothing_and_kill_9_falls_back_to_the_kernel() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let o = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args([
            "bench",
            "restart",
            "--ways",
            "none,takeover,upgrade,service,kill9",
        ])
        // 6 s: after kill -9 the new router starts cold, and loading the
        // fast path (verifying its programs: about 3.6 s with the stateful
        // stage, docs/firewall-stateful.md) must end within the traffic.
        .args(["-R", "20000", "-t", "6", "--at", "1", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let trials: Value = serde_json::from_slice(&o.stdout).unwrap();
    let trials = trials.as_array().unwrap();
    assert_eq!(trials.len(), 5, "{trials:#?}");
    let n = |t: &Value, k: &str| t[k].as_u64().unwrap();
    for t in trials {
        // About 120,000 frames each, some perhaps refused by the
        // generator's own ring (never sent: not lost).
        assert!(n(t, "sent") > 100_000, "{t:#}");
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

/// A running router whose counters this build cannot take over (another
/// version's layout): the successor says why, tells it to stop (it
/// detaches, the kernel forwards) and starts cold. The running router is
/// played by the test on the handover socket, offering another layout.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn another_layout_is_refused_then_the_router_starts_cold() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
    use std::io::{BufRead, BufReader, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixListener;
    let lab = "lrt-layout";
    let _down = common::lab::up(lab);
    let dut = format!("{lab}-dut");
    let path = format!("/run/linerate/routers/{dut}.handover");
    std::fs::create_dir_all("/run/linerate/routers").unwrap();
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).unwrap();
    let old = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut ask = String::new();
        BufReader::new(&s).read_line(&mut ask).unwrap();
        let offer = serde_json::json!({
            "protocol": 1, "pid": 1, "version": "0.0.0",
            "layout": "router_stats 1024 x 8 bytes: forwarded",
            "interfaces": ["dut0", "dut1"],
        });
        let line = format!("{offer}\n");
        let fds: Vec<std::fs::File> = (0..3)
            .map(|_| std::fs::File::open("/dev/null").unwrap())
            .collect();
        let raw: Vec<i32> = fds.iter().map(|f| f.as_raw_fd()).collect();
        sendmsg::<()>(
            s.as_raw_fd(),
            &[std::io::IoSlice::new(line.as_bytes())],
            &[ControlMessage::ScmRights(&raw)],
            MsgFlags::empty(),
            None,
        )
        .unwrap();
        let mut word = String::new();
        BufReader::new(&s).read_line(&mut word).unwrap();
        s.flush().unwrap();
        // Ends, as the router it plays would once detached.
        (ask, word)
    });
    let o = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["route", "--netns", &dut, "-i", "dut0,dut1", "-q"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (ask, word) = old.join().unwrap();
    assert!(ask.contains("\"protocol\":1"), "{ask}");
    assert_eq!(word.trim(), "\"Stop\"");
    // It attaches cold once the played router is gone.
    let t = std::time::Instant::now();
    while linerate_dataplane::record::open(&dut).is_err() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "not started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: signals our child.
    unsafe { libc::kill(o.id() as i32, libc::SIGTERM) };
    let out = o.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot take over from pid 1: linerate 0.0.0 (pid 1) counts by another layout (router_stats 1024 x 8 bytes: forwarded; this build: router_stats 1024 x"),
        "{err}"
    );
    assert!(
        err.contains("it is stopped and this one starts cold"),
        "{err}"
    );
    assert!(err.contains("attached to dut0, dut1"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
}
