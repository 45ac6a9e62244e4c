//! A DUT configuration's own commands: `setup` before a run,
//! `teardown` after it (also after a failure or Ctrl-C), `record` into the
//! results, and the DUT's settings as `linerate tune` finds them. They run
//! on the DUT's host, in its namespace: a remote box over SSH, or the
//! local lab's DUT namespace.
use crate::dut_settings::Settings;
use crate::hosts::in_netns;
use crate::remote::{quote, Host};
use crate::scenario::DutDef;
use anyhow::Result;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

/// Where and how long the commands run.
#[derive(Clone)]
pub struct DutShell {
    pub host: Arc<Host>,
    pub netns: Option<String>,
    pub timeout: Duration,
}

/// One `record` command's output, as the results keep it.
#[derive(Clone, Debug, Serialize)]
pub struct Recorded {
    pub dut: String,
    pub command: String,
    pub output: String,
}

impl DutShell {
    fn run(&self, command: &str) -> Result<String> {
        let o = self
            .host
            .run(&in_netns(self.netns.as_deref(), command), self.timeout)?;
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// Runs `setup` in order; the first failure is the error, and the
    /// returned guard (also on error) runs `teardown` when dropped.
    pub fn set_up<'a>(&'a self, name: &str, def: &DutDef) -> (SetUp<'a>, Result<()>) {
        let guard = SetUp {
            shell: self,
            teardown: def.teardown.clone(),
            errors: Vec::new(),
        };
        for c in &def.setup {
            if let Err(e) = self.run(c) {
                return (guard, Err(e.context(format!("DUT {name}: setup"))));
            }
        }
        (guard, Ok(()))
    }

    /// Each `record` command's output (a failing one records its error).
    pub fn record(&self, name: &str, def: &DutDef) -> Vec<Recorded> {
        def.record
            .iter()
            .map(|c| Recorded {
                dut: name.to_string(),
                command: c.clone(),
                output: self.run(c).unwrap_or_else(|e| format!("(failed: {e})")),
            })
            .collect()
    }
}

impl DutShell {
    /// `LINERATE tune --json -i IFACES` in the DUT's namespace.
    pub fn settings(&self, dut: &str, linerate: &str, ifaces: &[String]) -> Settings {
        let command = format!(
            "{} tune --json -i {}",
            quote(linerate),
            quote(&ifaces.join(","))
        );
        Settings::from_output(dut, command.clone(), self.run(&command))
    }
}

/// A configuration set up: dropping it (or `tear_down`) runs every
/// `teardown` command, each even when one before failed.
pub struct SetUp<'a> {
    shell: &'a DutShell,
    /// Still to run (taken when run: once).
    teardown: Vec<String>,
    errors: Vec<String>,
}

impl SetUp<'_> {
    /// Tears down now; the failures, if any, as one error.
    pub fn tear_down(mut self) -> Result<()> {
        self.run_teardown();
        if self.errors.is_empty() {
            Ok(())
        } else {
            anyhow::bail!("teardown: {}", self.errors.join("; "))
        }
    }

    fn run_teardown(&mut self) {
        for c in std::mem::take(&mut self.teardown) {
            if let Err(e) = self.shell.run(&c) {
                self.errors.push(e.to_string());
            }
        }
    }
}

impl Drop for SetUp<'_> {
    fn drop(&mut self) {
        self.run_teardown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::{SshOptions, Target};

    fn shell() -> DutShell {
        DutShell {
            host: Arc::new(Host::connect("dut", Target::Local, SshOptions::default()).unwrap()),
            netns: None,
            timeout: Duration::from_secs(5),
        }
    }

    fn def(dir: &std::path::Path, setup: &[&str]) -> DutDef {
        let mut d = crate::scenario::builtin_dut("linux").unwrap();
        let f = dir.join("log").display().to_string();
        d.setup = setup.iter().map(|c| c.replace("LOG", &f)).collect();
        d.teardown = vec![
            format!("echo down1 >> {f}"),
            "false".into(),
            format!("echo down2 >> {f}"),
        ];
        d.record = vec!["echo recorded".into(), "exit 2".into()];
        d
    }

    /// What a tune that is there prints is kept; one that fails (a
    /// FreeBSD DUT has no linerate) or prints something else says why.
    #[test]
    fn settings_are_tunes_findings_or_why_not() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("linerate");
        std::fs::write(
            &fake,
            "#!/bin/sh\necho '[{\"check\": \"IPv4 forwarding\", \"args\": \"'\"$*\"'\"}]'\n",
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let ifaces = ["p0".to_string(), "p1".to_string()];
        let s = shell().settings("d", fake.to_str().unwrap(), &ifaces);
        assert_eq!(s.error, None);
        assert_eq!(
            s.findings.unwrap()[0]["args"],
            "tune --json -i p0,p1",
            "the interfaces, comma-separated"
        );
        let s = shell().settings("d", "/nonexistent/linerate", &ifaces);
        assert!(s.findings.is_none());
        assert!(s.error.unwrap().contains("/nonexistent/linerate"));
        let s = shell().settings("d", "echo", &ifaces);
        assert!(
            s.error.unwrap().contains("not tune's findings"),
            "an echo is no tune"
        );
    }

    #[test]
    fn teardown_runs_whole_after_a_run_a_failed_setup_or_a_drop() {
        let dir = tempfile::tempdir().unwrap();
        let log = || std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
        let sh = shell();
        let d = def(dir.path(), &["echo up >> LOG"]);
        let (g, r) = sh.set_up("d", &d);
        r.unwrap();
        let e = g.tear_down().unwrap_err().to_string();
        assert!(e.starts_with("teardown: host dut: `false` failed"), "{e}");
        assert_eq!(log(), "up\ndown1\ndown2\n", "every teardown, once");

        std::fs::remove_file(dir.path().join("log")).unwrap();
        let d = def(
            dir.path(),
            &["echo up >> LOG", "exit 7", "echo never >> LOG"],
        );
        let (g, r) = sh.set_up("d", &d);
        let e = format!("{:#}", r.unwrap_err());
        assert!(
            e.starts_with("DUT d: setup: host dut: `exit 7` failed"),
            "{e}"
        );
        drop(g);
        assert_eq!(log(), "up\ndown1\ndown2\n");

        let r = sh.record("d", &d);
        assert_eq!(r[0].output, "recorded\n");
        assert!(r[1].output.starts_with("(failed: "), "{:?}", r[1]);
    }
}
