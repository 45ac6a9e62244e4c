//! Trials in the lab: the generator in the gen namespace, the receiver in
//! the recv namespace, pkt-gen style per-second lines into a log. As a
//! `search::Dut`, a trial offers a paced load; an overload run offers all
//! the generator can.
use anyhow::Result;
use linerate_search::Measurement;
use linerate_traffic::measure::{run_trial, ReceiverMode, TrialResult, TrialSetup};
use linerate_traffic::profile::{Sender, Traffic};
use linerate_traffic::tcp::{TcpPhase, TcpRun};
use linerate_traffic::units::rate_line;
use std::sync::atomic::AtomicBool;

/// The generator may fall this far short of a requested rate before the
/// trial is invalid (its pacing holds within 0.4% here: docs/lab.md).
pub const GENERATOR_TOLERANCE: f64 = 0.01;

/// Where the traffic goes and what it is.
#[derive(Clone, Debug)]
pub struct Path {
    pub gen_netns: String,
    /// The generator's interface, MACs and CPU.
    pub sender: Sender,
    /// Send from these CPUs instead of the sender's one (a multi-queue
    /// DUT: a veth puts an XDP-sent frame on the queue of the sending CPU).
    pub gen_cpus: Vec<usize>,
    pub recv_netns: String,
    pub recv_iface: String,
}

/// Who runs the generator and the receiver.
pub enum Runner {
    /// This process, in the local lab's namespaces.
    InProcess { path: Path, traffic: Traffic },
    /// `linerate gen` and `linerate recv` on the lab's hosts.
    Commands {
        path: crate::command_trial::CommandPath,
        profile: linerate_traffic::profile::Profile,
    },
}

pub struct LabTrials<'a> {
    pub runner: Runner,
    pub stop: &'a AtomicBool,
    /// Per-second lines of every trial, in pkt-gen's format.
    pub log: String,
    /// Every trial's full result.
    pub results: Vec<TrialResult>,
    pub receiver: ReceiverMode,
    /// On hosts: each generator's part of the last trial.
    pub generators: Vec<crate::command_trial::GeneratorRun>,
    /// A TCP profile: the segment the next trial sends of each connection,
    /// and where its data starts (each trial goes on from the last).
    pub tcp: Option<TcpRun>,
    /// The same for each other part of a mix.
    pub mix_tcp: Vec<Option<TcpRun>>,
}

impl<'a> LabTrials<'a> {
    /// Trials of `runner`'s traffic. A TCP profile's are answered whatever
    /// `receiver` says: the answering receiver is its connections' peer,
    /// whose acknowledgements keep the data in the window a DUT's
    /// conntrack allows.
    pub fn new(runner: Runner, receiver: ReceiverMode, stop: &'a AtomicBool) -> Self {
        let traffic = match &runner {
            Runner::InProcess { traffic, .. } => Some(traffic.clone()),
            Runner::Commands { profile, .. } => profile.check().ok(),
        };
        let tcp = traffic.as_ref().and_then(|t| t.tcp_run());
        let mix_tcp: Vec<Option<TcpRun>> = traffic
            .iter()
            .flat_map(|t| t.mix.iter().map(|p| p.tcp_run()))
            .collect();
        let any_tcp = tcp.is_some() || mix_tcp.iter().any(Option::is_some);
        LabTrials {
            runner,
            stop,
            log: String::new(),
            results: Vec::new(),
            receiver: if any_tcp {
                ReceiverMode::Answer
            } else {
                receiver
            },
            generators: Vec::new(),
            tcp,
            mix_tcp,
        }
    }

