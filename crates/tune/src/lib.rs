//! `linerate tune`'s checks (docs/tuning.md): the settings of a Linux
//! router that decide whether it forwards right, how fast, and how
//! steadily it measures, each read from procfs and sysfs ([`Root`]), with
//! the value recommended and why. The seeds' tuning guides, for Linux.
//!
//! A check reads files and what a driver says of itself ([`Driver`],
//! asked as `ethtool` asks), so that the same code judges the machine and
//! a tree copied from one. What cannot be read says why; where the
//! references disagree (SMT, turbo, GRO, rings) the check says to
//! measure.
pub mod ethtool;
pub mod fix;
pub mod host;
pub mod iface;
pub mod irq;
pub mod link;
pub mod platform;
pub mod root;

pub use ethtool::Driver;

pub use root::Root;
use serde::Serialize;

/// What a setting decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Whether the router forwards what the kernel would.
    Correctness,
    /// How fast it forwards.
    Speed,
    /// Whether a measurement repeats.
    Stability,
}

/// How the setting stands against the recommendation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Good,
    Change,
    /// The references disagree: a lab run with and without decides.
    Measure,
    /// Said for the record: no value is better for every router.
    Report,
    /// Could not be read, and why; never guessed.
    Unread(String),
}

/// One check's finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub check: &'static str,
    /// "host", or the interface's name.
    pub scope: String,
    pub class: Class,
    /// What was read (relative to the root).
    pub read: String,
    pub current: Option<String>,
    pub recommended: String,
    pub verdict: Verdict,
    /// One line, with its source or our own measurement.
    pub why: &'static str,
}

/// A setting a check reads: what it is called, decides, should be, and
/// why.
pub(crate) struct Setting {
    pub check: &'static str,
    pub class: Class,
    pub recommended: &'static str,
    pub why: &'static str,
}

impl Setting {
    /// The finding of file `rel` for `scope`: its value judged by `good`,
    /// or why it could not be read.
    pub(crate) fn read(
        &self,
        root: &Root,
        scope: &str,
        rel: String,
        good: impl Fn(&str) -> bool,
    ) -> Finding {
        let value = root.read(&rel);
        let verdict = match &value {
            Ok(v) if good(v) => Verdict::Good,
            Ok(_) => Verdict::Change,
            Err(e) => Verdict::Unread(e.clone()),
        };
        self.found(scope, rel, value.ok(), verdict)
    }

    /// The finding of a value read otherwise.
    pub(crate) fn found(
        &self,
        scope: &str,
        read: String,
        current: Option<String>,
        verdict: Verdict,
    ) -> Finding {
        Finding {
            check: self.check,
            scope: scope.to_string(),
            class: self.class,
            read,
            current,
            recommended: self.recommended.to_string(),
            verdict,
            why: self.why,
        }
    }
}

/// Every check: the host's, then each interface's of `ifaces`, its
/// driver's answers from `driver`.
pub fn check(root: &Root, ifaces: &[String], driver: &dyn Fn(&str) -> Driver) -> Vec<Finding> {
    let mut all = host::check(root);
    all.extend(platform::host(root));
    for i in ifaces {
        let files = iface::check(root, i);
        let present = files.iter().all(|f| f.check != "interface");
        all.extend(files);
        if present {
            all.extend(platform::iface(root, i));
            all.extend(link::check(root, i, &driver(i)));
        }
    }
    all
}

/// The findings on this machine (`linerate tune`): JSON, or the table.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct Report(pub Vec<Finding>);

/// `linerate tune` on this machine (in the caller's network namespace):
/// the checks; first, with `fix`, the safe fixes made and every value
/// they may change recorded in that file (written before anything else
/// is); or, with `revert`, the values such a file recorded put back. The
/// findings are those after.
pub fn machine(
    ifaces: &[String],
    fix: Option<&std::path::Path>,
    revert: Option<&std::path::Path>,
) -> Result<Report, String> {
    let root = Root::machine();
    if let Some(path) = revert {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let record: fix::Record = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}: not a record of `linerate tune --fix`: {e}",
                path.display()
            )
        })?;
        fix::revert(&root, &record)?;
    }
    if let Some(path) = fix {
        fix::fix(&root, &check(&root, ifaces, &Driver::ask), |r| {
            let json = serde_json::to_string_pretty(r).map_err(|e| e.to_string())?;
            std::fs::write(path, json + "\n").map_err(|e| format!("{}: {e}", path.display()))
        })?;
    }
    Ok(Report(check(&root, ifaces, &Driver::ask)))
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&table(&self.0))
    }
}

/// The findings as a table: a line a finding (scope, check, current,
/// recommended, verdict, class), then why, indented, and what kept a
/// value from being read.
pub fn table(findings: &[Finding]) -> String {
    let row = |a: &str, b: &str, c: &str, d: &str, e: &str, f: &str| {
        format!("{a:<8} {b:<30} {c:<24} {d:<22} {e:<8} {f}\n")
    };
    let mut out = row(
        "scope",
        "check",
        "current",
        "recommended",
        "verdict",
        "class",
    );
    for f in findings {
        let verdict = match &f.verdict {
            Verdict::Good => "good",
            Verdict::Change => "CHANGE",
            Verdict::Measure => "measure",
            Verdict::Report => "report",
            Verdict::Unread(_) => "unread",
        };
        out += &row(
            &f.scope,
            f.check,
            f.current.as_deref().unwrap_or("-"),
            &f.recommended,
            verdict,
            &format!("{:?}", f.class).to_lowercase(),
        );
        out += &format!("         {}\n", f.why);
        if let Verdict::Unread(why) = &f.verdict {
            out += &format!("         not read ({}): {why}\n", f.read);
        }
    }
    out
}
