//! `linerate bench rule-churn`: how long a policy rule added or deleted in
//! the kernel takes to reach the fast path, and what tenants' tables cost
//! in memory.
//!
//! A lab's DUT runs linerate's router (on a thread in the DUT's namespace,
//! as route-churn's). Main holds a blackhole for the receiver's prefix,
//! table 100 a route to it; with `--table N` main also holds N more
//! routes (an Internet table), and with `--tenants T` tables 100 onwards
//! the same N, each looked up by a rule of its own the lab's traffic does
//! not match (so that each has a FIB in the fast path from the start);
//! with `--cold`, table 100 holds them but no rule looks it up until the
//! churned one. A rule sending the generator's
//! traffic to table 100 is then added and deleted `changes` times through
//! rtnetlink, each change acknowledged; right after the ack a prober
//! test-runs the XDP program attached to the DUT's ingress
//! (BPF_PROG_TEST_RUN) on a frame from the generator to the receiver until
//! its verdict is the new rules' (redirected once the rule is there,
//! passed to the kernel's blackhole once it is gone). Lag = that moment -
//! the ack: for that long a packet is still judged by the old rules. The
//! prober then probes for another millisecond: a verdict that flips back
//! would be a packet judged by a stale rule set after the new one was
//! seen (`flapped`). Shapes: `iif` (`iif dut0 lookup 100`: the
//! interface's tables as a list) and `from` (`from 198.18.0.0/16 lookup
//! 100`: the rule program).
use crate::follow::{
    frame_to, install_table, kernel_fib_kb, lab_with_fixed_receiver, resident_kb, Lag, RouterThread,
};
use anyhow::{anyhow, bail, Context, Result};
use linerate_bpf::loader;
use linerate_bpf::test_run::{self, XdpAction};
use linerate_host::clock::monotonic_ns;
use linerate_host::cmd;
use linerate_lab::topology::addr;
use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL,
    NLM_F_REQUEST,
};
use netlink_packet_route::rule::{RuleAction, RuleAttribute, RuleHeader, RuleMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsFd;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long a change may take to reach the fast path before it counts as
/// never seen.
const GIVE_UP: Duration = Duration::from_secs(10);
/// The rule's priority, and the tenant table it looks up.
const PRIORITY: u32 = 100;
const TABLE: u32 = 100;
/// The lab's prefixes (198.18.0.0/15), kept out of the generated tables.
const LAB: &[(u32, u8)] = &[(0xC612_0000, 15)];

/// Which rule the changes add and delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Shape {
    /// `iif dut0 lookup 100`.
    Iif,
    /// `from 198.18.0.0/16 lookup 100`.
    From,
}

