//! The router's configuration file: `/etc/linerate/linerate.toml`,
//! or `linerate route --config FILE`; `linerate check-config FILE` checks one
//! without touching anything. Read and checked whole before anything is
//! attached: an unknown key, a bad value or an interface the router's
//! namespace does not have is refused with the file, the line and the
//! field. Flags given on the command line override the file's values.
use anyhow::{anyhow, bail, Result};
use linerate_dataplane::police::{parse_limit, Police};
use linerate_fib::Ipv6Layout;
use linerate_host::field::{at, line_of};
use serde::Deserialize;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::Path;
use toml::Spanned;

/// Where `linerate route` looks when given neither `-i` nor `--config`.
pub const DEFAULT_PATH: &str = "/etc/linerate/linerate.toml";

/// The file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    interfaces: Option<Spanned<Vec<Spanned<String>>>>,
    mode: Option<Spanned<String>>,
    fib6: Option<Spanned<String>>,
    netns: Option<Spanned<String>>,
    nice: Option<Spanned<i64>>,
    quiet: Option<bool>,
    metrics: Option<Spanned<String>>,
    log_level: Option<Spanned<String>>,
    carry_tcp: Option<bool>,
    police: Option<PoliceFile>,
}

/// `[police]`: each class's limit ("20k/5k", "off"), `all` first.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PoliceFile {
    all: Option<Spanned<String>>,
    neighbour: Option<Spanned<String>>,
    control: Option<Spanned<String>>,
    icmp: Option<Spanned<String>>,
    local: Option<Spanned<String>>,
    errors: Option<Spanned<String>>,
    slow: Option<Spanned<String>>,
    unresolved: Option<Spanned<String>>,
    connections: Option<Spanned<String>>,
    transit: Option<Spanned<String>>,
}

impl PoliceFile {
    /// The classes as written, in linerate_dataplane::layout::PUNT_CLASSES'
    /// order (the test below holds the two to each other).
    fn classes(&self) -> [(&'static str, &Option<Spanned<String>>); 9] {
        [
            ("neighbour", &self.neighbour),
            ("control", &self.control),
            ("icmp", &self.icmp),
            ("local", &self.local),
            ("errors", &self.errors),
            ("slow", &self.slow),
            ("unresolved", &self.unresolved),
            ("connections", &self.connections),
            ("transit", &self.transit),
        ]
    }
}

/// What `linerate route` runs with, from the file, the flags or both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteConfig {
    pub interfaces: Vec<String>,
    /// "native" or "generic".
    pub mode: String,
    pub fib6: Ipv6Layout,
    pub netns: Option<String>,
    pub nice: i32,
    pub quiet: bool,
    /// Where to serve the Prometheus metrics (None: not served).
    pub metrics: Option<SocketAddr>,
    /// error, warn, info or debug (crate::log).
    pub log_level: String,
    /// Established TCP connections the ruleset accepts carried, their
    /// windows unchecked, as the kernel's flowtable would (default off:
    /// with the kernel's window checking on, they go to the kernel).
    pub carry_tcp: bool,
    /// The limits of what the fast path passes to the kernel, per class
    /// and CPU (`[police]`, `--police`).
    pub police: Police,
}

impl RouteConfig {
    /// What the router would do with it, in a line.
    pub fn describe(&self) -> String {
        format!(
            "route between {} ({} XDP, IPv6 FIB {}, nice {}{}{})",
            self.interfaces.join(", "),
            self.mode,
            Ipv6Layout::CHOICES
                .iter()
                .find(|(_, l)| *l == self.fib6)
                .map_or("?", |(n, _)| n),
            self.nice,
            self.netns
                .as_deref()
                .map(|n| format!(", namespace {n}"))
                .unwrap_or_default(),
            self.metrics
                .map(|m| format!(", metrics at http://{m}/metrics"))
                .unwrap_or_default()
        ) + if self.carry_tcp {
            "; established TCP carried, its windows unchecked"
        } else {
            ""
        }
    }
}

/// A file read and its values checked; the interfaces' places kept for
/// [`Loaded::check_interfaces`].
pub struct Loaded {
    pub config: RouteConfig,
    source: String,
    text: String,
    interface_spans: Vec<Range<usize>>,
}

