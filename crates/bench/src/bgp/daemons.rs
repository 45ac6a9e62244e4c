//! The BGP daemons of `linerate bench bgp`, each a child process in a
//! lab namespace with its files in a directory of its own: the peer (BIRD,
//! originating the table from static routes it announces and withdraws on
//! command) and the DUT's speaker (BIRD, which installs plain routes, or
//! FRR's zebra and bgpd, which install next-hop objects), as Debian's bird2
//! and frr packages ship them.
use super::addrs;
use anyhow::{bail, Context, Result};
use linerate_host::daemon::Daemon;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The DUT's BGP speaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Speaker {
    Bird,
    Frr,
}

impl Speaker {
    pub fn name(self) -> &'static str {
        match self {
            Speaker::Bird => "bird",
            Speaker::Frr => "frr",
        }
    }
}

/// The peer's BIRD configuration: `routes4` IPv4 and `routes6` IPv6
/// prefixes in static protocols `s4` and `s6`, disabled until announced,
/// exported over one eBGP session per family (AS 65001 to the DUT's
/// 65000).
pub fn peer_config(routes4: usize, routes6: usize) -> String {
    let mut c = format!(
        "router id {p4};\nprotocol device {{}}\nipv4 table t4;\nipv6 table t6;\n\
         protocol static s4 {{\n  disabled yes;\n  ipv4 {{ table t4; }};\n",
        p4 = addrs::PEER_V4
    );
    for i in 0..routes4 {
        let _ = writeln!(c, "  route {}/24 blackhole;", addrs::prefix4(i));
    }
    c.push_str("}\nprotocol static s6 {\n  disabled yes;\n  ipv6 { table t6; };\n");
    for i in 0..routes6 {
        let _ = writeln!(c, "  route {}/48 blackhole;", addrs::prefix6(i));
    }
    let _ = write!(
        c,
        "}}\n\
         protocol bgp b4 {{\n  local {p4} as 65001;\n  neighbor {d4} as 65000;\n  {timers}\n  \
         ipv4 {{ table t4; import none; export all; }};\n}}\n\
         protocol bgp b6 {{\n  local {p6} as 65001;\n  neighbor {d6} as 65000;\n  {timers}\n  \
         ipv6 {{ table t6; import none; export all; }};\n}}\n",
        // The peer waits for the DUT to connect (no connection collision
        // as both start at once) and, should a session still fail, tries
        // again in a second, not BIRD's default minute.
        timers = "passive on; connect retry time 1; error wait time 1, 2;",
        p4 = addrs::PEER_V4,
        d4 = addrs::DUT_V4,
        p6 = addrs::PEER_V6,
        d6 = addrs::DUT_V6,
    );
    c
}

/// The DUT's BIRD: both sessions, every route into the kernel's main
/// table as a plain route. The import filter points the routes at the
/// lab's receiver (a third-party next hop on the DUT's egress), so the
/// generator's frames to them reach it and the BGP link carries only BGP.
pub fn dut_bird_config() -> String {
    format!(
        "router id {d4};\nprotocol device {{}}\n\
         protocol kernel k4 {{ ipv4 {{ import none; export all; }}; }}\n\
         protocol kernel k6 {{ ipv6 {{ import none; export all; }}; }}\n\
         protocol bgp b4 {{\n  local {d4} as 65000;\n  neighbor {p4} as 65001;\n  {timers}\n  \
         ipv4 {{ import filter {{ gw = {r4}; accept; }}; export none; }};\n}}\n\
         protocol bgp b6 {{\n  local {d6} as 65000;\n  neighbor {p6} as 65001;\n  {timers}\n  \
         ipv6 {{ import filter {{ gw = {r6}; accept; }}; export none; }};\n}}\n",
        timers = "connect delay time 1; connect retry time 1; error wait time 1, 2;",
        d4 = addrs::DUT_V4,
        p4 = addrs::PEER_V4,
        d6 = addrs::DUT_V6,
        p6 = addrs::PEER_V6,
        r4 = addrs::RECV_V4,
        r6 = addrs::RECV_V6,
    )
}

