//! What systemd does for a `Type=notify` service with a file descriptor
//! store (`FileDescriptorStoreMax=`), played by `linerate bench restart`
//! so that `systemctl restart` can be measured where no systemd runs (the
//! lab's machine, CI): the service's NOTIFY_SOCKET, the fds it stores
//! (FDSTORE=1, FDNAME=) and lets go (FDSTOREREMOVE=1), and the next start
//! given them as LISTEN_FDS, LISTEN_FDNAMES and LISTEN_PID, as
//! sd_listen_fds(3) describes. A stop closes the store.
use anyhow::{bail, Context, Result};
use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
use std::io::IoSliceMut;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct ServiceManager {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    /// The store, by name, in the order the fds came.
    store: Arc<Mutex<Vec<(String, OwnedFd)>>>,
    quit: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServiceManager {
    pub fn new() -> Result<ServiceManager> {
        let dir = tempfile::tempdir()?;
        let socket = dir.path().join("notify");
        let sock = UnixDatagram::bind(&socket)?;
        sock.set_read_timeout(Some(Duration::from_millis(20)))?;
        let store: Arc<Mutex<Vec<(String, OwnedFd)>>> = Arc::default();
        let quit = Arc::new(AtomicBool::new(false));
        let (their_store, their_quit) = (store.clone(), quit.clone());
        let thread = std::thread::spawn(move || {
            while !their_quit.load(Ordering::Relaxed) {
                if let Ok((text, fds)) = receive(&sock) {
                    apply(&text, fds, &their_store);
                }
            }
        });
        Ok(ServiceManager {
            _dir: dir,
            socket,
            store,
            quit,
            thread: Some(thread),
        })
    }

    /// The names in the store now.
    pub fn stored(&self) -> Vec<String> {
        self.store
            .lock()
            .unwrap()
            .iter()
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// `program args...` as the service's main process: NOTIFY_SOCKET, and
    /// the store's fds from 3 on with their names (LISTEN_PID is the
    /// process's own pid: a shell sets it and execs).
    pub fn command(&self, program: &std::path::Path, args: &[&str]) -> Result<Command> {
        let store = self.store.lock().unwrap();
        // Copies above the numbers they take in the child, so that placing
        // one never overwrites another (CLOEXEC: only the placed ones
        // cross the exec).
        let mut high = Vec::new();
        for (_, fd) in store.iter() {
            // SAFETY: duplicating an fd we own.
            let d = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 100) };
            if d < 0 {
                return Err(std::io::Error::last_os_error()).context("F_DUPFD_CLOEXEC");
            }
            // SAFETY: a new fd, owned here.
            high.push(unsafe { OwnedFd::from_raw_fd(d) });
        }
        let names: Vec<&str> = store.iter().map(|(n, _)| n.as_str()).collect();
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("LISTEN_PID=$$ exec \"$0\" \"$@\"")
            .arg(program)
            .args(args)
            .env("NOTIFY_SOCKET", &self.socket)
            .env_remove("LISTEN_PID");
        if high.is_empty() {
            c.env_remove("LISTEN_FDS").env_remove("LISTEN_FDNAMES");
            return Ok(c);
        }
        c.env("LISTEN_FDS", high.len().to_string())
            .env("LISTEN_FDNAMES", names.join(":"));
        let raw: Vec<RawFd> = high.iter().map(|f| f.as_raw_fd()).collect();
        // SAFETY: only dup2, async-signal-safe, between fork and exec; the
        // copies live as long as the command (moved into the closure).
        unsafe {
            c.pre_exec(move || {
                let _keep = &high;
                for (i, &fd) in raw.iter().enumerate() {
                    if libc::dup2(fd, 3 + i as i32) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        Ok(c)
    }

    /// The service stopped for good: the store is closed (its links
    /// detach).
    pub fn close_store(&self) {
        self.store.lock().unwrap().clear();
    }
}

impl Drop for ServiceManager {
    fn drop(&mut self) {
        self.quit.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One notification and the fds it carried.
fn receive(sock: &UnixDatagram) -> Result<(String, Vec<OwnedFd>)> {
    let mut buf = vec![0u8; 4096];
    let mut cmsg = nix::cmsg_space!([RawFd; 16]);
    let mut iov = [IoSliceMut::new(&mut buf)];
    let msg = recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(r) = c {
            // SAFETY: fds the kernel just gave this process.
            fds.extend(r.into_iter().map(|f| unsafe { OwnedFd::from_raw_fd(f) }));
        }
    }
    let n = msg.bytes;
    if n == 0 && fds.is_empty() {
        bail!("nothing");
    }
    Ok((String::from_utf8_lossy(&buf[..n]).into_owned(), fds))
}

/// What systemd does with FDSTORE=1 / FDSTOREREMOVE=1 and FDNAME=.
fn apply(text: &str, fds: Vec<OwnedFd>, store: &Mutex<Vec<(String, OwnedFd)>>) {
    let has = |k: &str| text.lines().any(|l| l == k);
    let name = text
        .lines()
        .find_map(|l| l.strip_prefix("FDNAME="))
        .unwrap_or("stored")
        .to_string();
    let mut store = store.lock().unwrap();
    if has("FDSTORE=1") {
        store.extend(fds.into_iter().map(|f| (name.clone(), f)));
    } else if has("FDSTOREREMOVE=1") {
        store.retain(|(n, _)| *n != name);
    }
}