impl Shape {
    pub const CHOICES: [(&'static str, Shape); 2] = [("iif", Shape::Iif), ("from", Shape::From)];
}

pub struct Options {
    pub changes: usize,
    pub shape: Shape,
    /// Routes in main and in each tenant's table beside the receiver's.
    pub table: usize,
    /// Tenants' tables holding `table` routes, looked up by rules (table
    /// 100 is the first; 0: table 100 holds the receiver's route alone).
    pub tenants: usize,
    /// With no tenants: table 100 holds `table` routes too, and no other
    /// rule looks it up, so that the first rule added brings a table the
    /// fast path must fill (the slowest change).
    pub cold: bool,
}

impl Options {
    pub fn check(&self) -> Result<()> {
        if self.changes == 0 || self.changes > 10_000 {
            bail!("--changes: 1 to 10000, got {}", self.changes);
        }
        if self.table > 2_000_000 {
            bail!("--table: at most 2000000 routes, got {}", self.table);
        }
        if self.cold && self.tenants > 0 {
            bail!("--cold: only without --tenants (a tenant's table is looked up from the start)");
        }
        if self.tenants > 5 {
            bail!(
                "--tenants: at most 5 (the fast path holds six tables beside main, one for the churned rule's), got {}",
                self.tenants
            );
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Phase {
    pub kind: &'static str,
    pub samples: usize,
    pub never: usize,
    /// Changes after which the verdict flipped back to the old rules'.
    pub flapped: usize,
    pub lag_ms: Lag,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub shape: Shape,
    pub table: usize,
    pub tenants: usize,
    /// The router's start on the tables: seconds, this process's memory
    /// beside the BPF maps', and the BPF maps mapped.
    pub startup_seconds: f64,
    pub control_plane_kb: u64,
    pub bpf_mapped_kb: u64,
    pub kernel_fib_kb: u64,
    pub add: Phase,
    pub delete: Phase,
    pub lag_ms: Lag,
}

/// The churned rule, added or deleted, as an rtnetlink request.
fn rule_message(seq: u32, add: bool, shape: Shape, iif: &str) -> Vec<u8> {
    let mut m = RuleMessage::default();
    m.header = RuleHeader {
        family: AddressFamily::Inet,
        table: TABLE as u8,
        action: RuleAction::ToTable,
        ..Default::default()
    };
    m.attributes = vec![
        RuleAttribute::Priority(PRIORITY),
        RuleAttribute::Table(TABLE),
    ];
    match shape {
        Shape::Iif => m.attributes.push(RuleAttribute::Iifname(iif.into())),
        Shape::From => {
            m.header.src_len = 16;
            m.attributes
                .push(RuleAttribute::Source(IpAddr::V4(Ipv4Addr::new(
                    198, 18, 0, 0,
                ))));
        }
    }
    let mut header = NetlinkHeader::default();
    header.sequence_number = seq;
    header.flags = NLM_F_REQUEST | NLM_F_ACK | if add { NLM_F_CREATE | NLM_F_EXCL } else { 0 };
    let payload = if add {
        RouteNetlinkMessage::NewRule(m)
    } else {
        RouteNetlinkMessage::DelRule(m)
    };
    let mut msg = NetlinkMessage::new(header, NetlinkPayload::from(payload));
    msg.finalize();
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.serialize(&mut buf);
    buf
}

/// Sends a request and waits for its ack; the ack's time.
fn request(sock: &Socket, req: &[u8], seq: u32) -> Result<u64> {
    sock.send(req, 0).context("sending a rule request")?;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = sock.recv(&mut &mut buf[..], 0)?;
        let at = monotonic_ns();
        for m in linerate_netlink::wire::messages(&buf[..n]) {
            let m = m?;
            if m.seq() != seq {
                continue;
            }
            return match m.error() {
                Some(0) => Ok(at),
                Some(e) => Err(anyhow!(
                    "the kernel refused the rule change: {}",
                    std::io::Error::from_raw_os_error(e.abs())
                )),
                None => bail!("an answer to a rule request that is no ack"),
            };
        }
    }
}

/// Probes until the verdict is `want` (the lag, in ns from `since`),
/// then for a millisecond more: whether it flipped back.
fn probe(
    prog: &std::os::fd::OwnedFd,
    ingress: u32,
    frame: &[u8],
    want: XdpAction,
    since: u64,
) -> Result<(Option<u64>, bool)> {
    let mut out = vec![0u8; 256];
    let start = Instant::now();
    let lag = loop {
        let r = test_run::run_xdp_on(prog.as_fd(), frame, &mut out, 1, Some(ingress))?;
        if r.verdict == want {
            break monotonic_ns().saturating_sub(since);
        }
        if start.elapsed() > GIVE_UP {
            return Ok((None, false));
        }
        std::thread::sleep(Duration::from_micros(100));
    };
    let held = Instant::now();
    while held.elapsed() < Duration::from_millis(1) {
        let r = test_run::run_xdp_on(prog.as_fd(), frame, &mut out, 1, Some(ingress))?;
        if r.verdict != want {
            return Ok((Some(lag), true));
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    Ok((Some(lag), false))
}

/// What the changes of each kind (add, delete) came to.
struct Churned {
    lags: [Vec<u64>; 2],
    never: [usize; 2],
    flapped: [usize; 2],
}

/// Adds and deletes the rule `changes` times, probing after each; the
/// calling thread goes into `netns` for good.
fn churn(
    netns: &str,
    dut_in: &str,
    changes: usize,
    shape: Shape,
    stop: &AtomicBool,
) -> Result<Churned> {
    linerate_host::netns::enter_for_good(netns)?;
    let ingress = loader::ifindex(dut_in)?;
    let prog = loader::attached_xdp_program(ingress)?;
    // (Not the receiver itself: main has a host route to it.)
    let frame = frame_to(IpAddr::V4(Ipv4Addr::new(198, 19, 5, 1)))?;
    let mut sock = Socket::new(NETLINK_ROUTE)?;
    sock.bind_auto()?;
    sock.connect(&SocketAddr::new(0, 0))?;
    let mut c = Churned {
        lags: [Vec::new(), Vec::new()],
        never: [0; 2],
        flapped: [0; 2],
    };
    let mut seq = 0;
    for _ in 0..changes {
        for (k, add) in [(0, true), (1, false)] {
            if stop.load(Ordering::Relaxed) {
                bail!("stopped");
            }
            seq += 1;
            let acked = request(&sock, &rule_message(seq, add, shape, dut_in), seq)?;
            let want = if add {
                XdpAction::Redirect
            } else {
                XdpAction::Pass
            };
            match probe(&prog, ingress, &frame, want, acked)? {
                (Some(lag), flap) => {
                    c.lags[k].push(lag);
                    c.flapped[k] += flap as usize;
                }
                (None, _) => c.never[k] += 1,
            }
            // Changes a few milliseconds apart, as an operator's or a
            // daemon's are.
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    Ok(c)
}

pub fn run(o: &Options, stop: &AtomicBool, mut say: impl FnMut(&str)) -> Result<Report> {
    o.check()?;
    let name = format!("lrrule{}", std::process::id() % 100_000);
    let lab = lab_with_fixed_receiver(&name)?;
    let ns = lab.namespaces();
    let ifs = lab.interfaces();
    let dut = ns.dut.clone();
    let ip = |args: &[&str]| cmd::ip(Some(&dut), args).map(drop);
    let result = (|| -> Result<Report> {
        // The receiver's prefix: main's blackhole, table 100's route.
        ip(&["route", "replace", "blackhole", "198.19.0.0/16"])?;
        ip(&[
            "route",
            "add",
            "198.19.0.0/16",
            "via",
            addr::RECV_V4,
            "dev",
            &ifs.dut_out,
            "table",
            "100",
        ])?;
        if o.table > 0 {
            say(&format!("installing {} routes in main", o.table));
            install_table(&dut, o.table, 254, addr::RECV_V4, &ifs.dut_out, LAB)?;
        }
        if o.table > 0 && (o.tenants > 0 || o.cold) {
            say(&format!("installing {} routes in table 100", o.table));
            install_table(&dut, o.table, TABLE, addr::RECV_V4, &ifs.dut_out, LAB)?;
        }
        // The other tenants' tables, each looked up by a rule the lab's
        // traffic never matches.
        for t in 1..o.tenants {
            let id = (TABLE + t as u32).to_string();
            say(&format!("installing {} routes in table {id}", o.table));
            install_table(
                &dut,
                o.table,
                TABLE + t as u32,
                addr::RECV_V4,
                &ifs.dut_out,
                LAB,
            )?;
            let pref = (PRIORITY + 10 + t as u32).to_string();
            ip(&[
                "rule",
                "add",
                "pref",
                &pref,
                "iif",
                &ifs.dut_out,
                "lookup",
                &id,
            ])?;
        }
        // With tenants, table 100 is looked up all along (a rule the lab's
        // traffic does not match): its FIB stays, and the churned rule
        // changes the walk alone.
        if o.tenants > 0 {
            ip(&[
                "rule",
                "add",
                "pref",
                "120",
                "iif",
                &ifs.dut_out,
                "lookup",
                "100",
            ])?;
        }
        let fib_kb = kernel_fib_kb(&dut)?;
        let (all0, bpf0) = resident_kb()?;
        let started = Instant::now();
        let router = RouterThread::spawn(
            &dut,
            vec![ifs.dut_in.clone(), ifs.dut_out.clone()],
            &name,
            None,
        )?;
        let measured = (|| -> Result<Report> {
            router.wait_ready(Duration::from_secs(300))?;
            let startup_seconds = started.elapsed().as_secs_f64();
            let (all, bpf) = resident_kb()?;
            say(&format!("the router started in {startup_seconds:.2} s"));
            let (dut, dut_in) = (dut.clone(), ifs.dut_in.clone());
            let (changes, shape) = (o.changes, o.shape);
            // The changes and the probes from a thread in the DUT's
            // namespace.
            let churn = std::thread::scope(|sc| {
                sc.spawn(|| churn(&dut, &dut_in, changes, shape, stop))
                    .join()
                    .map_err(|_| anyhow!("the churn thread panicked"))?
            });
            let Churned {
                lags,
                never,
                flapped,
            } = churn?;
            let phase = |k: usize, kind| Phase {
                kind,
                samples: lags[k].len(),
                never: never[k],
                flapped: flapped[k],
                lag_ms: Lag::of(lags[k].clone()),
            };
            Ok(Report {
                shape: o.shape,
                table: o.table,
                tenants: o.tenants,
                startup_seconds,
                control_plane_kb: (all - bpf).saturating_sub(all0 - bpf0),
                bpf_mapped_kb: bpf.saturating_sub(bpf0),
                kernel_fib_kb: fib_kb,
                add: phase(0, "add"),
                delete: phase(1, "delete"),
                lag_ms: Lag::of(lags.concat()),
            })
        })();
        let stopped = router.stop();
        let r = measured?;
        stopped?;
        Ok(r)
    })();
    lab.down()?;
    result
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let notes = [
            (self.never, "never followed"),
            (self.flapped, "flapped back"),
        ];
        write!(
            f,
            "{:<6} fast path {}",
            self.kind,
            self.lag_ms.said(self.samples, &notes)
        )
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |kb: u64| kb as f64 / 1024.0;
        writeln!(
            f,
            "rule `{}` on tables of {} routes ({} tenants' tables): start-up {:.2} s, control plane {:.1} MiB, BPF maps mapped {:.1} MiB; the kernel's main FIB {:.1} MiB",
            match self.shape {
                Shape::Iif => "iif dut0 lookup 100",
                Shape::From => "from 198.18.0.0/16 lookup 100",
            },
            self.table,
            self.tenants,
            self.startup_seconds,
            mib(self.control_plane_kb),
            mib(self.bpf_mapped_kb),
            mib(self.kernel_fib_kb)
        )?;
        writeln!(f, "{}", self.add)?;
        write!(f, "{}", self.delete)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The requests decode back to the rule: priority, table, selector,
    /// and the flags of an add that must create.
    #[test]
    fn rule_requests_are_what_the_kernel_parses() {
        for (shape, add) in [(Shape::Iif, true), (Shape::From, false)] {
            let b = rule_message(9, add, shape, "dut0");
            let m = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&b).unwrap();
            assert_eq!(m.header.sequence_number, 9);
            assert_ne!(m.header.flags & NLM_F_ACK, 0);
            let r = match (m.payload, add) {
                (NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRule(r)), true) => r,
                (NetlinkPayload::InnerMessage(RouteNetlinkMessage::DelRule(r)), false) => r,
                (p, _) => panic!("{p:?}"),
            };
            assert!(r.attributes.contains(&RuleAttribute::Priority(PRIORITY)));
            assert!(r.attributes.contains(&RuleAttribute::Table(TABLE)));
            match shape {
                Shape::Iif => assert!(r
                    .attributes
                    .contains(&RuleAttribute::Iifname("dut0".into()))),
                Shape::From => assert_eq!(r.header.src_len, 16),
            }
        }
    }
}
