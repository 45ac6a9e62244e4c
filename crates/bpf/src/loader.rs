//! Loading embedded objects and attaching XDP programs through BPF links.
use anyhow::{bail, Context, Result};
use libbpf_rs::{Object, ObjectBuilder};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Opens and loads a BPF object from memory (one of [`crate::objects`]).
pub fn load(object: &[u8], what: &str) -> Result<Object> {
    let open = ObjectBuilder::default()
        .open_memory(object)
        .with_context(|| format!("cannot open the {what} BPF object"))?;
    open.load().with_context(|| {
        format!(
            "cannot load the {what} BPF program into the kernel (are you root? is BPF enabled?)"
        )
    })
}

/// As [`load`], with the maps named in `reuse` taken from a running
/// program (a router handing over: its counters go on counting) instead of
/// created. libbpf refuses a map whose type, key, value or size differ.
pub fn load_reusing(object: &[u8], what: &str, reuse: &[(&str, BorrowedFd<'_>)]) -> Result<Object> {
    load_sized(object, what, reuse, &[])
}

/// As [`load_reusing`], with the maps named in `sizes` created with that
/// many entries instead of the object's own.
pub fn load_sized(
    object: &[u8],
    what: &str,
    reuse: &[(&str, BorrowedFd<'_>)],
    sizes: &[(&str, u32)],
) -> Result<Object> {
    let mut open = ObjectBuilder::default()
        .open_memory(object)
        .with_context(|| format!("cannot open the {what} BPF object"))?;
    // Each named map gets its change, or the load fails naming it.
    let mut change = |name: &str, f: &dyn Fn(&mut libbpf_rs::OpenMapMut) -> Result<()>| {
        let mut map = open
            .maps_mut()
            .find(|m| m.name() == name)
            .ok_or_else(|| anyhow::anyhow!("the {what} BPF object has no map {name}"))?;
        f(&mut map)
    };
    for (name, entries) in sizes {
        change(name, &|m| {
            m.set_max_entries(*entries)
                .with_context(|| format!("cannot size map {name} to {entries} entries"))
        })?;
    }
    for (name, fd) in reuse {
        change(name, &|m| {
            m.reuse_fd(*fd)
                .with_context(|| format!("cannot take over map {name}"))
        })?;
    }
    open.load().with_context(|| {
        if reuse.is_empty() {
            format!(
                "cannot load the {what} BPF program into the kernel (are you root? is BPF enabled?)"
            )
        } else {
            format!(
                "cannot load the {what} BPF program with the maps it takes over ({})",
                reuse.iter().map(|r| r.0).collect::<Vec<_>>().join(", ")
            )
        }
    })
}

/// The instructions the kernel's verifier processed to load each program
/// of `object` (its "processed N insns"), the maps named in `sizes` sized
/// as [`load_sized`] sizes them: how close a program is to the
/// verifier's limit (1M), which one more feature must not cross. The
/// object is loaded and dropped.
pub fn verifier_processed(object: &[u8], sizes: &[(&str, u32)]) -> Result<Vec<(String, u64)>> {
    use std::sync::Mutex;
    // libbpf hands a program's log to its print callback, a plain fn:
    // the lines it prints while this load runs land here.
    static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());
    fn keep(_: libbpf_rs::PrintLevel, msg: String) {
        LINES.lock().unwrap().push(msg);
    }
    let mut open = ObjectBuilder::default()
        .open_memory(object)
        .context("cannot open the BPF object")?;
    for (name, entries) in sizes {
        if let Some(mut m) = open.maps_mut().find(|m| m.name() == *name) {
            m.set_max_entries(*entries)?;
        }
    }
    // BPF_LOG_STATS: the verifier's statistics, not its trace.
    for mut p in open.progs_mut() {
        p.set_log_level(if std::env::var_os("LINERATE_VERIFIER_TRACE").is_some() {
            5
        } else {
            4
        });
    }
    LINES.lock().unwrap().clear();
    let before = libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, keep)));
    let loaded = open.load();
    libbpf_rs::set_print(before);
    let lines = std::mem::take(&mut *LINES.lock().unwrap());
    if let Err(e) = loaded {
        // The verifier's last words say why.
        let log: Vec<&str> = lines.iter().flat_map(|m| m.lines()).collect();
        let tail = log[log.len().saturating_sub(40)..].join("\n");
        return Err(e).context(format!("cannot load the BPF object; its log ends:\n{tail}"));
    }
    // "prog 'NAME': -- BEGIN PROG LOAD LOG --", then "processed N insns".
    let mut out = Vec::new();
    let mut prog = None;
    for line in lines.iter().flat_map(|m| m.lines()) {
        if let Some(rest) = line
            .strip_prefix("libbpf: prog '")
            .or(line.strip_prefix("prog '"))
        {
            prog = rest.split('\'').next().map(str::to_string);
        }
        if let Some(n) = line
            .strip_prefix("processed ")
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse().ok())
        {
            out.push((prog.clone().unwrap_or_default(), n));
        }
    }
    Ok(out)
}