/// The DUT's FRR bgpd: the same sessions and next-hop rewrite as route
/// maps (zebra installs the routes with next-hop objects).
pub fn dut_bgpd_config() -> String {
    format!(
        "router bgp 65000\n bgp router-id {d4}\n no bgp ebgp-requires-policy\n \
         neighbor {p4} remote-as 65001\n neighbor {p4} timers connect 1\n \
         neighbor {p6} remote-as 65001\n neighbor {p6} timers connect 1\n \
         address-family ipv4 unicast\n  neighbor {p4} route-map TORECV4 in\n  \
         no neighbor {p6} activate\n exit-address-family\n \
         address-family ipv6 unicast\n  neighbor {p6} activate\n  \
         neighbor {p6} route-map TORECV6 in\n exit-address-family\n!\n\
         route-map TORECV4 permit 10\n set ip next-hop {r4}\n!\n\
         route-map TORECV6 permit 10\n set ipv6 next-hop global {r6}\n \
         set ipv6 next-hop prefer-global\n!\n",
        d4 = addrs::DUT_V4,
        p4 = addrs::PEER_V4,
        p6 = addrs::PEER_V6,
        r4 = addrs::RECV_V4,
        r6 = addrs::RECV_V6,
    )
}

/// The peer: BIRD in `netns`, controlled through its socket.
pub struct Peer {
    ctl: PathBuf,
    daemon: Daemon,
}

impl Peer {
    pub fn start(netns: &str, dir: &Path, routes4: usize, routes6: usize) -> Result<Peer> {
        let conf = dir.join("peer.conf");
        std::fs::write(&conf, peer_config(routes4, routes6))?;
        let ctl = dir.join("peer.ctl");
        let daemon = bird(netns, dir, "peer bird", &conf, &ctl)?;
        Ok(Peer { ctl, daemon })
    }

    /// `birdc` on the peer's socket; its reply.
    fn birdc(&mut self, args: &[&str]) -> Result<String> {
        self.daemon.check_running()?;
        let o = Command::new("birdc")
            .arg("-s")
            .arg(&self.ctl)
            .args(args)
            .output()
            .context("running birdc")?;
        let reply = String::from_utf8_lossy(&o.stdout).to_string();
        if !o.status.success() {
            bail!("birdc {}: {}", args.join(" "), reply.trim());
        }
        Ok(reply)
    }

