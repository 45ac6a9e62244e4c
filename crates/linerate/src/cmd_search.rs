//! `linerate search`: one throughput search against a DUT, through a lab
//! that is up or through named interfaces.
use crate::cli::{PathArgs, SearchArgs, SearchMethod, TrafficArgs};
use anyhow::{anyhow, bail, Result};
use linerate_host::stop;
use linerate_lab::topology;
use linerate_labrun::measure::{LabTrials, Path, Runner};
use linerate_labrun::scenario::{Family, Profile};
use linerate_labrun::throughput::{self, SearchPlan};
use linerate_search::{equilibrium, Dut, Trial, Trials};
use linerate_traffic::frame::parse_mac;
use linerate_traffic::profile::{Sender, Traffic};
use serde_json::json;

/// The path of `a`'s flags: a lab that is up, or named interfaces.
pub fn path(a: &PathArgs) -> Result<Path> {
    if let Some(i) = &a.gen_iface {
        if a.lab.is_some() {
            bail!("--lab and -i: give a lab or interfaces, not both");
        }
        let recv = a
            .recv_iface
            .clone()
            .ok_or_else(|| anyhow!("-i: also give the receiving interface with -r"))?;
        let dst_mac = a
            .dst_mac
            .clone()
            .ok_or_else(|| anyhow!("-i: also give the DUT's MAC with -D"))?;
        let src_mac = match &a.src_mac {
            Some(m) => m.clone(),
            None => linerate_host::cmd::interface_mac(a.gen_netns.as_deref(), i)?,
        };
        let ns = |n: &Option<String>| -> Result<String> {
            match n {
                Some(n) if !linerate_host::netns::exists(n) => {
                    bail!("network namespace {n} does not exist")
                }
                Some(n) => Ok(n.clone()),
                // The trial enters a namespace for each side: ours.
                None => Ok(format!("/proc/{}/ns/net", std::process::id())),
            }
        };
        return Ok(Path {
            gen_netns: ns(&a.gen_netns)?,
            sender: Sender {
                ifname: i.clone(),
                src_mac: parse_mac("-S", &src_mac)?,
                dst_mac: parse_mac("-D", &dst_mac)?,
                cpu: a.gen_cpu,
            },
            gen_cpus: Vec::new(),
            recv_netns: ns(&a.recv_netns)?,
            recv_iface: recv,
        });
    }
    let name = a
        .lab
        .clone()
        .unwrap_or_else(|| topology::DEFAULT_NAME.into());
    if linerate_lab::find(&name)?.is_none() {
        bail!("lab {name} is not up: `linerate lab up --name {name}` first, or give -i/-r/-D");
    }
    let spec = linerate_lab::LabSpec::new(&name);
    let ns = spec.namespaces();
    let ifs = topology::Interfaces::default();
    Ok(Path {
        gen_netns: ns.gen,
        sender: Sender {
            ifname: ifs.gen,
            src_mac: parse_mac("the lab's generator MAC", topology::mac::GEN)?,
            dst_mac: parse_mac("the lab's DUT MAC", topology::mac::DUT_IN)?,
            cpu: a.gen_cpu,
        },
        gen_cpus: Vec::new(),
        recv_netns: ns.recv,
        recv_iface: ifs.recv,
    })
}

/// The traffic of `a`'s flags, checked; a field refused is said as its flag.
pub fn traffic(a: &TrafficArgs) -> Result<Traffic> {
    let family = if a.ipv6 { Family::Ipv6 } else { Family::Ipv4 };
    let profile = Profile {
        src: a.src.clone(),
        dst: a.dst.clone(),
        ..Profile::new(family, &a.len)
    };
    profile.check().map_err(|e| {
        let flag = match e.field {
            "len" => "-l",
            "src" => "-s",
            _ => "-d",
        };
        anyhow!("{flag}: {}", e.reason)
    })
}

