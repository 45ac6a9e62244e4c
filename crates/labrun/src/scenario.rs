//! A lab scenario: which DUT configurations, which traffic profiles, how
//! many repeats, what to measure. Read from TOML, checked whole before
//! anything is built; every error names the file, the line and the field.
use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::Range;
use toml::Spanned;

pub use linerate_traffic::measure::ReceiverMode;
pub use linerate_traffic::profile::{builtin_profile, Family, Profile, BUILTIN_PROFILES};

/// The scenario run when none is given: the kernel against linerate,
/// and both against the machine's XDP limit (xdp-redirect), IPv4 60-byte
/// frames, 2000 flows, 5 repeats of 5 s under overload.
pub const DEFAULT: &str = r#"# linerate's built-in scenario: the kernel against linerate, and both
# against what this machine forwards in XDP at all (xdp-redirect).
name = "linux vs linerate"
repeat = 5
duts = ["linux", "linerate", "xdp-redirect"]
profiles = ["ipv4-60"]

[measure]
method = "overload"
seconds = 5
"#;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: Option<String>,
    repeat: Option<Spanned<u32>>,
    duts: Spanned<Vec<Spanned<String>>>,
    profiles: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    measure: Measure,
    #[serde(default)]
    lab: LabSection,
    /// User-defined DUT configurations, by name.
    #[serde(default)]
    dut: BTreeMap<String, Spanned<DutDef>>,
    /// User-defined traffic profiles, by name.
    #[serde(default)]
    profile: BTreeMap<String, Spanned<Profile>>,
    /// The lab's hosts (none: the local namespace lab).
    hosts: Option<crate::hosts::HostsSection>,
    #[serde(default)]
    ssh: crate::hosts::SshSection,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// BSDRP's default: offer more than the DUT can take, count what
    /// comes out.
    Overload,
    Equilibrium,
    Rfc2544,
    /// MLRsearch, the no-drop rate.
    Ndr,
    /// MLRsearch, the partial-drop rate (`loss_ratio`).
    Pdr,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Measure {
    #[serde(default = "Measure::default_method")]
    pub method: Method,
    /// Seconds per run (overload) or per search trial.
    #[serde(default = "Measure::default_seconds")]
    pub seconds: Spanned<f64>,
    /// Searches: final trial seconds (rfc2544 confirmation, MLRsearch
    /// final phase). Default: `seconds`.
    pub final_seconds: Option<Spanned<f64>>,
    /// Searches: the highest load tried, pps ("auto": what the generator
    /// offers unpaced in a first trial).
    pub max_rate: Option<Spanned<String>>,
    /// Equilibrium tolerance.
    #[serde(default = "Measure::default_tolerance")]
    pub tolerance: Spanned<f64>,
    /// RFC 2544 / MLRsearch relative width.
    #[serde(default = "Measure::default_width")]
    pub width: Spanned<f64>,
    /// PDR's loss ratio.
    #[serde(default = "Measure::default_loss_ratio")]
    pub loss_ratio: Spanned<f64>,
    /// MLRsearch: the share of a load's trial seconds that may miss a
    /// goal's loss ratio (RFC 9971's exceed ratio), 0 by default.
    #[serde(default = "Measure::default_exceed_ratio")]
    pub exceed_ratio: Spanned<f64>,
    /// MLRsearch: seconds of final-length trials behind a result (default:
    /// one final trial's).
    #[serde(default)]
    pub duration_sum: Option<Spanned<f64>>,
    /// "count" (default): the receiver counts frames and stamped frames, at
    /// a quarter of the per-frame cost of "full" (loss, reordering and
    /// latency), which matters where its work shares the DUT's core;
    /// "frames" never reads a frame and counts whatever arrives.
    #[serde(default)]
    pub receiver: ReceiverMode,
    /// The router's ping and a BGP session through it watched during
    /// every run (crate::probes); overload, the local lab.
    #[serde(default)]
    pub probes: bool,
    /// The generator's port the probes use (default: the lab's last, so
    /// the second where there are two).
    pub probes_port: Option<u32>,
}

impl Measure {
    fn default_method() -> Method {
        Method::Overload
    }
    fn default_seconds() -> Spanned<f64> {
        Spanned::new(0..0, 5.0)
    }
    fn default_tolerance() -> Spanned<f64> {
        Spanned::new(0..0, 0.01)
    }
    fn default_width() -> Spanned<f64> {
        Spanned::new(0..0, 0.005)
    }
    fn default_loss_ratio() -> Spanned<f64> {
        Spanned::new(0..0, 0.005)
    }
    fn default_exceed_ratio() -> Spanned<f64> {
        Spanned::new(0..0, 0.0)
    }
}

