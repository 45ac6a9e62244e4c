//! The router's own services while it is measured (`[measure] probes`): a
//! ping of the DUT's address from the generator's side, ten a second, and
//! a BGP session through the DUT between the generator's and the
//! receiver's namespaces (BIRD at both ends, keepalives every second, the
//! least hold time BGP allows, 3 s). What a flood of the slow path takes
//! from the control plane and from the traffic the router must carry
//! (docs/policing.md). The receiver hands BGP's segments to its
//! namespace's kernel (bpf/lab/recv.bpf.c, `bgp_segment`). In a lab with a
//! second generator port they use it unless told otherwise
//! (`probes_port`): a port the flood does not take, so that their packets
//! queue behind none of its frames, and what they lose is the DUT's doing.
use anyhow::{bail, Context, Result};
use linerate_host::daemon::Daemon;
use linerate_lab::topology::{addr, Namespaces};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What the probes saw during one run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProbeRecord {
    /// The generator side's address they ran from (its port's).
    pub from: String,
    /// Echo requests sent to the DUT's address, and the replies.
    pub pings_sent: u64,
    pub pings_answered: u64,
    /// The BGP session was established when the run started and when it
    /// ended, and did not change state in between.
    pub bgp_up: bool,
    /// The generator side's session at the end: its state and, when it
    /// went down, why (BIRD's words).
    pub bgp_state: String,
}

/// The two BIRDs of the session, running.
pub struct Probes {
    gen_ns: String,
    /// The generator side's address and the DUT's it pings.
    gen_addr: &'static str,
    dut_addr: &'static str,
    gen: Bird,
    recv: Bird,
    _dir: tempfile::TempDir,
}

struct Bird {
    ctl: PathBuf,
    daemon: Daemon,
}

/// A run being watched: its ping, and the session as it was at the start.
pub struct Watch {
    ping: Child,
    since: Option<String>,
}

/// How long a session may take to come up once both ends run.
const ESTABLISH: Duration = Duration::from_secs(20);

/// The BGP session's name in both BIRDs.
const SESSION: &str = "probe";

/// One end's configuration: the session to `peer` (`peer_as`) from `local`
/// (`local_as`), one hop away through the DUT (TTL 2), no routes either
/// way. One end is passive: with both connecting at once, BGP's collision
/// resolution closed one of two connections after the session was up,
/// which a run saw as the session going down.
fn bird_config(local: &str, local_as: u32, peer: &str, peer_as: u32, passive: bool) -> String {
    let passive = if passive { "  passive on;\n" } else { "" };
    format!(
        "router id {local};\nprotocol device {{}}\n\
         protocol bgp {SESSION} {{\n  local {local} as {local_as};\n  neighbor {peer} as {peer_as};\n  \
         multihop 2;\n  hold time 3;\n  keepalive time 1;\n  connect retry time 1;\n{passive}  \
         ipv4 {{ import none; export none; }};\n}}\n"
    )
}

impl Bird {
    fn start(netns: &str, dir: &Path, name: &str, conf: String) -> Result<Bird> {
        let file = dir.join(format!("{name}.conf"));
        std::fs::write(&file, conf)?;
        let ctl = dir.join(format!("{name}.ctl"));
        let pid = dir.join(format!("{name}.pid"));
        // Real-time priority: the lab's generator keeps its CPU busy, and
        // a starved end would miss keepalives the DUT forwarded.
        let args = [
            "-f".to_string(),
            "10".into(),
            "bird".into(),
            "-f".into(),
            "-c".into(),
            file.display().to_string(),
            "-s".into(),
            ctl.display().to_string(),
            "-P".into(),
            pid.display().to_string(),
        ];
        let mut daemon = Daemon::spawn(&format!("{name} bird"), netns, "chrt", &args, dir)?;
        daemon.wait_for(&ctl)?;
        Ok(Bird { ctl, daemon })
    }

    /// The session's line: `probe BGP --- up 12:10:24.123 Established`.
    fn session(&mut self) -> Result<String> {
        self.daemon.check_running()?;
        let o = Command::new("birdc")
            .arg("-s")
            .arg(&self.ctl)
            .args(["show", "protocols", SESSION])
            .output()
            .context("running birdc")?;
        let reply = String::from_utf8_lossy(&o.stdout);
        Ok(reply
            .lines()
            .find(|l| l.starts_with(SESSION))
            .unwrap_or_default()
            .to_string())
    }
}

/// The session's state and since when, from its line: None unless
/// established.
fn established_since(line: &str) -> Option<String> {
    let cols: Vec<&str> = line.split_whitespace().collect();
    (cols.len() >= 6 && cols[3] == "up" && cols[5] == "Established").then(|| cols[4].to_string())
}

