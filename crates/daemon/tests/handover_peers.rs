//! The hand-over socket offers the fast path (its counters map and XDP
//! links, which let the peer replace the router) to a process of the
//! router's own user only: another user cannot connect (the socket is
//! root's, made with its umask), and one that can (a socket made writable
//! by all) is refused by its credentials before it is sent anything.
use linerate_daemon::handover::{self, Offering, Told};
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// What the other user's process saw, as its exit code.
const CANNOT_CONNECT: i32 = 10;
const REFUSED: i32 = 11;
const GIVEN_DATA: i32 = 12;
const OTHER: i32 = 13;

/// Connects to `path` as `uid` (a forked child: only system calls after
/// the fork), asks, and says what came back.
fn peer_as(uid: u32, path: &Path) -> i32 {
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let p = path.as_os_str().as_encoded_bytes();
    assert!(p.len() < addr.sun_path.len());
    for (d, s) in addr.sun_path.iter_mut().zip(p) {
        *d = *s as libc::c_char;
    }
    let ask = format!(
        "{{\"protocol\":{},\"pid\":{}}}\n",
        handover::PROTOCOL,
        std::process::id()
    );
    // SAFETY: the child makes system calls only, on memory prepared
    // before the fork, and ends with _exit.
    unsafe {
        let pid = libc::fork();
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            if libc::setgid(uid) != 0 || libc::setuid(uid) != 0 {
                libc::_exit(OTHER);
            }
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            if libc::connect(fd, &addr as *const _ as *const libc::sockaddr, len) != 0 {
                libc::_exit(CANNOT_CONNECT);
            }
            libc::write(fd, ask.as_ptr() as *const _, ask.len());
            let mut buf = [0u8; 64];
            let n = libc::read(fd, buf.as_mut_ptr() as *mut _, buf.len());
            // Closed unread (the ask still in its buffer): a reset.
            let reset = n < 0 && *libc::__errno_location() == libc::ECONNRESET;
            libc::_exit(match n {
                0 => REFUSED,
                _ if reset => REFUSED,
                n if n > 0 => GIVEN_DATA,
                _ => OTHER,
            });
        }
        let mut status = 0;
        assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
        assert!(libc::WIFEXITED(status), "the peer died: {status}");
        libc::WEXITSTATUS(status)
    }
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_fast_path_is_offered_to_the_routers_own_user_only() {
    let record = format!("lrtest-handover-{}", std::process::id());
    let map: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
    let offering = Offering::start(&record, map, Vec::new()).unwrap();
    let path = Path::new("/run/linerate/routers").join(format!("{record}.handover"));
    let nobody = 65534;

    // Another user: the socket is root's, and not writable by others.
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o002, 0, "{mode:o}");
    assert_eq!(peer_as(nobody, &path), CANNOT_CONNECT);

    // Made writable by all, it connects, and is refused by its
    // credentials: nothing sent, and the router goes on.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    assert_eq!(peer_as(nobody, &path), REFUSED);
    assert_eq!(offering.told(), Told::Nothing);

    // Its own user is offered the fast path (the counters map, no links).
    let pred = handover::find(&record)
        .unwrap()
        .expect("the router answers its own user");
    assert!(pred.offer.interfaces.is_empty());
    drop(pred);
    assert_eq!(offering.told(), Told::Nothing);
    drop(offering);
    assert!(!path.exists());
}
