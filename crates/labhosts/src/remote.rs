//! The lab's hosts: this machine, or a machine reached with the
//! system's OpenSSH client. One master connection a host (ControlMaster),
//! key authentication only, batch mode (never a prompt), a connect timeout,
//! and a timeout on every command; errors name the host and what failed.
//! No SSH of our own: `ssh` does the protocol, the keys and the host keys.
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Where a host's commands run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// This machine (`ssh = "local"`).
    Local,
    /// `[user@]host` for ssh.
    Ssh(String),
}

impl Target {
    pub fn parse(s: &str) -> Result<Target> {
        let s = s.trim();
        if s == "local" {
            return Ok(Target::Local);
        }
        if s.is_empty() || s.starts_with('-') || s.contains(char::is_whitespace) {
            bail!("{s:?} is not an SSH target ([user@]host, or \"local\")");
        }
        Ok(Target::Ssh(s.to_string()))
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Local => f.write_str("local"),
            Target::Ssh(d) => f.write_str(d),
        }
    }
}

/// ssh's options beside the target (a scenario's, or a test's own keys).
#[derive(Clone, Debug, Default)]
pub struct SshOptions {
    /// `-i`: the private key (default: ssh's own choice).
    pub identity: Option<PathBuf>,
    /// `UserKnownHostsFile` (default: ssh's).
    pub known_hosts: Option<PathBuf>,
    /// `ConnectTimeout`, seconds (default 10).
    pub connect_timeout: Option<u32>,
}

/// A host of the lab, connected.
pub struct Host {
    /// The scenario's name for it (`gen`, `recv`, `dut`), for errors.
    pub name: String,
    pub target: Target,
    options: SshOptions,
    /// The master connection (Ssh only), shared by the names one host has
    /// ([`Host::named`]).
    control: Option<std::sync::Arc<Master>>,
}

/// ssh's master connection: its socket's directory and its process,
/// ended when the last name of its host goes.
struct Master {
    dir: tempfile::TempDir,
    process: Child,
}

