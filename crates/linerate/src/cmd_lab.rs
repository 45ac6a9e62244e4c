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
            "lab {}: kernel forwarding DUT, -l {} frames, 2000 flows, {} s (generator CPU {}, DUT CPU {})",
            a.name,
            a.len,
            a.seconds,
            a.gen_cpu,
            lab.spec().dut_cpu
        );
    }
    let r = run_trial(&trial, stop, |p, b, us| {
        if !a.json {
            println!("recv: {}", rate_line(p, b, us));
        }
    })?;
    let status = lab.status()?;
    let removed = lab.down()?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    println!(
        "offered:   {} frames in {:.3} s = {:.3} Mpps",
        r.offered.sent_packets,
        r.offered.seconds,
        r.offered.pps / 1e6
    );
    println!(
        "delivered: {} frames = {:.3} Mpps ({:.1}% of offered; the rest was dropped by the DUT under overload)",
        r.received_packets,
        r.received_pps / 1e6,
        100.0 * (1.0 - r.loss_ratio)
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