pub fn run(a: SearchArgs) -> Result<()> {
    let traffic = traffic(&a.traffic)?;
    let max_rate = match a.max_rate.as_str() {
        "auto" => None,
        r => Some(linerate_imix::parse_rate("--max-rate", r).map_err(anyhow::Error::msg)?),
    };
    if !(a.seconds > 0.0 && a.seconds <= 3600.0) {
        bail!(
            "-t: must be more than 0 and at most 3600 seconds, got {}",
            a.seconds
        );
    }
    let final_seconds = a.final_seconds.unwrap_or(a.seconds);
    if final_seconds < a.seconds {
        bail!(
            "--final-seconds: must not be shorter than -t ({})",
            a.seconds
        );
    }
    if !(0.0..1.0).contains(&a.exceed_ratio) {
        bail!(
            "--exceed-ratio: must be at least 0 and less than 1, got {}",
            a.exceed_ratio
        );
    }
    if let Some(d) = a.duration_sum.filter(|d| !(*d > 0.0 && d.is_finite())) {
        bail!("--duration-sum: must be more than 0 seconds, got {d}");
    }
    // The simulated DUT (--sim) or the lab's path.
    let mut sim = crate::cmd_trial::sim_dut(&a.sim)?;
    if sim.is_some() && max_rate.is_none() {
        bail!("--max-rate: give the highest load with --sim (the simulated generator has no limit to probe)");
    }
    let mut lab = None;
    if sim.is_none() {
        linerate_host::privilege::require_root("linerate search")?;
        lab = Some(LabTrials::new(
            Runner::InProcess {
                path: path(&a.path)?,
                traffic,
            },
            a.receiver,
            stop::flag(),
        ));
    }
    // Check the generator's options once before any trial.
    let max = match (max_rate, lab.as_mut()) {
        (Some(m), _) => m,
        (None, lab) => {
            let lab = lab.expect("--sim comes with --max-rate, checked above");
            let m = throughput::probe_max_rate(lab, a.seconds)?;
            if !a.json {
                println!(
                    "- Maximum rate (the generator, unpaced) = {} Kpps",
                    equilibrium::kpps(m)
                );
            }
            m
        }
    };
    let json = a.json;
    // A spinner while a trial runs (on a terminal only); lines go above it.
    let spinner = if json {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new_spinner()
    };
    spinner.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .expect("a valid template"),
    );
    spinner.enable_steady_tick(std::time::Duration::from_millis(200));
    spinner.set_message("first trial");
    let say = |line: String| {
        if spinner.is_hidden() {
            println!("{line}");
        } else {
            spinner.println(line);
        }
    };
    let mut so_far = 0.0;
    let mut trials = Trials::new(|t: &Trial| {
        so_far += t.duration;
        spinner.set_message(format!(
            "{} trials, {so_far:.0} trial-seconds so far",
            t.index
        ));
        if !json && a.method != SearchMethod::Equilibrium {
            say(throughput::trial_line(t));
        }
        if !json && a.method == SearchMethod::Equilibrium {
            say(format!(
                "- Measured forwarding rate = {} Kpps",
                equilibrium::kpps(t.measurement.forwarding_pps())
            ));
        }
    });
    let plan = SearchPlan {
        method: match a.method {
            SearchMethod::Equilibrium => throughput::SearchMethod::Equilibrium,
            SearchMethod::Rfc2544 => throughput::SearchMethod::Rfc2544,
            SearchMethod::NdrPdr => throughput::SearchMethod::NdrPdr,
        },
        seconds: a.seconds,
        final_seconds,
        tolerance: a.tolerance,
        width: a.width,
        loss_ratio: a.loss_ratio,
        exceed_ratio: a.exceed_ratio,
        duration_sum: a.duration_sum,
    };
    if !json && plan.method == throughput::SearchMethod::Equilibrium {
        print!(
            "{}",
            throughput::equilibrium_preamble(&a.traffic.len, max, a.tolerance)
        );
    }
    let dut: &mut dyn Dut = match lab.as_mut() {
        Some(lab) => lab,
        None => sim.as_mut().expect("a lab or --sim"),
    };
    let outcome = throughput::run(dut, &plan, max, &mut trials, |i| {
        if !json {
            say(throughput::iteration_text(i));
        }
    })?;
    if !json {
        print!("{}", outcome.text(max));
    }
    let result = json!(outcome);
    let seconds = trials.seconds();
    spinner.finish_and_clear();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "method": format!("{:?}", a.method).to_lowercase(),
                "max_rate_pps": max,
                "result": result,
                "trial_seconds": seconds,
                "trials": trials.list,
            }))?
        );
    } else {
        println!("{} trials, {:.0} trial-seconds", trials.list.len(), seconds);
    }
    Ok(())
}
