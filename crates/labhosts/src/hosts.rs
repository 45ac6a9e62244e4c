//! The lab's hosts as a scenario names them: the generator and
//! the receiver, each this machine or an SSH target with its interfaces
//! and CPUs, and the DUT, an SSH target or a box known only by its MAC.
//! Without a `[hosts]` table the lab is the local namespace lab (this
//! machine, the lab's three namespaces): one run loop serves both
//! (linerate_labrun::run).
use crate::remote::{quote, Host, SshOptions, Target};
use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// `[hosts]` as written.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HostsSection {
    /// `[hosts.gen]`, or several generator hosts as `[[hosts.gen]]`.
    pub gen: Option<toml::Value>,
    pub recv: Option<EndDef>,
    pub dut: Option<DutHostDef>,
}

/// `[hosts.gen]` or `[hosts.recv]` as written.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EndDef {
    /// `[user@]host`, or "local".
    pub ssh: String,
    /// The generator's: several share its CPUs (dealt in order) and add
    /// up; the receiver's: one.
    pub interfaces: Vec<String>,
    /// The generator's sending CPUs (default: the CPU it starts on).
    #[serde(default)]
    pub cpus: Vec<usize>,
    /// A network namespace on that host to run in.
    pub netns: Option<String>,
    /// The linerate binary on that host (default: `linerate` in its PATH).
    pub linerate: Option<String>,
}

/// `[hosts.dut]` as written.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DutHostDef {
    /// `[user@]host` or "local"; omitted for a DUT nobody logs into (its
    /// `setup` and `teardown` must then be empty).
    pub ssh: Option<String>,
    /// The MAC the generator sends to (default: read from the first of
    /// `interfaces` over SSH).
    pub mac: Option<String>,
    /// The DUT's ports, in then out (checked to exist when it has `ssh`).
    #[serde(default)]
    pub interfaces: Vec<String>,
    pub netns: Option<String>,
    /// The DUT's linerate command, for its settings (`linerate tune`)
    /// beside the results (default "linerate"; a DUT without one records
    /// why not).
    pub linerate: Option<String>,
}

/// `[ssh]`: options for every SSH host.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SshSection {
    /// The private key (default: ssh's own choice).
    pub identity: Option<PathBuf>,
    /// A known_hosts file, checked strictly (default: ssh's).
    pub known_hosts: Option<PathBuf>,
    /// Seconds to connect (default 10).
    pub connect_timeout: Option<u32>,
    /// Seconds a DUT's `setup`, `teardown` or `record` command may take
    /// (default 60).
    pub command_timeout: Option<f64>,
}

/// A generator or receiver host, checked.
#[derive(Clone, Debug, Serialize)]
pub struct End {
    #[serde(serialize_with = "target_text")]
    pub target: Target,
    pub netns: Option<String>,
    pub linerate: String,
    pub interfaces: Vec<String>,
    pub cpus: Vec<usize>,
}

/// The DUT's host, checked.
#[derive(Clone, Debug, Serialize)]
pub struct DutHost {
    #[serde(serialize_with = "opt_target_text")]
    pub target: Option<Target>,
    pub netns: Option<String>,
    pub mac: Option<String>,
    pub interfaces: Vec<String>,
    pub linerate: String,
}

/// The lab's hosts, checked.
#[derive(Clone, Debug, Serialize)]
pub struct LabHosts {
    /// One or more generator hosts: their rates add up.
    pub gen: Vec<End>,
    pub recv: End,
    pub dut: DutHost,
    #[serde(skip)]
    pub ssh: SshOptions,
    pub command_timeout: f64,
}

fn target_text<S: serde::Serializer>(t: &Target, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&match t {
        Target::Local => "local".to_string(),
        Target::Ssh(d) => d.clone(),
    })
}

fn opt_target_text<S: serde::Serializer>(t: &Option<Target>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => target_text(t, s),
        None => s.serialize_none(),
    }
}

/// Why a hosts section is refused: the field (`hosts.gen.cpus`, ...) and
/// the reason.
pub type HostsError = linerate_host::field::FieldError;

fn fail<T>(field: &'static str, reason: String) -> std::result::Result<T, HostsError> {
    Err(HostsError { field, reason })
}