impl Default for Measure {
    fn default() -> Self {
        Measure {
            method: Method::Overload,
            seconds: Self::default_seconds(),
            final_seconds: None,
            max_rate: None,
            tolerance: Self::default_tolerance(),
            width: Self::default_width(),
            loss_ratio: Self::default_loss_ratio(),
            exceed_ratio: Self::default_exceed_ratio(),
            duration_sum: None,
            receiver: ReceiverMode::Count,
            probes: false,
            probes_port: None,
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LabSection {
    /// The lab's name (its namespaces: NAME-gen, NAME-dut, NAME-recv).
    pub name: Option<String>,
    pub gen_cpu: Option<usize>,
    pub dut_cpu: Option<usize>,
    /// Receive queues of the DUT's port (veth queues); the DUT's NAPI
    /// threads are pinned from dut_cpu on, one a queue, and the generator
    /// sends from as many CPUs from gen_cpu on.
    pub queues: Option<u32>,
    /// The generator's ports into the DUT: 2 adds gen1 -> dut2, the
    /// port a profile's `port = 2` sends by (default 1).
    pub gen_ports: Option<u32>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Forwarder {
    /// Nothing the lab starts: the DUT forwards as its `setup` commands
    /// leave it (in the local lab, the kernel forwards). The only one for
    /// a DUT on its own host.
    #[default]
    Commands,
    /// The kernel forwards.
    Linux,
    /// linerate's XDP fast path on dut0 and dut1, the kernel as slow path.
    Linerate,
    /// The XDP samples' forwarder (xdp_fwd): bpf_fib_lookup() in the
    /// kernel's FIB, then bpf_redirect(); the reference linerate must beat.
    XdpFibLookup,
    /// The machine's XDP limit: every IP frame given the receiver's MACs
    /// and redirected out of dut1, no parsing, no lookup
    /// (bpf/ref/ref_redirect.bpf.c); a report says how far the others are
    /// from it, round by round.
    XdpRedirect,
    /// The kernel forwards behind an XDP program on each port that passes
    /// every frame (bpf/ref/ref_pass.bpf.c): what attaching XDP costs the
    /// kernel's path by itself, the floor of any XDP forwarder's cost for
    /// what it passes.
    XdpPass,
}

/// A DUT configuration: who forwards, plus optional nftables ruleset and
/// sysctls applied in the DUT's namespace for the runs.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DutDef {
    #[serde(default)]
    pub forwarder: Forwarder,
    /// Shell commands run on the DUT (in its namespace) before each run,
    /// in order; one that fails stops the scenario (teardown still runs).
    #[serde(default)]
    pub setup: Vec<String>,
    /// Run after each run, also after a failure or Ctrl-C; all of them,
    /// even when one fails.
    #[serde(default)]
    pub teardown: Vec<String>,
    /// Commands whose output goes into the results (`uname -a`, the
    /// configuration applied), run after the first run's setup.
    #[serde(default)]
    pub record: Vec<String>,
    /// An nftables ruleset (`nft -f` syntax), loaded before and removed
    /// after each run.
    pub nft: Option<String>,
    #[serde(default)]
    pub sysctl: BTreeMap<String, String>,
    /// Generated IPv4 / IPv6 routes (the `fib` generator's Internet-like
    /// tables) added to the DUT's kernel, via the receiver, with a default
    /// route, for the runs. The lab's own prefixes are left out, so the
    /// lab's traffic still reaches the receiver through the lab's routes.
    pub routes: Option<u32>,
    pub routes6: Option<u32>,
    /// Receive queues the DUT takes frames on for its runs (1 to the
    /// lab's `queues`; default: all of them).
    pub queues: Option<u32>,
    /// Before each run, make every flow of the profile a connection the
    /// DUT's conntrack holds established and assured: the profile's flows
    /// sent at a moderate rate, the receiver answering each (addresses
    /// and ports swapped), passes at least 2.2 s apart (a UDP entry is
    /// assured by a packet two seconds after its first) until 99.9% of
    /// them are assured, at most eight. For stateful
    /// rulesets; the DUT's conntrack table is flushed after the run.
    #[serde(default)]
    pub establish: bool,
    /// The kernel's conntrack limits for the runs, set in the host's
    /// namespace (they are global: a DUT namespace cannot change them)
    /// and put back after, as the seeds raise ipfw's and pf's:
    /// `nf_conntrack_max` and the hash's buckets.
    pub conntrack_max: Option<u64>,
    pub conntrack_buckets: Option<u64>,
    /// linerate only: established TCP connections the ruleset accepts
    /// carried, their windows unchecked as the kernel's flowtable would
    /// (`linerate route --carry-tcp`).
    #[serde(default)]
    pub carry_tcp: bool,
    /// linerate only: the limits of what it passes to the kernel, on top
    /// of its defaults (`linerate route --police`: `off`, or
    /// `CLASS=RATE/BURST,...`).
    pub police: Option<String>,
    /// linerate only: "native" (the default) or "generic" XDP
    /// (`linerate route --mode`).
    pub xdp_mode: Option<String>,
    /// The DUT's ports as 802.1Q trunks (the seeds' "VLAN tagging"
    /// configuration): frames arrive on the first port tagged with the
    /// first id and leave the second tagged with the second, routed as
    /// VLAN devices, which take the lab's addresses, routes and
    /// neighbours for the runs (crate::dut_vlans). The profiles tag their
    /// frames with the first (`vlan`). Needs a kernel with 802.1Q.
    pub vlans: Option<[u16; 2]>,
}

/// Built-in DUT configurations: the kernel alone, with an nftables
/// stateless rule, with conntrack, linerate, and the XDP samples'
/// forwarder (docs/lab-run.md).
pub fn builtin_dut(name: &str) -> Option<DutDef> {
    let linux = |nft: Option<&str>| DutDef {
        forwarder: Forwarder::Linux,
        nft: nft.map(str::to_string),
        sysctl: BTreeMap::new(),
        routes: None,
        routes6: None,
        queues: None,
        setup: Vec::new(),
        teardown: Vec::new(),
        record: Vec::new(),
        establish: false,
        conntrack_max: None,
        conntrack_buckets: None,
        carry_tcp: false,
        police: None,
        xdp_mode: None,
        vlans: None,
    };
    let plain = |forwarder, routes| DutDef {
        forwarder,
        nft: None,
        sysctl: BTreeMap::new(),
        routes,
        routes6: None,
        queues: None,
        setup: Vec::new(),
        teardown: Vec::new(),
        record: Vec::new(),
        establish: false,
        conntrack_max: None,
        conntrack_buckets: None,
        carry_tcp: false,
        police: None,
        xdp_mode: None,
        vlans: None,
    };
    match name {
        "linux" => Some(linux(None)),
        // One stateless rule, evaluated for every forwarded packet (the
        // seeds' "one rule" firewall benches).
        "linux-nft-stateless" => Some(linux(Some(
            "table inet linerate {\n  chain forward {\n    type filter hook forward priority 0; policy accept;\n    meta l4proto udp accept\n  }\n}\n",
        ))),
        // Connection tracking: every packet looked up in the state table.
        "linux-conntrack" => Some(linux(Some(
            "table inet linerate {\n  chain forward {\n    type filter hook forward priority 0; policy accept;\n    ct state established,related accept\n    ct state new accept\n  }\n}\n",
        ))),
        "linerate" => Some(plain(Forwarder::Linerate, None)),
        "xdp-fib-lookup" => Some(plain(Forwarder::XdpFibLookup, None)),
        "xdp-redirect" => Some(plain(Forwarder::XdpRedirect, None)),
        "xdp-pass" => Some(plain(Forwarder::XdpPass, None)),
        // The same with a full-size IPv4 table (1M routes) in the kernel.
        "linux-1m" => Some(plain(Forwarder::Linux, Some(FULL_TABLE))),
        "xdp-fib-lookup-1m" => Some(plain(Forwarder::XdpFibLookup, Some(FULL_TABLE))),
        "linerate-1m" => Some(plain(Forwarder::Linerate, Some(FULL_TABLE))),
        // The seeds' stateless firewall slides: N rules, a set of M
        // addresses (crate::firewall_duts).
        _ => crate::firewall_duts::by_name(name).map(|(linerate, nft)| DutDef {
            forwarder: if linerate { Forwarder::Linerate } else { Forwarder::Linux },
            nft: Some(nft),
            sysctl: BTreeMap::new(),
            routes: None,
            routes6: None,
            queues: None,
            setup: Vec::new(),
            teardown: Vec::new(),
            record: Vec::new(),
            establish: crate::firewall_duts::is_stateful(name),
            conntrack_max: crate::firewall_duts::is_stateful(name)
                .then_some(crate::firewall_duts::STATEFUL_CONNTRACK_MAX),
            conntrack_buckets: crate::firewall_duts::is_stateful(name)
                .then_some(crate::firewall_duts::STATEFUL_CONNTRACK_BUCKETS),
            carry_tcp: false,
            police: None,
            xdp_mode: None,
            vlans: None,
        }),
    }
}

/// Routes of a full IPv4 table.
pub const FULL_TABLE: u32 = 1_000_000;

pub const BUILTIN_DUTS: &[&str] = &[
    "linux",
    "linux-nft-stateless",
    "linux-conntrack",
    "linerate",
    "xdp-fib-lookup",
    "xdp-redirect",
    "xdp-pass",
    "linux-1m",
    "xdp-fib-lookup-1m",
    "linerate-1m",
    "linux-nft-rules-N and linerate-nft-rules-N (N: 1, 100, 1000, 10000)",
    "linux-nft-set-M and linerate-nft-set-M (M: 1, 1000, 100000, 1000000)",
    "linux-nft-acl-N and linerate-nft-acl-N (an access list of N rules, each an address prefix and a port; N: 1, 100, 1000, 10000)",
    "linux-nft-stateful, linerate-nft-stateful and their -strict, -masquerade and -dnat variants (flows established first; -masquerade: what leaves through dut1 masqueraded; -dnat: 198.19.0.0/17 and 2001:2:0:8000::/50 mapped one-to-one onto 198.19.128.0/17 and 2001:2:0:c000::/50)",
];

/// A checked scenario.
#[derive(Clone, Debug, Serialize)]
pub struct Scenario {
    /// Where it came from ("built-in" or the file's path).
    pub source: String,
    pub name: String,
    pub repeat: u32,
    /// In order; the first is the baseline of every comparison.
    pub duts: Vec<(String, DutDef)>,
    pub profiles: Vec<(String, Profile)>,
    pub method: Method,
    pub seconds: f64,
    pub final_seconds: f64,
    /// None: measured ("auto").
    pub max_rate_pps: Option<f64>,
    pub tolerance: f64,
    pub width: f64,
    pub loss_ratio: f64,
    pub exceed_ratio: f64,
    pub duration_sum: Option<f64>,
    pub receiver: ReceiverMode,
    /// The router's ping and a BGP session through it during each run.
    pub probes: bool,
    /// The generator's port they use (1 or 2).
    pub probes_port: u32,
    pub lab_name: String,
    pub gen_cpu: usize,
    pub dut_cpu: Option<usize>,
    /// The lab's queues (its DUT port's receive queues, at most).
    pub queues: u32,
    /// The generator's ports into the DUT (1 or 2).
    pub gen_ports: u32,
    /// The lab's hosts; None: the local namespace lab.
    pub hosts: Option<crate::hosts::LabHosts>,
    /// Record the DUT's core during every run (`lab run --profile`:
    /// crate::profile); not a key of the file.
    pub profile: bool,
    /// The file's own [dut.NAME] and [profile.NAME] definitions, for
    /// command-line overrides of the lists.
    #[serde(skip)]
    defined_duts: BTreeMap<String, DutDef>,
    #[serde(skip)]
    defined_profiles: BTreeMap<String, Profile>,
    /// Line of each [dut.NAME] table, for errors found later.
    #[serde(skip)]
    dut_lines: BTreeMap<String, usize>,
}

/// Command-line overrides of a scenario.
#[derive(Default)]
pub struct Overrides {
    pub repeat: Option<u32>,
    pub seconds: Option<f64>,
    pub duts: Option<Vec<String>>,
    pub profiles: Option<Vec<String>>,
    pub lab_name: Option<String>,
}

/// Why an override is refused: its field in [`Overrides`] and the reason.
pub type OverrideError = linerate_host::field::FieldError;

use linerate_host::field::at;

impl Scenario {
    pub fn builtin() -> Self {
        Self::parse("built-in scenario", DEFAULT).expect("the built-in scenario is valid")
    }

    pub fn load(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow!("scenario {}: {e}", path.display()))?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// Parses and checks `text`; `source` names it in errors.
    pub fn parse(source: &str, text: &str) -> Result<Self> {
        let f: File = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| format!(":{}", linerate_host::field::line_of(text, s.start)))
                .unwrap_or_default();
            anyhow!("{source}{line}: {}", e.message().trim_end())
        })?;
        let err = |span: Range<usize>, field: &str, why: String| at(source, text, span, field, why);

        let repeat = f.repeat.as_ref().map(|r| *r.get_ref()).unwrap_or(5);
        if !(1..=1000).contains(&repeat) {
            let span = f.repeat.as_ref().map(|r| r.span()).unwrap_or(0..0);
            return Err(err(
                span,
                "repeat",
                format!("must be 1 to 1000, got {repeat}"),
            ));
        }

        if f.duts.get_ref().is_empty() {
            return Err(err(
                f.duts.span(),
                "duts",
                "at least one DUT configuration is needed".into(),
            ));
        }
        let defined_duts: BTreeMap<String, DutDef> = f
            .dut
            .iter()
            .map(|(k, v)| (k.clone(), v.get_ref().clone()))
            .collect();
        let duts = resolve(
            f.duts.get_ref().iter().map(|d| (d.span(), d.get_ref())),
            &defined_duts,
            &NAMES_OF_DUTS,
            &|span, why| err(span, "duts", why),
        )?;
        for (name, def) in &f.dut {
            check_dut(name, def.get_ref())
                .map_err(|why| err(def.span(), &format!("dut.{name}"), why))?;
        }

        let listed: Vec<Spanned<String>> = match &f.profiles {
            Some(p) if p.get_ref().is_empty() => {
                return Err(err(
                    p.span(),
                    "profiles",
                    "at least one traffic profile is needed".into(),
                ))
            }
            Some(p) => p.get_ref().clone(),
            None => vec![Spanned::new(0..0, "ipv4-60".to_string())],
        };
        let defined_profiles: BTreeMap<String, Profile> = f
            .profile
            .iter()
            .map(|(k, v)| (k.clone(), v.get_ref().clone()))
            .collect();
        let profiles = resolve(
            listed.iter().map(|p| (p.span(), p.get_ref())),
            &defined_profiles,
            &NAMES_OF_PROFILES,
            &|span, why| err(span, "profiles", why),
        )?;
        for (name, def) in &f.profile {
            check_profile(def.get_ref())
                .map_err(|why| err(def.span(), &format!("profile.{name}"), why))?;
        }

        let m = &f.measure;
        let positive = |v: &Spanned<f64>, field: &str| -> Result<f64> {
            let x = *v.get_ref();
            if !(x > 0.0 && x <= 3600.0) {
                return Err(err(
                    v.span(),
                    field,
                    format!("must be more than 0 and at most 3600 seconds, got {x}"),
                ));
            }
            Ok(x)
        };
        let seconds = positive(&m.seconds, "measure.seconds")?;
        let final_seconds = match &m.final_seconds {
            Some(v) => positive(v, "measure.final_seconds")?,
            None => seconds,
        };
        if final_seconds < seconds {
            let span = m.final_seconds.as_ref().unwrap().span();
            return Err(err(
                span,
                "measure.final_seconds",
                format!("must not be shorter than measure.seconds ({seconds})"),
            ));
        }
        let fraction = |v: &Spanned<f64>, field: &str, hi: f64| -> Result<f64> {
            let x = *v.get_ref();
            if !(x > 0.0 && x < hi) {
                return Err(err(
                    v.span(),
                    field,
                    format!("must be more than 0 and less than {hi}, got {x}"),
                ));
            }
            Ok(x)
        };
        let tolerance = fraction(&m.tolerance, "measure.tolerance", 0.5)?;
        let width = fraction(&m.width, "measure.width", 0.5)?;
        let loss_ratio = fraction(&m.loss_ratio, "measure.loss_ratio", 1.0)?;
        let exceed_ratio = *m.exceed_ratio.get_ref();
        if !(0.0..1.0).contains(&exceed_ratio) {
            return Err(err(
                m.exceed_ratio.span(),
                "measure.exceed_ratio",
                format!("must be at least 0 and less than 1, got {exceed_ratio}"),
            ));
        }
        let duration_sum = match &m.duration_sum {
            None => None,
            Some(d) if *d.get_ref() > 0.0 && d.get_ref().is_finite() => Some(*d.get_ref()),
            Some(d) => {
                return Err(err(
                    d.span(),
                    "measure.duration_sum",
                    format!("must be more than 0 seconds, got {}", d.get_ref()),
                ))
            }
        };
        let max_rate_pps = match &m.max_rate {
            None => None,
            Some(v) if v.get_ref() == "auto" => None,
            Some(v) => Some(
                linerate_imix::parse_rate("max_rate", v.get_ref())
                    .map_err(|e| err(v.span(), "measure.max_rate", e))?,
            ),
        };
        if m.method == Method::Overload && (m.final_seconds.is_some() || m.max_rate.is_some()) {
            let span = m
                .final_seconds
                .as_ref()
                .map(|v| v.span())
                .or(m.max_rate.as_ref().map(|v| v.span()))
                .unwrap();
            return Err(err(
                span,
                "measure",
                "final_seconds and max_rate are for searches, not for method = \"overload\"".into(),
            ));
        }
        if m.probes && (m.method != Method::Overload || m.receiver == ReceiverMode::Frames) {
            return Err(err(
                0..0,
                "measure.probes",
                "the probes watch overload runs, with a receiver that reads frames (not \"frames\"): it hands BGP's segments to its namespace".into(),
            ));
        }
        if m.method != Method::Overload {
            if let Some((name, def)) = f.profile.iter().find(|(_, p)| p.get_ref().rate.is_some()) {
                return Err(err(
                    def.span(),
                    &format!("profile.{name}"),
                    "rate: a profile with its own rate runs at that rate, which a search cannot vary: use method = \"overload\"".into(),
                ));
            }
        }

        let dut_lines: BTreeMap<String, usize> = f
            .dut
            .iter()
            .map(|(k, v)| (k.clone(), text[..v.span().start].matches('\n').count() + 1))
            .collect();
        let lab = &f.lab;
        let lab_name = lab.name.clone().unwrap_or_else(|| "linerate-run".into());
        let mut spec = linerate_lab::LabSpec::new(&lab_name);
        if let Some(c) = lab.dut_cpu {
            spec.dut_cpu = c;
        }
        if let Some(q) = lab.queues {
            spec.queues = q;
        }
        if let Some(p) = lab.gen_ports {
            spec.gen_ports = p;
        }
        spec.validate()
            .map_err(|e| anyhow!("{source}: lab.{}: {}", e.field, e.reason))?;
        let gen_cpu = lab.gen_cpu.unwrap_or(0);
        let cpus = linerate_host::cpu::online();
        if gen_cpu >= cpus {
            bail!("{source}: lab.gen_cpu: CPU {gen_cpu} does not exist (this machine has {cpus} online)");
        }
        // A veth puts a frame an XDP program sends on the receive queue of
        // the sending CPU: k queues need k generator CPUs.
        if spec.queues as usize > cpus {
            bail!("{source}: lab.queues: {} queues need as many generator CPUs (a veth puts an XDP-sent frame on the queue of the CPU that sent it); this machine has {cpus} online", spec.queues);
        }
        for (name, def) in &duts {
            if let Some(q) = def.queues {
                if !(1..=spec.queues).contains(&q) {
                    bail!(
                        "{}: queues: must be 1 to lab.queues ({}), got {q}",
                        origin(&dut_lines, source, name),
                        spec.queues
                    );
                }
            }
        }

        // Fields named in full (hosts.gen.cpus): toml's spans do not reach
        // into these tables.
        let hosts = crate::hosts::LabHosts::check(&f.hosts, &f.ssh)
            .map_err(|e| err(0..0, e.field, e.reason))?;
        check_vlans(&duts, &profiles).map_err(|e| anyhow!("{source}: {e}"))?;
        check_ports(spec.gen_ports, &duts, &profiles).map_err(|e| anyhow!("{source}: {e}"))?;
        let probes_port = m.probes_port.unwrap_or(spec.gen_ports);
        if m.probes_port.is_some() && !m.probes {
            bail!("{source}: measure.probes_port: for the probes: set probes = true");
        }
        if !(1..=spec.gen_ports).contains(&probes_port) {
            bail!(
                "{source}: measure.probes_port: {probes_port}, and the lab's generator has {} port(s) into the DUT (lab.gen_ports)",
                spec.gen_ports
            );
        }
        if let Some(h) = &hosts {
            check_remote_lab(source, lab, h, &duts, &|name| {
                origin(&dut_lines, source, name)
            })
            .map_err(|e| anyhow!("{e}"))?;
            if m.probes {
                bail!("{source}: measure.probes: the probes run in the local lab only (its namespaces' BIRD and ping)");
            }
            // `linerate gen` on a host sends one kind of traffic.
            if let Some((name, _)) = profiles.iter().find(|(_, p)| !p.mix.is_empty()) {
                bail!("{source}: profile.{name}: mix: a mix runs in the local lab only (a host's `linerate gen` sends one profile)");
            }
        }

        Ok(Scenario {
            source: source.to_string(),
            name: f.name.unwrap_or_else(|| {
                duts.iter()
                    .map(|d| d.0.as_str())
                    .collect::<Vec<_>>()
                    .join(" vs ")
            }),
            repeat,
            duts,
            profiles,
            method: m.method,
            seconds,
            final_seconds,
            max_rate_pps,
            tolerance,
            width,
            loss_ratio,
            exceed_ratio,
            duration_sum,
            receiver: m.receiver,
            probes: m.probes,
            probes_port,
            lab_name,
            gen_cpu,
            dut_cpu: lab.dut_cpu,
            queues: spec.queues,
            gen_ports: spec.gen_ports,
            hosts,
            profile: false,
            dut_lines,
            defined_duts,
            defined_profiles,
        })
    }

