//! `linerate lab run` on hosts over real SSH. The test builds a
//! lab's three namespaces (generator, DUT, receiver, joined by the lab's
//! veths), gives each a management veth to this namespace and Debian's
//! sshd with a host key and a client key it generates, and runs scenarios
//! whose hosts are those SSH targets. The DUT is configured only through
//! its `setup` and `teardown` commands. Results agree with the same
//! scenario run in a local lab; an unreachable host, a wrong linerate, a
//! failing setup and a generator host killed mid-run each give an error
//! that names what failed, and the DUT's teardown runs. Needs root and
//! openssh-server (scripts/setup.sh).
use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");
const LAB: &str = "lrt-remote";
const ROLES: [&str; 3] = ["gen", "dut", "recv"];

fn sh(cmd: &str) {
    let o = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    assert!(o.status.success(), "{cmd}: {o:?}");
}

/// The management address of host `k` (gen 0, dut 1, recv 2) and of this
/// namespace's end of its veth.
fn addr(k: usize) -> (String, String) {
    (
        format!("10.250.8.{}", 4 * k + 2),
        format!("10.250.8.{}", 4 * k + 1),
    )
}

/// Three sshd, one in each of the lab's namespaces, removed when dropped.
struct Hosts {
    dir: tempfile::TempDir,
    daemons: Vec<Child>,
}