impl Drop for Master {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

impl Host {
    /// Connects: for an SSH target, opens the master connection and waits
    /// until it answers, or fails naming the host and ssh's reason.
    pub fn connect(name: &str, target: Target, options: SshOptions) -> Result<Host> {
        let Target::Ssh(dest) = &target else {
            return Ok(Host {
                name: name.into(),
                target,
                options,
                control: None,
            });
        };
        let dir = tempfile::Builder::new()
            .prefix("linerate-ssh-")
            .tempdir()
            .context("a directory for ssh's control socket")?;
        let socket = dir.path().join("master");
        let mut c = Command::new("ssh");
        std::os::unix::process::CommandExt::process_group(&mut c, 0);
        c.args(common_args(&options, &socket))
            .args(["-M", "-N", "-o", "ControlPersist=no"])
            .arg(dest)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut master = c.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                anyhow!("host {name}: no ssh client (Debian's openssh-client)")
            }
            _ => anyhow!("host {name}: cannot run ssh: {e}"),
        })?;
        let limit = Duration::from_secs(options.connect_timeout.unwrap_or(10) as u64 + 5);
        let started = Instant::now();
        loop {
            if let Some(status) = master.try_wait()? {
                let mut err = String::new();
                if let Some(mut e) = master.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                bail!(
                    "host {name} ({dest}): cannot connect ({status}): {}",
                    first_line(&err)
                );
            }
            if socket.exists() && check(&options, &socket, dest) {
                break;
            }
            if started.elapsed() > limit {
                let _ = master.kill();
                let _ = master.wait();
                bail!(
                    "host {name} ({dest}): no connection in {} s",
                    limit.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Host {
            name: name.into(),
            target,
            options,
            control: Some(std::sync::Arc::new(Master {
                dir,
                process: master,
            })),
        })
    }

    /// The same host under another name (a host that is both generator and
    /// receiver): the same master connection, errors naming `name`.
    pub fn named(&self, name: &str) -> Host {
        Host {
            name: name.to_string(),
            target: self.target.clone(),
            options: self.options.clone(),
            control: self.control.clone(),
        }
    }

    /// The command that runs shell command `script` on the host. It runs
    /// in a process group of its own: a terminal's Ctrl-C reaches the lab
    /// runner only, which then stops what runs on the hosts itself (and
    /// still has their connections for the DUT's teardown).
    pub fn command(&self, script: &str) -> Command {
        let mut c = self.bare_command(script);
        std::os::unix::process::CommandExt::process_group(&mut c, 0);
        c
    }

    fn bare_command(&self, script: &str) -> Command {
        match (&self.target, &self.control) {
            (Target::Ssh(dest), Some(m)) => {
                let mut c = Command::new("ssh");
                c.args(common_args(&self.options, &m.dir.path().join("master")))
                    .arg(dest)
                    .arg("--")
                    .arg(script);
                c
            }
            _ => {
                let mut c = Command::new("sh");
                c.arg("-c").arg(script);
                c
            }
        }
    }

    /// Runs `script` on the host and returns its output; a failure or a
    /// run past `timeout` is an error naming the host, the command and its
    /// first line of error. On timeout the local ssh is killed, which
    /// closes the session; a remote process that ignores its closed pipes
    /// runs on (there is no terminal to hang up): what must stop, the
    /// caller stops with a command of its own.
    pub fn run(&self, script: &str, timeout: Duration) -> Result<Output> {
        let mut child = self
            .command(script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("host {}: cannot run `{script}`", self.name))?;
        // Read while it runs: a full pipe would stall it.
        let out = child.stdout.take().map(reader);
        let err = child.stderr.take().map(reader);
        let started = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait()? {
                break s;
            }
            if started.elapsed() > timeout {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "host {}: `{script}` did not end in {:.1} s (stopped)",
                    self.name,
                    timeout.as_secs_f64()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let take = |h: Option<std::thread::JoinHandle<Vec<u8>>>| {
            h.map(|h| h.join().unwrap_or_default()).unwrap_or_default()
        };
        let output = Output {
            status,
            stdout: take(out),
            stderr: take(err),
        };
        if !output.status.success() {
            bail!(
                "host {}: `{script}` failed ({}): {}",
                self.name,
                output.status,
                first_line(&String::from_utf8_lossy(&output.stderr))
            );
        }
        Ok(output)
    }
}

/// A command started on a host that runs until it ends or is told to stop
/// (a receiver, a generator): its stdin is the stop line. The host's shell
/// runs it in the background and sends it SIGTERM when a line arrives on
/// stdin or stdin closes, so a lost SSH connection stops it too; its exit
/// status is the shell's. `command` must be a simple command (the shell
/// then runs it as its own child, the one it signals).
pub struct Started {
    host: String,
    command: String,
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: Option<std::thread::JoinHandle<Vec<u8>>>,
    /// Stderr, line by line as it comes, and all of it.
    lines: std::sync::mpsc::Receiver<String>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

/// The host-side wrapper of [`Started`] (POSIX sh: dash or bash).
fn stoppable(command: &str) -> String {
    format!(
        "exec 3<&0\n{command} </dev/null &\np=$!\n\
         {{ read x <&3; kill -TERM $p; }} >/dev/null 2>&1 &\nw=$!\n\
         wait $p; s=$?\nkill $w 2>/dev/null\nexit $s\n"
    )
}

impl Host {
    /// Starts `command` (a simple command) on the host; see [`Started`].
    pub fn start(&self, command: &str) -> Result<Started> {
        let mut child = self
            .command(&stoppable(command))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("host {}: cannot run `{command}`", self.name))?;
        let stdout = child.stdout.take().map(reader);
        let (tx, lines) = std::sync::mpsc::channel();
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        if let Some(e) = child.stderr.take() {
            let all = stderr.clone();
            std::thread::spawn(move || {
                for line in std::io::BufRead::lines(std::io::BufReader::new(e)) {
                    let Ok(line) = line else { break };
                    all.lock().unwrap().push_str(&format!("{line}\n"));
                    let _ = tx.send(line);
                }
            });
        }
        Ok(Started {
            host: self.name.clone(),
            command: command.to_string(),
            stdin: child.stdin.take(),
            child,
            stdout,
            lines,
            stderr,
        })
    }
}

impl Started {
    /// Waits until a line of its stderr contains `needle`: an error if it
    /// ends first or `timeout` passes (then it is stopped).
    pub fn wait_for(&mut self, needle: &str, timeout: Duration) -> Result<()> {
        let end = Instant::now() + timeout;
        loop {
            match self.lines.recv_timeout(Duration::from_millis(50)) {
                Ok(l) if l.contains(needle) => return Ok(()),
                Ok(_) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait()?;
                    bail!(
                        "host {}: `{}` ended ({status}) before it was ready: {}",
                        self.host,
                        self.command,
                        first_line(&self.stderr.lock().unwrap())
                    );
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            }
            if Instant::now() > end {
                self.stop();
                bail!(
                    "host {}: `{}` was not ready in {:.1} s (stopped)",
                    self.host,
                    self.command,
                    timeout.as_secs_f64()
                );
            }
        }
    }

    /// Whether it has ended.
    pub fn ended(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Tells it to stop (SIGTERM on the host); `finish` collects it.
    pub fn stop(&mut self) {
        if let Some(mut i) = self.stdin.take() {
            let _ = std::io::Write::write_all(&mut i, b"stop\n");
        }
    }

    /// Waits for it to end, at most `timeout` (then it is stopped, and
    /// killed if the stop does not end it in 5 s more), and returns its
    /// stdout; a failure is an error naming the host, the command and its
    /// first line of error.
    pub fn finish(mut self, timeout: Duration) -> Result<Vec<u8>> {
        let started = Instant::now();
        let mut stopped = false;
        let status = loop {
            if let Some(s) = self.child.try_wait()? {
                break s;
            }
            if !stopped && started.elapsed() > timeout {
                self.stop();
                stopped = true;
            }
            if started.elapsed() > timeout + Duration::from_secs(5) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                bail!(
                    "host {}: `{}` did not end in {:.1} s (killed)",
                    self.host,
                    self.command,
                    timeout.as_secs_f64()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let out = self
            .stdout
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        if !status.success() {
            bail!(
                "host {}: `{}` failed ({status}): {}",
                self.host,
                self.command,
                first_line(&self.stderr.lock().unwrap())
            );
        }
        if stopped {
            bail!(
                "host {}: `{}` did not end in {:.1} s (stopped)",
                self.host,
                self.command,
                timeout.as_secs_f64()
            );
        }
        Ok(out)
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.stop();
            let t = Instant::now();
            while self.child.try_wait().ok().flatten().is_none() {
                if t.elapsed() > Duration::from_secs(5) {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// `s` as one word for a POSIX shell.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+%".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn reader(mut r: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    })
}

/// Options every ssh call of a host shares: its master's socket, batch
/// mode, keys only, the timeouts.
fn common_args(o: &SshOptions, socket: &Path) -> Vec<String> {
    let mut a = vec![
        "-o".into(),
        format!("ControlPath={}", socket.display()),
        "-o".into(),
        "BatchMode=yes".into(),
        "-o".into(),
        "PasswordAuthentication=no".into(),
        "-o".into(),
        "KbdInteractiveAuthentication=no".into(),
        "-o".into(),
        format!("ConnectTimeout={}", o.connect_timeout.unwrap_or(10)),
        "-o".into(),
        "ServerAliveInterval=5".into(),
        "-o".into(),
        "ServerAliveCountMax=3".into(),
    ];
    if let Some(k) = &o.identity {
        a.extend(["-i".into(), k.display().to_string()]);
        a.extend(["-o".into(), "IdentitiesOnly=yes".into()]);
    }
    if let Some(k) = &o.known_hosts {
        a.extend(["-o".into(), format!("UserKnownHostsFile={}", k.display())]);
        a.extend(["-o".into(), "StrictHostKeyChecking=yes".into()]);
    }
    a
}

/// Whether the master on `socket` answers (`ssh -O check`).
fn check(o: &SshOptions, socket: &Path, dest: &str) -> bool {
    Command::new("ssh")
        .args(common_args(o, socket))
        .args(["-O", "check", dest])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn first_line(s: &str) -> &str {
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no message")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_local_or_ssh_destinations() {
        assert_eq!(Target::parse("local").unwrap(), Target::Local);
        assert_eq!(
            Target::parse("root@gen.lab").unwrap(),
            Target::Ssh("root@gen.lab".into())
        );
        for bad in ["", "-oProxyCommand=x", "root@a b"] {
            assert!(Target::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_host_under_another_name_says_that_name() {
        let gen = Host::connect("gen", Target::Local, SshOptions::default()).unwrap();
        let recv = gen.named("recv");
        let e = recv
            .run("exit 3", Duration::from_secs(5))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("host recv: "), "{e}");
        drop(gen);
        assert!(recv.run("true", Duration::from_secs(5)).is_ok());
    }

    #[test]
    fn quoting_keeps_every_word_whole() {
        for w in ["plain", "", "a b", "it's", "$(reboot)", "a\"b", "x;y"] {
            let o = Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {}", quote(w)))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&o.stdout), w, "{}", quote(w));
        }
    }

    #[test]
    fn a_started_command_runs_until_stopped_and_says_when_ready() {
        let h = Host::connect("recv", Target::Local, SshOptions::default()).unwrap();
        // Ready on stderr, then counts until SIGTERM, then says so.
        let mut s = h
            .start("sh -c 'trap \"echo stopped; exit 0\" TERM; echo ready >&2; while :; do sleep 0.05; done'")
            .unwrap();
        s.wait_for("ready", Duration::from_secs(5)).unwrap();
        s.stop();
        let out = s.finish(Duration::from_secs(5)).unwrap();
        assert_eq!(String::from_utf8_lossy(&out), "stopped\n");
        // One that ends on its own, failing, is an error with its words.
        let s = h.start("sh -c 'echo broken >&2; exit 4'").unwrap();
        let e = s.finish(Duration::from_secs(5)).unwrap_err().to_string();
        assert!(e.contains("failed") && e.ends_with(": broken"), "{e}");
        // One that is never ready is stopped and said so.
        let mut s = h.start("sleep 30").unwrap();
        let t = Instant::now();
        let e = s
            .wait_for("ready", Duration::from_millis(300))
            .unwrap_err()
            .to_string();
        assert!(e.contains("was not ready in 0.3 s"), "{e}");
        drop(s);
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_local_host_runs_commands_with_timeouts_and_named_errors() {
        let h = Host::connect("gen", Target::Local, SshOptions::default()).unwrap();
        let o = h.run("echo hi", Duration::from_secs(5)).unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout), "hi\n");
        let e = h
            .run("echo nope >&2; exit 3", Duration::from_secs(5))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("host gen: `echo nope >&2; exit 3` failed"),
            "{e}"
        );
        assert!(e.ends_with(": nope"), "{e}");
        let t = Instant::now();
        let e = h
            .run("sleep 30", Duration::from_millis(300))
            .unwrap_err()
            .to_string();
        assert!(e.contains("did not end in 0.3 s"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}
