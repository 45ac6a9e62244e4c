//! The firewall's thread in `linerate route`: it reads the kernel's
//! nftables ruleset when told it changed, publishes each generation
//! (linerate_firewall::compile), learns the misses the fast path reports, and keeps
//! the fast path's rule counts by rule across generations. It is the only
//! writer of the firewall's maps. It follows nf_tables' notifications
//! itself (crate::follow): transactions that only add or remove elements
//! of sets the ruleset names, or rules, are applied in place (no re-read:
//! elements change often and sets may hold millions; nft takes 0.3 s of
//! CPU to list 10,000 rules), anything else has the ruleset read again.
//! The loop that follows the routes tells it when the router's interfaces
//! are renamed or notifications were lost (`reread`), and hears back
//! which chains the fast path now judges (`news`), which decide the
//! interfaces' IFACE_FIREWALL flags.
//!
//! A change is built beside the generation in force: the ruleset read
//! (or the elements and rules applied), compiled with its classifiers, and
//! published as the next generation in one step, as the kernel's own
//! transaction gives a packet the old ruleset or the new. Until then the
//! old generation judges, its cached verdicts and its classifiers alike;
//! after, every cached verdict is stale and the new classifiers judge each
//! key at the fast path's speed. No frame is judged by a mix, or by
//! nobody. A ruleset that cannot be read leaves everything to the kernel.
use crate::follow::{self, Notifications};
use crate::monitor::RuleMonitor;
use anyhow::{Context, Result};
use linerate_bpf::layout::Pod;
use linerate_dataplane::fw_maps::FwMaps;
use linerate_dataplane::layout::{FwMiss, FwRuleCounter, FwSlot};
use linerate_dataplane::record::{FirewallRecord, RuleCount};
use linerate_firewall::carry;
use linerate_firewall::compile::{self, ChainRules, Compiled, RuleRef};
use linerate_netlink::nft_events::ElementChange;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::time::{Duration, Instant};

/// What the loop hears back after a ruleset was read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FwNews {
    /// Per family (`[ipv6]`), the base chains the fast path judges, named
    /// as linerate_netlink::netfilter names hooks.
    pub covered: [BTreeSet<String>; 2],
    /// Per family, why the fast path judges none of it (None: it does, or
    /// nothing filters it).
    pub refused: [Option<String>; 2],
    /// Per family the fast path judges, why it has no classifier (None:
    /// it has one, and judges a new flow's first packet itself): its new
    /// flows then go to the kernel until their verdict is cached.
    pub unclassified: [Option<String>; 2],
    /// The generation published, and how long from the word of a change
    /// to its publication.
    pub generation: u32,
    pub took: Duration,
}

/// Rule counts of the fast path, by rule, over every generation so far.
pub type RuleCounts = BTreeMap<RuleRef, FwRuleCounter>;

enum Job {
    /// The ruleset (or the interface names) changed: read it again.
    Reread(BTreeMap<u32, String>),
}

pub struct FwThread {
    jobs: Option<Sender<Job>>,
    wake: OwnedFd,
    news: Receiver<Result<FwNews, String>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The record the thread keeps (linerate_dataplane::record::write_firewall).
    record: Option<String>,
    follows: bool,
}

