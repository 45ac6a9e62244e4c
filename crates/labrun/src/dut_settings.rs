//! The DUT's settings beside the results: what `linerate tune --json`
//! found in the DUT with each configuration running, kept whole in
//! results.json and summed up in report.md.
use anyhow::Result;
use serde::Serialize;
use serde_json::Value;

/// The DUT's settings while a configuration runs, as `linerate tune
/// --json` found them there (the seeds record the setup beside each
/// figure).
#[derive(Clone, Debug, Serialize)]
pub struct Settings {
    pub dut: String,
    pub command: String,
    /// tune's findings, as it printed them.
    pub findings: Option<serde_json::Value>,
    /// Why there are none: the command failed, or printed no findings.
    pub error: Option<String>,
}

impl Settings {
    /// Settings from `command`'s outcome.
    pub fn from_output(dut: &str, command: String, out: Result<String>) -> Settings {
        let parsed = out.and_then(|o| {
            serde_json::from_str::<serde_json::Value>(&o)
                .ok()
                .filter(|v| v.is_array())
                .ok_or_else(|| anyhow::anyhow!("not tune's findings: {:?}", o.trim()))
        });
        let (findings, error) = match parsed {
            Ok(v) => (Some(v), None),
            Err(e) => (None, Some(format!("{e:#}"))),
        };
        Settings {
            dut: dut.to_string(),
            command,
            findings,
            error,
        }
    }
}

/// report.md's section: a row a finding that says to change in some
/// configuration, or that differs between them; a column a configuration.
/// (What is only reported, to be measured, or unread is the same in every
/// configuration of a lab: results.json has it.)
pub fn markdown(all: &[Settings]) -> String {
    if all.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n## DUT settings\n\n`linerate tune` in the DUT with each configuration running; \
         below, what it says to change or differs between configurations (every finding: \
         `results.json`, `settings`).\n",
    );
    let read: Vec<(&Settings, &Vec<Value>)> = all
        .iter()
        .filter_map(|x| {
            x.findings
                .as_ref()
                .and_then(|f| f.as_array())
                .map(|f| (x, f))
        })
        .collect();
    for x in all.iter().filter(|x| x.findings.is_none()) {
        s += &format!(
            "\n{}: not recorded (`{}`): {}\n",
            x.dut,
            x.command,
            x.error.as_deref().unwrap_or("")
        );
    }
    if read.is_empty() {
        return s;
    }
    // Rows in the order the first configuration's findings come.
    let key = |f: &Value| (f["scope"].to_string(), f["check"].to_string());
    let mut rows: Vec<(String, String)> = Vec::new();
    for (_, fs) in &read {
        for f in fs.iter() {
            if !rows.contains(&key(f)) {
                rows.push(key(f));
            }
        }
    }
    s += &format!(
        "\n| scope | check | {} |\n|---|---|{}\n",
        read.iter()
            .map(|(x, _)| x.dut.as_str())
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(read.len())
    );
    for row in rows {
        let cells: Vec<(String, bool)> = read
            .iter()
            .map(|(_, fs)| match fs.iter().find(|f| key(f) == row) {
                Some(f) => cell(f),
                None => ("-".into(), false),
            })
            .collect();
        let differ = cells.windows(2).any(|w| w[0].0 != w[1].0);
        if !differ && !cells.iter().any(|c| c.0.ends_with(" (change)")) {
            continue;
        }
        let unquote = |t: &str| t.trim_matches('"').to_string();
        s += &format!(
            "| {} | {} | {} |\n",
            unquote(&row.0),
            unquote(&row.1),
            cells
                .iter()
                .map(|c| c.0.as_str())
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
    s
}

/// A finding as a cell: its value, and its verdict unless good; and
/// whether it is good.
fn cell(f: &Value) -> (String, bool) {
    let current = f["current"].as_str().unwrap_or("-").replace('|', "\\|");
    match &f["verdict"] {
        Value::String(v) if v == "good" => (current, true),
        Value::String(v) => (format!("{current} ({v})"), false),
        _ => (format!("{current} (unread)"), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(scope: &str, check: &str, current: &str, verdict: Value) -> Value {
        serde_json::json!({"scope": scope, "check": check, "current": current, "verdict": verdict})
    }

    #[test]
    fn rows_to_change_or_that_differ_and_what_was_not_recorded() {
        let linux = vec![
            finding("host", "IPv4 forwarding", "1", "good".into()),
            finding("host", "SMT (hyper-threading)", "on", "measure".into()),
            finding("dut0", "XDP mode", "none", "report".into()),
            finding("dut0", "GRO", "off", "measure".into()),
            finding("host", "softnet time squeeze", "248", "change".into()),
        ];
        let mut linerate = linux.clone();
        linerate[2] = finding("dut0", "XDP mode", "native", "good".into());
        let s = |dut: &str, f: Vec<Value>| Settings {
            dut: dut.into(),
            command: "linerate tune --json -i dut0,dut1".into(),
            findings: Some(Value::Array(f)),
            error: None,
        };
        let bsd = Settings::from_output(
            "bsdrp",
            "linerate tune".into(),
            Err(anyhow::anyhow!("sh: linerate: not found")),
        );
        let md = markdown(&[s("linux", linux), s("linerate", linerate), bsd]);
        assert!(
            md.contains("\nbsdrp: not recorded (`linerate tune`): sh: linerate: not found\n"),
            "{md}"
        );
        let table: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(
            table,
            [
                "| scope | check | linux | linerate |",
                "|---|---|---|---|",
                "| dut0 | XDP mode | none (report) | native |",
                "| host | softnet time squeeze | 248 (change) | 248 (change) |",
            ]
        );
        assert_eq!(markdown(&[]), "");
    }
}