/// An interface name the kernel takes (IFNAMSIZ, no space or slash).
fn check_ifname(field: &'static str, n: &str) -> std::result::Result<(), HostsError> {
    if n.is_empty() || n.len() > 15 || n.contains(|c: char| c.is_whitespace() || c == '/') {
        return fail(field, format!("{n:?} is not an interface name"));
    }
    Ok(())
}

fn check_netns(field: &'static str, n: &Option<String>) -> std::result::Result<(), HostsError> {
    match n {
        Some(n) if n.is_empty() || n.contains(|c: char| c.is_whitespace() || c == '/') => {
            fail(field, format!("{n:?} is not a namespace name"))
        }
        _ => Ok(()),
    }
}

impl End {
    fn check(def: &EndDef, role: &'static str) -> std::result::Result<End, HostsError> {
        let f = |gen: &'static str, recv: &'static str| if role == "gen" { gen } else { recv };
        let target = Target::parse(&def.ssh).map_err(|e| HostsError {
            field: f("hosts.gen.ssh", "hosts.recv.ssh"),
            reason: e.to_string(),
        })?;
        let field = f("hosts.gen.interfaces", "hosts.recv.interfaces");
        if def.interfaces.is_empty() {
            return fail(field, "at least one interface is needed".into());
        }
        if role == "recv" && def.interfaces.len() > 1 {
            return fail(field, "one receiving interface (several generators may feed one DUT; one receiver counts)".into());
        }
        for i in &def.interfaces {
            check_ifname(field, i)?;
        }
        let cpus_field = f("hosts.gen.cpus", "hosts.recv.cpus");
        if role == "recv" && !def.cpus.is_empty() {
            return fail(
                cpus_field,
                "the receiver runs in the kernel's receive path; it takes no CPUs".into(),
            );
        }
        let n = def.interfaces.len();
        if !def.cpus.is_empty() {
            if !def.cpus.len().is_multiple_of(n) {
                return fail(
                    cpus_field,
                    format!(
                        "{} CPUs for {n} interfaces: each interface gets as many, dealt in order",
                        def.cpus.len()
                    ),
                );
            }
            // `linerate gen --cpu C -p K` sends from K CPUs from C on.
            for share in def.cpus.chunks(def.cpus.len() / n) {
                if share.windows(2).any(|w| w[1] != w[0] + 1) {
                    return fail(cpus_field, format!("{share:?}: an interface's CPUs must be consecutive (linerate gen --cpu C -p K)"));
                }
            }
        }
        check_netns(f("hosts.gen.netns", "hosts.recv.netns"), &def.netns)?;
        let linerate = def.linerate.clone().unwrap_or_else(|| "linerate".into());
        if linerate.is_empty() {
            return fail(
                f("hosts.gen.linerate", "hosts.recv.linerate"),
                "empty".into(),
            );
        }
        Ok(End {
            target,
            netns: def.netns.clone(),
            linerate,
            interfaces: def.interfaces.clone(),
            cpus: def.cpus.clone(),
        })
    }

    /// Each interface's generator CPUs: (first, count), or None for the
    /// CPU it starts on.
    pub fn cpu_shares(&self) -> Vec<Option<(usize, usize)>> {
        let n = self.interfaces.len();
        if self.cpus.is_empty() {
            return vec![None; n];
        }
        self.cpus
            .chunks(self.cpus.len() / n)
            .map(|c| Some((c[0], c.len())))
            .collect()
    }

    /// The shell command that runs `linerate ARGS` there (in its
    /// namespace, if it has one).
    pub fn linerate_command(&self, args: &[String]) -> String {
        let mut words = vec![quote(&self.linerate)];
        words.push(quote(&args[0]));
        if let Some(ns) = &self.netns {
            words.extend(["--netns".into(), quote(ns)]);
        }
        words.extend(args[1..].iter().map(|a| quote(a)));
        words.join(" ")
    }
}

