//! The AF_PACKET sender: frames built in user space ([`crate::synth`]) and
//! handed to the driver in batches with `sendmmsg`, bypassing the qdisc
//! (`PACKET_QDISC_BYPASS`), the way a tuned pkt-gen without netmap would.
//! For interfaces without XDP, and as the yardstick of the XDP generator.
use anyhow::{bail, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Frames per `sendmmsg` call.
pub const BATCH: usize = 64;

/// A raw packet socket bound to one interface, send only.
pub struct PacketSocket {
    fd: OwnedFd,
}

impl PacketSocket {
    pub fn open(ifindex: u32) -> Result<Self> {
        // Protocol 0: the socket receives nothing, it only sends.
        // SAFETY: plain syscalls on a fresh descriptor we own.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
        if raw < 0 {
            bail!(
                "cannot open an AF_PACKET socket: {}",
                std::io::Error::last_os_error()
            );
        }
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let one: libc::c_int = 1;
        let rc = unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_QDISC_BYPASS,
                &one as *const _ as *const libc::c_void,
                std::mem::size_of_val(&one) as libc::socklen_t,
            )
        };
        if rc < 0 {
            bail!("PACKET_QDISC_BYPASS: {}", std::io::Error::last_os_error());
        }
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = ifindex as i32;
        let rc = unsafe {
            libc::bind(
                raw,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of_val(&sll) as libc::socklen_t,
            )
        };
        if rc < 0 {
            bail!(
                "cannot bind an AF_PACKET socket to ifindex {ifindex}: {}",
                std::io::Error::last_os_error()
            );
        }
        Ok(PacketSocket { fd })
    }

    /// Sends `frames[i][..lens[i]]` in order until the kernel refuses one
    /// (no buffer space, like a full NIC ring). Returns how many it took
    /// and whether it refused one; the caller sends the rest again later,
    /// so sequence numbers never skip a frame that was not sent.
    pub fn send_batch(&self, frames: &mut [Vec<u8>], lens: &[usize]) -> Result<(usize, bool)> {
        let n = lens.len();
        let mut iov: Vec<libc::iovec> = frames[..n]
            .iter_mut()
            .zip(lens)
            .map(|(f, &l)| libc::iovec {
                iov_base: f.as_mut_ptr() as *mut libc::c_void,
                iov_len: l,
            })
            .collect();
        let mut msgs: Vec<libc::mmsghdr> = iov
            .iter_mut()
            .map(|v| {
                // SAFETY: mmsghdr is plain data; all-zero is valid.
                let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
                m.msg_hdr.msg_iov = v as *mut libc::iovec;
                m.msg_hdr.msg_iovlen = 1;
                m
            })
            .collect();
        let mut sent = 0usize;
        while sent < n {
            let rest = &mut msgs[sent..];
            // SAFETY: msgs and iov point into live buffers for the call.
            let rc = unsafe {
                libc::sendmmsg(self.fd.as_raw_fd(), rest.as_mut_ptr(), rest.len() as u32, 0)
            };
            if rc > 0 {
                sent += rc as usize;
                continue;
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                _ if rc == 0 => return Ok((sent, true)),
                Some(libc::EINTR) => continue,
                Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EBUSY) => {
                    return Ok((sent, true))
                }
                _ => bail!("sendmmsg: {e}"),
            }
        }
        Ok((sent, false))
    }
}
