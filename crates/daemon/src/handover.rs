//! A running router hands its fast path to its successor: a new
//! `linerate route` (a restart, an upgrade to a rebuilt binary) takes over
//! without a frame going to the kernel or being lost.
//!
//! The running router listens on /run/linerate/routers/NAME.handover. A
//! successor with the same name connects and says which counters' layout
//! it has; the running one answers with its offer (its pid, version,
//! layout and interfaces) and, over SCM_RIGHTS, its counters map and the
//! BPF links of its interfaces. The successor loads its program with that
//! counters map (the counts go on rising), builds its own FIB and tables
//! from the kernel while the running router keeps following the kernel
//! with its own, then replaces the program on each link at once
//! (bpf_link_update: each frame meets one program or the other, both with
//! complete tables) and says `leave`: the running router ends without
//! detaching anything, and the successor goes on once it is gone (the
//! socket's end). A counters layout the successor cannot take over (a
//! version counting by other reasons): it says `stop`, the running router
//! detaches and ends (the kernel forwards), and the successor starts cold.
//! If the successor dies before its word, the running router goes on.
//!
//! Only a process of the same user (root) may connect: the links are
//! the router's.
use anyhow::{anyhow, bail, Context, Result};
use linerate_dataplane::layout::{RouterCounters, REASONS, ROUTER_IFACES};
use nix::sys::socket::{
    getsockopt, recvmsg, sendmsg, sockopt, ControlMessage, ControlMessageOwned, MsgFlags,
};
use serde::{Deserialize, Serialize};
use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Changed when the conversation changes.
pub const PROTOCOL: u32 = 1;

fn path(record: &str) -> PathBuf {
    PathBuf::from("/run/linerate/routers").join(format!("{record}.handover"))
}

/// The counters map as this build lays it out: its size, and the reasons
/// in order. A successor takes the map over only if this is the same.
pub fn counters_layout() -> String {
    format!(
        "router_stats {} x {} bytes: {}",
        ROUTER_IFACES,
        std::mem::size_of::<RouterCounters>(),
        REASONS.join(",")
    )
}

/// What a successor asks with.
#[derive(Serialize, Deserialize)]
struct Ask {
    protocol: u32,
    pid: u32,
}

/// What the running router offers; its fds follow: the counters map, then
/// one link per interface, in `interfaces`' order.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Offer {
    pub protocol: u32,
    pub pid: u32,
    pub version: String,
    pub layout: String,
    pub interfaces: Vec<String>,
}

impl Offer {
    /// This process's offer of `interfaces`' links.
    fn ours(interfaces: Vec<String>) -> Offer {
        Offer {
            protocol: PROTOCOL,
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            layout: counters_layout(),
            interfaces,
        }
    }
}

/// The successor's word.
#[derive(Serialize, Deserialize)]
enum Word {
    /// The links run the successor's program: end without detaching.
    Leave,
    /// It cannot take over: detach and end; it starts cold.
    Stop,
}

/// What the running router's loop hears from the handover thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Told {
    /// Go on.
    Nothing,
    /// A successor (this pid) runs the links now: end, detaching nothing,
    /// leaving the records to it.
    HandedOver(u32),
    /// A successor that cannot take over asked it to end (detaching).
    Stop(u32),
}

/// The running router's side: a thread answering successors, until
/// dropped (which closes its copies of the fds and removes the socket).
pub struct Offering {
    told: Arc<Mutex<Told>>,
    quit: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    path: PathBuf,
}

