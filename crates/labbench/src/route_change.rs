//! `linerate bench route-change`: how long linerate takes to follow the
//! kernel. Traffic flows through a lab with linerate as the DUT while the
//! DUT's kernel is changed with `ip route replace` (the next hop moves to
//! another gateway) and `ip neigh replace` (the gateway's MAC changes).
//! The receiver tells next hops apart by destination MAC and knows when
//! each frame was sent (the generator's stamp). The kernel's change is
//! timed by an rtnetlink listener in the DUT's namespace, like linerate's
//! own. For every change: delay = first frame sent to the new next hop -
//! the kernel's notification; a frame sent to the old next hop after the
//! first one to the new is a late one.
use anyhow::{anyhow, bail, Result};
use linerate_bpf::loader::XdpMode;
use linerate_host::clock::monotonic_ns;
use linerate_host::cmd;
use linerate_host::cmd::mac_text;
use linerate_lab::{Lab, LabSpec, UpOutcome};
use linerate_labrun::dut_setup::RunningDut;
use linerate_labrun::scenario::builtin_dut;
use linerate_netlink::route::{topic, Monitor, Topic};
use linerate_traffic::profile::builtin_profile;
use linerate_traffic::recv::{self, Receiver};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Two gateways on the receiver's side, two MACs each.
const GW: [&str; 2] = ["198.19.0.2", "198.19.0.3"];
const MACS: [[u8; 6]; 4] = [
    [2, 0, 0, 0, 1, 0x0a],
    [2, 0, 0, 0, 1, 0x0b],
    [2, 0, 0, 0, 2, 0x0a],
    [2, 0, 0, 0, 2, 0x0b],
];
/// The generator's destinations (198.19.10.1-100) are in this prefix.
const PREFIX: &str = "198.19.10.0/24";

#[derive(Clone, Debug, Serialize)]
pub struct Change {
    pub kind: &'static str,
    pub command: String,
    /// From the kernel's notification of the change to the first frame
    /// sent to the new next hop.
    pub delay_us: f64,
    /// From starting `ip` to the kernel's notification (process start-up).
    pub ip_us: f64,
    /// Frames to the old next hop sent after the first one to the new.
    pub late_old_us: f64,
    pub old_packets: u64,
    pub new_packets: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub rate_pps: u64,
    pub changes: Vec<Change>,
    pub route_delay_us: Summary,
    pub neigh_delay_us: Summary,
    /// The worst `late_old_us` over all changes (0: never after the switch).
    pub worst_late_old_us: f64,
    pub lost: u64,
    pub received: u64,
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub worst: f64,
}

fn summary(mut v: Vec<f64>) -> Summary {
    if v.is_empty() {
        return Summary::default();
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Summary {
        n,
        median: if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        },
        worst: v[n - 1],
    }
}

pub struct Options {
    pub changes: usize,
    pub interval: Duration,
    pub rate_pps: u64,
    pub gen_cpu: usize,
}