    /// Waits until both sessions are established.
    pub fn wait_established(&mut self, dut: &mut [Daemon], limit: Duration) -> Result<()> {
        let t = Instant::now();
        loop {
            for d in dut.iter_mut() {
                d.check_running()?;
            }
            let up = |s: &str| s.contains("Established");
            let (b4, b6) = (
                self.birdc(&["show", "protocols", "b4"]).unwrap_or_default(),
                self.birdc(&["show", "protocols", "b6"]).unwrap_or_default(),
            );
            if up(&b4) && up(&b6) {
                return Ok(());
            }
            if t.elapsed() > limit {
                bail!(
                    "the BGP sessions did not come up in {} s: {} {}",
                    limit.as_secs(),
                    b4.trim(),
                    b6.trim()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Announces (enables the static protocols) or withdraws the table.
    pub fn announce(&mut self, on: bool) -> Result<()> {
        let verb = if on { "enable" } else { "disable" };
        for proto in ["s4", "s6"] {
            let r = self.birdc(&[verb, proto])?;
            if !r.contains(&format!("{proto}: {verb}d")) {
                bail!("birdc {verb} {proto}: {}", r.trim());
            }
        }
        Ok(())
    }
}

fn bird(netns: &str, dir: &Path, what: &str, conf: &Path, ctl: &Path) -> Result<Daemon> {
    let pid = ctl.with_extension("pid");
    let (conf, ctl, pid) = (
        conf.display().to_string(),
        ctl.display().to_string(),
        pid.display().to_string(),
    );
    let mut d = Daemon::spawn(
        what,
        netns,
        "bird",
        &["-f", "-c", &conf, "-s", &ctl, "-P", &pid],
        dir,
    )?;
    // BIRD checks its configuration before it opens its socket.
    d.wait_for(Path::new(&ctl))?;
    Ok(d)
}

/// Starts the DUT's speaker in `netns`: BIRD, or FRR's zebra then bgpd.
/// FRR's daemons drop to the `frr` user (it refuses root's vty group), so
/// their directory becomes frr's.
pub fn start_speaker(speaker: Speaker, netns: &str, dir: &Path) -> Result<Vec<Daemon>> {
    match speaker {
        Speaker::Bird => {
            let conf = dir.join("dut.conf");
            std::fs::write(&conf, dut_bird_config())?;
            Ok(vec![bird(
                netns,
                dir,
                "dut bird",
                &conf,
                &dir.join("dut.ctl"),
            )?])
        }
        Speaker::Frr => {
            let frr = dir.join("frr");
            std::fs::create_dir_all(&frr)?;
            std::fs::write(frr.join("zebra.conf"), "hostname dut\n")?;
            std::fs::write(frr.join("bgpd.conf"), dut_bgpd_config())?;
            let chown = Command::new("chown")
                .args(["-R", "frr:frr"])
                .arg(dir)
                .status()
                .context("chown to the frr user")?;
            if !chown.success() {
                bail!(
                    "chown -R frr:frr {}: is the frr package installed?",
                    dir.display()
                );
            }
            let p = |f: &str| frr.join(f).display().to_string();
            let (zserv, vty) = (p("zserv.api"), frr.display().to_string());
            let common = |conf: &str, pid: &str| {
                vec![
                    "-u".to_string(),
                    "frr".into(),
                    "-g".into(),
                    "frr".into(),
                    "-f".into(),
                    p(conf),
                    "-i".into(),
                    p(pid),
                    "-z".into(),
                    zserv.clone(),
                    "--vty_socket".into(),
                    vty.clone(),
                    "-A".into(),
                    "127.0.0.1".into(),
                    "-P".into(),
                    "0".into(),
                ]
            };
            // A netlink buffer for a full table's notifications (zebra's
            // -s, as FRR's docs advise for large tables).
            let mut zargs = common("zebra.conf", "zebra.pid");
            zargs.extend(["-s".into(), (64 << 20).to_string()]);
            let mut zebra = Daemon::spawn("dut zebra", netns, "/usr/lib/frr/zebra", &zargs, dir)?;
            zebra.wait_for(Path::new(&zserv))?;
            let bargs = common("bgpd.conf", "bgpd.pid");
            let bgpd = Daemon::spawn("dut bgpd", netns, "/usr/lib/frr/bgpd", &bargs, dir)?;
            Ok(vec![zebra, bgpd])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peer_announces_each_prefix_once_and_starts_withdrawn() {
        let c = peer_config(300, 70);
        assert_eq!(c.matches("/24 blackhole;").count(), 300);
        assert_eq!(c.matches("/48 blackhole;").count(), 70);
        assert!(c.contains("route 32.0.0.0/24 blackhole;"));
        assert!(c.contains("route 32.1.43.0/24 blackhole;"), "the 300th");
        assert!(c.contains("route 2a00:0:45::/48 blackhole;"), "the 70th");
        assert_eq!(c.matches("disabled yes;").count(), 2);
    }

    #[test]
    fn both_speakers_point_the_routes_at_the_receiver() {
        for c in [dut_bird_config(), dut_bgpd_config()] {
            assert!(c.contains(addrs::RECV_V4), "{c}");
            assert!(c.contains(addrs::RECV_V6), "{c}");
            assert!(
                c.contains(addrs::PEER_V4) && c.contains(addrs::PEER_V6),
                "{c}"
            );
        }
    }
}