impl Probes {
    /// Both ends started and the session established, from the
    /// generator's port `port` (1 or 2, a lab's second).
    pub fn start(ns: &Namespaces, port: u32) -> Result<Probes> {
        let (gen_addr, dut_addr) = match port {
            1 => (addr::GEN_V4, addr::DUT_IN_V4),
            _ => (addr::GEN_PORT2_V4, addr::DUT_PORT2_V4),
        };
        let dir = tempfile::Builder::new()
            .prefix("linerate-probes")
            .tempdir()?;
        let gen = Bird::start(
            &ns.gen,
            dir.path(),
            "gen",
            bird_config(gen_addr, 65101, addr::RECV_V4, 65102, false),
        )?;
        let recv = Bird::start(
            &ns.recv,
            dir.path(),
            "recv",
            bird_config(addr::RECV_V4, 65102, gen_addr, 65101, true),
        )?;
        let mut p = Probes {
            gen_ns: ns.gen.clone(),
            gen_addr,
            dut_addr,
            gen,
            recv,
            _dir: dir,
        };
        let t = Instant::now();
        loop {
            p.recv.daemon.check_running()?;
            let line = p.gen.session()?;
            if established_since(&line).is_some() {
                return Ok(p);
            }
            if t.elapsed() > ESTABLISH {
                bail!(
                    "the probes' BGP session through the DUT did not come up in {} s: {}",
                    ESTABLISH.as_secs(),
                    line.trim()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Starts watching a run of `seconds`: the ping, and the session's
    /// state now.
    pub fn watch(&mut self, seconds: f64) -> Result<Watch> {
        let since = established_since(&self.gen.session()?);
        let ping = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.gen_ns,
                "ping",
                "-q",
                "-n",
                "-i",
                "0.1",
                "-I",
                self.gen_addr,
            ])
            .args(["-w", &format!("{}", seconds.ceil().max(1.0) as u64)])
            .arg(self.dut_addr)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting ping")?;
        Ok(Watch { ping, since })
    }

    /// What the run's probes saw.
    pub fn finish(&mut self, w: Watch) -> Result<ProbeRecord> {
        let out = w.ping.wait_with_output().context("waiting for ping")?;
        let (sent, answered) = ping_counts(&String::from_utf8_lossy(&out.stdout))
            .context("ping printed no statistics")?;
        let line = self.gen.session()?;
        let now = established_since(&line);
        Ok(ProbeRecord {
            from: self.gen_addr.to_string(),
            pings_sent: sent,
            pings_answered: answered,
            bgp_up: w.since.is_some() && now == w.since,
            bgp_state: line
                .split_whitespace()
                .skip(5)
                .collect::<Vec<_>>()
                .join(" "),
        })
    }
}

/// `N packets transmitted, M received` from ping's statistics.
fn ping_counts(out: &str) -> Option<(u64, u64)> {
    let line = out.lines().find(|l| l.contains("packets transmitted"))?;
    let mut words = line.split(", ");
    let sent = words.next()?.split(' ').next()?.parse().ok()?;
    let answered = words.next()?.split(' ').next()?.parse().ok()?;
    Some((sent, answered))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_and_the_pings_are_read_from_the_tools() {
        assert_eq!(
            established_since("probe      BGP        ---        up     12:10:24.123  Established"),
            Some("12:10:24.123".into())
        );
        assert_eq!(
            established_since("probe      BGP        ---        start  12:10:29.001  Active        Socket: Connection refused"),
            None
        );
        assert_eq!(established_since(""), None);
        assert_eq!(
            ping_counts("\n--- 198.18.0.254 ping statistics ---\n50 packets transmitted, 48 received, 4% packet loss, time 4912ms\nrtt min/avg/max/mdev = 0.030/0.051/0.120/0.010 ms\n"),
            Some((50, 48))
        );
        assert_eq!(
            ping_counts("50 packets transmitted, 0 received, 100% packet loss, time 4912ms\n"),
            Some((50, 0))
        );
        assert_eq!(ping_counts("ping: connect: Network is unreachable\n"), None);
        let c = bird_config(addr::GEN_V4, 65101, addr::RECV_V4, 65102, false);
        assert!(c.contains("neighbor 198.19.0.1 as 65102;"), "{c}");
        assert!(c.contains("multihop 2;"), "{c}");
        assert!(!c.contains("passive"), "{c}");
        let c = bird_config(addr::RECV_V4, 65102, addr::GEN_V4, 65101, true);
        assert!(c.contains("  passive on;\n"), "{c}");
    }
}