impl Hosts {
    fn start() -> Hosts {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        sh(&format!(
            "ssh-keygen -q -t ed25519 -N '' -f {d}/host && ssh-keygen -q -t ed25519 -N '' -f {d}/id && \
             cp {d}/id.pub {d}/authorized_keys && chmod 600 {d}/authorized_keys && mkdir -p /run/sshd"
        ));
        let mut h = Hosts {
            dir,
            daemons: Vec::new(),
        };
        let mut known = String::new();
        for (k, role) in ROLES.iter().enumerate() {
            let ns = format!("{LAB}-{role}");
            let (there, here) = addr(k);
            let _ = Command::new("ip")
                .args(["link", "del", &format!("lrtrm{k}")])
                .output();
            sh(&format!(
                "ip link add lrtrm{k} type veth peer name mgmt0 netns {ns} && \
                 ip addr add {here}/30 dev lrtrm{k} && ip link set lrtrm{k} up && \
                 ip -n {ns} addr add {there}/30 dev mgmt0 && ip -n {ns} link set mgmt0 up && \
                 ip -n {ns} link set lo up"
            ));
            std::fs::write(
                h.dir.path().join(format!("sshd_config.{role}")),
                format!(
                    "ListenAddress {there}\nHostKey {d}/host\nAuthorizedKeysFile {d}/authorized_keys\n\
                     PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                     PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\nPidFile {d}/sshd.{role}.pid\n"
                ),
            )
            .unwrap();
            h.daemons.push(
                Command::new("ip")
                    .args(["netns", "exec", &ns, "/usr/sbin/sshd", "-D", "-f"])
                    .arg(format!("{d}/sshd_config.{role}"))
                    .args(["-E", &format!("{d}/sshd.{role}.log")])
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap(),
            );
            known.push_str(&format!(
                "{there} {}",
                std::fs::read_to_string(h.dir.path().join("host.pub")).unwrap()
            ));
            let t = Instant::now();
            while std::net::TcpStream::connect((there.as_str(), 22)).is_err() {
                assert!(
                    t.elapsed() < Duration::from_secs(10),
                    "sshd {role} did not listen"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        std::fs::write(h.dir.path().join("known_hosts"), known).unwrap();
        h
    }

    /// The scenario's [ssh] table and hosts: the lab's three namespaces as
    /// SSH targets, this test's own linerate on each. Two generators, on
    /// CPUs 0 and 1, both send from the generator namespace's gen0 (the
    /// lab has one generator port): their rates add up.
    fn section(&self, gen_linerate: &str) -> String {
        let d = self.dir.path().display();
        let gen = |cpu: usize| {
            format!(
                "[[hosts.gen]]\nssh = \"root@{}\"\ninterfaces = [\"gen0\"]\ncpus = [{cpu}]\nlinerate = \"{gen_linerate}\"\n\n",
                addr(0).0
            )
        };
        format!(
            "[ssh]\nidentity = \"{d}/id\"\nknown_hosts = \"{d}/known_hosts\"\nconnect_timeout = 3\n\n{}{}\
             [hosts.recv]\nssh = \"root@{}\"\ninterfaces = [\"recv0\"]\nlinerate = \"{BIN}\"\n\n\
             [hosts.dut]\nssh = \"root@{}\"\ninterfaces = [\"dut0\", \"dut1\"]\nlinerate = \"{BIN}\"\n",
            gen(0),
            gen(1),
            addr(2).0,
            addr(1).0
        )
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for mut d in self.daemons.drain(..) {
            let _ = d.kill();
            let _ = d.wait();
        }
        // Their sessions too (a session outlives its daemon, and one whose
        // client is gone would hold its namespace for good).
        for role in ROLES {
            kill_all_in(role);
        }
        for k in 0..ROLES.len() {
            let _ = Command::new("ip")
                .args(["link", "del", &format!("lrtrm{k}")])
                .output();
        }
    }
}

/// Two DUT configurations made only of commands: the kernel told to
/// forward, and told not to. `marks` gets a line a teardown.
fn duts(marks: &Path) -> String {
    let m = marks.display();
    format!(
        "[dut.kernel-on]\nsetup = [\"sysctl -qw net.ipv4.ip_forward=1\"]\n\
         teardown = [\"sysctl -qw net.ipv4.ip_forward=0\", \"echo on >> {m}\"]\n\
         record = [\"sysctl net.ipv4.ip_forward\", \"ip -br link show dut0\"]\n\n\
         [dut.kernel-off]\nsetup = [\"sysctl -qw net.ipv4.ip_forward=0\"]\n\
         teardown = [\"echo off >> {m}\"]\n"
    )
}

/// RFC 2544 at most 2 kpps: far below what the kernel forwards here, so a
/// forwarding DUT's throughput is exactly the maximum, wherever it runs.
/// (RFC 2544 allows no loss, and a 256-frame veth ring fills in a stall of
/// the DUT's core: 13 ms at 20 kpps, where a local run once lost frames;
/// 51 ms at 5 kpps, where a fresh CI machine once did; 128 ms at 2 kpps.)
const MEASURE: &str = "repeat = 2\nduts = [\"kernel-on\", \"kernel-off\"]\n\n\
     [measure]\nmethod = \"rfc2544\"\nseconds = 0.5\nmax_rate = \"2000\"\nwidth = 0.4\n\n";

/// Writes scenario `name` into `dir`: [`MEASURE`], the hosts `section`
/// (or a local lab's), the DUT configurations.
fn scenario(dir: &Path, name: &str, section: &str, marks: &Path) -> std::path::PathBuf {
    let f = dir.join(format!("{name}.toml"));
    let text = format!("name = \"{name}\"\n{MEASURE}{section}\n{}", duts(marks));
    std::fs::write(&f, text).unwrap();
    f
}

/// Replaces `from` (which must be there) by `to` in file `f`.
fn edit(f: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(f).unwrap();
    assert!(text.contains(from), "{from:?} in {text}");
    std::fs::write(f, text.replace(from, to)).unwrap();
}

fn lab_run(scenario: &Path, out: &Path) -> Output {
    Command::new(BIN)
        .args(["lab", "run", "--json", "--out"])
        .arg(out)
        .arg(scenario)
        .output()
        .unwrap()
}

fn throughputs(o: &Output) -> Vec<(String, f64)> {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    r["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["dut"].as_str().unwrap().to_string(),
                x["value_pps"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// Every run's log in a lab run's output directory: its trials, for a
/// failure's message.
fn logs(out: &Path) -> String {
    let mut all = String::new();
    for e in std::fs::read_dir(out.join("logs"))
        .into_iter()
        .flatten()
        .flatten()
    {
        all.push_str(&format!("{}:\n", e.path().display()));
        all.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
    }
    all
}

fn forwarding() -> String {
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            &format!("{LAB}-dut"),
            "sysctl",
            "-n",
            "net.ipv4.ip_forward",
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_scenario_runs_on_hosts_over_ssh_as_it_runs_locally_and_fails_cleanly() {
    let _down = common::lab::up(LAB);
    let hosts = Hosts::start();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let marks = w.join("teardowns");
    // The DUT does not forward until a setup command says so.
    sh(&format!(
        "ip netns exec {LAB}-dut sysctl -qw net.ipv4.ip_forward=0"
    ));

    // The same scenario on the hosts and in a local lab of its own.
    let remote = scenario(w, "remote", &hosts.section(BIN), &marks);
    let local = scenario(w, "local", "[lab]\nname = \"lrt-rlocal\"\n", &marks);
    // `--check`: every host connected and checked, nothing run.
    let o = Command::new(BIN)
        .args(["lab", "run", "--check"])
        .arg(&remote)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && said.contains("ready"), "{said}{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("DUT root@10.250.8.6 (MAC 02:00:00:00:00:02)"),
        "{o:?}"
    );
    assert_eq!(forwarding(), "0", "--check runs no setup");
    let on_hosts = throughputs(&lab_run(&remote, &w.join("out-remote")));
    let report = std::fs::read_to_string(w.join("out-remote/report.md")).unwrap();
    let in_lab = throughputs(&lab_run(&local, &w.join("out-local")));
    assert_eq!(
        on_hosts,
        in_lab,
        "on the hosts, then in the local lab; their trials:\n{}\n{}",
        logs(&w.join("out-remote")),
        logs(&w.join("out-local"))
    );
    // And with hosts that are this machine (`ssh = "local"`), in the same
    // namespaces: the commands path without SSH.
    let section = format!(
        "[hosts.gen]\nssh = \"local\"\nnetns = \"{LAB}-gen\"\ninterfaces = [\"gen0\"]\nlinerate = \"{BIN}\"\n\n\
         [hosts.recv]\nssh = \"local\"\nnetns = \"{LAB}-recv\"\ninterfaces = [\"recv0\"]\nlinerate = \"{BIN}\"\n\n\
         [hosts.dut]\nssh = \"local\"\nnetns = \"{LAB}-dut\"\ninterfaces = [\"dut0\", \"dut1\"]\n"
    );
    let here = scenario(w, "here", &section, &marks);
    let on_local_hosts = throughputs(&lab_run(&here, &w.join("out-here")));
    assert_eq!(
        on_hosts,
        on_local_hosts,
        "on the hosts, then on local ones; their trials:\n{}\n{}",
        logs(&w.join("out-remote")),
        logs(&w.join("out-here"))
    );
    assert_eq!(
        on_hosts,
        // (The second round runs them the other way round: the lab's
        // balanced order, crates/labrun/src/order.rs.)
        [
            ("kernel-on", 2000.0),
            ("kernel-off", 0.0),
            ("kernel-off", 0.0),
            ("kernel-on", 2000.0)
        ]
        .map(|(d, v)| (d.to_string(), v))
    );
    // Every run's teardown ran, on the hosts and in the lab.
    assert_eq!(
        std::fs::read_to_string(&marks).unwrap(),
        "on\noff\noff\non\n".repeat(3)
    );
    assert_eq!(forwarding(), "0", "the remote DUT as its teardown left it");
    // What the DUT was asked to record, from the DUT; and its settings
    // with each configuration set up, as `linerate tune` found them there.
    assert!(report.contains("net.ipv4.ip_forward = 1"), "{report}");
    assert!(
        report.contains("| scope | check | kernel-on | kernel-off |\n")
            && report.contains("| host | IPv4 forwarding | 1 | 0 (change) |\n"),
        "{report}"
    );
    assert!(report.contains("dut0@if"), "{report}");
    let g = addr(0).0;
    assert!(
        report.contains(&format!(
            "- hosts: generator root@{g} (gen0; CPUs [0]) + root@{g} (gen0; CPUs [1]), receiver"
        )),
        "{report}"
    );
    // Each generator's share, reported: half the 2 kpps each, as its
    // pacing holds it (the generator may fall short by GENERATOR_TOLERANCE,
    // 1%, before a trial is invalid).
    let row = report
        .lines()
        .find(|l| l.starts_with("| kernel-on | ipv4-60 | 1 |"))
        .unwrap_or_else(|| panic!("no generators' row for run 1: {report}"));
    let shares: Vec<f64> = row
        .trim_matches('|')
        .split('|')
        .skip(3)
        .map(|c| c.trim().parse().unwrap())
        .collect();
    assert_eq!(shares.len(), 2, "{row}");
    for v in shares {
        assert!((v - 1000.0).abs() <= 10.0, "{row}");
    }

    // Failures. A host nobody answers for: refused before anything runs.
    let section = hosts.section(BIN).replace(&addr(2).0, "10.250.8.30");
    let bad = scenario(w, "unreachable", &section, &marks);
    let o = lab_run(&bad, &w.join("out-bad"));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(e.contains("host recv (root@10.250.8.30): "), "{e}");
    assert!(!w.join("out-bad/results.json").exists());
    let o = Command::new(BIN)
        .args(["lab", "run", "--check"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("host recv (root@10.250.8.30): "),
        "{o:?}"
    );
    // Another linerate on the generator host: the error says what to install.
    let fake = w.join("old-linerate");
    std::fs::write(&fake, "#!/bin/sh\necho linerate 0.0.1\n").unwrap();
    sh(&format!("chmod +x {}", fake.display()));
    let old = scenario(
        w,
        "old",
        &hosts.section(&fake.display().to_string()),
        &marks,
    );
    let o = lab_run(&old, &w.join("out-old"));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("host gen: ")
            && e.contains("\"linerate 0.0.1\"")
            && e.contains(&format!("install linerate {}", env!("CARGO_PKG_VERSION"))),
        "{e}"
    );

    // A setup that fails: stopped, its teardown run, the report says so.
    std::fs::write(&marks, "").unwrap();
    let failing = scenario(w, "failing", &hosts.section(BIN), &marks);
    edit(
        &failing,
        "setup = [\"sysctl -qw net.ipv4.ip_forward=0\"]",
        "setup = [\"sysctl -qw net.ipv4.no_such_thing=0\"]",
    );
    let o = lab_run(&failing, &w.join("out-failing"));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(e.contains("stopped: kernel-off, ipv4-60, run 1: DUT kernel-off: setup: host dut: `sysctl -qw net.ipv4.no_such_thing=0` failed"), "{e}");
    assert_eq!(std::fs::read_to_string(&marks).unwrap(), "on\noff\n");
    let report = std::fs::read_to_string(w.join("out-failing/report.md")).unwrap();
    assert!(
        report.contains("**stopped by a failure**: kernel-off"),
        "{report}"
    );
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(w.join("out-failing/results.json")).unwrap())
            .unwrap();
    assert_eq!(
        r["runs"].as_array().unwrap().len(),
        1,
        "the run finished before is kept"
    );

    // Ctrl-C during the second run: the remote generators and receiver
    // stop, the DUT's teardown runs, the first run is kept.
    let long = scenario(w, "long", &hosts.section(BIN), &marks);
    edit(
        &long,
        "method = \"rfc2544\"\nseconds = 0.5\nmax_rate = \"2000\"\nwidth = 0.4",
        "method = \"overload\"\nseconds = 3",
    );
    let child = second_run_under_way(&long, &w.join("out-int"), &marks);
    // SAFETY: signals our child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(e.contains("interrupted: partial results in"), "{e}");
    assert_eq!(
        std::fs::read_to_string(&marks).unwrap(),
        "on\noff\n",
        "the DUT's teardown ran"
    );
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(w.join("out-int/results.json")).unwrap()).unwrap();
    assert_eq!(
        (r["runs"].as_array().unwrap().len(), &r["interrupted"]),
        (1, &serde_json::json!(true))
    );
    for role in ROLES {
        assert_eq!(
            linerate_processes(role),
            0,
            "a linerate left running on host {role}"
        );
    }

    // The generator's host killed mid-run: every process in its namespace,
    // sshd and the running generators with it.
    let child = second_run_under_way(&long, &w.join("out-long"), &marks);
    kill_all_in("gen");
    let o = child.wait_with_output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        e.contains("stopped: kernel-off, ipv4-60, run 1: host gen"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(&marks).unwrap(),
        "on\noff\n",
        "the DUT's teardown ran"
    );
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(w.join("out-long/results.json")).unwrap()).unwrap();
    assert_eq!(r["runs"].as_array().unwrap().len(), 1);
    assert!(r["failed"].as_str().unwrap().contains("host gen"), "{r}");
    assert_eq!(
        linerate_processes("recv"),
        0,
        "the receiver was left running"
    );
    drop(hosts);
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&ns.stdout).contains("lrt-rlocal"),
        "the local lab was left behind"
    );
}

/// Starts `linerate lab run` of `scenario` (kernel-on, then kernel-off, 3 s
/// overload runs) and returns once the first run's teardown has run and
/// the second run is 1.5 s in.
fn second_run_under_way(scenario: &Path, out: &Path, marks: &Path) -> Running {
    std::fs::write(marks, "").unwrap();
    let child = Command::new(BIN)
        .args(["lab", "run", "--json", "--out"])
        .arg(out)
        .arg(scenario)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !std::fs::read_to_string(marks)
        .unwrap_or_default()
        .starts_with("on\n")
    {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the first run never ended"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    Running(Some(child))
}

/// A `lab run` the test started: stopped (Ctrl-C, then waited for) if the
/// test ends before it does, so that it tears down what it set up before
/// the hosts go.
struct Running(Option<Child>);

impl Running {
    fn id(&self) -> u32 {
        self.0.as_ref().unwrap().id()
    }

    fn wait_with_output(mut self) -> std::io::Result<Output> {
        self.0.take().unwrap().wait_with_output()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            // SAFETY: signals our child.
            unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
            let _ = c.wait();
        }
    }
}

/// Kills every process in host `role`'s namespace (one may end on its own
/// meanwhile).
fn kill_all_in(role: &str) {
    let _ = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ip netns pids {LAB}-{role} | xargs -r kill -9 2>/dev/null"
        ))
        .output();
}

/// linerate processes in host `role`'s namespace.
fn linerate_processes(role: &str) -> usize {
    linerate_host::netns::processes_named(&format!("{LAB}-{role}"), "linerate").unwrap()
}