    /// Where DUT configuration `name` is defined, for error messages:
    /// "FILE:LINE: dut.NAME" or "FILE: DUT NAME" for a built-in one.
    pub fn dut_origin(&self, name: &str) -> String {
        origin(&self.dut_lines, &self.source, name)
    }

    /// The CPUs the generator sends from when the DUT takes frames on `k`
    /// queues: k of them from gen_cpu on, so that every queue gets frames
    /// (CPU c's land on queue c mod k).
    pub fn gen_cpus(&self, k: u32) -> Vec<usize> {
        let cpus = linerate_host::cpu::online();
        (0..k as usize).map(|j| (self.gen_cpu + j) % cpus).collect()
    }

    pub fn method_words(&self) -> String {
        match self.method {
            Method::Overload => format!("forwarding rate under overload, {} s a run", self.seconds),
            Method::Equilibrium => format!("equilibrium throughput, {} s trials", self.seconds),
            Method::Rfc2544 => format!(
                "RFC 2544 throughput, {} s trials, {} s final",
                self.seconds, self.final_seconds
            ),
            Method::Ndr | Method::Pdr => format!(
                "MLRsearch {}, {} s to {} s trials",
                if self.method == Method::Ndr {
                    "NDR"
                } else {
                    "PDR"
                },
                self.seconds,
                self.final_seconds
            ),
        }
    }