impl LabHosts {
    /// Checks `[hosts]` and `[ssh]`; None when there is no `[hosts]`
    /// (the local namespace lab).
    pub fn check(
        h: &Option<HostsSection>,
        ssh: &SshSection,
    ) -> std::result::Result<Option<LabHosts>, HostsError> {
        let Some(h) = h else {
            return Ok(None);
        };
        let gen_defs: Vec<EndDef> = match &h.gen {
            None => {
                return fail(
                    "hosts.gen",
                    "the generator's host is needed with [hosts]".into(),
                )
            }
            Some(toml::Value::Array(many)) if many.is_empty() => {
                return fail("hosts.gen", "at least one generator host".into())
            }
            Some(toml::Value::Array(many)) => many
                .iter()
                .map(|g| g.clone().try_into())
                .collect::<std::result::Result<_, _>>(),
            Some(one) => one.clone().try_into().map(|g| vec![g]),
        }
        .map_err(|e: toml::de::Error| HostsError {
            field: "hosts.gen",
            reason: e.message().trim_end().to_string(),
        })?;
        let gen = gen_defs
            .iter()
            .map(|g| End::check(g, "gen"))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let recv = h
            .recv
            .as_ref()
            .map(|r| End::check(r, "recv"))
            .unwrap_or_else(|| {
                fail(
                    "hosts.recv",
                    "the receiver's host is needed with [hosts]".into(),
                )
            })?;
        let Some(d) = &h.dut else {
            return fail(
                "hosts.dut",
                "the DUT is needed with [hosts] (its ssh, or its mac for a box nobody logs into)"
                    .into(),
            );
        };
        let target = d
            .ssh
            .as_deref()
            .map(Target::parse)
            .transpose()
            .map_err(|e| HostsError {
                field: "hosts.dut.ssh",
                reason: e.to_string(),
            })?;
        if let Some(m) = &d.mac {
            linerate_traffic::frame::parse_mac("hosts.dut.mac", m).map_err(|e| HostsError {
                field: "hosts.dut.mac",
                reason: e
                    .to_string()
                    .trim_start_matches("hosts.dut.mac: ")
                    .to_string(),
            })?;
        }
        if d.mac.is_none() && (target.is_none() || d.interfaces.is_empty()) {
            return fail(
                "hosts.dut.mac",
                "needed unless the DUT has ssh and interfaces to read it from".into(),
            );
        }
        if d.interfaces.len() > 2 {
            return fail(
                "hosts.dut.interfaces",
                "its ports in and out: at most two".into(),
            );
        }
        for i in &d.interfaces {
            check_ifname("hosts.dut.interfaces", i)?;
        }
        check_netns("hosts.dut.netns", &d.netns)?;
        if target.is_none() && d.netns.is_some() {
            return fail(
                "hosts.dut.netns",
                "a DUT without ssh runs no commands".into(),
            );
        }
        let command_timeout = ssh.command_timeout.unwrap_or(60.0);
        if !(command_timeout > 0.0 && command_timeout <= 3600.0) {
            return fail(
                "ssh.command_timeout",
                format!("must be more than 0 and at most 3600 seconds, got {command_timeout}"),
            );
        }
        Ok(Some(LabHosts {
            gen,
            recv,
            dut: DutHost {
                target,
                netns: d.netns.clone(),
                mac: d.mac.clone(),
                interfaces: d.interfaces.clone(),
                linerate: match d.linerate.as_deref() {
                    None => "linerate".into(),
                    Some("") => return fail("hosts.dut.linerate", "empty".into()),
                    Some(l) => l.to_string(),
                },
            },
            ssh: SshOptions {
                identity: ssh.identity.clone(),
                known_hosts: ssh.known_hosts.clone(),
                connect_timeout: ssh.connect_timeout,
            },
            command_timeout,
        }))
    }
}

/// The hosts, connected: one master connection per distinct SSH target.
pub struct Connected {
    /// One a generator host, in order.
    pub gen: Vec<std::sync::Arc<Host>>,
    pub recv: std::sync::Arc<Host>,
    pub dut: Option<std::sync::Arc<Host>>,
}

impl Connected {
    pub fn connect(h: &LabHosts) -> Result<Connected> {
        let mut open: Vec<(Target, std::sync::Arc<Host>)> = Vec::new();
        let mut get = |name: &str, t: &Target| -> Result<std::sync::Arc<Host>> {
            if let Some((_, h)) = open.iter().find(|(o, _)| o == t) {
                return Ok(std::sync::Arc::new(h.named(name)));
            }
            let host = std::sync::Arc::new(Host::connect(name, t.clone(), h.ssh.clone())?);
            open.push((t.clone(), host.clone()));
            Ok(host)
        };
        Ok(Connected {
            gen: h
                .gen
                .iter()
                .enumerate()
                .map(|(k, g)| get(&gen_name(k), &g.target))
                .collect::<Result<_>>()?,
            recv: get("recv", &h.recv.target)?,
            dut: h.dut.target.as_ref().map(|t| get("dut", t)).transpose()?,
        })
    }
}