impl Offering {
    /// Offers `links` (interface name, link) and the counters map to the
    /// successors of router `record`.
    pub fn start(record: &str, stats_map: OwnedFd, links: Vec<(String, OwnedFd)>) -> Result<Self> {
        let path = path(record);
        std::fs::create_dir_all(path.parent().unwrap())?;
        // A socket left by a router that died: nobody answers on it.
        if UnixStream::connect(&path).is_err() {
            let _ = std::fs::remove_file(&path);
        }
        let listener = UnixListener::bind(&path)
            .with_context(|| format!("cannot listen on {}", path.display()))?;
        listener.set_nonblocking(true)?;
        let told = Arc::new(Mutex::new(Told::Nothing));
        let quit = Arc::new(AtomicBool::new(false));
        let offer = Offer::ours(links.iter().map(|(n, _)| n.clone()).collect());
        let mut fds = vec![stats_map];
        fds.extend(links.into_iter().map(|(_, l)| l));
        let (their_told, their_quit) = (told.clone(), quit.clone());
        let thread = std::thread::Builder::new()
            .name("linerate-handover".into())
            .spawn(move || {
                while !their_quit.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => match answer(stream, &offer, &fds) {
                            Ok(Told::Nothing) => {}
                            Ok(t) => {
                                *their_told.lock().unwrap() = t;
                                return;
                            }
                            Err(e) => tracing::warn!("handover: {e:#}"),
                        },
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        Err(e) => {
                            tracing::warn!("handover: {e}");
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                }
            })?;
        Ok(Offering {
            told,
            quit,
            thread: Some(thread),
            path,
        })
    }

    /// What a successor said, if anything.
    pub fn told(&self) -> Told {
        *self.told.lock().unwrap()
    }
}