    /// Applies overrides (a command line's); a refusal names the field of
    /// [`Overrides`] and why, for the caller to say as its option.
    pub fn apply(&mut self, o: Overrides) -> std::result::Result<(), OverrideError> {
        let fail = |field, reason: String| Err(OverrideError { field, reason });
        if let Some(r) = o.repeat {
            if !(1..=1000).contains(&r) {
                return fail("repeat", format!("must be 1 to 1000, got {r}"));
            }
            self.repeat = r;
        }
        if let Some(t) = o.seconds {
            if !(t > 0.0 && t <= 3600.0) {
                return fail(
                    "seconds",
                    format!("must be more than 0 and at most 3600 seconds, got {t}"),
                );
            }
            if self.final_seconds == self.seconds || self.final_seconds < t {
                self.final_seconds = t;
            }
            self.seconds = t;
        }
        let listed = |field, names: &[String]| {
            if names.is_empty() {
                return Err(OverrideError {
                    field,
                    reason: "at least one name is needed".into(),
                });
            }
            Ok(names.iter().map(|n| (0..0, n.clone())).collect::<Vec<_>>())
        };
        let because = |field| {
            move |e: anyhow::Error| OverrideError {
                field,
                reason: e.to_string(),
            }
        };
        if let Some(names) = o.duts {
            let l = listed("duts", &names)?;
            self.duts = resolve(
                l.iter().map(|(s, n)| (s.clone(), n)),
                &self.defined_duts,
                &NAMES_OF_DUTS,
                &|_, why| anyhow!("{why}"),
            )
            .map_err(because("duts"))?;
        }
        if let Some(names) = o.profiles {
            let l = listed("profiles", &names)?;
            self.profiles = resolve(
                l.iter().map(|(s, n)| (s.clone(), n)),
                &self.defined_profiles,
                &NAMES_OF_PROFILES,
                &|_, why| anyhow!("{why}"),
            )
            .map_err(because("profiles"))?;
        }
        if let Err(reason) = check_vlans(&self.duts, &self.profiles) {
            return fail("duts", reason);
        }
        if let Err(reason) = check_ports(self.gen_ports, &self.duts, &self.profiles) {
            return fail("profiles", reason);
        }
        if let Some(n) = o.lab_name {
            // (Only the name can be wrong in a spec made of it.)
            if let Err(e) = linerate_lab::LabSpec::new(&n).validate() {
                return fail("lab_name", e.reason);
            }
            self.lab_name = n;
        }
        Ok(())
    }
}