/// Where the XDP program runs: the driver's hook (native; veth has one) or
/// the generic hook after skb allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum XdpMode {
    #[default]
    Native,
    Generic,
}

impl XdpMode {
    fn link_flags(self) -> u32 {
        match self {
            XdpMode::Native => libbpf_sys::XDP_FLAGS_DRV_MODE,
            XdpMode::Generic => libbpf_sys::XDP_FLAGS_SKB_MODE,
        }
    }
}

/// Interfaces up to this MTU (Ethernet's) try the single-buffer program
/// first ([`XdpAttachment::attach_sized`]).
pub const SINGLE_BUFFER_MTU: u32 = 1500;

/// An XDP program attached to an interface through a BPF link. The link
/// lives as long as this value (or the process): dropping it, or the process
/// dying for any reason, detaches the program. Nothing is left behind.
#[derive(Debug)]
pub struct XdpAttachment {
    link: OwnedFd,
    pub ifindex: u32,
    pub ifname: String,
}

impl XdpAttachment {
    /// Attaches `prog` to interface `ifname` in the calling thread's network
    /// namespace.
    pub fn attach(prog: &libbpf_rs::Program<'_>, ifname: &str, mode: XdpMode) -> Result<Self> {
        let ifindex = ifindex(ifname)?;
        let opts = libbpf_sys::bpf_link_create_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as _,
            flags: mode.link_flags(),
            ..Default::default()
        };
        // SAFETY: valid program fd, valid opts struct of the size we declare.
        let fd = unsafe {
            libbpf_sys::bpf_link_create(
                prog.as_fd().as_raw_fd(),
                ifindex as i32,
                libbpf_sys::BPF_XDP,
                &opts,
            )
        };
        if fd < 0 {
            bail!(
                "cannot attach XDP program to {ifname}: {}",
                attach_error(ifname, -fd, mode)
            );
        }
        // SAFETY: bpf_link_create returned a new fd that we now own.
        let link = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(XdpAttachment {
            link,
            ifindex,
            ifname: ifname.to_string(),
        })
    }

    /// Attaches `single`, a single-buffer XDP program, where the interface
    /// takes it, else `multi`, the same program declared for multi-buffer
    /// frames (xdp.frags). A single-buffer program spares the common frame
    /// the length helper, and the kernel hands it every frame in one
    /// buffer; it takes only what one page holds, so a device refuses it
    /// at a large MTU (a veth, at its peer's too). Above Ethernet's MTU the
    /// multi-buffer one goes straight on. Whether it is the multi-buffer
    /// program that is attached comes back with the link.
    pub fn attach_sized(
        single: &libbpf_rs::Program<'_>,
        multi: &libbpf_rs::Program<'_>,
        ifname: &str,
        mode: XdpMode,
    ) -> Result<(Self, bool)> {
        if mtu(ifname)? <= SINGLE_BUFFER_MTU {
            if let Ok(link) = Self::attach(single, ifname, mode) {
                return Ok((link, false));
            }
        }
        Ok((Self::attach(multi, ifname, mode)?, true))
    }

    /// The link's file descriptor (for pinning or queries).
    pub fn link_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.link.as_fd()
    }

    /// A link another process made (handed over), to interface `ifname`
    /// of the calling thread's namespace.
    pub fn from_link(link: OwnedFd, ifname: &str) -> Result<Self> {
        Ok(XdpAttachment {
            link,
            ifindex: ifindex(ifname)?,
            ifname: ifname.to_string(),
        })
    }

    /// Replaces the link's program with `prog`, atomically: each frame
    /// meets the old program or the new one (bpf_link_update).
    pub fn update(&self, prog: &libbpf_rs::Program<'_>) -> Result<()> {
        // SAFETY: valid link and program fds; no options.
        let r = unsafe {
            libbpf_sys::bpf_link_update(
                self.link.as_raw_fd(),
                prog.as_fd().as_raw_fd(),
                std::ptr::null(),
            )
        };
        if r < 0 {
            bail!(
                "cannot replace the XDP program on {}: {}",
                self.ifname,
                std::io::Error::from_raw_os_error(-r)
            );
        }
        Ok(())
    }

    /// [`Self::update`] with the program `attach_sized` would pick: the
    /// single-buffer one where the interface takes it (true: multi-buffer).
    pub fn update_sized(
        &self,
        single: &libbpf_rs::Program<'_>,
        multi: &libbpf_rs::Program<'_>,
    ) -> Result<bool> {
        if mtu(&self.ifname)? <= SINGLE_BUFFER_MTU && self.update(single).is_ok() {
            return Ok(false);
        }
        self.update(multi).map(|()| true)
    }
}