impl Drop for Offering {
    fn drop(&mut self) {
        self.quit.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Handed over: the successor listens on it next.
        if self.told() == Told::Nothing {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// One successor's conversation, on the running router's side. The
/// stream of a successor that took over (or stopped it) is kept open until
/// this process ends: its end is how the successor knows it is gone.
fn answer(stream: UnixStream, offer: &Offer, fds: &[OwnedFd]) -> Result<Told> {
    stream.set_nonblocking(false)?;
    let peer = getsockopt(&stream, sockopt::PeerCredentials)?;
    // SAFETY: geteuid has no preconditions.
    if peer.uid() != unsafe { libc::geteuid() } {
        bail!("refused a successor of uid {}", peer.uid());
    }
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let ask: Ask = serde_json::from_str(&read_line(&stream)?).context("a successor's ask")?;
    if ask.protocol != PROTOCOL {
        bail!(
            "pid {} speaks handover protocol {}, this router {PROTOCOL}",
            ask.pid,
            ask.protocol
        );
    }
    let mut line = serde_json::to_vec(offer)?;
    line.push(b'\n');
    let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    sendmsg::<()>(
        stream.as_raw_fd(),
        &[IoSlice::new(&line)],
        &[ControlMessage::ScmRights(&raw)],
        MsgFlags::empty(),
        None,
    )
    .context("cannot send the fast path's fds")?;
    // The successor builds its tables (a full Internet table, its
    // firewall) before its word.
    stream.set_read_timeout(Some(Duration::from_secs(600)))?;
    let word = match read_line(&stream) {
        Ok(l) => serde_json::from_str::<Word>(&l).context("a successor's word")?,
        // It ended (or gave up) without a word: go on.
        Err(_) => return Ok(Told::Nothing),
    };
    std::mem::forget(stream);
    Ok(match word {
        Word::Leave => Told::HandedOver(ask.pid),
        Word::Stop => Told::Stop(ask.pid),
    })
}

/// A line of at most 64 KiB, read a byte at a time (the fds of an offer
/// come with its first byte; nothing is read past the line).
fn read_line(mut s: &UnixStream) -> Result<String> {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    loop {
        if s.read(&mut b)? == 0 {
            bail!("the other side ended");
        }
        if b[0] == b'\n' {
            return Ok(String::from_utf8(line)?);
        }
        line.push(b[0]);
        if line.len() > 65536 {
            bail!("a line over 64 KiB");
        }
    }
}

/// Where a predecessor's fast path comes from.
enum Source {
    /// A running router, which ends when told.
    Live(UnixStream),
    /// The service manager's fd store (a router stopped under systemd left
    /// it there for the service's next start): these names to remove.
    Stored(Vec<String>),
}

/// The successor's side: a running router's offer and its fds.
pub struct Predecessor {
    source: Source,
    pub offer: Offer,
    pub stats_map: OwnedFd,
    /// (interface, link), as offered.
    pub links: Vec<(String, OwnedFd)>,
}

/// The router running as `record`, if one answers.
pub fn find(record: &str) -> Result<Option<Predecessor>> {
    let path = path(record);
    let stream = match UnixStream::connect(&path) {
        Ok(s) => s,
        Err(_) => return Ok(None),
    };
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut ask = serde_json::to_vec(&Ask {
        protocol: PROTOCOL,
        pid: std::process::id(),
    })?;
    ask.push(b'\n');
    (&stream).write_all(&ask)?;
    let mut buf = vec![0u8; 65536];
    let mut cmsg = nix::cmsg_space!([RawFd; 64]);
    let (n, fds) = {
        let mut iov = [IoSliceMut::new(&mut buf)];
        let msg = recvmsg::<()>(
            stream.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .with_context(|| format!("no offer from the router on {}", path.display()))?;
        let mut fds = Vec::new();
        for c in msg.cmsgs()? {
            if let ControlMessageOwned::ScmRights(r) = c {
                // SAFETY: fds the kernel just gave this process.
                fds.extend(r.into_iter().map(|f| unsafe { OwnedFd::from_raw_fd(f) }));
            }
        }
        (msg.bytes, fds)
    };
    let mut line = buf[..n].to_vec();
    while !line.ends_with(b"\n") {
        let mut more = [0u8; 4096];
        let k = (&stream).read(&mut more)?;
        if k == 0 {
            bail!("the running router ended its offer early");
        }
        line.extend_from_slice(&more[..k]);
    }
    let offer: Offer = serde_json::from_slice(&line).context("the running router's offer")?;
    if fds.len() != 1 + offer.interfaces.len() {
        bail!(
            "the running router offered {} fds for {} interfaces",
            fds.len(),
            offer.interfaces.len()
        );
    }
    let mut fds = fds.into_iter();
    let stats_map = fds.next().unwrap();
    let links = offer.interfaces.iter().cloned().zip(fds).collect();
    Ok(Some(Predecessor {
        source: Source::Live(stream),
        offer,
        stats_map,
        links,
    }))
}

impl Predecessor {
    /// Whether it came from the service manager's store (its router has
    /// ended) rather than from a running router.
    pub fn stored(&self) -> bool {
        matches!(self.source, Source::Stored(_))
    }

    /// Why this build cannot take over the counters map (None: it can).
    pub fn incompatible(&self) -> Option<String> {
        (self.offer.layout != counters_layout()).then(|| {
            format!(
                "linerate {} (pid {}) counts by another layout ({}; this build: {})",
                self.offer.version,
                self.offer.pid,
                self.offer.layout,
                counters_layout()
            )
        })
    }

    /// The links run this process's program: tells the running router to
    /// end, and waits until it has.
    pub fn leave(self) -> Result<()> {
        self.say(Word::Leave)
    }

    /// Tells the running router to detach and end, and waits until it has.
    pub fn stop(self) -> Result<()> {
        self.say(Word::Stop)
    }

    fn say(self, word: Word) -> Result<()> {
        let Predecessor {
            source,
            offer,
            stats_map,
            links,
        } = self;
        // Ours closed first: after `stop`, the links detach when it ends.
        drop((stats_map, links));
        let stream = match source {
            Source::Live(s) => s,
            // The service manager lets its copies go: after `leave` the
            // links are held by this process alone (it dies, they detach),
            // after `stop` by nobody.
            Source::Stored(names) => return forget_stored(&names),
        };
        let mut line = serde_json::to_vec(&word)?;
        line.push(b'\n');
        (&stream).write_all(&line)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut rest = Vec::new();
        (&stream)
            .read_to_end(&mut rest)
            .map_err(|e| anyhow!("linerate route (pid {}) did not end: {e}", offer.pid))?;
        Ok(())
    }
}

/// The names a router's fds go by in the service manager's store.
const STORED_OFFER: &str = "linerate-offer";
const STORED_STATS: &str = "linerate-stats";
const STORED_LINK: &str = "linerate-link-";

/// Under systemd (`FileDescriptorStoreMax=` in the unit), leaves the fast
/// path with the service manager as the router stops: its offer (in a
/// memfd), counters map and links. A restart of the service hands them to
/// the next router (LISTEN_FDS: [`from_service_manager`]), which takes
/// over; a stop has the service manager close them, and the links detach
/// (the kernel forwards).
pub fn store_in_service_manager(
    stats_map: std::os::fd::BorrowedFd<'_>,
    links: &[(String, std::os::fd::BorrowedFd<'_>)],
) -> Result<()> {
    use sd_notify::NotifyState::{FdName, FdStore};
    let offer = Offer::ours(links.iter().map(|(n, _)| n.clone()).collect());
    // SAFETY: a name and flags; checked below.
    let memfd = unsafe { libc::memfd_create(c"linerate-offer".as_ptr(), libc::MFD_CLOEXEC) };
    if memfd < 0 {
        return Err(std::io::Error::last_os_error()).context("memfd_create");
    }
    // SAFETY: a new fd, owned here.
    let memfd = unsafe { OwnedFd::from_raw_fd(memfd) };
    std::fs::File::from(memfd.try_clone()?).write_all(&serde_json::to_vec(&offer)?)?;
    sd_notify::notify_with_fds(&[FdStore, FdName(STORED_OFFER)], &[memfd.as_fd()])?;
    sd_notify::notify_with_fds(&[FdStore, FdName(STORED_STATS)], &[stats_map])?;
    for (name, link) in links {
        let fdname = format!("{STORED_LINK}{name}");
        sd_notify::notify_with_fds(&[FdStore, FdName(&fdname)], &[*link])?;
    }
    Ok(())
}

/// The fast path a router stopped under systemd left in the service
/// manager's store, passed to this start (LISTEN_FDS), if any.
pub fn from_service_manager() -> Result<Option<Predecessor>> {
    let mut offer = None;
    let mut stats_map = None;
    let mut links = std::collections::BTreeMap::new();
    let mut names = Vec::new();
    for (fd, name) in sd_notify::listen_fds_with_names()? {
        // SAFETY: passed to this process by the service manager, once.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        if name == STORED_OFFER {
            let mut text = String::new();
            let mut f = std::fs::File::from(fd);
            std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(0))?;
            f.read_to_string(&mut text)?;
            offer = Some(serde_json::from_str::<Offer>(&text).context("the stored offer")?);
        } else if name == STORED_STATS {
            stats_map = Some(fd);
        } else if let Some(ifname) = name.strip_prefix(STORED_LINK) {
            links.insert(ifname.to_string(), fd);
        } else {
            continue;
        }
        names.push(name);
    }
    let (Some(offer), Some(stats_map)) = (offer, stats_map) else {
        // Half a store: nothing to take over; let it go.
        forget_stored(&names)?;
        return Ok(None);
    };
    let links = offer
        .interfaces
        .iter()
        .map(|i| {
            links
                .remove(i)
                .map(|l| (i.clone(), l))
                .ok_or_else(|| anyhow!("the service manager holds no link for {i}"))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(Predecessor {
        source: Source::Stored(names),
        offer,
        stats_map,
        links,
    }))
}

/// Has the service manager close its copies of the fds named `names`.
fn forget_stored(names: &[String]) -> Result<()> {
    for name in names {
        sd_notify::notify(&[
            sd_notify::NotifyState::FdStoreRemove,
            sd_notify::NotifyState::FdName(name),
        ])?;
    }
    Ok(())
}

/// A duplicate of `fd`, for the offering thread.
pub fn dup(fd: impl AsFd) -> Result<OwnedFd> {
    Ok(fd.as_fd().try_clone_to_owned()?)
}
