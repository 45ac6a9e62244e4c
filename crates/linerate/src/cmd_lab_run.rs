//! `linerate lab run`: the scenario runner on the terminal, with a
//! progress bar, a line per run, and ministat's comparison at the end.
use crate::cli::RunArgs;
use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use linerate_host::stop;
use linerate_labrun::report::{self, Results, RunRecord};
use linerate_labrun::scenario::{Overrides, Scenario, DEFAULT};
use linerate_labrun::{self as labrun, Progress};
use linerate_search::Trial;

struct Terminal {
    bar: ProgressBar,
    /// --json: stdout is for results.json only.
    json: bool,
}

impl Terminal {
    fn say(&self, line: &str) {
        if self.json || self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }
}

impl Progress for Terminal {
    fn run_start(&mut self, index: usize, total: usize, dut: &str, profile: &str, repeat: u32) {
        self.bar.set_length(total as u64);
        self.bar.set_position(index as u64 - 1);
        self.bar
            .set_message(format!("{dut}, {profile}, run {repeat}"));
    }

    fn trial(&mut self, t: &Trial) {
        self.say(&report::trial_line(t));
    }

    fn run_done(&mut self, r: &RunRecord) {
        self.bar.inc(1);
        self.say(&r.line());
    }

    fn note(&mut self, line: &str) {
        self.say(line);
    }
}

pub fn run(a: RunArgs) -> Result<()> {
    if a.show_default {
        print!("{DEFAULT}");
        return Ok(());
    }
    let mut sc = match &a.scenario {
        Some(p) => Scenario::load(p)?,
        None => Scenario::builtin(),
    };
    sc.profile = a.profile;
    if a.profile && sc.hosts.is_some() {
        anyhow::bail!("--profile: records the local lab's DUT core; with [hosts], record on the DUT's host (perf record -e cpu-clock -C CPU) in its setup and record commands");
    }
    if a.profile {
        linerate_host::cmd::require_tool("perf")
            .map_err(|e| anyhow::anyhow!("--profile: {e:#} (Debian's linux-perf)"))?;
    }
    sc.apply(Overrides {
        repeat: a.repeat,
        seconds: a.seconds,
        duts: a.duts,
        profiles: a.profiles,
        lab_name: a.name,
    })
    .map_err(|e| {
        let option = match e.field {
            "seconds" => "-t",
            "lab_name" => "--name",
            "repeat" => "--repeat",
            "duts" => "--duts",
            _ => "--profiles",
        };
        anyhow::anyhow!("{option}: {}", e.reason)
    })?;
    if a.check {
        let mut term = Terminal {
            bar: ProgressBar::hidden(),
            json: a.json,
        };
        labrun::check(&sc, &mut term)?;
        println!(
            "{}: ready ({} DUT configurations, {} profiles{})",
            sc.source,
            sc.duts.len(),
            sc.profiles.len(),
            if sc.hosts.is_some() {
                ", every host checked"
            } else {
                "; the local lab is built by the run"
            }
        );
        return Ok(());
    }
    linerate_host::privilege::require_root("linerate lab run")?;
    let out = a.out.clone().unwrap_or_else(|| {
        let stamp: String = report::utc_now()
            .chars()
            .filter(|c| c.is_ascii_digit() || *c == ' ')
            .collect::<String>()
            .trim()
            .replacen(' ', "-", 1)
            .replace(' ', "");
        std::path::PathBuf::from("lab-results").join(stamp)
    });
    if let Some(why) = report::dir_refusal(&out) {
        anyhow::bail!("--out {}: {why}", out.display());
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .expect("a valid template"),
    );
    let mut term = Terminal { bar, json: a.json };
    let r = labrun::run(&sc, &out, stop::flag(), &mut term);
    term.bar.finish_and_clear();
    let r = r?;
    print_summary(&r, &out, a.json)?;
    if let Some(why) = &r.failed {
        anyhow::bail!("stopped: {why}; partial results in {}", out.display());
    }
    if r.interrupted {
        anyhow::bail!("interrupted: partial results in {}", out.display());
    }
    Ok(())
}

fn print_summary(r: &Results, out: &std::path::Path, json: bool) -> Result<()> {
    let text = report::summary(r, out);
    if json {
        eprintln!("{text}");
        println!("{}", serde_json::to_string_pretty(r)?);
    } else {
        println!("{text}");
    }
    Ok(())
}