/// How names of one kind (DUT configurations, traffic profiles) resolve.
struct Names<T: 'static> {
    what: &'static str,
    table: &'static str,
    builtin: fn(&str) -> Option<T>,
    builtins: &'static [&'static str],
}

const NAMES_OF_DUTS: Names<DutDef> = Names {
    what: "DUT configuration",
    table: "dut",
    builtin: builtin_dut,
    builtins: BUILTIN_DUTS,
};

const NAMES_OF_PROFILES: Names<Profile> = Names {
    what: "traffic profile",
    table: "profile",
    builtin: builtin_profile,
    builtins: BUILTIN_PROFILES,
};

/// Looks up listed names among the scenario's own definitions, then the
/// built-in ones; `fail` turns a reason into an error at a name's span.
fn resolve<'n, T: Clone>(
    names: impl Iterator<Item = (Range<usize>, &'n String)>,
    defined: &BTreeMap<String, T>,
    kind: &Names<T>,
    fail: &dyn Fn(Range<usize>, String) -> anyhow::Error,
) -> Result<Vec<(String, T)>> {
    let mut out: Vec<(String, T)> = Vec::new();
    for (span, n) in names {
        if out.iter().any(|(m, _)| m == n) {
            return Err(fail(span, format!("{n:?} is listed twice")));
        }
        let def = defined
            .get(n)
            .cloned()
            .or_else(|| (kind.builtin)(n))
            .ok_or_else(|| {
                fail(
                    span.clone(),
                    format!(
                    "unknown {} {n:?}: built-in ones are {}, or define [{}.{n}] in a scenario file",
                    kind.what,
                    kind.builtins.join(", "),
                    kind.table
                ),
                )
            })?;
        out.push((n.clone(), def));
    }
    Ok(out)
}

/// "FILE:LINE: dut.NAME" for a DUT the file defines, "FILE: DUT NAME" for
/// a built-in one.
fn origin(dut_lines: &BTreeMap<String, usize>, source: &str, name: &str) -> String {
    match dut_lines.get(name) {
        Some(line) => format!("{source}:{line}: dut.{name}"),
        None => format!("{source}: DUT {name}"),
    }
}

fn check_dut(name: &str, d: &DutDef) -> std::result::Result<(), String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(format!(
            "the name {name:?} may hold only letters, digits, '-', '_' and '.' (it names files)"
        ));
    }
    for k in d.sysctl.keys() {
        if !k.starts_with("net.") {
            return Err(format!(
                "sysctl {k:?}: only net.* settings are per namespace"
            ));
        }
    }
    if d.carry_tcp && d.forwarder != Forwarder::Linerate {
        return Err("carry_tcp: only linerate carries TCP (forwarder = \"linerate\")".to_string());
    }
    if let Some(m) = &d.xdp_mode {
        if d.forwarder != Forwarder::Linerate {
            return Err("xdp_mode: for linerate (forwarder = \"linerate\")".into());
        }
        if m != "native" && m != "generic" {
            return Err(format!("xdp_mode: {m:?}: \"native\" or \"generic\""));
        }
    }
    if let Some(ids) = d.vlans {
        if let Some(id) = ids.iter().find(|id| !(1..=4094).contains(*id)) {
            return Err(format!("vlans: {id}: a VLAN id is 1 to 4094"));
        }
    }
    if let Some(list) = &d.police {
        if d.forwarder != Forwarder::Linerate {
            return Err(
                "police: only linerate polices what it passes (forwarder = \"linerate\")".into(),
            );
        }
        linerate_dataplane::police::Police::default()
            .apply_list(list)
            .map_err(|why| format!("police: {why}"))?;
    }
    Ok(())
}

