//! `linerate lab ...`
use crate::cli::{LabCmd, StatusArgs, UpArgs};
use anyhow::Result;
use linerate_lab::{Lab, LabSpec};

pub fn run(cmd: LabCmd) -> Result<()> {
    match cmd {
        LabCmd::Up(a) => up(a),
        LabCmd::Down(a) => {
            let removed = linerate_lab::down(&a.name)?;
            println!("lab {} down: removed {}", a.name, removed.join(", "));
            Ok(())
        }
        LabCmd::Status(a) => status(a),
        LabCmd::Run(a) => crate::cmd_lab_run::run(a),
    }
}

/// The lab of these arguments, checked: a field refused is said as its
/// option (`dut_cpu` as `--dut-cpu`).
fn spec(a: &UpArgs) -> Result<LabSpec> {
    let mut s = LabSpec::new(&a.name.name);
    s.queues = a.queues;
    s.mtu = a.mtu;
    s.gen_ports = a.gen_ports;
    let dut_cpu = a.dut_cpu;
    if let Some(c) = dut_cpu {
        s.dut_cpu = c;
    }
    s.validate()
        .map_err(|e| anyhow::anyhow!("--{}: {}", e.field.replace('_', "-"), e.reason))?;
    Ok(s)
}

fn up(a: UpArgs) -> Result<()> {
    let (lab, outcome) = Lab::up(&spec(&a)?, a.force)?;
    print!("{}", lab.said_at_up(&outcome));
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