impl FwThread {
    /// Starts the thread on the fast path's firewall maps; it inherits the
    /// caller's network namespace, keeps router `record`'s firewall record
    /// (linerate_dataplane::record), and ends when this is dropped. `ct`: the fast path
    /// finds connections (fw_state's FW_CT_ON, linerate_dataplane::ct_cache), so that
    /// rulesets reading them are compiled.
    pub fn start(maps: FwMaps, record: Option<String>, ct: bool) -> Result<FwThread> {
        // SAFETY: eventfd has no preconditions; checked below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context("eventfd");
        }
        // SAFETY: a new fd, owned here.
        let wake = unsafe { OwnedFd::from_raw_fd(fd) };
        let their_wake = wake.try_clone()?;
        let (jobs, their_jobs) = channel();
        let (their_news, news) = channel();
        let their_record = record.clone();
        // nf_tables' notifications: set elements are applied as they come,
        // anything else has the ruleset read again.
        let notices =
            linerate_netlink::socket::socket_on(netlink_sys::protocols::NETLINK_NETFILTER, 0)
                .ok()
                .filter(|s| {
                    s.add_membership(linerate_netlink::netfilter::NFNLGRP_NFTABLES)
                        .is_ok()
                });
        if let Some(s) = &notices {
            linerate_netlink::socket::force_rcvbuf(s, linerate_netlink::socket::NOTIFY_RCVBUF);
        }
        let follows = notices.is_some();
        let thread = std::thread::Builder::new()
            .name("linerate-fw".into())
            .spawn(move || {
                // It fails only before it publishes anything: the fast
                // path judges nothing, the kernel everything.
                let told = their_news.clone();
                if let Err(e) = run(
                    maps,
                    ct,
                    notices,
                    their_wake,
                    their_jobs,
                    their_news,
                    their_record,
                ) {
                    let _ = told.send(Err(format!("the firewall thread could not start: {e:#}")));
                }
            })?;
        Ok(FwThread {
            jobs: Some(jobs),
            wake,
            news,
            thread: Some(thread),
            record,
            follows,
        })
    }

    fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: 8 bytes to an eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    /// Leaves the firewall record in place when dropped (a successor
    /// keeps it now).
    pub fn keep_record(&mut self) {
        self.record = None;
    }

    /// Whether the thread follows nf_tables' notifications itself (else
    /// the caller must say when the ruleset changed: `reread`).
    pub fn follows_nftables(&self) -> bool {
        self.follows
    }

    /// Tells the thread the ruleset or the names of the router's
    /// interfaces changed: everything cached is stale at once, and the
    /// ruleset is read again.
    pub fn reread(&self, names: BTreeMap<u32, String>) {
        if let Some(jobs) = &self.jobs {
            if jobs.send(Job::Reread(names)).is_ok() {
                self.wake();
            }
        }
    }

    /// What the thread made of the last ruleset read, if it finished one
    /// since the last call (an error: it could not read it; nothing is
    /// judged in the fast path until a read succeeds).
    pub fn news(&self) -> Option<Result<FwNews, String>> {
        let mut last = None;
        while let Ok(n) = self.news.try_recv() {
            last = Some(n);
        }
        last
    }
}

impl Drop for FwThread {
    fn drop(&mut self) {
        // The thread sees the channel closed when it wakes, and ends.
        self.jobs = None;
        self.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(r) = &self.record {
            let _ = std::fs::remove_file(linerate_dataplane::record::firewall_path(r));
        }
    }
}

/// The thread's state: the generation in force and what it learned.
struct Learner {
    maps: FwMaps,
    compiled: Compiled,
    /// Rule counter ids written into this generation's slots.
    used: BTreeSet<u16>,
    /// Counts of earlier generations, by rule.
    before: RuleCounts,
    evict: bool,
    /// Whole reads of the ruleset, and elements and rules changed in place.
    reads: u64,
    elements_changed: u64,
    rules_changed: u64,
    /// The thread's own time on the notifications of transactions whose
    /// element changes it applied: receiving, decoding, applying,
    /// publishing.
    elements_busy: Duration,
    /// Cached verdicts carried into the generation after theirs, and
    /// those the budget left to be learned from their misses.
    carried: u64,
    carry_left: u64,
}

/// How long the thread judges cached keys again before it publishes a
/// generation its cache alone judges: the publication waits that long at
/// most (a key takes the evaluator's walk of the ruleset: 10,000 rules
/// and a set of a million elements about 0.25 ms, some 2,000 keys).
const CARRY_BUDGET: Duration = Duration::from_millis(500);

impl Learner {
    fn next_generation(&self) -> u32 {
        self.compiled.generation.wrapping_add(1).max(1)
    }

    /// Makes every cached verdict stale: the kernel judges until the next
    /// publication. The counts so far are kept for it.
    fn invalidate(&mut self) {
        let nothing = Compiled::nothing(self.next_generation());
        self.publish(nothing);
    }

    /// Publishes ruleset generation `c`: counts are kept for the rules it
    /// still has, and forgotten for the others (as the kernel forgets a
    /// deleted rule's counter).
    fn publish_ruleset(&mut self, c: Compiled) {
        let rules = c.rules();
        self.publish(c);
        self.before.retain(|r, _| rules.contains(r));
    }

