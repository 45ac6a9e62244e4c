//! `linerate search`: one throughput search against a DUT, through a lab
//! that is up or through named interfaces.
use crate::cli::{PathArgs, SearchArgs, SearchMethod, TrafficArgs};
use anyhow::{bail, Result};
use linerate_host::stop;
use linerate_labrun::measure::{LabTrials, Path, Runner};
use linerate_labrun::throughput::{self, SearchPlan};
use linerate_search::{equilibrium, Dut, Trial, Trials};
use linerate_traffic::profile::Traffic;
use serde_json::json;

/// The path of `a`'s flags: a lab that is up, or named interfaces.
pub fn path(a: &PathArgs) -> Result<Path> {
    linerate_labrun::path_flags::PathFlags {
        lab: a.lab.clone(),
        gen_iface: a.gen_iface.clone(),
        gen_netns: a.gen_netns.clone(),
        recv_iface: a.recv_iface.clone(),
        recv_netns: a.recv_netns.clone(),
        dst_mac: a.dst_mac.clone(),
        src_mac: a.src_mac.clone(),
        gen_cpu: a.gen_cpu,
    }
    .path()
}

/// The traffic of `a`'s flags, checked; a field refused is said as its flag.
pub fn traffic(a: &TrafficArgs) -> Result<Traffic> {
    linerate_labrun::path_flags::traffic(&a.len, a.ipv6, a.src.clone(), a.dst.clone())
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
