//! netlink sockets: open and bind one, and dump a table of any netlink
//! family as raw messages (checked by crate::wire), for the parsers of
//! messages netlink-packet-route does not know.
use crate::wire::{self, Message};
use anyhow::{bail, Context, Result};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::os::fd::AsRawFd;

/// A socket of netlink `protocol`, joined to the multicast `groups` (the
/// legacy bit mask; others are joined by number with add_membership).
pub fn socket_on(protocol: isize, groups: u32) -> Result<Socket> {
    let mut s = Socket::new(protocol).context("cannot open a netlink socket")?;
    s.bind(&SocketAddr::new(0, groups))
        .context("cannot bind the netlink socket")?;
    force_rcvbuf(&s, DUMP_RCVBUF);
    Ok(s)
}

/// A dump's socket buffer: answers are read as they come.
const DUMP_RCVBUF: usize = 8 << 20;

/// The notification socket's buffer (the kernel doubles it, to 256 MiB):
/// a BGP full table arrives at 30-50k routes/s, a route notification takes
/// 832 bytes of it (measured: /proc/net/netlink's Rmem over 1,000 of
/// them), and the router must not lose one while it waits for a CPU or
/// re-reads a million routes after all (2.5 s, 100k notifications
/// meanwhile). 256 MiB holds about 320k, 6 s or more of a full table; 16
/// MiB (20k, half a second) overflowed once in a 1.1M-route FRR run
/// (docs/route-changes-measured.md). Memory is only taken while notifications wait.
pub const NOTIFY_RCVBUF: usize = 128 << 20;

/// Sets `s`'s receive buffer to `bytes` (SO_RCVBUFFORCE: root may exceed
/// net.core.rmem_max); a refusal leaves the default.
pub fn force_rcvbuf(s: &Socket, bytes: usize) {
    let _ = try_force_rcvbuf(s, bytes);
}

/// [`force_rcvbuf`], saying whether the kernel took it (a listener that
/// must hear every notification refuses to run without it).
pub fn try_force_rcvbuf(s: &Socket, bytes: usize) -> std::io::Result<()> {
    let size = bytes.min(i32::MAX as usize / 2) as libc::c_int;
    // SAFETY: a valid socket and option value.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &size as *const _ as *const libc::c_void,
            std::mem::size_of_val(&size) as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Sends a dump request of an rtnetlink message type (`kind`, with `body`
/// after the netlink header) and returns the answers as they came, each
/// with its netlink header; `Err(errno)` inside if the kernel refused the
/// dump.
pub fn raw_dump(kind: u16, body: &[u8], what: &str) -> Result<Result<Vec<Vec<u8>>, i32>> {
    raw_dump_on(NETLINK_ROUTE, kind, body, what)
}

/// raw_dump over another netlink protocol (NETLINK_NETFILTER,
/// NETLINK_GENERIC).
pub fn raw_dump_on(
    protocol: isize,
    kind: u16,
    body: &[u8],
    what: &str,
) -> Result<Result<Vec<Vec<u8>>, i32>> {
    let s = socket_on(protocol, 0)?;
    s.connect(&SocketAddr::new(0, 0))?;
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    s.send(&wire::request(kind, flags, 1, body), 0)
        .with_context(|| format!("netlink {what} dump request"))?;
    let mut out = Vec::new();
    let mut rx = vec![0u8; 1 << 20];
    loop {
        let n = s
            .recv(&mut &mut rx[..], 0)
            .with_context(|| format!("netlink {what} dump"))?;
        for m in wire::messages(&rx[..n]) {
            let m: Message = m.with_context(|| format!("the {what} dump"))?;
            match m.kind() as i32 {
                libc::NLMSG_DONE => return Ok(Ok(out)),
                libc::NLMSG_ERROR => match m.error() {
                    Some(errno) => return Ok(Err(errno)),
                    None => bail!("a truncated error answer to the {what} dump"),
                },
                _ => out.push(m.bytes().to_vec()),
            }
        }
    }
}