    /// Publishes `c`, after moving the counts of the generation it
    /// replaces to `before` (its slots are stale from here on: nothing
    /// counts into them any more, past frames in flight).
    fn publish(&mut self, c: Compiled) {
        let (slots, carried) = self.carry(self.compiled.generation, &c);
        compile::publish_carrying(&mut self.maps, &c, &slots);
        // The program counts at every counter its classifiers name, and
        // at those of the verdicts carried.
        let counted_by_program = c.classifier_counters();
        let old = std::mem::replace(&mut self.compiled, c);
        let used = std::mem::replace(&mut self.used, counted_by_program);
        self.used.extend(carried);
        for id in used {
            if let (Some(rule), Ok(n)) = (old.rule_of(id), self.maps.counter(id)) {
                let e = self.before.entry(rule).or_default();
                e.packets += n.packets;
                e.bytes += n.bytes;
            }
            if let Err(e) = self.maps.clear_counter(id) {
                tracing::warn!("the firewall's counter {id}: {e:#}");
            }
        }
    }

    /// Applies a batch of transactions to the generation in force, in
    /// place, and publishes it as the next. Rule counter ids follow the
    /// rules' places in their chains: where rules moved, what each id
    /// counted is kept by the rule it stood for, as [`Learner::publish`]
    /// does.
    fn apply(&mut self, elements: &[ElementChange], chains: &[ChainRules]) -> Result<(), String> {
        let next = self.next_generation();
        // Only rules moving moves what a counter id stands for.
        let stood_for: Vec<(u16, Option<RuleRef>)> = match chains.is_empty() {
            true => Vec::new(),
            false => self
                .used
                .iter()
                .map(|&id| (id, self.compiled.rule_of(id)))
                .collect(),
        };
        let current = self.compiled.generation;
        if !self
            .compiled
            .apply(next, elements, chains, &linerate_firewall::read::if_index)?
        {
            return Ok(());
        }
        let compiled = std::mem::take(&mut self.compiled);
        let (slots, carried) = self.carry(current, &compiled);
        self.compiled = compiled;
        // What changed is of no use past the carrying (and may be large).
        self.compiled.since = Default::default();
        compile::publish_carrying(&mut self.maps, &self.compiled, &slots);
        if chains.is_empty() {
            self.used.extend(carried);
            return Ok(());
        }
        for (id, rule) in stood_for {
            if let (Some(rule), Ok(n)) = (rule, self.maps.counter(id)) {
                let e = self.before.entry(rule).or_default();
                e.packets += n.packets;
                e.bytes += n.bytes;
            }
            if let Err(e) = self.maps.clear_counter(id) {
                tracing::warn!("the firewall's counter {id}: {e:#}");
            }
        }
        self.used = self.compiled.classifier_counters();
        self.used.extend(carried);
        if !self.before.is_empty() {
            let rules = self.compiled.rules();
            self.before.retain(|r, _| rules.contains(r));
        }
        Ok(())
    }

    /// The verdicts cached under `current` that `next` would otherwise
    /// leave to the kernel (linerate_firewall::carry), to be published
    /// with it, and the rule counter ids they count at.
    fn carry(&mut self, current: u32, next: &Compiled) -> (Vec<(u32, FwSlot)>, BTreeSet<u16>) {
        let c = carry::carried(&self.maps, current, next, CARRY_BUDGET);
        let ids = c
            .writes
            .iter()
            .flat_map(|(_, s)| s.counters[..s.counters_n as usize].iter().copied())
            .collect();
        self.carried += c.writes.len() as u64;
        self.carry_left += c.left as u64;
        if c.keys > 0 {
            tracing::debug!(
                "generation {}: {} cached verdicts carried ({} as they were), {} not, {} left to their misses",
                next.generation,
                c.writes.len(),
                c.kept,
                c.dropped,
                c.left
            );
        }
        (c.writes, ids)
    }

    fn learn(&mut self, m: &FwMiss) {
        if m.generation != self.compiled.generation {
            return;
        }
        self.evict = !self.evict;
        if let Some(i) = compile::learn(&mut self.maps, &self.compiled, &m.key.flow, self.evict) {
            let s = linerate_dataplane::fw_cache::FwTable::slot(&self.maps, i);
            self.used
                .extend(s.counters[..s.counters_n as usize].iter().copied());
        }
    }

    /// Counts so far: earlier generations' and this one's.
    fn counts(&self) -> RuleCounts {
        let mut all = self.before.clone();
        for &id in &self.used {
            if let (Some(rule), Ok(n)) = (self.compiled.rule_of(id), self.maps.counter(id)) {
                let e = all.entry(rule).or_default();
                e.packets += n.packets;
                e.bytes += n.bytes;
            }
        }
        all
    }
}