/// The DUT configurations' trunks and the profiles' tags agree: with
/// `vlans`, every configuration has the same first id and every profile
/// tags its frames with it; without, none tags.
fn check_vlans(
    duts: &[(String, DutDef)],
    profiles: &[(String, Profile)],
) -> std::result::Result<(), String> {
    let first = duts.first().and_then(|(_, d)| d.vlans).map(|v| v[0]);
    if let Some((name, d)) = duts.iter().find(|(_, d)| d.vlans.map(|v| v[0]) != first) {
        return Err(format!(
            "dut.{name}: vlans: {:?}, where {} takes its frames {}: the generator tags every run's frames alike",
            d.vlans, duts[0].0, first.map_or("untagged".to_string(), |v| format!("on VLAN {v}"))
        ));
    }
    if let Some((name, p)) = profiles.iter().find(|(_, p)| p.vlan != first) {
        return Err(format!(
            "profile.{name}: vlan: {}, where the DUT takes its frames {}",
            p.vlan.map_or("none".to_string(), |v| v.to_string()),
            first.map_or("untagged (no vlans)".to_string(), |v| format!(
                "on VLAN {v} (vlans)"
            ))
        ));
    }
    Ok(())
}

/// Every profile's parts leave by ports the lab has; a second port is not
/// made a trunk.
fn check_ports(
    gen_ports: u32,
    duts: &[(String, DutDef)],
    profiles: &[(String, Profile)],
) -> std::result::Result<(), String> {
    for (name, p) in profiles {
        let mut ports = std::iter::once(p).chain(&p.mix).filter_map(|p| p.port);
        if let Some(port) = ports.find(|&n| n > gen_ports) {
            return Err(format!(
                "profile.{name}: port: {port}, and the lab's generator has {gen_ports} port(s) into the DUT (set lab.gen_ports = {port})"
            ));
        }
    }
    if gen_ports > 1 {
        if let Some((name, _)) = duts.iter().find(|(_, d)| d.vlans.is_some()) {
            return Err(format!(
                "dut.{name}: vlans: the trunks are dut0 and dut1; a lab with lab.gen_ports = {gen_ports} has a port that would not be one"
            ));
        }
    }
    Ok(())
}

/// With `[hosts]`, the lab starts nothing on the DUT and has no namespaces
/// of its own: what belongs to the local lab is refused, naming the key.
fn check_remote_lab(
    source: &str,
    lab: &LabSection,
    h: &crate::hosts::LabHosts,
    duts: &[(String, DutDef)],
    origin: &dyn Fn(&str) -> String,
) -> std::result::Result<(), String> {
    let local_only = [
        ("name", lab.name.is_some()),
        ("gen_cpu", lab.gen_cpu.is_some()),
        ("dut_cpu", lab.dut_cpu.is_some()),
        ("queues", lab.queues.is_some()),
        ("gen_ports", lab.gen_ports.is_some()),
    ];
    if let Some((k, _)) = local_only.iter().find(|(_, set)| *set) {
        return Err(format!(
            "{source}: lab.{k}: is for the local namespace lab; with [hosts], the hosts' keys say where and on which CPUs"));
    }
    for (name, d) in duts {
        let o = origin(name);
        if d.forwarder != Forwarder::Commands {
            return Err(format!(
                "{o}: forwarder: the lab starts it in its local namespace; a DUT on its own host is what its setup commands make it (for linerate: setup = [\"systemctl start linerate\"])"
            ));
        }
        let local_keys = [
            ("nft", d.nft.is_some()),
            ("sysctl", !d.sysctl.is_empty()),
            ("routes", d.routes.is_some()),
            ("routes6", d.routes6.is_some()),
            ("queues", d.queues.is_some()),
            ("establish", d.establish),
            ("conntrack_max", d.conntrack_max.is_some()),
            ("conntrack_buckets", d.conntrack_buckets.is_some()),
            ("carry_tcp", d.carry_tcp),
            ("police", d.police.is_some()),
            ("xdp_mode", d.xdp_mode.is_some()),
            ("vlans", d.vlans.is_some()),
        ];
        if let Some((k, _)) = local_keys.iter().find(|(_, set)| *set) {
            return Err(format!(
                "{o}: {k}: applied in the local lab only; on a DUT host, do it with setup and teardown commands"
            ));
        }
        let commands = d.setup.len() + d.teardown.len() + d.record.len();
        if h.dut.target.is_none() && commands > 0 {
            return Err(format!(
                "{o}: setup, teardown and record run on the DUT, and hosts.dut has no ssh"
            ));
        }
    }
    Ok(())
}

