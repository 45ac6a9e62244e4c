//! A daemon run in the foreground in a network namespace (BIRD, FRR's
//! daemons), its output in a log file of its own: stopped (SIGTERM, then
//! waited for) when dropped, so that no run leaves one behind.
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A daemon in the foreground: stopped (SIGTERM, then waited for) when
/// dropped, so no run leaves one behind.
pub struct Daemon {
    what: String,
    log: PathBuf,
    child: Child,
}

impl Daemon {
    pub fn spawn<A: AsRef<std::ffi::OsStr>>(
        what: &str,
        netns: &str,
        program: &str,
        args: &[A],
        dir: &Path,
    ) -> Result<Daemon> {
        let log = dir.join(format!("{}.log", what.replace(' ', "-")));
        let out = std::fs::File::create(&log)?;
        let child = Command::new("ip")
            .args(["netns", "exec", netns, program])
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {what} ({program})"))?;
        Ok(Daemon {
            what: what.to_string(),
            log,
            child,
        })
    }

    /// Waits until the daemon has made `path` (its socket), failing if it
    /// exits first or takes over 10 s.
    pub fn wait_for(&mut self, path: &Path) -> Result<()> {
        let t = Instant::now();
        while !path.exists() {
            self.check_running()?;
            if t.elapsed() > Duration::from_secs(10) {
                bail!("{} did not open {}", self.what, path.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Fails, with the daemon's own words, if it has exited.
    pub fn check_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            let said = std::fs::read_to_string(&self.log).unwrap_or_default();
            bail!("{} exited ({status}): {}", self.what, said.trim());
        }
        Ok(())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SAFETY: a signal to our own child (ip netns exec became the
        // daemon: same pid).
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