    /// One trial at `rate_pps` (None: as fast as the generator goes).
    pub fn run(&mut self, rate_pps: Option<f64>, seconds: f64) -> Result<TrialResult> {
        let rate = rate_pps.map(|r| r.round().max(1.0) as u64);
        self.log.push_str(&match rate_pps {
            Some(r) => format!(
                "# trial {}: -R {:.0} pps for {seconds:.2} s\n",
                self.results.len() + 1,
                r
            ),
            None => format!(
                "# trial {}: unpaced for {seconds} s\n",
                self.results.len() + 1
            ),
        });
        let log = &mut self.log;
        let r = match &self.runner {
            Runner::InProcess { path: p, traffic } => {
                let mut gen = traffic.gen_options(&p.sender, rate, seconds)?;
                if !p.gen_cpus.is_empty() {
                    gen.cpus = p.gen_cpus.clone();
                }
                gen.tcp = self.tcp;
                for (part, tcp) in gen.mix.iter_mut().zip(&self.mix_tcp) {
                    part.tcp = *tcp;
                }
                let trial = TrialSetup {
                    gen_netns: p.gen_netns.clone(),
                    recv_netns: p.recv_netns.clone(),
                    recv_ifname: p.recv_iface.clone(),
                    gen,
                    receiver: self.receiver,
                };
                run_trial(&trial, self.stop, |pk, b, us| {
                    log.push_str(&rate_line(pk, b, us));
                    log.push('\n');
                })?
            }
            Runner::Commands { path, profile } => {
                let offer = crate::command_trial::Offer {
                    rate,
                    seconds,
                    tcp: self.tcp,
                };
                let (r, each) = path.run(profile, self.receiver, offer, self.stop, log)?;
                self.generators = each;
                r
            }
        };
        self.log.push_str(&format!(
            "# offered {} frames ({} refused at the DUT's ring), received {}, over {:.3} s\n",
            offered(&r),
            r.offered.xmit_errors,
            r.received_packets,
            r.offered.seconds
        ));
        if let (Some(t), Some(next)) = (&mut self.tcp, r.offered.tcp_next) {
            t.from = next;
        }
        for (t, next) in self.mix_tcp.iter_mut().zip(&r.offered.mix_tcp_next) {
            if let (Some(t), Some(next)) = (t, next) {
                t.from = *next;
            }
        }
        self.results.push(r.clone());
        Ok(r)
    }
}

/// The rate flows are established at (scenario::DutDef::establish): one
/// the kernel's conntrack takes new connections at on this machine's DUT
/// core, with room.
pub const ESTABLISH_PPS: u64 = 200_000;

/// Passes over the flows at most when establishing them.
pub const ESTABLISH_PASSES: usize = 8;

/// The share of the flows the DUT's conntrack must hold assured for the
/// passes to stop.
pub const ESTABLISHED_SHARE: f64 = 0.999;

/// What establishing a profile's flows did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Established {
    pub flows: u64,
    /// Passes over the flows.
    pub passes: usize,
    /// Frames sent, and answers that came back, over the passes.
    pub sent: u64,
    pub answered: u64,
    /// Connections the DUT's conntrack held assured after the last pass.
    pub assured: u64,
    pub seconds: f64,
}

impl LabTrials<'_> {
    /// Makes each of the profile's `flows` flows (on `cpus` sending CPUs,
    /// each cycling through all of them) a connection the DUT's conntrack
    /// holds established and assured: passes over them at ESTABLISH_PPS,
    /// the receiver answering each frame (addresses and ports swapped),
    /// each pass starting at least 2.2 s after the one before (a UDP entry
    /// is assured by a packet two seconds after its first, the reply
    /// seen), until `assured` (the DUT's count of assured entries) says
    /// ESTABLISHED_SHARE of them are, or ESTABLISH_PASSES. A frame the
    /// DUT's ring refuses in one pass (creating connections, the kernel
    /// takes fewer than it is offered) is sent again in the next. The
    /// passes are in the log, not in the results.
    ///
    /// TCP connections (shared out over the CPUs): a pass is a SYN to
    /// each, answered with a SYN|ACK, then its first data segment, which
    /// completes the handshake (assured at once); a SYN again to a
    /// connection already open is invalid to the DUT and changes nothing.
    pub fn establish(
        &mut self,
        flows: u64,
        cpus: usize,
        mut assured: impl FnMut() -> Result<u64>,
    ) -> Result<Established> {
        // UDP: every CPU sends every flow; TCP: each its own.
        let senders = if self.tcp.is_some() { 1 } else { cpus.max(1) };
        let pass = (flows as f64 * senders as f64 / ESTABLISH_PPS as f64 * 1.05).max(0.2);
        let saved = std::mem::replace(&mut self.receiver, ReceiverMode::Answer);
        let started = std::time::Instant::now();
        let mut e = Established {
            flows,
            ..Default::default()
        };
        let mut result = Ok(());
        let mut last = started;
        for i in 0..ESTABLISH_PASSES {
            let tcp = self.tcp.is_some();
            let passed = if tcp {
                self.tcp_pass(pass, &mut e)
            } else {
                self.udp_pass(i, pass, &mut last, &mut e)
            };
            if let Err(err) = passed {
                result = Err(err);
                break;
            }
            // A TCP connection is assured once its handshake completes; a
            // UDP flow by a packet two seconds after its first, not yet.
            if !tcp && i == 0 {
                continue;
            }
            match assured() {
                Ok(n) => {
                    e.assured = n;
                    self.log
                        .push_str(&format!("# the DUT's conntrack holds {n} assured\n"));
                    if n as f64 >= flows as f64 * ESTABLISHED_SHARE {
                        break;
                    }
                }
                Err(err) => {
                    result = Err(err);
                    break;
                }
            }
        }
        self.receiver = saved;
        e.seconds = started.elapsed().as_secs_f64();
        result.map(|()| e)
    }
}