/// Why an attach failed with `errno`, in words a user can act on. The
/// kernel's own message (extack) does not come back through a BPF link, so
/// the errno is read with what the kernel's drivers mean by it.
fn attach_error(ifname: &str, errno: i32, mode: XdpMode) -> String {
    let err = std::io::Error::from_raw_os_error(errno);
    let mtu = mtu(ifname).ok();
    let mtu_text = mtu.map_or_else(String::new, |m| format!(" (MTU {m})"));
    match errno {
        libc::EBUSY | libc::EEXIST => format!(
            "{err}: another XDP program is already attached (linerate already running there, or `ip link set dev {ifname} xdp off`)"
        ),
        // veth: the peer's MTU is above what one page holds, and the
        // program is not declared for multi-buffer frames.
        libc::ERANGE => format!(
            "{err}: {ifname}{mtu_text} or its veth peer has an MTU above what single-buffer XDP takes (about 3500 bytes); this program does not take multi-buffer frames: lower the MTU, or use --mode generic"
        ),
        libc::EOPNOTSUPP if mode == XdpMode::Native => format!(
            "{err}: the driver of {ifname} has no native XDP, or none at this MTU{mtu_text}: use --mode generic"
        ),
        // Drivers refuse XDP at an MTU their single-buffer XDP cannot
        // take (i40e, ixgbe, ...) with EINVAL.
        libc::EINVAL if mode == XdpMode::Native && mtu.is_some_and(|m| m > 3000) => format!(
            "{err}: the driver of {ifname} refused XDP at MTU {}: drivers without multi-buffer XDP take it only up to about 3500 bytes: lower the MTU, or use --mode generic",
            mtu.unwrap_or(0)
        ),
        _ => err.to_string(),
    }
}

/// The index of an interface in the calling thread's network namespace.
pub fn ifindex(ifname: &str) -> Result<u32> {
    let c = std::ffi::CString::new(ifname).context("interface name contains a NUL byte")?;
    // SAFETY: valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        bail!("interface {ifname} does not exist (in this network namespace; use --netns to pick another)");
    }
    Ok(idx)
}

