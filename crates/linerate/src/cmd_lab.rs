//! `linerate lab ...`
use crate::cli::{LabCmd, RunArgs, StatusArgs, UpArgs};
use crate::stop;
use anyhow::Result;
use linerate_lab::{topology, Lab, LabSpec, UpOutcome};
use linerate_traffic::measure::{run_trial, Trial};
use linerate_traffic::units::rate_line;

pub fn run(cmd: LabCmd) -> Result<()> {
    match cmd {
        LabCmd::Up(a) => up(a),
        LabCmd::Down(a) => {
            let removed = linerate_lab::down(&a.name)?;
            println!("lab {} down: removed {}", a.name, removed.join(", "));
            Ok(())
        }
        LabCmd::Status(a) => status(a),
        LabCmd::Run(a) => run_kernel(a),
    }
}

fn spec(name: &str, queues: u32, dut_cpu: Option<usize>) -> LabSpec {
    let mut s = LabSpec::new(name);
    s.queues = queues;
    if let Some(c) = dut_cpu {
        s.dut_cpu = c;
    }
    s
}

fn up(a: UpArgs) -> Result<()> {
    let (lab, outcome) = Lab::up(&spec(&a.name.name, a.queues, a.dut_cpu), a.force)?;
    let ns = lab.namespaces();
    match outcome {
        UpOutcome::AlreadyUp => {
            println!(
                "lab {} is already up; nothing changed (--force rebuilds it)",
                a.name.name
            );
        }
        UpOutcome::Built => {
            println!(
                "lab {} up: {} -> {} -> {}",
                a.name.name, ns.gen, ns.dut, ns.recv
            );
        }
    }
    lab.persist();
    Ok(())
}

fn status(a: StatusArgs) -> Result<()> {
    let s = linerate_lab::status(&a.name.name)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print!("{s}");
    }
    Ok(())
}

/// The main job until the lab runner exists: a lab, the kernel as the DUT,
/// one forwarding-rate trial under overload, a report, no lab left.
fn run_kernel(a: RunArgs) -> Result<()> {
    let stop = stop::flag();
    let (lab, outcome) = Lab::up(&spec(&a.name, 1, None), false)?;
    if outcome == UpOutcome::AlreadyUp {
        anyhow::bail!("lab {} is already up; remove it with `linerate lab down --name {}` or pick another --name", a.name, a.name);
    }
    let ns = lab.namespaces();
    let ifs = lab.interfaces();
    let mut args = crate::cli::GenArgs::for_lab(&ifs.gen, &a.len, a.ipv6, a.seconds as f64);
    args.cpu = Some(a.gen_cpu);
    let gen = crate::cmd_traffic::gen_options(&args, topology::mac::GEN)?;
    let trial = Trial {
        gen_netns: ns.gen.clone(),
        recv_netns: ns.recv.clone(),
        recv_ifname: ifs.recv.clone(),
        gen,
    };
    if !a.json {
        println!(
            "lab {}: {} DUT, -l {} frames, 2000 flows, {} s (generator CPU {}, DUT CPU {})",
            a.name,
            a.dut,
            a.len,
            a.seconds,
            a.gen_cpu,
            lab.spec().dut_cpu
        );
    }
    // The linerate DUT: the fast path on dut0 and dut1, run from a thread
    // inside the DUT's namespace until the trial ends.
    let route_stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ready = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let router = (a.dut == "linerate").then(|| {
        let (ns, ifs) = (
            ns.dut.clone(),
            vec![ifs.dut_in.clone(), ifs.dut_out.clone()],
        );
        let (stop, ready) = (route_stop.clone(), ready.clone());
        std::thread::spawn(move || -> Result<u64> {
            linerate_host::netns::enter_for_good(&ns)?;
            let mut forwarded = 0;
            linerate_router::run::run(
                &crate::cmd_route::options(&ifs, "native", Some(&ns)),
                &stop,
                &ready,
                |s| {
                    forwarded += s.delta.packets[0];
                },
            )?;
            Ok(forwarded)
        })
    });
    if let Some(r) = &router {
        let t = std::time::Instant::now();
        while !ready.load(std::sync::atomic::Ordering::SeqCst) {
            if r.is_finished() || t.elapsed() > std::time::Duration::from_secs(10) {
                route_stop.store(true, std::sync::atomic::Ordering::SeqCst);
                let err = router.map(|h| h.join());
                anyhow::bail!(
                    "the linerate DUT did not start: {:?}",
                    err.map(|r| r.map(|x| x.err()))
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    let r = run_trial(&trial, stop, |p, b, us| {
        if !a.json {
            println!("recv: {}", rate_line(p, b, us));
        }
    });
    route_stop.store(true, std::sync::atomic::Ordering::SeqCst);
    if let Some(h) = router {
        h.join()
            .map_err(|_| anyhow::anyhow!("the linerate DUT thread panicked"))??;
    }
    let r = r?;
    let status = lab.status()?;
    let removed = lab.down()?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    // The generator offers what it builds; what the DUT's receiving veth
    // could not take is refused there (the generator's xmit errors), as a
    // NIC drops what its ring cannot hold.
    let built = r.offered.sent_packets + r.offered.xmit_errors;
    println!(
        "offered:   {} frames in {:.3} s = {:.3} Mpps ({} refused at dut0's ring)",
        built,
        r.offered.seconds,
        built as f64 / r.offered.seconds / 1e6,
        r.offered.xmit_errors
    );
    println!(
        "delivered: {} frames = {:.3} Mpps ({:.1}% of offered)",
        r.received_packets,
        r.received_pps / 1e6,
        100.0 * r.received_packets as f64 / built.max(1) as f64
    );
    if let Some(dut_in) = status.links.iter().find(|l| l.role == "dut_in") {
        println!(
            "dut0: rx {} packets, rx dropped {}",
            dut_in.rx_packets, dut_in.rx_dropped
        );
    }
    println!("lab {} removed ({})", a.name, removed.join(", "));
    Ok(())
}