/// How often the record's counts are brought up to date while they move.
const RECORD_EVERY: Duration = Duration::from_millis(200);

fn run(
    maps: FwMaps,
    ct: bool,
    notices: Option<netlink_sys::Socket>,
    wake: OwnedFd,
    jobs: Receiver<Job>,
    news: Sender<Result<FwNews, String>>,
    record: Option<String>,
) -> Result<()> {
    let ring_map = libbpf_rs::MapHandle::try_from(maps.misses())?;
    let generation = maps.generation();
    let mut l = Learner {
        maps,
        compiled: Compiled::nothing(generation),
        used: BTreeSet::new(),
        before: RuleCounts::new(),
        evict: false,
        reads: 0,
        elements_changed: 0,
        rules_changed: 0,
        elements_busy: Duration::ZERO,
        carried: 0,
        carry_left: 0,
    };
    let misses: RefCell<Vec<FwMiss>> = RefCell::new(Vec::new());
    let mut b = libbpf_rs::RingBufferBuilder::new();
    b.add(&ring_map, |d: &[u8]| {
        if let Some(m) = FwMiss::from_bytes(d) {
            misses.borrow_mut().push(m);
        }
        0
    })?;
    let ring = b.build()?;
    let mut tick = Instant::now();
    let mut written = FirewallRecord::default();
    let mut last_news = FwNews::default();
    let keep_record = |l: &Learner, n: &FwNews, written: &mut FirewallRecord| {
        let Some(name) = &record else { return };
        let rec = record_of(l, n);
        if rec != *written {
            if let Err(e) = linerate_dataplane::record::write_firewall(name, &rec) {
                tracing::warn!("{e:#}");
            }
            *written = rec;
        }
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut names = BTreeMap::new();
    // The rules nft prints as they are added: a rule change is applied in
    // place with them (without it, the ruleset is read again).
    let mut monitor = notices.as_ref().and_then(|_| match RuleMonitor::start() {
        Ok(m) => Some(m),
        Err(e) => {
            tracing::info!("rule changes have the ruleset read again: {e:#}");
            None
        }
    });
    let mut notified = Notifications::default();
    loop {
        let fd = |fd: i32| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let mut pfd = [
            fd(ring.epoll_fd()),
            fd(wake.as_raw_fd()),
            fd(notices.as_ref().map_or(-1, |s| s.as_raw_fd())),
            fd(monitor.as_ref().map_or(-1, RuleMonitor::fd)),
        ];
        // SAFETY: four pollfds (a negative fd is ignored).
        unsafe { libc::poll(pfd.as_mut_ptr(), 4, 1000) };
        if let Some(m) = &mut monitor {
            m.read();
        }
        let mut reread = false;
        if pfd[1].revents != 0 {
            let mut b = [0u8; 8];
            // SAFETY: reads the eventfd's counter into 8 bytes.
            unsafe { libc::read(wake.as_raw_fd(), b.as_mut_ptr().cast(), 8) };
            // Every reread queued collapses into one, with the last names.
            loop {
                match jobs.try_recv() {
                    Ok(Job::Reread(n)) => {
                        names = n;
                        reread = true;
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return Ok(()),
                }
            }
        }
        if let (Some(sock), true) = (&notices, pfd[2].revents != 0) {
            let since = Instant::now();
            loop {
                let n = match sock.recv(&mut &mut buf[..], libc::MSG_DONTWAIT) {
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    // Lost notifications (ENOBUFS): read it all again.
                    Err(_) => {
                        l.invalidate();
                        reread = true;
                        notified.clear();
                        break;
                    }
                };
                for m in linerate_netlink::wire::messages(&buf[..n]) {
                    notified.take(
                        m.map_err(anyhow::Error::from)
                            .and_then(|m| linerate_netlink::nft_events::event(m.bytes())),
                    );
                }
            }
            notified.committed.busy += since.elapsed();
        }
        if let (false, Some((generation, b))) = (reread, notified.take_committed()) {
            let started = Instant::now();
            let refused = last_news
                .refused
                .iter()
                .flatten()
                .next()
                .map(String::as_str);
            let applied = follow::in_place(&l.compiled, &b, generation, monitor.as_mut(), refused)
                .and_then(|chains| l.apply(&b.elements, &chains).map_err(Some));
            match applied {
                Ok(()) => {
                    l.elements_changed += b.element_changes() as u64;
                    l.rules_changed += b.rule_changes() as u64;
                    if b.rules.is_empty() {
                        l.elements_busy += b.busy + started.elapsed();
                    }
                    last_news.generation = l.compiled.generation;
                    last_news.unclassified = l.compiled.unclassified();
                    last_news.took = started.elapsed();
                    // The flows the new generation lacks go to the
                    // kernel until learned: learned first.
                    learn_misses(&ring, &misses, &mut l);
                    keep_record(&l, &last_news, &mut written);
                }
                Err(why) => {
                    if let Some(why) = why {
                        tracing::info!("the firewall reads the ruleset again: {why}");
                    }
                    reread = true;
                }
            }
            // A batch of a million elements takes longer to free (0.15 s)
            // than a flow's misses may wait to be learned: freed aside
            // (here, if no thread can be made).
            if b.element_changes() > FREE_ASIDE {
                let aside = std::thread::Builder::new().name("lr-fw-free".into());
                let _ = aside.spawn(move || drop(b));
            }
        }
        if reread {
            notified.clear();
            let started = Instant::now();
            // A table made again reuses handles: what nft printed before
            // the read is not to be taken for a later rule's.
            if let Some(m) = &mut monitor {
                m.forget();
            }
            // The generation in force judges until the next is whole, as
            // the kernel's transaction gives a packet the old ruleset or
            // the new: the cache's entries and the classifier stay, and
            // the fast path keeps its speed through the change.
            l.reads += 1;
            let answer = match linerate_firewall::read::read_current_with(&|t, s| {
                linerate_netlink::nft_elements::dump(t, s)
            }) {
                Ok(rs) => {
                    let (c, refused) = Compiled::new(l.next_generation(), &rs, names.clone(), ct);
                    let covered = c.covered();
                    let unclassified = c.unclassified();
                    let generation = c.generation;
                    l.publish_ruleset(c);
                    last_news = FwNews {
                        covered,
                        refused,
                        unclassified,
                        generation,
                        took: started.elapsed(),
                    };
                    Ok(last_news.clone())
                }
                Err(e) => {
                    // Unread, the ruleset is the kernel's alone.
                    l.invalidate();
                    last_news = FwNews {
                        generation: l.compiled.generation,
                        ..Default::default()
                    };
                    Err(format!("{e:#}"))
                }
            };
            keep_record(&l, &last_news, &mut written);
            if news.send(answer).is_err() {
                return Ok(());
            }
        }
        learn_misses(&ring, &misses, &mut l);
        if tick.elapsed() >= RECORD_EVERY {
            keep_record(&l, &last_news, &mut written);
            tick = Instant::now();
        }
    }
}

/// Element changes in a batch past which it is freed on a thread of its
/// own.
const FREE_ASIDE: usize = 10_000;

/// Learns the misses the program reported.
fn learn_misses(ring: &libbpf_rs::RingBuffer, misses: &RefCell<Vec<FwMiss>>, l: &mut Learner) {
    // A failed read of the ring loses reports, not verdicts: those flows
    // go on through the kernel until they miss again.
    if let Err(e) = ring.consume() {
        tracing::warn!("the firewall's misses: {e:#}");
    }
    for m in misses.borrow_mut().drain(..) {
        l.learn(&m);
    }
}

/// The record of what the thread judges and counted.
fn record_of(l: &Learner, n: &FwNews) -> FirewallRecord {
    FirewallRecord {
        generation: l.compiled.generation,
        judged: n.covered.clone().map(|c| c.into_iter().collect()),
        refused: n.refused.clone(),
        rules: l
            .counts()
            .into_iter()
            .map(|(r, c)| RuleCount {
                ipv6: r.ipv6,
                table: r.table,
                table_handle: r.table_handle,
                chain: r.chain,
                handle: r.handle,
                packets: c.packets,
                bytes: c.bytes,
            })
            .collect(),
        reads: l.reads,
        elements_changed: l.elements_changed,
        elements_busy_us: l.elements_busy.as_micros() as u64,
        rules_changed: l.rules_changed,
        verdicts_carried: l.carried,
        verdicts_left: l.carry_left,
    }
}