/// The kernel's run-time statistics of BPF programs (how often each ran
/// and for how long), on while this lives: BPF_ENABLE_STATS, which the
/// kernel turns off again when its fd closes, however this process ends
/// (unlike `kernel.bpf_stats_enabled`, which a killed process would leave
/// on). They cost every program run two clock reads.
pub struct RunStats(#[allow(dead_code)] OwnedFd);

impl RunStats {
    pub fn enable() -> Result<RunStats> {
        // SAFETY: no pointers.
        let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
        if fd < 0 {
            bail!(
                "cannot turn on BPF run-time statistics: {}",
                std::io::Error::from_raw_os_error(-fd)
            );
        }
        // SAFETY: a new fd, owned here.
        Ok(RunStats(unsafe { OwnedFd::from_raw_fd(fd) }))
    }
}

/// How many times program `prog` ran and for how many nanoseconds in all,
/// while run-time statistics were on ([`RunStats`]).
pub fn program_runs(prog: BorrowedFd<'_>) -> Result<(u64, u64)> {
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: an info struct of the size we declare.
    let err = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(prog.as_raw_fd(), &mut info, &mut len) };
    if err < 0 {
        bail!(
            "cannot read a BPF program's statistics: {}",
            std::io::Error::from_raw_os_error(-err)
        );
    }
    Ok((info.run_cnt, info.run_time_ns))
}

/// Where a source line of a program begins in its JIT image: the byte
/// offset from the image's start (its kernel symbol, `bpf_prog_TAG_NAME`),
/// the file, the line and its text, from the program's BTF line info.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JitLine {
    pub offset: u64,
    pub file: String,
    pub line: u32,
    pub source: String,
}

