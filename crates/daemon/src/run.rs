//! `linerate route`: attach the fast path to the interfaces, mirror the
//! kernel into it, follow the kernel's changes, detach on the way out.
//! The XDP programs hang on BPF links owned by this process: however it
//! ends (Ctrl-C, SIGTERM, kill -9, a crash) they detach and the kernel
//! forwards alone.
use crate::handover::{self, Offering, Predecessor, Told};
use anyhow::{bail, Context, Result};
use linerate_bpf::loader::{self, XdpAttachment, XdpMode};
use linerate_dataplane::dataplane::Dataplane;
use linerate_dataplane::fastpath::FastPath;
use linerate_dataplane::layout::{
    RouterCounters, REASONS, R_BRIDGED, R_DROP_BLACKHOLE, R_DROP_FIREWALL, R_FORWARDED, R_PASSES,
};
use linerate_fwfollow::thread::{FwNews, FwThread};
use linerate_netlink::route::{self, Monitor};
use linerate_router::follow::{
    apply_netfilter, apply_notifications, apply_tc, apply_xdp_features, follow_ipv6_switches,
    follow_netfilter, follow_tc, follow_xdp_features, Poller,
};
use linerate_router::mirror::Mirror;
use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub struct RouteOptions {
    pub interfaces: Vec<String>,
    pub mode: XdpMode,
    /// The IPv6 table's layout.
    pub ipv6: linerate_fib::Ipv6Layout,
    /// Name of the record `linerate stats` finds it by (its network
    /// namespace, or "default").
    pub record: String,
    /// The loop's nice value (-20 to 19; [`DEFAULT_NICE`]).
    pub nice: i32,
    /// Where the loop publishes what the metrics show (crate::metrics).
    pub status: crate::metrics::Status,
    /// Under a service manager (systemd, NOTIFY_SOCKET): a stop leaves the
    /// fast path in its fd store for the next start to take over.
    pub service_manager: bool,
    /// Established TCP connections the ruleset accepts marked liberal and
    /// carried, their windows no longer checked, as the kernel's flowtable
    /// does (`carry_tcp`; linerate_firewall::tcp_carry).
    pub carry_tcp: bool,
    /// The limits of what the fast path passes to the kernel
    /// (linerate_dataplane::police).
    pub police: linerate_dataplane::police::Police,
}

/// The loop runs ahead of ordinary processes (nice -10): while a BGP
/// daemon installs a table it competes with that daemon, the kernel's
/// route work and the traffic for the CPU, and every millisecond it waits
/// is a millisecond the fast path uses a withdrawn route. It only needs
/// the CPU while there are changes to follow. Measured (docs/route-changes-measured.md,
/// `linerate bench bgp`, 2 cores shared): withdraw lag p99 53-243 ms at
/// nice 0, 11 ms at -10.
pub const DEFAULT_NICE: i32 = -10;
pub const NICE_RANGE: std::ops::RangeInclusive<i32> = -20..=19;