impl LabTrials<'_> {
    /// Pass `i` of UDP establishing: every flow sent once, 2.2 s after the
    /// last pass started.
    fn udp_pass(
        &mut self,
        i: usize,
        seconds: f64,
        last: &mut std::time::Instant,
        e: &mut Established,
    ) -> Result<()> {
        if i > 0 {
            let due = *last + std::time::Duration::from_secs_f64(2.2);
            if let Some(wait) = due.checked_duration_since(std::time::Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        *last = std::time::Instant::now();
        self.log.push_str(&format!(
            "# establishing the flows: pass {} (of at most {ESTABLISH_PASSES})\n",
            i + 1
        ));
        let r = self.run(Some(ESTABLISH_PPS as f64), seconds)?;
        self.results.pop();
        e.sent += offered(&r);
        e.answered += r.received_packets;
        e.passes += 1;
        Ok(())
    }

    /// One pass of TCP establishing: a SYN to each connection, then (its
    /// SYN|ACK back through the DUT) its next data segment.
    fn tcp_pass(&mut self, seconds: f64, e: &mut Established) -> Result<()> {
        let data = self.tcp.expect("a TCP profile");
        for phase in [TcpPhase::Syn, TcpPhase::Data] {
            self.log.push_str(&format!(
                "# establishing the connections: pass {}, {}\n",
                e.passes + 1,
                phase.label()
            ));
            self.tcp = Some(TcpRun { phase, ..data });
            let r = self.run(Some(ESTABLISH_PPS as f64), seconds);
            if phase == TcpPhase::Syn {
                // The SYN pass leaves the data where it was.
                self.tcp = Some(data);
            }
            let r = r?;
            self.results.pop();
            e.sent += offered(&r);
            e.answered += r.received_packets;
        }
        if let Some(t) = &mut self.tcp {
            t.phase = TcpPhase::Data;
        }
        e.passes += 1;
        Ok(())
    }
}

/// Frames the generator built for the DUT: sent, plus those the DUT's
/// receive ring refused (a NIC's rx drop: the DUT's loss).
pub fn offered(r: &TrialResult) -> u64 {
    r.offered.sent_packets + r.offered.xmit_errors
}

impl linerate_search::Dut for LabTrials<'_> {
    fn trial(&mut self, load_pps: f64, seconds: f64) -> Result<Measurement> {
        if self.stop.load(std::sync::atomic::Ordering::Relaxed) {
            anyhow::bail!("interrupted");
        }
        let r = self.run(Some(load_pps), seconds)?;
        let offered = offered(&r);
        let secs = r.offered.seconds.max(1e-9);
        Ok(Measurement {
            requested_pps: load_pps,
            offered,
            received: r.received_packets,
            seconds: secs,
            valid: offered as f64 / secs >= load_pps * (1.0 - GENERATOR_TOLERANCE),
        })
    }
}