fn check_profile(p: &Profile) -> std::result::Result<(), String> {
    p.check().map(|_| ()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        Scenario::parse("s.toml", text).unwrap_err().to_string()
    }

    /// A profile's port is one the lab has; the shipped scenario of two
    /// ports parses; a second port is refused with trunks, and a profile
    /// named on the command line is checked as one of the file.
    #[test]
    fn profiles_send_by_ports_the_lab_has() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scenarios/tenants-by-port.toml"
        ))
        .unwrap();
        let s = Scenario::parse("tenants-by-port.toml", &text).unwrap();
        assert_eq!(s.gen_ports, 2);
        assert_eq!(s.profiles[0].1.mix[0].port, Some(2));
        let e = err("duts = [\"linux\"]\nprofiles = [\"p\"]\n[profile.p]\nfamily = \"ipv4\"\nlen = \"60\"\n[[profile.p.mix]]\nfamily = \"ipv4\"\nlen = \"60\"\nport = 2\n");
        assert!(
            e.contains("profile.p: port: 2, and the lab's generator has 1 port(s) into the DUT (set lab.gen_ports = 2)"),
            "{e}"
        );
        let e = err("duts = [\"linux\"]\n[lab]\ngen_ports = 3\n");
        assert!(e.contains("lab.gen_ports: must be 1 or 2"), "{e}");
        let e = err("duts = [\"t\"]\nprofiles = [\"p\"]\n[lab]\ngen_ports = 2\n[dut.t]\nforwarder = \"linux\"\nvlans = [10, 20]\n[profile.p]\nfamily = \"ipv4\"\nlen = \"60\"\nvlan = 10\n");
        assert!(
            e.contains("dut.t: vlans: the trunks are dut0 and dut1"),
            "{e}"
        );
        let mut s = Scenario::parse(
            "s.toml",
            "duts = [\"linux\"]\nprofiles = [\"ipv4-60\"]\n[profile.p2]\nfamily = \"ipv4\"\nlen = \"60\"\nport = 2\n",
        )
        .unwrap();
        let e = s
            .apply(Overrides {
                repeat: None,
                seconds: None,
                duts: None,
                profiles: Some(vec!["p2".into()]),
                lab_name: None,
            })
            .unwrap_err();
        assert_eq!(e.field, "profiles");
        assert!(e.reason.contains("port: 2"), "{e}");
        // The probes: the last port by default, or the one named.
        let probes = |extra: &str| {
            Scenario::parse(
                "s.toml",
                &format!(
                    "duts = [\"linux\"]\n[lab]\ngen_ports = 2\n[measure]\nprobes = true\n{extra}"
                ),
            )
        };
        assert_eq!(probes("").unwrap().probes_port, 2);
        assert_eq!(probes("probes_port = 1\n").unwrap().probes_port, 1);
        let e = probes("probes_port = 3\n").unwrap_err().to_string();
        assert!(
            e.contains("measure.probes_port: 3, and the lab's generator has 2 port(s)"),
            "{e}"
        );
        let e = err("duts = [\"linux\"]\n[measure]\nprobes_port = 1\n");
        assert!(e.contains("measure.probes_port: for the probes"), "{e}");
    }

    /// Trunks and tags agree across the scenario, VLAN ids in range; the
    /// shipped VLAN scenario parses.
    #[test]
    fn vlans_and_the_profiles_tags_agree() {
        let vlan = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scenarios/vlan.toml"
        ))
        .unwrap();
        let s = Scenario::parse("vlan.toml", &vlan).unwrap();
        assert_eq!(s.duts[1].1.vlans, Some([10, 20]));
        assert_eq!(s.profiles[0].1.vlan, Some(10));
        let e = err("duts = [\"t\"]\n[dut.t]\nforwarder = \"linux\"\nvlans = [10, 5000]\n");
        assert!(
            e.contains("dut.t: vlans: 5000: a VLAN id is 1 to 4094"),
            "{e}"
        );
        let e = err("duts = [\"t\"]\n[dut.t]\nforwarder = \"linux\"\nvlans = [10, 20]\n");
        assert!(
            e.contains("profile.ipv4-60: vlan: none, where the DUT takes its frames on VLAN 10"),
            "{e}"
        );
        let e = err("duts = [\"t\", \"linux\"]\nprofiles = [\"p\"]\n[dut.t]\nforwarder = \"linux\"\nvlans = [10, 20]\n[profile.p]\nfamily = \"ipv4\"\nlen = \"60\"\nvlan = 10\n");
        assert!(
            e.contains("dut.linux: vlans: None, where t takes its frames on VLAN 10"),
            "{e}"
        );
        let e = err("duts = [\"linux\"]\nprofiles = [\"p\"]\n[profile.p]\nfamily = \"ipv4\"\nlen = \"60\"\nvlan = 7\n");
        assert!(
            e.contains("profile.p: vlan: 7, where the DUT takes its frames untagged"),
            "{e}"
        );
    }

    #[test]
    fn the_builtin_scenario_is_linux_against_linerate_and_the_xdp_limit() {
        let s = Scenario::builtin();
        assert_eq!(
            s.duts.iter().map(|d| d.0.as_str()).collect::<Vec<_>>(),
            ["linux", "linerate", "xdp-redirect"]
        );
        assert_eq!(s.duts[2].1.forwarder, Forwarder::XdpRedirect);
        assert_eq!(s.profiles[0].0, "ipv4-60");
        assert_eq!((s.repeat, s.seconds, s.method), (5, 5.0, Method::Overload));
    }

    #[test]
    fn a_full_scenario_with_its_own_dut_and_profile() {
        let s = Scenario::parse(
            "s.toml",
            r#"
repeat = 3
duts = ["linux", "tuned", "linux-conntrack"]
profiles = ["ipv6-62", "small"]
[measure]
method = "ndr"
seconds = 1
final_seconds = 4
max_rate = "2M"
[dut.tuned]
forwarder = "linux"
sysctl = { "net.core.netdev_budget" = "600" }
[profile.small]
family = "ipv4"
len = "64,128"
dst = "198.19.10.1:2000-198.19.10.10"
"#,
        )
        .unwrap();
        assert_eq!(s.duts[1].1.sysctl["net.core.netdev_budget"], "600");
        assert!(s.duts[2].1.nft.as_deref().unwrap().contains("ct state"));
        assert_eq!(s.profiles[1].1.len, "64,128");
        assert_eq!((s.final_seconds, s.max_rate_pps), (4.0, Some(2e6)));
    }

    #[test]
    fn a_dut_uses_at_most_the_labs_queues() {
        let s = Scenario::parse(
            "s.toml",
            "duts = [\"linux\", \"one\"]\n[dut.one]\nforwarder = \"linux\"\nqueues = 1\n",
        )
        .unwrap();
        assert_eq!((s.queues, s.duts[1].1.queues), (1, Some(1)));
        assert_eq!(s.gen_cpus(1), vec![0]);
        let e = err("duts = [\"two\"]\n[dut.two]\nforwarder = \"linerate\"\nqueues = 2\n");
        assert_eq!(
            e,
            "s.toml:2: dut.two: queues: must be 1 to lab.queues (1), got 2"
        );
        let e = err("duts = [\"linux\"]\n[lab]\nqueues = 0\n");
        assert!(
            e.contains("lab.queues: must be between 1 and 64, got 0"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_file_the_line_and_the_field() {
        let e = err("duts = [\"linux\"]\nrepaet = 3\n");
        assert!(e.starts_with("s.toml:2: ") && e.contains("repaet"), "{e}");
        let e = err("duts = [\"linux\"]\nrepeat = 0\n");
        assert_eq!(e, "s.toml:2: repeat: must be 1 to 1000, got 0");
        let e = err("repeat = 2\nduts = [\"linux\", \"bsd\"]\n");
        assert!(
            e.starts_with("s.toml:2: duts: unknown DUT configuration \"bsd\""),
            "{e}"
        );
        let e = err("duts = [\"linux\"]\n[measure]\nseconds = \"five\"\n");
        assert!(e.starts_with("s.toml:3: "), "{e}");
        let e = err("duts = [\"linux\"]\n[measure]\nmethod = \"fastest\"\n");
        assert!(e.starts_with("s.toml:3: ") && e.contains("fastest"), "{e}");
        let e = err(
            "duts = [\"linux\"]\n[measure]\nseconds = 2\nfinal_seconds = 1\nmethod = \"rfc2544\"\n",
        );
        assert!(
            e.starts_with("s.toml:4: measure.final_seconds: must not be shorter"),
            "{e}"
        );
        let e = err("duts = [\"linux\"]\n[measure]\nmax_rate = \"3M\"\n");
        assert!(
            e.starts_with("s.toml:3: measure: final_seconds and max_rate are for searches"),
            "{e}"
        );
        let e = err("duts = [\"linux\"]\nprofiles = [\"p\"]\n[profile.p]\nfamily = \"ipv6\"\nlen = \"20\"\n");
        // A table's errors point at its header.
        assert!(
            e.starts_with("s.toml:3: profile.p: len: frame length 20"),
            "{e}"
        );
        let e = err("duts = [\"linux\"]\nprofiles = [\"p\"]\n[profile.p]\nfamily = \"ipv6\"\nlen = \"62\"\nsrc = \"10.0.0.1\"\n");
        assert!(e.contains("profile.p: src: 10.0.0.1 is not IPv6"), "{e}");
        let e = err("duts = [\"t\"]\n[dut.t]\nforwarder = \"linux\"\nsysctl = { \"kernel.pid_max\" = \"1\" }\n");
        assert!(
            e.starts_with("s.toml:2: dut.t: sysctl \"kernel.pid_max\": only net.*"),
            "{e}"
        );
        let e = err("duts = [\"t\"]\n[dut.t]\nforwarder = \"linerate\"\nxdp_mode = \"skb\"\n");
        assert!(
            e.starts_with("s.toml:2: dut.t: xdp_mode: \"skb\": \"native\" or \"generic\""),
            "{e}"
        );
        let e = err("duts = [\"t\"]\n[dut.t]\nforwarder = \"linux\"\nxdp_mode = \"generic\"\n");
        assert!(
            e.starts_with("s.toml:2: dut.t: xdp_mode: for linerate"),
            "{e}"
        );
        let e = err("duts = [\"t\"]\n[dut.t]\nforwarder = \"linux\"\ncarry_tcp = true\n");
        assert!(
            e.starts_with("s.toml:2: dut.t: carry_tcp: only linerate carries TCP"),
            "{e}"
        );
        let e = err("duts = [\"linux\", \"linux\"]\n");
        assert!(
            e.starts_with("s.toml:1: duts: \"linux\" is listed twice"),
            "{e}"
        );
        let e = err("duts = []\n");
        assert!(e.starts_with("s.toml:1: duts: at least one"), "{e}");
        let e = err("duts = [\"linux\"]\n[lab]\nname = \"a b\"\n");
        assert!(e.starts_with("s.toml: lab.name: "), "{e}");
    }

    #[test]
    fn overrides_are_checked_and_name_the_option() {
        let mut s = Scenario::builtin();
        let e = s.apply(Overrides {
            duts: Some(vec!["linux".into(), "nope".into()]),
            ..Default::default()
        });
        let e = e.unwrap_err();
        assert_eq!(e.field, "duts");
        assert!(
            e.reason.starts_with("unknown DUT configuration \"nope\""),
            "{e}"
        );
        let e = s.apply(Overrides {
            repeat: Some(0),
            ..Default::default()
        });
        assert_eq!(
            e.unwrap_err(),
            OverrideError {
                field: "repeat",
                reason: "must be 1 to 1000, got 0".into()
            }
        );
        s.apply(Overrides {
            seconds: Some(1.5),
            profiles: Some(vec!["imix".into(), "ipv6-62".into()]),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            (s.seconds, s.final_seconds, s.profiles.len()),
            (1.5, 1.5, 2)
        );
    }

    const HOSTS: &str = r#"
duts = ["fbsd-tryforward"]
[hosts.gen]
ssh = "root@gen.lab"
interfaces = ["enp1s0f0"]
cpus = [2, 3]
[hosts.recv]
ssh = "root@gen.lab"
interfaces = ["enp1s0f1"]
[hosts.dut]
ssh = "root@router.lab"
mac = "90:e2:ba:84:20:38"
[dut.fbsd-tryforward]
setup = ["sysctl net.inet.ip.redirect=0"]
teardown = ["sysctl net.inet.ip.redirect=1"]
record = ["uname -a", "sysctl net.inet.ip.redirect"]
"#;

    #[test]
    fn a_lab_of_hosts_takes_dut_commands_and_refuses_the_local_labs_keys() {
        let s = Scenario::parse("h.toml", HOSTS).unwrap();
        let h = s.hosts.as_ref().unwrap();
        assert_eq!(h.dut.mac.as_deref(), Some("90:e2:ba:84:20:38"));
        assert_eq!(s.duts[0].1.forwarder, Forwarder::Commands);
        assert_eq!(s.duts[0].1.record.len(), 2);
        let cases = [
            (
                HOSTS.replace("[dut.fbsd-tryforward]\n", "[dut.fbsd-tryforward]\nforwarder = \"linux\"\n"),
                "s.toml:13: dut.fbsd-tryforward: forwarder: the lab starts it",
            ),
            (
                HOSTS.replace("[dut.fbsd-tryforward]\n", "[dut.fbsd-tryforward]\nnft = \"x\"\n"),
                "s.toml:13: dut.fbsd-tryforward: nft: applied in the local lab only",
            ),
            (
                format!("{HOSTS}[lab]\nqueues = 2\n"),
                "s.toml: lab.queues: is for the local namespace lab",
            ),
            (
                HOSTS.replace("ssh = \"root@router.lab\"\n", ""),
                "s.toml:12: dut.fbsd-tryforward: setup, teardown and record run on the DUT, and hosts.dut has no ssh",
            ),
            (
                HOSTS.replace("cpus = [2, 3]", "cpus = [3, 2]"),
                "s.toml: hosts.gen.cpus: [3, 2]: an interface's CPUs must be consecutive",
            ),
            (
                HOSTS.replace("ssh = \"root@router.lab\"", "ssh = \"root@router.lab\"\nport = 22"),
                "s.toml:12: unknown field `port`",
            ),
            (
                HOSTS.replace(
                    "duts = [\"fbsd-tryforward\"]\n",
                    "duts = [\"fbsd-tryforward\"]\nprofiles = [\"m\"]\n[profile.m]\nfamily = \"ipv4\"\nlen = \"60\"\n[[profile.m.mix]]\nfamily = \"ipv4\"\nlen = \"60\"\n",
                ),
                "s.toml: profile.m: mix: a mix runs in the local lab only",
            ),
        ];
        for (text, want) in cases {
            let e = err(&text);
            assert!(e.starts_with(want), "{e}\nwanted: {want}");
        }
        // Without [hosts], the same DUT commands run in the local lab.
        let local = HOSTS.split("[hosts.gen]").next().unwrap().to_string()
            + "[dut.fbsd-tryforward]\nsetup = [\"true\"]\n";
        assert!(Scenario::parse("l.toml", &local).unwrap().hosts.is_none());
    }

    /// Every example in scenarios/ is a scenario this version reads.
    #[test]
    fn the_example_scenarios_are_valid() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        let mut n = 0;
        for f in std::fs::read_dir(&dir).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|e| e == "toml") {
                Scenario::load(&p).unwrap_or_else(|e| panic!("{e:#}"));
                n += 1;
            }
        }
        assert!(n >= 9, "{n} scenarios in {}", dir.display());
    }
}