pub fn run(o: &Options, stop: &AtomicBool, mut progress: impl FnMut(&Change)) -> Result<Report> {
    let name = format!("lrchg{}", std::process::id());
    let (lab, outcome) = Lab::up(&LabSpec::new(&name), false)?;
    if outcome == UpOutcome::AlreadyUp {
        bail!("lab {name} is already up");
    }
    let ns = lab.namespaces();
    let ifs = lab.interfaces();
    let dut = |args: &[&str]| cmd::ip(Some(&ns.dut), args);
    // Gateway g starts with MAC 2g (its first MAC); the prefix via gateway 0.
    for (g, gw) in GW.iter().enumerate() {
        dut(&[
            "neigh",
            "replace",
            gw,
            "lladdr",
            &mac_text(&MACS[2 * g]),
            "dev",
            &ifs.dut_out,
            "nud",
            "permanent",
        ])?;
    }
    dut(&[
        "route",
        "replace",
        PREFIX,
        "via",
        GW[0],
        "dev",
        &ifs.dut_out,
    ])?;
    let def = builtin_dut("linerate").expect("built-in");
    let router = RunningDut::start(&def, &ns.dut, &ifs.dut_ports(1))?;
    let receiver = Receiver::attach_watching(&ifs.recv, Some(&ns.recv), XdpMode::Native, &MACS)?;
    let notes = Notes::start(&ns.dut)?;

    // Paced traffic for the whole test.
    let seconds = 1.0 + o.changes as f64 * o.interval.as_secs_f64();
    let sender = crate::lab_traffic::sender(&ifs, o.gen_cpu)?;
    let gen_opts = builtin_profile("ipv4-60")
        .ok_or_else(|| anyhow::anyhow!("no built-in profile ipv4-60"))?
        .check()?
        .gen_options(&sender, Some(o.rate_pps), seconds)?;
    let gen_stop = Arc::new(AtomicBool::new(false));
    let gen = crate::lab_traffic::spawn(&ns.gen, gen_opts, gen_stop.clone());
    // Past the generator's warm-up, traffic flowing via gateway 0.
    std::thread::sleep(Duration::from_millis(700));
    let mut gw = 0usize; // the prefix's gateway
    let mut gw_mac = [0usize, 0usize]; // which of its two MACs each gateway has
    let mut changes = Vec::new();
    let result = (|| -> Result<()> {
        for i in 0..o.changes {
            if stop.load(Ordering::Relaxed) || gen.is_finished() {
                break;
            }
            let old_mac = 2 * gw + gw_mac[gw];
            let (kind, topic) = if i % 2 == 0 {
                gw = 1 - gw;
                ("route", Topic::Route)
            } else {
                gw_mac[gw] = 1 - gw_mac[gw];
                ("neigh", Topic::Neighbour)
            };
            let new_mac = 2 * gw + gw_mac[gw];
            let mac = mac_text(&MACS[new_mac]);
            let out = ifs.dut_out.as_str();
            let command: Vec<&str> = if kind == "route" {
                vec!["route", "replace", PREFIX, "via", GW[gw], "dev", out]
            } else {
                vec![
                    "neigh",
                    "replace",
                    GW[gw],
                    "lladdr",
                    &mac,
                    "dev",
                    out,
                    "nud",
                    "permanent",
                ]
            };
            receiver.watched(MACS.len())?; // a new window
            let t0 = monotonic_ns();
            dut(&command)?;
            std::thread::sleep(o.interval);
            let tk = notes.first_after(t0, topic).ok_or_else(|| {
                anyhow!(
                    "change {}: no rtnetlink notification within {:?}",
                    i + 1,
                    o.interval
                )
            })?;
            let w = receiver.watched(MACS.len())?;
            let (old, new) = (w[old_mac], w[new_mac]);
            if new.packets == 0 {
                bail!(
                    "change {} ({}): no frame reached the new next hop in {:?}",
                    i + 1,
                    command.join(" "),
                    o.interval
                );
            }
            let since = |tx: u32| tx.wrapping_sub(tk as u32) as i32 as f64 / 1e3;
            let c = Change {
                kind,
                command: format!("ip {}", command.join(" ")),
                delay_us: since(new.first_tx).max(0.0),
                ip_us: (tk - t0) as f64 / 1e3,
                late_old_us: if old.packets == 0 {
                    0.0
                } else {
                    (since(old.last_tx) - since(new.first_tx)).max(0.0)
                },
                old_packets: old.packets,
                new_packets: new.packets,
            };
            progress(&c);
            changes.push(c);
        }
        Ok(())
    })();
    gen_stop.store(true, Ordering::SeqCst);
    notes.stop();
    let gen_result = gen
        .join()
        .map_err(|_| anyhow!("generator thread panicked"))?;
    std::thread::sleep(Duration::from_millis(200));
    let seq = recv::totals(&receiver.streams()?);
    let received = receiver.total()?.stamped;
    drop(receiver);
    router.stop()?;
    lab.down()?;
    result?;
    gen_result?;
    let pick = |k: &str| {
        changes
            .iter()
            .filter(|c| c.kind == k)
            .map(|c| c.delay_us)
            .collect()
    };
    Ok(Report {
        rate_pps: o.rate_pps,
        route_delay_us: summary(pick("route")),
        neigh_delay_us: summary(pick("neigh")),
        worst_late_old_us: changes.iter().map(|c| c.late_old_us).fold(0.0, f64::max),
        lost: seq.lost,
        received,
        changes,
    })
}

/// When rtnetlink notifications arrive in the DUT's namespace.
struct Notes {
    seen: Arc<Mutex<Vec<(u64, Topic)>>>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Result<()>>,
}

impl Notes {
    fn start(netns: &str) -> Result<Self> {
        let (seen, stop) = (
            Arc::new(Mutex::new(Vec::new())),
            Arc::new(AtomicBool::new(false)),
        );
        let ready = Arc::new(AtomicBool::new(false));
        let thread = {
            let (seen, stop, ready, ns) =
                (seen.clone(), stop.clone(), ready.clone(), netns.to_string());
            std::thread::spawn(move || -> Result<()> {
                linerate_host::netns::enter_for_good(&ns)?;
                let mut m = Monitor::open()?;
                ready.store(true, Ordering::SeqCst);
                while !stop.load(Ordering::Relaxed) {
                    let msgs = m.wait(Duration::from_millis(20))?;
                    let t = monotonic_ns();
                    let mut s = seen.lock().unwrap();
                    s.extend(msgs.iter().map(|x| (t, topic(x))));
                }
                Ok(())
            })
        };
        while !ready.load(Ordering::SeqCst) {
            if thread.is_finished() {
                return Err(thread
                    .join()
                    .map_err(|_| anyhow!("netlink listener panicked"))?
                    .unwrap_err());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(Notes { seen, stop, thread })
    }

    fn first_after(&self, t: u64, want: Topic) -> Option<u64> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .find(|(at, k)| *at >= t && *k == want)
            .map(|x| x.0)
    }

    fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
    }
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:<5} {:>9.1} us to the new next hop ({:>5} frames to the old one, {:>7} to the new; ip took {:.0} us){}",
            self.kind,
            self.delay_us,
            self.old_packets,
            self.new_packets,
            self.ip_us,
            if self.late_old_us > 0.0 { format!(", old next hop used {:.1} us after the switch", self.late_old_us) } else { String::new() }
        )
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "route changes: median {:.1} us, worst {:.1} us ({} changes); neighbour changes: median {:.1} us, worst {:.1} us ({})",
            self.route_delay_us.median, self.route_delay_us.worst, self.route_delay_us.n,
            self.neigh_delay_us.median, self.neigh_delay_us.worst, self.neigh_delay_us.n
        )?;
        write!(
            f,
            "old next hop used after the switch: worst {:.1} us; {} frames received, {} lost, at {} pps",
            self.worst_late_old_us, self.received, self.lost, self.rate_pps
        )
    }
}