/// The name of program `prog` and its source lines in JIT order (the kernel's
/// jited_line_info beside its line_info), for telling where in the program
/// a profiler's samples fell. Empty for a program loaded without BTF.
pub fn program_lines(prog: BorrowedFd<'_>) -> Result<(String, Vec<JitLine>)> {
    let fd = prog.as_raw_fd();
    let get = |info: &mut libbpf_sys::bpf_prog_info| -> Result<()> {
        let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
        // SAFETY: an info struct of the size we declare; any arrays it
        // points at are sized by its counts.
        let err = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, info, &mut len) };
        if err < 0 {
            bail!(
                "cannot read a BPF program's line info: {}",
                std::io::Error::from_raw_os_error(-err)
            );
        }
        Ok(())
    };
    let mut counts = libbpf_sys::bpf_prog_info::default();
    get(&mut counts)?;
    // SAFETY: the kernel NUL-terminates the name within its 16 bytes.
    let prog_name = unsafe { std::ffi::CStr::from_ptr(counts.name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let n = counts.nr_line_info.min(counts.nr_jited_line_info) as usize;
    if n == 0 || counts.btf_id == 0 {
        return Ok((prog_name, Vec::new()));
    }
    let mut lines = vec![libbpf_sys::bpf_line_info::default(); counts.nr_line_info as usize];
    let mut addrs = vec![0u64; counts.nr_jited_line_info as usize];
    let mut func_lens = vec![0u32; counts.nr_jited_func_lens as usize];
    let mut info = libbpf_sys::bpf_prog_info {
        nr_jited_func_lens: counts.nr_jited_func_lens,
        jited_func_lens: func_lens.as_mut_ptr() as u64,
        nr_line_info: counts.nr_line_info,
        line_info_rec_size: std::mem::size_of::<libbpf_sys::bpf_line_info>() as u32,
        line_info: lines.as_mut_ptr() as u64,
        nr_jited_line_info: counts.nr_jited_line_info,
        jited_line_info_rec_size: 8,
        jited_line_info: addrs.as_mut_ptr() as u64,
        ..Default::default()
    };
    get(&mut info)?;
    // SAFETY: loads the program's BTF from the kernel; freed below.
    let btf = unsafe { libbpf_sys::btf__load_from_kernel_by_id(counts.btf_id) };
    if btf.is_null() {
        bail!(
            "cannot load the BTF (id {}) of a BPF program",
            counts.btf_id
        );
    }
    let name = |off: u32| -> String {
        // SAFETY: btf is valid; the name is a NUL-terminated string in it.
        let p = unsafe { libbpf_sys::btf__name_by_offset(btf, off) };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: as above.
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_string_lossy()
            .into_owned()
    };
    // The first line begins at the image's start (the kernel sets it so);
    // the lines of subprograms (images of their own) are left out.
    let base = addrs[0];
    let main_len = func_lens.first().copied().unwrap_or(counts.jited_prog_len) as u64;
    let out = lines[..n]
        .iter()
        .zip(&addrs[..n])
        .filter(|(_, a)| a.wrapping_sub(base) < main_len)
        .map(|(l, a)| JitLine {
            offset: a.wrapping_sub(base),
            file: name(l.file_name_off)
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_string(),
            line: l.line_col >> 10,
            source: name(l.line_off).trim().to_string(),
        })
        .collect();
    // SAFETY: loaded above, not used after.
    unsafe { libbpf_sys::btf__free(btf) };
    Ok((prog_name, out))
}

/// The XDP program attached to interface `ifindex` (of the calling
/// thread's namespace), as a file descriptor of its own: another process's
/// or thread's program can be test-run through it (BPF_PROG_TEST_RUN), to
/// see what the fast path does with a frame without sending one.
pub fn attached_xdp_program(ifindex: u32) -> Result<OwnedFd> {
    let mut id: u32 = 0;
    // SAFETY: a valid out pointer.
    let err = unsafe { libbpf_sys::bpf_xdp_query_id(ifindex as i32, 0, &mut id) };
    if err < 0 {
        bail!(
            "cannot query interface {ifindex}'s XDP program: {}",
            std::io::Error::from_raw_os_error(-err)
        );
    }
    if id == 0 {
        bail!("interface {ifindex} has no XDP program attached");
    }
    // SAFETY: plain syscall wrapper.
    let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) };
    if fd < 0 {
        bail!(
            "cannot open XDP program {id}: {}",
            std::io::Error::from_raw_os_error(-fd)
        );
    }
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The MTU of an interface in the calling thread's network namespace
/// (SIOCGIFMTU: /sys/class/net shows the namespace sysfs was mounted in,
/// not the thread's).
pub fn mtu(ifname: &str) -> Result<u32> {
    if ifname.len() >= libc::IFNAMSIZ {
        bail!(
            "interface name {ifname:?} is longer than {} bytes",
            libc::IFNAMSIZ - 1
        );
    }
    // SAFETY: a datagram socket we close, and an ifreq the kernel fills.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context("socket for SIOCGIFMTU");
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let mut req: libc::ifreq = std::mem::zeroed();
        for (d, s) in req.ifr_name.iter_mut().zip(ifname.bytes()) {
            *d = s as libc::c_char;
        }
        if libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFMTU, &mut req) < 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("cannot read the MTU of {ifname}"));
        }
        Ok(req.ifr_ifru.ifru_mtu as u32)
    }
}

/// The program called `name` in `obj`.
pub fn prog<'o>(obj: &'o Object, name: &str) -> Result<libbpf_rs::Program<'o>> {
    obj.progs()
        .find(|p| p.name() == name)
        .ok_or_else(|| anyhow::anyhow!("BPF object has no program {name} (build mismatch)"))
}

/// The map called `name` in `obj`.
pub fn map<'o>(obj: &'o Object, name: &str) -> Result<libbpf_rs::Map<'o>> {
    obj.maps()
        .find(|m| libbpf_rs::MapCore::name(m) == name)
        .ok_or_else(|| anyhow::anyhow!("BPF object has no map {name} (build mismatch)"))
}

/// The map of a program's own data section `section` (`.data.ref` for
/// `SEC(".data.ref")`: libbpf names it after the object, then the
/// section), which user space writes after loading.
pub fn data_section<'o>(obj: &'o Object, section: &str) -> Result<libbpf_rs::Map<'o>> {
    obj.maps()
        .find(|m| {
            libbpf_rs::MapCore::name(m)
                .to_string_lossy()
                .ends_with(section)
        })
        .ok_or_else(|| anyhow::anyhow!("BPF object has no {section} section (build mismatch)"))
}