impl Loaded {
    pub fn read(path: &Path) -> Result<Loaded> {
        let text =
            std::fs::read_to_string(path).map_err(|e| anyhow!("config {}: {e}", path.display()))?;
        Loaded::parse(&path.display().to_string(), &text)
    }

    /// Parses and checks `text`; `source` names it in errors.
    pub fn parse(source: &str, text: &str) -> Result<Loaded> {
        let f: File = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| format!(":{}", line_of(text, s.start)))
                .unwrap_or_default();
            anyhow!("{source}{line}: {}", e.message().trim_end())
        })?;
        let err = |span: Range<usize>, field: &str, why: String| at(source, text, span, field, why);
        let Some(list) = f.interfaces else {
            return Err(err(
                0..0,
                "interfaces",
                "missing: the interfaces to route between".into(),
            ));
        };
        let list_span = list.span();
        let list = list.into_inner();
        if list.is_empty() {
            return Err(err(
                list_span,
                "interfaces",
                "empty: give the interfaces to route between".into(),
            ));
        }
        let mut interfaces = Vec::new();
        let mut interface_spans = Vec::new();
        for name in list {
            let span = name.span();
            let name = name.into_inner();
            if let Err(why) = interface_name(&name) {
                return Err(err(span, "interfaces", why));
            }
            if interfaces.contains(&name) {
                return Err(err(span, "interfaces", format!("{name} is listed twice")));
            }
            interfaces.push(name);
            interface_spans.push(span);
        }
        let mode = match f.mode {
            None => "native".to_string(),
            Some(m) if matches!(m.get_ref().as_str(), "native" | "generic") => m.into_inner(),
            Some(m) => {
                return Err(err(
                    m.span(),
                    "mode",
                    format!("must be \"native\" or \"generic\", got {:?}", m.get_ref()),
                ))
            }
        };
        let fib6 = match f.fib6 {
            None => Ipv6Layout::default(),
            Some(l) => Ipv6Layout::CHOICES
                .iter()
                .find(|(name, _)| name == l.get_ref())
                .map(|(_, v)| *v)
                .ok_or_else(|| {
                    let names: Vec<&str> = Ipv6Layout::CHOICES.iter().map(|c| c.0).collect();
                    err(
                        l.span(),
                        "fib6",
                        format!("must be one of {}, got {:?}", names.join(", "), l.get_ref()),
                    )
                })?,
        };
        let netns = match f.netns {
            None => None,
            Some(n) if n.get_ref().is_empty() || n.get_ref().contains('/') => {
                return Err(err(
                    n.span(),
                    "netns",
                    format!("not a namespace name: {:?}", n.get_ref()),
                ))
            }
            Some(n) => Some(n.into_inner()),
        };
        let nice = match f.nice {
            None => crate::run::DEFAULT_NICE,
            Some(n) if (-20..=19).contains(n.get_ref()) => *n.get_ref() as i32,
            Some(n) => {
                return Err(err(
                    n.span(),
                    "nice",
                    format!("must be -20 to 19, got {}", n.get_ref()),
                ))
            }
        };
        let metrics = match f.metrics {
            None => None,
            Some(m) => {
                Some(metrics_address(m.get_ref()).map_err(|why| err(m.span(), "metrics", why))?)
            }
        };
        let log_level = match f.log_level {
            None => "info".to_string(),
            Some(l) if crate::log::level_of(l.get_ref()).is_some() => l.into_inner(),
            Some(l) => {
                return Err(err(
                    l.span(),
                    "log_level",
                    format!(
                        "must be one of {}, got {:?}",
                        crate::log::LEVELS.join(", "),
                        l.get_ref()
                    ),
                ))
            }
        };
        let mut police = Police::default();
        if let Some(p) = &f.police {
            if let Some(all) = &p.all {
                let limit =
                    parse_limit(all.get_ref()).map_err(|why| err(all.span(), "police.all", why))?;
                police.limits = [limit; 9];
            }
            for (i, (name, value)) in p.classes().into_iter().enumerate() {
                if let Some(v) = value {
                    police.limits[i] = parse_limit(v.get_ref())
                        .map_err(|why| err(v.span(), &format!("police.{name}"), why))?;
                }
            }
        }
        Ok(Loaded {
            config: RouteConfig {
                interfaces,
                mode,
                fib6,
                netns,
                nice,
                quiet: f.quiet.unwrap_or(false),
                metrics,
                log_level,
                carry_tcp: f.carry_tcp.unwrap_or(false),
                police,
            },
            source: source.to_string(),
            text: text.to_string(),
            interface_spans,
        })
    }

    /// Each interface the file names exists in the file's namespace
    /// (entered for the check, and left), or the caller's.
    pub fn check_in_namespace(&self) -> Result<()> {
        match &self.config.netns {
            Some(ns) => {
                let _in = linerate_host::netns::NetnsGuard::enter(ns)
                    .map_err(|e| anyhow!("{}: netns: {ns}: {e:#}", self.source))?;
                self.check_interfaces()
            }
            None => self.check_interfaces(),
        }
    }

    /// Each interface the file names exists in the calling thread's
    /// namespace (the router's, once it is in it).
    pub fn check_interfaces(&self) -> Result<()> {
        for (name, span) in self.config.interfaces.iter().zip(&self.interface_spans) {
            if linerate_bpf::loader::ifindex(name).is_err() {
                let place = match &self.config.netns {
                    Some(ns) => format!("in namespace {ns}"),
                    None => "here".to_string(),
                };
                return Err(at(
                    &self.source,
                    &self.text,
                    span.clone(),
                    "interfaces",
                    format!("{name} does not exist {place}"),
                ));
            }
        }
        Ok(())
    }
}