/// Sets the calling thread's nice value (Linux's is per thread). Out of
/// range is refused; not permitted (no CAP_SYS_NICE) is said, and the
/// loop runs at the nice it has.
fn set_nice(nice: i32) -> Result<()> {
    if !NICE_RANGE.contains(&nice) {
        bail!("--nice: must be -20 to 19, got {nice}");
    }
    // SAFETY: setpriority on the calling thread (who = 0).
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
        tracing::warn!(
            "could not set nice {nice}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// A second of the fast path's counters, over the attached interfaces.
#[derive(Clone, Debug, Default)]
pub struct Second {
    pub usec: u64,
    pub delta: RouterCounters,
    /// Resyncs so far: times the kernel's notifications were lost (the
    /// socket overflowed) or could not be read, each followed by a full
    /// read of the kernel's tables.
    pub resyncs: u64,
}

impl Second {
    /// `forwarded 1.234 Mpps, passed 12 pps (ttl 10, no_neigh 2), dropped 5 pps (firewall 5, policed 3)`.
    pub fn line(&self) -> String {
        let per_sec = |n: u64| n as f64 * 1e6 / self.usec.max(1) as f64;
        let fwd = per_sec(self.delta.packets[R_FORWARDED]);
        let bridged = match self.delta.packets[R_BRIDGED] {
            0 => String::new(),
            n => format!(", bridged {:.3} Mpps", per_sec(n) / 1e6),
        };
        let passed = self.delta.passed();
        let mut reasons: Vec<(u64, &str)> = R_PASSES
            .filter(|&i| self.delta.packets[i] > 0)
            .map(|i| {
                (
                    self.delta.packets[i],
                    REASONS[i].trim_start_matches("pass_"),
                )
            })
            .collect();
        reasons.sort_by_key(|r| std::cmp::Reverse(r.0));
        let detail = if reasons.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                reasons
                    .iter()
                    .take(4)
                    .map(|(n, r)| format!("{r} {:.0}", per_sec(*n)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let dropped = self.delta.dropped();
        // The drops a rule made (the ruleset's, a blackhole rule's), and
        // the policer's.
        let by_rule: Vec<String> = [
            (self.delta.packets[R_DROP_FIREWALL], "firewall"),
            (self.delta.packets[R_DROP_BLACKHOLE], "blackhole"),
            (self.delta.policed(), "policed"),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, name)| format!("{name} {:.0}", per_sec(n)))
        .collect();
        format!(
            "forwarded {:.3} Mpps{bridged}, passed {:.0} pps{detail}, dropped {:.0} pps{}",
            fwd / 1e6,
            per_sec(passed),
            per_sec(dropped),
            if by_rule.is_empty() {
                String::new()
            } else {
                format!(" ({})", by_rule.join(", "))
            }
        )
    }
}

/// Set once the first sync is done and traffic may come.
pub type Ready<'a> = &'a AtomicBool;

/// How a router ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Its programs detached: the kernel forwards alone.
    Detached,
    /// A successor (this pid) runs the fast path now (crate::handover).
    HandedOver(u32),
    /// Left with the service manager for the service's next start
    /// (crate::handover::store_in_service_manager).
    Stored,
}

/// Runs until `stop`; calls `on_second` once a second. The calling thread
/// must be in the router's network namespace. In stages: the interfaces
/// named, the fast path loaded (or a running router's taken over) and
/// attached, the firewall's and conntrack's threads started, the kernel's
/// tables mirrored and the ruleset read, the fast path put on the links,
/// the record written; then the loop follows the kernel until `stop` or a
/// successor, and the fast path is left as the way of ending asks.
pub fn run(
    opts: &RouteOptions,
    stop: &AtomicBool,
    ready: Ready,
    mut on_second: impl FnMut(&Second),
) -> Result<Ended> {
    if opts.interfaces.is_empty() {
        bail!("-i: give the interfaces to route between (-i eth0,eth1)");
    }
    set_nice(opts.nice)?;
    let ifindexes = interface_indexes(&opts.interfaces)?;
    // A router running here already: take its fast path over.
    let (fp, mut predecessor) = take_over_or_load(opts)?;
    // Before any link runs it: the kernel is policed from the first frame.
    fp.set_police(&opts.police)?;
    tracing::info!(
        "what goes to the kernel is policed, per CPU (frames a second/burst): {}",
        opts.police
    );
    let mut inherited = Vec::new();
    if let Some(p) = &mut predecessor {
        for (name, link) in std::mem::take(&mut p.links) {
            inherited.push(XdpAttachment::from_link(link, &name)?);
        }
    }
    // Attach everywhere or nowhere: the links made so far drop on error.
    let mut links = Vec::new();
    if predecessor.is_none() {
        links = attach_all(&fp, opts)?;
    }
    let monitor = Monitor::open()?;
    let mut mirror = Mirror::new(fp)?;
    // After the mirror, so that they end before the fast path is unloaded
    // (the firewall's thread writes its arena).
    let (_ct_thread, mut fw) = start_firewall(mirror.fast_path(), opts)?;
    first_sync(&mut mirror, &ifindexes, &opts.interfaces)?;
    let (fw_names, fw_said) = first_firewall_read(&mut fw, &mut mirror);
    // Tables built: the links run this program from now, and the router
    // that made them ends.
    let mut took_over = false;
    if let Some(p) = predecessor.take() {
        match take_the_links(&mirror, p, inherited, opts)? {
            Links::Inherited(l) => {
                links = l;
                took_over = true;
            }
            Links::Attached(l) => links = l,
        }
    }
    let record = linerate_dataplane::record::RouterRecord {
        pid: std::process::id(),
        stats_map_id: mirror.fast_path().stats_map_id()?,
        rxq_map_id: mirror.fast_path().rxq_map_id()?,
        interfaces: opts
            .interfaces
            .iter()
            .cloned()
            .zip(ifindexes.iter().copied())
            .collect(),
    };
    let record_guard = linerate_dataplane::record::write_record(&opts.record, &record)?;
    let publish = Publisher {
        status: opts.status.clone(),
        changes: 0,
        last_change: None,
        resyncs: 0,
    };
    publish.at_start(&record);
    say_attached(&mirror, &links, &opts.interfaces, took_over);
    linerate_router::follow::say_routing_changed(&[], &mirror.routing());
    publish.now(&mirror, fw_said.last.clone());
    // Its successor's way in.
    let offering = Offering::start(
        &opts.record,
        handover::dup(mirror.fast_path().stats_map_fd()?)?,
        links
            .iter()
            .map(|(l, _)| Ok((l.ifname.clone(), handover::dup(l.link_fd())?)))
            .collect::<Result<Vec<_>>>()?,
    )?;
    ready.store(true, Ordering::SeqCst);
    let mut router = Following {
        ingress: mirror.ingress().clone(),
        last: counters(&mirror, &ifindexes)?,
        mirror,
        monitor,
        fw,
        fw_names,
        fw_said,
        publish,
        poller: Poller::start()?,
        tick: Instant::now(),
        freed_at: None,
        resyncs: 0,
        generation: 0,
        ifindexes,
        vlan_entry: vec![None; links.len()],
    };
    let (mut ended, told_to_stop) = router.follow(opts, stop, &offering, &links, &mut on_second)?;
    // The offering thread's copies of the links first: they would keep
    // them attached.
    drop(offering);
    if ended == Ended::Detached && !told_to_stop && opts.service_manager {
        ended = leave_with_service_manager(&router.mirror, &links)?;
    }
    if let Ended::HandedOver(_) = ended {
        // The successor's now: its records, its links.
        std::mem::forget(record_guard);
        router.fw.keep_record();
    }
    drop(links);
    Ok(ended)
}

/// The index of each interface named, refused if it is not there or past
/// what the fast path's arrays hold.
fn interface_indexes(names: &[String]) -> Result<Vec<u32>> {
    let mut ifindexes = Vec::new();
    for name in names {
        let idx = loader::ifindex(name)
            .map_err(|_| anyhow::anyhow!("-i: interface {name} does not exist"))?;
        if idx >= linerate_dataplane::layout::ROUTER_IFACES {
            bail!(
                "-i: interface {name} has index {idx}; linerate handles indexes below {}",
                linerate_dataplane::layout::ROUTER_IFACES
            );
        }
        ifindexes.push(idx);
    }
    Ok(ifindexes)
}

/// The fast path attached to every interface of `opts`, or to none (the
/// links made so far drop on error); whether each runs the multi-buffer
/// program.
fn attach_all(fp: &FastPath, opts: &RouteOptions) -> Result<Vec<(XdpAttachment, bool)>> {
    opts.interfaces
        .iter()
        .map(|name| {
            fp.attach(name, opts.mode)
                .with_context(|| format!("-i {name}"))
        })
        .collect()
}

/// The stateful firewall's connection stage (on where the kernel has the
/// conntrack kfuncs, said once if not) and the firewall's thread.
fn start_firewall(
    fp: &FastPath,
    opts: &RouteOptions,
) -> Result<(Option<linerate_firewall::conntrack::CtThread>, FwThread)> {
    use linerate_dataplane::layout::{FW_CT_ON, FW_CT_TCP_CARRY};
    let ct_maps = fp.ct_maps()?;
    let mut ct_flags = ct_maps.flags();
    let ct_on = ct_flags & FW_CT_ON != 0;
    if ct_on && opts.carry_tcp {
        ct_flags |= FW_CT_TCP_CARRY;
    }
    let fw_maps = fp.fw_maps()?;
    ct_maps.publish_flags(ct_flags);
    if !ct_on {
        tracing::info!(
            "the stateful firewall is off: this kernel has no XDP conntrack kfuncs; rulesets reading ct stay the kernel's"
        );
    }
    let ct_thread = if ct_on {
        tracing::info!(
            "the stateful firewall's connection cache: {}; sized for nf_conntrack_max {}",
            ct_maps.describe(),
            linerate_dataplane::ct_cache::CtMaps::conntrack_max_now()
        );
        tracing::info!("{}", tcp_carrying(ct_flags));
        let t = linerate_firewall::conntrack::CtThread::start(ct_maps, opts.carry_tcp)?;
        if let Ok(mut p) = opts.status.lock() {
            p.tcp_carry = Some(t.carry_counts());
            p.ct_span = Some(t.span());
        }
        Some(t)
    } else {
        None
    };
    let fw = FwThread::start(fw_maps, Some(opts.record.clone()), ct_on)?;
    Ok((ct_thread, fw))
}

/// What becomes of established TCP connections under a ruleset that reads
/// their state, said at start (`flags`: fw_state's ct_flags).
fn tcp_carrying(flags: u32) -> &'static str {
    use linerate_dataplane::layout::{FW_CT_TCP_CARRY, FW_CT_TCP_LIBERAL};
    if flags & FW_CT_TCP_LIBERAL != 0 {
        "established TCP: carried (nf_conntrack_tcp_be_liberal=1: the kernel checks no TCP windows)"
    } else if flags & FW_CT_TCP_CARRY != 0 {
        "established TCP: carried, its windows unchecked as the kernel's flowtable would (carry_tcp: each connection the ruleset accepts is marked liberal in conntrack)"
    } else {
        "established TCP: goes to the kernel, which checks its windows; set carry_tcp = true (or --carry-tcp) to carry it, its windows unchecked as the kernel's flowtable would"
    }
}

/// The kernel's tables mirrored (the first load is a resync of an empty
/// mirror), then the interfaces: until they are in, every frame passes
/// (not ours).
fn first_sync(mirror: &mut Mirror<FastPath>, ifindexes: &[u32], names: &[String]) -> Result<()> {
    mirror.resync_with(|apply| route::dump_all_each(|c| apply(&c)))?;
    trim_heap();
    follow_netfilter(mirror);
    for (&idx, name) in ifindexes.iter().zip(names) {
        mirror.set_ipv6_enabled(idx, linerate_netlink::netconf::ipv6_enabled(name))?;
        mirror
            .add_ingress(idx)
            .with_context(|| format!("-i: interface {name}"))?;
    }
    linerate_router::follow::follow_tag_stripping(mirror, strips_tags);
    follow_tc(mirror);
    follow_xdp_features(mirror);
    Ok(())
}

/// The firewall's first reading, before the router says it is ready:
/// until it is in, a family netfilter sees goes to the kernel. The kernel
/// takes 15 s to dump a set of a million elements (its dump walks the set
/// from the start for each message): a minute at most. The interface
/// names it was read with, and what it said.
fn first_firewall_read(
    fw: &mut FwThread,
    mirror: &mut Mirror<FastPath>,
) -> (BTreeMap<u32, String>, FirewallSaid) {
    let fw_names = names_of(mirror);
    fw.reread(fw_names.clone());
    let mut fw_said = FirewallSaid::default();
    let first = Instant::now();
    while first.elapsed() < FIRST_FIREWALL_READ {
        if let Some(news) = fw.news() {
            fw_said.apply(mirror, news);
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    (fw_names, fw_said)
}

/// Whose links the router runs on.
enum Links {
    /// Its predecessor's, now running this program.
    Inherited(Vec<(XdpAttachment, bool)>),
    /// Its own: the predecessor could not hand its over and was stopped.
    Attached(Vec<(XdpAttachment, bool)>),
}

/// Puts this fast path's program on predecessor `p`'s links (`inherited`)
/// and lets it end; where that fails, stops it and attaches anew (the
/// kernel forwards meanwhile).
fn take_the_links(
    mirror: &Mirror<FastPath>,
    p: Predecessor,
    inherited: Vec<XdpAttachment>,
    opts: &RouteOptions,
) -> Result<Links> {
    let (pid, version, stored) = (p.offer.pid, p.offer.version.clone(), p.stored());
    match replace_programs(mirror.fast_path(), &inherited) {
        Ok(mb) => {
            let links = inherited.into_iter().zip(mb).collect();
            p.leave()?;
            tracing::info!(
                "took over the fast path of linerate {version} (pid {pid}){}",
                if stored {
                    ", left with the service manager"
                } else {
                    "; it has ended"
                }
            );
            Ok(Links::Inherited(links))
        }
        Err(e) => {
            tracing::warn!("{e:#}; linerate route (pid {pid}) is stopped and this one attaches anew: the kernel forwards meanwhile");
            drop(inherited);
            p.stop()?;
            Ok(Links::Attached(attach_all(mirror.fast_path(), opts)?))
        }
    }
}

/// Says where the router runs, and how much it mirrored.
fn say_attached(
    mirror: &Mirror<FastPath>,
    links: &[(XdpAttachment, bool)],
    interfaces: &[String],
    took_over: bool,
) {
    let (v4, v6) = mirror.routes();
    let multibuf: Vec<&str> = links
        .iter()
        .filter(|(_, mb)| *mb)
        .map(|(l, _)| l.ifname.as_str())
        .collect();
    tracing::info!(
        "{} {}{}; {v4} IPv4 and {v6} IPv6 prefixes mirrored",
        if took_over {
            "routing between"
        } else {
            "attached to"
        },
        interfaces.join(", "),
        if multibuf.is_empty() {
            String::new()
        } else {
            // Named: it costs the common frame more (docs/router.md).
            format!(
                " (multi-buffer program for the jumbo MTU of {})",
                multibuf.join(", ")
            )
        }
    );
}

/// The fast path's counters summed over the router's interfaces.
fn counters(mirror: &Mirror<FastPath>, ifindexes: &[u32]) -> Result<RouterCounters> {
    let mut sum = RouterCounters::default();
    for &i in ifindexes {
        sum.add(&mirror.fast_path().counters(i)?);
    }
    Ok(sum)
}

/// Leaves the fast path (its links and counters) in the service manager's
/// fd store for the service's next start; detached where it cannot.
fn leave_with_service_manager(
    mirror: &Mirror<FastPath>,
    links: &[(XdpAttachment, bool)],
) -> Result<Ended> {
    let fds: Vec<(String, std::os::fd::BorrowedFd)> = links
        .iter()
        .map(|(l, _)| (l.ifname.clone(), l.link_fd()))
        .collect();
    let stats = mirror.fast_path().stats_map_fd()?;
    Ok(
        match handover::store_in_service_manager(stats.as_fd(), &fds) {
            Ok(()) => Ended::Stored,
            Err(e) => {
                tracing::warn!("cannot leave the fast path with the service manager: {e:#}");
                Ended::Detached
            }
        },
    )
}

/// The running router: what the loop follows the kernel with. Its fields
/// drop in order: the firewall's thread ends before the fast path whose
/// arena it writes is unloaded.
struct Following {
    fw: FwThread,
    mirror: Mirror<FastPath>,
    monitor: Monitor,
    /// The interface names the firewall's ruleset was last read with
    /// (iifname and oifname compare them).
    fw_names: BTreeMap<u32, String>,
    fw_said: FirewallSaid,
    publish: Publisher,
    poller: Poller,
    /// The start of this second, and the counters at it.
    tick: Instant,
    last: RouterCounters,
    /// When FIB groups were last freed (reused once no reader can see them).
    freed_at: Option<Instant>,
    /// The router's interfaces and their MACs as last said.
    ingress: BTreeMap<u32, [u8; 6]>,
    resyncs: u64,
    /// Counts the loop's own reads of what the poller reads.
    generation: u64,
    ifindexes: Vec<u32>,
    /// Whether each link runs the single-buffer program for ports with
    /// VLAN devices (None: not yet suited to its port).
    vlan_entry: Vec<Option<bool>>,
}

impl Following {
    /// The loop, until `stop` or a successor: how it ended, and whether a
    /// successor that could not take over asked it to stop.
    fn follow(
        &mut self,
        opts: &RouteOptions,
        stop: &AtomicBool,
        offering: &Offering,
        links: &[(XdpAttachment, bool)],
        on_second: &mut impl FnMut(&Second),
    ) -> Result<(Ended, bool)> {
        self.suit_programs(links);
        while !stop.load(Ordering::Relaxed) {
            match offering.told() {
                Told::Nothing => {}
                Told::HandedOver(pid) => return Ok((Ended::HandedOver(pid), false)),
                Told::Stop(pid) => {
                    tracing::warn!("linerate route (pid {pid}) cannot take over and asked this one to end: detaching");
                    return Ok((Ended::Detached, true));
                }
            }
            let changed = self.apply_kernel_changes()?;
            if changed {
                self.suit_programs(links);
            }
            // iifname and oifname compare the names cached verdicts were
            // judged with.
            if changed && names_of(&self.mirror) != self.fw_names {
                self.fw_names = names_of(&self.mirror);
                self.fw.reread(self.fw_names.clone());
            }
            if let Some(news) = self.fw.news() {
                self.fw_said.apply(&mut self.mirror, news);
                self.publish.now(&self.mirror, self.fw_said.last.clone());
            }
            let second = self.tick.elapsed() >= Duration::from_secs(1);
            if changed || second {
                follow_ipv6_switches(&mut self.mirror);
            }
            if second {
                linerate_router::follow::follow_tag_stripping(&mut self.mirror, strips_tags);
            }
            self.apply_unnotified(second);
            if changed {
                report_ingress_changes(
                    &mut self.ingress,
                    self.mirror.ingress(),
                    &opts.interfaces,
                    &self.ifindexes,
                )?;
            }
            self.release_freed_groups(changed);
            if second {
                self.each_second(on_second)?;
            }
        }
        Ok((Ended::Detached, false))
    }

    /// Gives each link the single-buffer program its port's frames want
    /// (FastPath::program_for): the VLAN one once the port has VLAN
    /// devices, the other once it has none. A link on the multi-buffer
    /// program keeps it; one that cannot be changed keeps its program,
    /// which hands the frames that are not its to the other (slower, not
    /// wrong: said).
    fn suit_programs(&mut self, links: &[(XdpAttachment, bool)]) {
        let fp = self.mirror.fast_path();
        for ((link, multibuf), entry) in links.iter().zip(&mut self.vlan_entry) {
            let vlan = fp.has_vlan_devices(link.ifindex);
            if *multibuf || *entry == Some(vlan) {
                continue;
            }
            match fp.program_for(link.ifindex).and_then(|p| link.update(&p)) {
                Ok(()) => {
                    if entry.is_some() || vlan {
                        tracing::info!(
                            "{}: {}",
                            link.ifname,
                            if vlan {
                                "has VLAN devices: runs the program for tagged frames"
                            } else {
                                "has no VLAN device: runs the program for untagged frames"
                            }
                        );
                    }
                    *entry = Some(vlan);
                }
                Err(e) => {
                    tracing::warn!("{e:#}; its frames take the way of the other program");
                    *entry = Some(vlan);
                }
            }
        }
    }

    /// The kernel's notifications, applied; a full read of its tables
    /// where some were lost. Whether anything changed.
    fn apply_kernel_changes(&mut self) -> Result<bool> {
        match self.monitor.wait(Duration::from_millis(50)) {
            Ok(msgs) => {
                let read_at = Instant::now();
                // Stale at once, before anything else is read.
                if route::rereads(&msgs).netfilter && !self.fw.follows_nftables() {
                    self.fw.reread(names_of(&self.mirror));
                }
                if apply_notifications(&mut self.mirror, &msgs) {
                    self.generation += 1;
                }
                if !msgs.is_empty() {
                    self.publish.changes += msgs.len() as u64;
                    self.publish.last_change = Some(read_at.elapsed());
                }
                Ok(!msgs.is_empty())
            }
            Err(e) => {
                // Lost notifications: read everything again, and drop
                // what the kernel no longer has.
                tracing::warn!("{e:#}; resyncing");
                self.resyncs += 1;
                self.monitor = Monitor::open()?;
                if let Err(e) = self
                    .mirror
                    .resync_with(|apply| route::dump_all_each(|c| apply(&c)))
                {
                    tracing::warn!("{e:#}");
                }
                trim_heap();
                follow_netfilter(&mut self.mirror);
                follow_tc(&mut self.mirror);
                self.fw.reread(names_of(&self.mirror));
                self.generation += 1;
                Ok(true)
            }
        }
    }

    /// Legacy iptables tables and tcx programs come and go unnotified:
    /// asked for once a `second`, off this loop, and applied as they come.
    fn apply_unnotified(&mut self, second: bool) {
        if second {
            self.poller.ask(
                self.mirror.ingress().keys().copied().collect(),
                self.generation,
            );
        }
        if let Some(u) = self.poller.answer(self.generation) {
            apply_netfilter(&mut self.mirror, u.netfilter);
            apply_tc(&mut self.mirror, u.tc);
            if let Some(known) = u.xdp {
                apply_xdp_features(&mut self.mirror, known);
            }
        }
    }

    /// Freed FIB groups may be reused once every reader that saw them is
    /// done: XDP programs run in RCU read sections of nanoseconds.
    fn release_freed_groups(&mut self, changed: bool) {
        if changed && self.freed_at.is_none() {
            self.freed_at = Some(Instant::now());
        }
        if self
            .freed_at
            .is_some_and(|t| t.elapsed() > Duration::from_millis(100))
        {
            if let Err(e) = self.mirror.release_quarantine() {
                tracing::warn!("{e:#}");
            }
            self.freed_at = None;
        }
    }

    /// Once a second: the neighbours and bridges' entries used marked in
    /// the kernel, the second's counters handed on, what the metrics show
    /// published.
    fn each_second(&mut self, on_second: &mut impl FnMut(&Second)) -> Result<()> {
        self.poller.mark_used(self.mirror.neighbours_in_use());
        match self.mirror.fdb_in_use() {
            Ok(used) => self.poller.mark_fdb_used(used),
            Err(e) => tracing::warn!("{e:#}"),
        }
        let now = counters(&self.mirror, &self.ifindexes)?;
        let delta = now.since(&self.last);
        on_second(&Second {
            usec: self.tick.elapsed().as_micros() as u64,
            delta,
            resyncs: self.resyncs,
        });
        self.publish.resyncs = self.resyncs;
        self.publish.now(&self.mirror, self.fw_said.last.clone());
        (self.tick, self.last) = (Instant::now(), now);
        Ok(())
    }
}

/// The router already running under this record, if one answers, and the
/// fast path loaded to take its place: with its counters map when this
/// build counts as it does; otherwise it is stopped (detaching) first and
/// this one starts cold. Another set of interfaces is refused, with the
/// running router left as it is.
fn take_over_or_load(opts: &RouteOptions) -> Result<(FastPath, Option<Predecessor>)> {
    let stored = if opts.service_manager {
        handover::from_service_manager()?
    } else {
        None
    };
    let found = match stored {
        Some(p) => Some(p),
        None => handover::find(&opts.record)?,
    };
    let Some(p) = found else {
        return Ok((FastPath::load_with(opts.ipv6)?, None));
    };
    if p.offer.interfaces != opts.interfaces {
        bail!(
            "-i: linerate route (pid {}) routes between {} here; a new one takes it over only for the same interfaces: stop it first",
            p.offer.pid,
            p.offer.interfaces.join(", ")
        );
    }
    let why = match p.incompatible() {
        None => match FastPath::load_taking_over(opts.ipv6, p.stats_map.as_fd()) {
            Ok(fp) => return Ok((fp, Some(p))),
            Err(e) => format!("{e:#}"),
        },
        Some(why) => why,
    };
    let pid = p.offer.pid;
    tracing::warn!("cannot take over from pid {pid}: {why}; it is stopped and this one starts cold: the kernel forwards meanwhile");
    p.stop()?;
    Ok((FastPath::load_with(opts.ipv6)?, None))
}

/// Puts this fast path's program on the links another router made, one
/// link at a time (each frame meets one program or the other, each with
/// complete tables); whether each runs the multi-buffer program.
fn replace_programs(fp: &FastPath, links: &[XdpAttachment]) -> Result<Vec<bool>> {
    let multi = fp.multibuf_program()?;
    links
        .iter()
        .map(|l| l.update_sized(&fp.program_for(l.ifindex)?, &multi))
        .collect()
}

/// What the loop knows, handed to the metrics (crate::metrics): routes,
/// next hops and FIB memory once a second and with each firewall word;
/// the changes' count and delay as they come.
struct Publisher {
    status: crate::metrics::Status,
    changes: u64,
    last_change: Option<Duration>,
    resyncs: u64,
}

impl Publisher {
    fn at_start(&self, record: &linerate_dataplane::record::RouterRecord) {
        if let Ok(mut p) = self.status.lock() {
            p.stats_map_id = record.stats_map_id;
            p.rxq_map_id = record.rxq_map_id;
            p.interfaces = record.interfaces.clone();
        }
    }

    fn now<D: Dataplane>(&self, mirror: &Mirror<D>, firewall: Option<Result<FwNews, String>>) {
        let fibs = mirror
            .fibs()
            .into_iter()
            .map(|(ipv6, table, routes, bytes)| crate::metrics::FibStatus {
                ipv6,
                table,
                routes: routes as u64,
                bytes,
            })
            .collect();
        let Ok(mut p) = self.status.lock() else {
            return;
        };
        // Called from the first sync on.
        p.ready = true;
        p.fibs = fibs;
        p.nexthops = mirror.nexthops() as u64;
        p.overflows = mirror
            .overflows()
            .all()
            .into_iter()
            .map(|(t, n)| (t.name(), n))
            .collect();
        p.changes = self.changes;
        p.last_change = self.last_change;
        p.resyncs = self.resyncs;
        p.firewall = firewall;
    }
}

/// How long the router waits for the firewall's first reading of the
/// ruleset before it says it is ready (it goes on reading after).
const FIRST_FIREWALL_READ: Duration = Duration::from_secs(60);

/// The names of the router's interfaces, by index.
/// Whether port `name`'s driver strips VLAN tags (unknown: no).
fn strips_tags(name: &str) -> bool {
    linerate_host::ethtool::strips_vlan_tags(name).unwrap_or(false)
}

/// The names of the interfaces the router routes from: its own, and the
/// VLAN devices on them (what the firewall's iifname and oifname see).
fn names_of<D: Dataplane>(mirror: &Mirror<D>) -> BTreeMap<u32, String> {
    let mut names: BTreeMap<u32, String> = mirror.ingress_names().into_iter().collect();
    names.extend(mirror.vlan_names());
    names
}

/// What the firewall thread last said, to say only what changes.
#[derive(Default)]
struct FirewallSaid {
    last: Option<Result<FwNews, String>>,
}

impl FirewallSaid {
    /// Hands the chains the firewall judges to the mirror (the
    /// interfaces' flags follow), and says what changed.
    fn apply<D: Dataplane>(&mut self, mirror: &mut Mirror<D>, news: Result<FwNews, String>) {
        let covered = match &news {
            Ok(n) => n.covered.clone(),
            Err(_) => Default::default(),
        };
        let said = |n: &Result<FwNews, String>| match n {
            Ok(n) => Ok((n.covered.clone(), n.refused.clone(), n.unclassified.clone())),
            Err(e) => Err(e.clone()),
        };
        if self.last.as_ref().map(said) != Some(said(&news)) {
            match &news {
                Ok(n) => {
                    for (i, family) in ["IPv4", "IPv6"].iter().enumerate() {
                        if let Some(why) = &n.refused[i] {
                            tracing::warn!("the firewall cannot judge forwarded {family}: {why}; the kernel judges it");
                        } else if !n.covered[i].is_empty() {
                            let chains: Vec<&str> =
                                n.covered[i].iter().map(String::as_str).collect();
                            let new_flows = match &n.unclassified[i] {
                                None => "new flows judged in the fast path".to_string(),
                                Some(why) => format!(
                                    "new flows judged by the kernel until their verdict is cached: the classifier cannot hold the ruleset ({why})"
                                ),
                            };
                            tracing::info!(
                                "the firewall judges forwarded {family} by {} (generation {}, read in {} ms); {new_flows}",
                                chains.join(", "),
                                n.generation,
                                n.took.as_millis()
                            );
                        }
                    }
                }
                Err(e) => tracing::warn!(
                    "the nftables ruleset: {e}; the kernel judges what netfilter sees"
                ),
            }
        }
        self.last = Some(news);
        if let Err(e) = mirror.set_firewall(covered) {
            tracing::warn!("{e:#}");
        }
    }
}

/// Gives the allocator's free pages back to the system after a resync,
/// whose sets of what the dump showed (a million route identities on a
/// full table) are freed at its end: glibc's malloc keeps such pages
/// otherwise, and the router would hold them for good.
fn trim_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Says which of the router's interfaces changed address or went, from
/// what the mirror had (`before`, updated) to what it has; an error once
/// none is left, as there is nothing left to route between.
fn report_ingress_changes(
    before: &mut BTreeMap<u32, [u8; 6]>,
    now: &BTreeMap<u32, [u8; 6]>,
    names: &[String],
    ifindexes: &[u32],
) -> Result<()> {
    let name = |idx: u32| {
        ifindexes
            .iter()
            .position(|&i| i == idx)
            .map_or_else(|| format!("interface {idx}"), |p| names[p].clone())
    };
    for (&idx, mac) in before.iter() {
        match now.get(&idx) {
            None => tracing::info!(
                "{} is gone (deleted, or moved to another namespace): no longer routed",
                name(idx)
            ),
            Some(m) if m != mac => tracing::info!(
                "{} has a new address, {}: the fast path takes frames to it",
                name(idx),
                linerate_host::cmd::mac_text(m)
            ),
            Some(_) => {}
        }
    }
    before.clone_from(now);
    if now.is_empty() {
        bail!("every interface it routed between is gone");
    }
    Ok(())
}
