//! The lab's hosts over real SSH (the transport): Debian's sshd in
//! a network namespace the test makes, joined to this one by a veth, with a
//! host key and a client key the test generates; the system's ssh client
//! connects through one master connection. Commands run there (in that
//! namespace), failures and hangs are errors naming the host, and a host
//! nobody answers for is refused at connect. Needs root and
//! openssh-server (scripts/setup.sh).
use linerate_labhosts::remote::{Host, SshOptions, Target};
use std::process::Command;
use std::time::{Duration, Instant};

const NS: &str = "lrt-sshd";
const HOST_ADDR: &str = "10.250.7.2";

fn sh(cmd: &str) {
    let s = Command::new("sh").arg("-c").arg(cmd).status().unwrap();
    assert!(s.success(), "{cmd}");
}

/// The namespace, its veth and its sshd, removed when dropped.
struct Sshd {
    dir: tempfile::TempDir,
    daemon: Option<std::process::Child>,
}

impl Sshd {
    fn start() -> Sshd {
        let _ = Command::new("ip").args(["netns", "del", NS]).status();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        sh(&format!("ip netns add {NS}"));
        let mut s = Sshd { dir, daemon: None };
        sh(&format!(
            "ip link add lrtssh0 type veth peer name lrtssh1 netns {NS} && \
             ip addr add 10.250.7.1/29 dev lrtssh0 && ip link set lrtssh0 up && \
             ip -n {NS} addr add {HOST_ADDR}/29 dev lrtssh1 && ip -n {NS} link set lrtssh1 up && \
             ip -n {NS} link set lo up"
        ));
        sh(&format!(
            "ssh-keygen -q -t ed25519 -N '' -f {d}/host && ssh-keygen -q -t ed25519 -N '' -f {d}/id && \
             cp {d}/id.pub {d}/authorized_keys && chmod 600 {d}/authorized_keys && mkdir -p /run/sshd && \
             echo \"{HOST_ADDR} $(cat {d}/host.pub)\" > {d}/known_hosts"
        ));
        std::fs::write(
            s.dir.path().join("sshd_config"),
            format!(
                "ListenAddress {HOST_ADDR}\nHostKey {d}/host\nAuthorizedKeysFile {d}/authorized_keys\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\nPidFile {d}/sshd.pid\n"
            ),
        )
        .unwrap();
        // In the foreground (-D), the test's child: killed and reaped here.
        s.daemon = Some(
            Command::new("ip")
                .args(["netns", "exec", NS, "/usr/sbin/sshd", "-D", "-f"])
                .arg(format!("{d}/sshd_config"))
                .args(["-E", &format!("{d}/sshd.log")])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        let t = Instant::now();
        while std::net::TcpStream::connect((HOST_ADDR, 22)).is_err() {
            assert!(t.elapsed() < Duration::from_secs(10), "sshd did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    fn options(&self) -> SshOptions {
        SshOptions {
            identity: Some(self.dir.path().join("id")),
            known_hosts: Some(self.dir.path().join("known_hosts")),
            connect_timeout: Some(3),
        }
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            let _ = d.kill();
            let _ = d.wait();
        }
        // Its sessions too: one outlives its daemon.
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!("ip netns pids {NS} | xargs -r kill -9 2>/dev/null"))
            .status();
        let _ = Command::new("ip").args(["netns", "del", NS]).status();
        let _ = Command::new("ip").args(["link", "del", "lrtssh0"]).status();
    }
}

/// sshd processes in the host's namespace.
fn sshd_processes() -> usize {
    linerate_host::netns::processes_named(NS, "sshd").unwrap()
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn commands_run_on_the_host_through_one_master_connection() {
    let sshd = Sshd::start();
    let dut = Host::connect(
        "dut",
        Target::Ssh(format!("root@{HOST_ADDR}")),
        sshd.options(),
    )
    .unwrap();
    // It runs in the host's namespace: the host's interface is there, the
    // test's end is not.
    let o = dut.run("ip -br link", Duration::from_secs(10)).unwrap();
    let links = String::from_utf8_lossy(&o.stdout);
    assert!(links.contains("lrtssh1"), "{links}");
    assert!(!links.contains("lrtssh0"), "{links}");
    // Through the master: more commands open no more connections (sshd
    // keeps its processes per connection, not per command).
    let connections = sshd_processes();
    for _ in 0..5 {
        dut.run("true", Duration::from_secs(10)).unwrap();
    }
    assert_eq!(sshd_processes(), connections);
    // A failing command and a hanging one: errors naming the host.
    let e = dut
        .run("echo no such thing >&2; exit 7", Duration::from_secs(10))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("host dut: `echo no such thing >&2; exit 7` failed"),
        "{e}"
    );
    assert!(e.ends_with("no such thing"), "{e}");
    let t = Instant::now();
    let e = dut
        .run("sleep 30", Duration::from_millis(500))
        .unwrap_err()
        .to_string();
    assert!(e.contains("did not end in 0.5 s"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(5));
    // Still usable after.
    dut.run("true", Duration::from_secs(10)).unwrap();
    drop(dut);
    // Nobody at that address (on the veth's subnet, no answer): refused at
    // connect, naming the host, within the connect timeout.
    let t = Instant::now();
    let e = Host::connect("gen", Target::Ssh("root@10.250.7.3".into()), sshd.options())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.starts_with("host gen (root@10.250.7.3): cannot connect"),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    // A key the host does not know: refused too (batch mode, no prompt).
    let mut wrong = sshd.options();
    wrong.identity = Some(sshd.dir.path().join("host"));
    let e = Host::connect("recv", Target::Ssh(format!("root@{HOST_ADDR}")), wrong)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("Permission denied"), "{e}");
}