/// The name of generator host `k` in messages: gen, gen2, gen3, ...
pub fn gen_name(k: usize) -> String {
    match k {
        0 => "gen".into(),
        _ => format!("gen{}", k + 1),
    }
}

/// `script` for a host, in namespace `netns` if given.
pub fn in_netns(netns: Option<&str>, script: &str) -> String {
    match netns {
        Some(ns) => format!("ip netns exec {} sh -c {}", quote(ns), quote(script)),
        None => script.to_string(),
    }
}

const QUICK: Duration = Duration::from_secs(30);

/// Before anything runs: each host's linerate is this version, each
/// interface exists, the DUT's MAC is known (read over SSH if not given),
/// the first word of every DUT command exists. Returns the DUT's MAC.
/// Errors name the host and what failed.
pub fn preflight(h: &LabHosts, c: &Connected, dut_commands: &[&str]) -> Result<String> {
    let want = format!("linerate {}", env!("CARGO_PKG_VERSION"));
    let gens = h.gen.iter().zip(&c.gen).enumerate();
    let ends =
        gens.map(|(k, (e, c))| (gen_name(k), e, c))
            .chain([("recv".to_string(), &h.recv, &c.recv)]);
    for (role, end, host) in ends {
        let key = if role.starts_with("gen") {
            "gen"
        } else {
            "recv"
        };
        let v = host
            .run(&format!("{} --version", quote(&end.linerate)), QUICK)
            .map_err(|e| anyhow!("{e}\n(install linerate {} on host {role}, or set hosts.{key}.linerate to its path)", env!("CARGO_PKG_VERSION")))?;
        let got = String::from_utf8_lossy(&v.stdout).trim().to_string();
        if got != want {
            bail!(
                "host {role}: {} says {got:?}, this is {want:?}: install linerate {} there (or set hosts.{key}.linerate to its path)",
                end.linerate,
                env!("CARGO_PKG_VERSION")
            );
        }
        for i in &end.interfaces {
            host.run(
                &in_netns(
                    end.netns.as_deref(),
                    &format!("ip link show dev {} >/dev/null", quote(i)),
                ),
                QUICK,
            )
            .map_err(|e| anyhow!("host {role}: interface {i}: {e}"))?;
        }
    }
    let Some(dut) = &c.dut else {
        if !dut_commands.is_empty() {
            bail!("host dut: has no ssh, so it runs no setup, teardown or record command");
        }
        return Ok(h
            .dut
            .mac
            .clone()
            .expect("checked: a DUT without ssh has a mac"));
    };
    let ns = h.dut.netns.as_deref();
    let mut mac = h.dut.mac.clone();
    for (k, i) in h.dut.interfaces.iter().enumerate() {
        let o = dut
            .run(
                &in_netns(ns, &format!("cat /sys/class/net/{}/address", quote(i))),
                QUICK,
            )
            .map_err(|e| anyhow!("host dut: interface {i}: {e}"))?;
        if k == 0 && mac.is_none() {
            mac = Some(String::from_utf8_lossy(&o.stdout).trim().to_string());
        }
    }
    for cmd in dut_commands {
        let first = cmd.split_whitespace().next().unwrap_or("");
        dut.run(
            &in_netns(ns, &format!("command -v {} >/dev/null", quote(first))),
            QUICK,
        )
        .map_err(|_| anyhow!("host dut: `{first}` (of `{cmd}`) is not a command there"))?;
    }
    Ok(mac.expect("read above"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> std::result::Result<Option<LabHosts>, HostsError> {
        #[derive(Deserialize)]
        struct F {
            hosts: Option<HostsSection>,
            #[serde(default)]
            ssh: SshSection,
        }
        let f: F = toml::from_str(text).unwrap();
        LabHosts::check(&f.hosts, &f.ssh)
    }

    const GOOD: &str = r#"
[hosts.gen]
ssh = "root@gen.lab"
interfaces = ["enp1s0f0", "enp2s0f0"]
cpus = [2, 3, 6, 7]
[hosts.recv]
ssh = "root@gen.lab"
interfaces = ["enp1s0f1"]
[hosts.dut]
mac = "90:e2:ba:84:20:38"
"#;

    #[test]
    fn the_issue_shape_is_read_and_cpus_are_dealt_per_interface() {
        let h = parse(GOOD).unwrap().unwrap();
        assert_eq!(h.gen[0].target, Target::Ssh("root@gen.lab".into()));
        assert_eq!(h.gen[0].cpu_shares(), vec![Some((2, 2)), Some((6, 2))]);
        // Several generator hosts.
        let two = GOOD.replacen("[hosts.gen]", "[[hosts.gen]]", 1).replacen(
            "[hosts.recv]",
            "[[hosts.gen]]\nssh = \"root@gen2.lab\"\ninterfaces = [\"eth1\"]\n[hosts.recv]",
            1,
        );
        let h2 = parse(&two).unwrap().unwrap();
        assert_eq!(h2.gen.len(), 2);
        assert_eq!(h2.gen[1].target, Target::Ssh("root@gen2.lab".into()));
        let typo = GOOD.replace("cpus = [2, 3, 6, 7]", "cpu = 2");
        let e = parse(&typo).unwrap_err();
        assert_eq!(e.field, "hosts.gen");
        assert!(e.reason.starts_with("unknown field `cpu`"), "{}", e.reason);
        assert_eq!(h.dut.target, None);
        assert_eq!(h.command_timeout, 60.0);
        assert!(parse("").unwrap().is_none(), "no [hosts]: the local lab");
        let end = End::check(
            &EndDef {
                ssh: "local".into(),
                interfaces: vec!["gen0".into()],
                cpus: vec![],
                netns: Some("my lab".into()),
                linerate: None,
            },
            "gen",
        );
        assert_eq!(end.unwrap_err().field, "hosts.gen.netns");
    }

    #[test]
    fn commands_run_in_the_namespace_with_every_word_quoted() {
        let mut h = parse(GOOD).unwrap().unwrap();
        h.gen[0].netns = Some("lab-gen".into());
        h.gen[0].linerate = "/opt/linerate 2/linerate".into();
        let args: Vec<String> = ["gen", "-i", "enp1s0f0", "-s", "10.0.0.1:2000-10.0.0.9"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            h.gen[0].linerate_command(&args),
            "'/opt/linerate 2/linerate' gen --netns lab-gen -i enp1s0f0 -s 10.0.0.1:2000-10.0.0.9"
        );
        assert_eq!(
            in_netns(Some("d"), "sysctl -w a=1; nft -f x"),
            "ip netns exec d sh -c 'sysctl -w a=1; nft -f x'"
        );
    }

    #[test]
    fn every_refusal_names_its_field() {
        let cases = [
            (
                GOOD.replace("cpus = [2, 3, 6, 7]", "cpus = [2, 3, 6]"),
                "hosts.gen.cpus",
            ),
            (
                GOOD.replace("cpus = [2, 3, 6, 7]", "cpus = [2, 4, 6, 7]"),
                "hosts.gen.cpus",
            ),
            (
                GOOD.replace("[\"enp1s0f1\"]", "[\"a\", \"b\"]"),
                "hosts.recv.interfaces",
            ),
            (
                GOOD.replace("[\"enp1s0f1\"]", "[]"),
                "hosts.recv.interfaces",
            ),
            (
                GOOD.replace(
                    "ssh = \"root@gen.lab\"\ninterfaces = [\"enp1s0f1\"]",
                    "ssh = \"-oProxyCommand=x\"\ninterfaces = [\"enp1s0f1\"]",
                ),
                "hosts.recv.ssh",
            ),
            (
                GOOD.replace("mac = \"90:e2:ba:84:20:38\"", "mac = \"90:e2:ba\""),
                "hosts.dut.mac",
            ),
            (
                GOOD.replace("mac = \"90:e2:ba:84:20:38\"", "interfaces = [\"ix0\"]"),
                "hosts.dut.mac",
            ),
            (
                GOOD.replace("enp2s0f0", "a-very-long-interface-name"),
                "hosts.gen.interfaces",
            ),
            (
                format!("{GOOD}[ssh]\ncommand_timeout = 0\n"),
                "ssh.command_timeout",
            ),
            (
                GOOD.replace("[hosts.dut]\nmac = \"90:e2:ba:84:20:38\"", ""),
                "hosts.dut",
            ),
        ];
        for (text, field) in cases {
            let e = parse(&text).unwrap_err();
            assert_eq!(e.field, field, "{}: {}", e.reason, text);
        }
    }
}