/// A name the kernel could give an interface.
fn interface_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 15 {
        return Err(format!("{name:?}: an interface name is 1 to 15 bytes"));
    }
    if name.contains(['/', ' ', ':']) || name == "." || name == ".." {
        return Err(format!("{name:?} is not an interface name"));
    }
    Ok(())
}

/// An address and port to serve the metrics on: "127.0.0.1:9417",
/// "[::1]:9417", "0.0.0.0:9417".
pub fn metrics_address(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| {
        format!("{text:?} is not an IP address and port (\"127.0.0.1:9417\", \"[::1]:9417\")")
    })
}

/// The flags of `linerate route` that override the file (None: not given).
#[derive(Default)]
pub struct Overrides {
    pub interfaces: Vec<String>,
    pub mode: Option<String>,
    pub fib6: Option<Ipv6Layout>,
    pub netns: Option<String>,
    pub nice: Option<i32>,
    pub quiet: bool,
    pub metrics: Option<SocketAddr>,
    pub log_level: Option<String>,
    /// `--carry-tcp` (a flag can only turn it on).
    pub carry_tcp: bool,
    /// `--police`: `off`, or `CLASS=LIMIT,...` on top of the file's.
    pub police: Option<String>,
}

/// The file's configuration with the flags given on top; without a file,
/// the flags and the defaults (then `-i` is needed).
pub fn merge(file: Option<RouteConfig>, flags: Overrides) -> Result<RouteConfig> {
    let base = match file {
        Some(c) => c,
        None => {
            if flags.interfaces.is_empty() {
                bail!(
                    "-i: give the interfaces to route between (-i eth0,eth1), or a configuration file (--config FILE, or {DEFAULT_PATH})"
                );
            }
            RouteConfig {
                interfaces: Vec::new(),
                mode: "native".into(),
                fib6: Ipv6Layout::default(),
                netns: None,
                nice: crate::run::DEFAULT_NICE,
                quiet: false,
                metrics: None,
                log_level: "info".into(),
                carry_tcp: false,
                police: Police::default(),
            }
        }
    };
    let mut police = base.police;
    if let Some(list) = &flags.police {
        police
            .apply_list(list)
            .map_err(|why| anyhow!("--police: {why}"))?;
    }
    Ok(RouteConfig {
        interfaces: if flags.interfaces.is_empty() {
            base.interfaces
        } else {
            flags.interfaces
        },
        mode: flags.mode.unwrap_or(base.mode),
        fib6: flags.fib6.unwrap_or(base.fib6),
        netns: flags.netns.or(base.netns),
        nice: flags.nice.unwrap_or(base.nice),
        quiet: flags.quiet || base.quiet,
        metrics: flags.metrics.or(base.metrics),
        log_level: flags.log_level.unwrap_or(base.log_level),
        carry_tcp: flags.carry_tcp || base.carry_tcp,
        police,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"# a router between two links
interfaces = ["eth0", "eth1"]
mode = "generic"
fib6 = "compact"
netns = "edge"
nice = -5
quiet = true
metrics = "[::1]:9417"
log_level = "debug"
carry_tcp = true

[police]
all = "100k/10k"
icmp = "1k/100"
transit = "off"
"#;

    #[test]
    fn a_whole_file_is_read() {
        let c = Loaded::parse("f.toml", GOOD).unwrap().config;
        assert_eq!(
            c,
            RouteConfig {
                interfaces: vec!["eth0".into(), "eth1".into()],
                mode: "generic".into(),
                fib6: Ipv6Layout::Compact,
                netns: Some("edge".into()),
                nice: -5,
                quiet: true,
                metrics: Some("[::1]:9417".parse().unwrap()),
                log_level: "debug".into(),
                carry_tcp: true,
                police: {
                    let mut p = Police::off();
                    p.apply_list(
                        "neighbour=100k/10k,control=100k/10k,icmp=1k/100,local=100k/10k,\
                         errors=100k/10k,slow=100k/10k,unresolved=100k/10k,\
                         connections=100k/10k",
                    )
                    .unwrap();
                    p
                },
            }
        );
        // Only the interfaces are needed.
        let c = Loaded::parse("f.toml", "interfaces = [\"a\"]\n")
            .unwrap()
            .config;
        assert_eq!(
            (c.mode.as_str(), c.fib6, c.nice),
            ("native", Ipv6Layout::default(), -10)
        );
    }

    #[test]
    fn refusals_name_the_file_line_and_field() {
        let refused = |text: &str| {
            Loaded::parse("/etc/l.toml", text)
                .err()
                .unwrap()
                .to_string()
        };
        assert_eq!(
            refused("interfaces = [\"a\"]\nmode = \"fast\"\n"),
            "/etc/l.toml:2: mode: must be \"native\" or \"generic\", got \"fast\""
        );
        let e = refused("interfaces = [\"a\"]\nspeed = 3\n");
        assert!(e.starts_with("/etc/l.toml:2: unknown field `speed`"), "{e}");
        assert_eq!(
            refused("mode = \"native\"\n"),
            "/etc/l.toml: interfaces: missing: the interfaces to route between"
        );
        assert_eq!(
            refused("interfaces = []\n"),
            "/etc/l.toml:1: interfaces: empty: give the interfaces to route between"
        );
        assert_eq!(
            refused("interfaces = [\n \"a\",\n \"a\"]\n"),
            "/etc/l.toml:3: interfaces: a is listed twice"
        );
        let e = refused("interfaces = [\"a\", \"an-interface-name-too-long\"]\n");
        assert!(
            e.starts_with("/etc/l.toml:1: interfaces: \"an-interface"),
            "{e}"
        );
        assert_eq!(
            refused("interfaces = [\"a\"]\n\nnice = 40\n"),
            "/etc/l.toml:3: nice: must be -20 to 19, got 40"
        );
        let e = refused("interfaces = [\"a\"]\nfib6 = \"narrow\"\n");
        assert!(
            e.starts_with("/etc/l.toml:2: fib6: must be one of wide, compact"),
            "{e}"
        );
        assert_eq!(
            refused("interfaces = [\"a\"]\nmetrics = \"localhost\"\n"),
            "/etc/l.toml:2: metrics: \"localhost\" is not an IP address and port (\"127.0.0.1:9417\", \"[::1]:9417\")"
        );
        assert_eq!(
            refused("interfaces = [\"a\"]\nlog_level = \"loud\"\n"),
            "/etc/l.toml:2: log_level: must be one of error, warn, info, debug, got \"loud\""
        );
        assert_eq!(
            refused("interfaces = [\"a\"]\n[police]\nicmp = \"5k\"\n"),
            "/etc/l.toml:3: police.icmp: \"5k\": give RATE/BURST (\"20k/5k\") or \"off\""
        );
        assert_eq!(
            refused("interfaces = [\"a\"]\n[police]\nall = \"0/1\"\n"),
            "/etc/l.toml:3: police.all: rate 0: 1 to 1G frames a second (\"off\": no limit)"
        );
        let e = refused("interfaces = [\"a\"]\n[police]\npings = \"1/1\"\n");
        assert!(e.starts_with("/etc/l.toml:3: unknown field `pings`"), "{e}");
        let e = refused("interfaces = [\"a\"]\nnice = \"low\"\n");
        assert!(e.starts_with("/etc/l.toml:2: "), "{e}");
        let e = refused("interfaces = [\"a\"\n");
        assert!(e.starts_with("/etc/l.toml:"), "{e}");
    }

    #[test]
    fn flags_override_the_file() {
        let file = Loaded::parse("f", GOOD).unwrap().config;
        let c = merge(
            Some(file.clone()),
            Overrides {
                interfaces: vec!["x0".into()],
                nice: Some(0),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            (c.interfaces, c.nice, c.mode),
            (vec!["x0".to_string()], 0, "generic".into())
        );
        assert_eq!(
            merge(Some(file.clone()), Overrides::default()).unwrap(),
            file
        );
        let e = merge(None, Overrides::default()).unwrap_err().to_string();
        assert!(e.starts_with("-i: give the interfaces"), "{e}");
        // --police on top of the file's: the classes it names.
        let c = merge(
            Some(file.clone()),
            Overrides {
                police: Some("icmp=off".into()),
                ..Default::default()
            },
        )
        .unwrap();
        let icmp = Police::class("icmp").unwrap();
        assert_eq!(c.police.limits[icmp], None);
        assert_eq!(c.police.limits[0], file.police.limits[0]);
        let e = merge(
            Some(file.clone()),
            Overrides {
                police: Some("icmp".into()),
                ..Default::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "--police: \"icmp\": give CLASS=RATE/BURST or CLASS=off");
        let c = merge(
            None,
            Overrides {
                interfaces: vec!["x0".into()],
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!((c.mode.as_str(), c.nice), ("native", -10));
    }

    #[test]
    fn the_police_table_names_the_programs_classes() {
        let f: PoliceFile = toml::from_str("").unwrap();
        let names: Vec<&str> = f.classes().iter().map(|(n, _)| *n).collect();
        assert_eq!(names, linerate_dataplane::layout::PUNT_CLASSES);
    }

    /// The keys the parser takes, as its refusal of an unknown one lists
    /// them ("expected one of `interfaces`, `mode`, ...").
    fn accepted_keys() -> Vec<String> {
        let e = Loaded::parse("/etc/l.toml", "interfaces = [\"a\"]\nno_such_key = 1\n")
            .err()
            .unwrap()
            .to_string();
        let listed = e
            .split("expected one of")
            .nth(1)
            .unwrap_or_else(|| panic!("{e}"));
        let mut keys: Vec<String> = listed
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        keys.sort();
        keys
    }

    #[test]
    fn every_key_has_its_row() {
        let page = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/reference/config.md"
        ))
        .unwrap();
        let mut rows: Vec<String> = page
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .map(|l| l.split('`').next().unwrap().to_string())
            .collect();
        rows.sort();
        let keys = accepted_keys();
        assert!(keys.len() >= 8, "{keys:?}");
        assert_eq!(
            rows, keys,
            "docs/reference/config.md's rows, and the keys the parser takes"
        );
        // The packaged example names only keys the parser takes.
        let example = include_str!("../../../packaging/linerate.toml");
        for l in example.lines().map(|l| l.trim_start_matches("# ")) {
            if let Some((k, _)) = l.split_once(" = ") {
                assert!(
                    keys.contains(&k.to_string()),
                    "packaging/linerate.toml: {k}"
                );
            }
        }
    }
}
