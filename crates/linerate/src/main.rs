//! linerate: the command line. Argument parsing and wiring only; the work
//! is in the library crates.
mod cli;
mod cmd_bench;
mod cmd_fib;
mod cmd_firewall;
mod cmd_imix;
mod cmd_lab;
mod cmd_lab_run;
mod cmd_ministat;
mod cmd_queues;
mod cmd_route;
mod cmd_search;
mod cmd_traffic;
mod cmd_trial;

use clap::Parser;
use cmd_bench::print_report;
use linerate_daemon::log;

fn main() {
    // Like other Unix tools, end quietly when the reader of our output
    // goes away (`linerate ... | head`) instead of panicking on EPIPE.
    // SAFETY: setting a signal disposition before any thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let args = cli::Cli::parse();
    log::init(match &args.command {
        cli::Command::Route(_) => "linerate route",
        cli::Command::Lab(_) => "linerate lab",
        cli::Command::Bench(_) => "linerate bench",
        _ => "linerate",
    });
    let result = match args.command {
        cli::Command::Lab(lab) => cmd_lab::run(lab),
        cli::Command::Gen(g) => cmd_traffic::gen(g),
        cli::Command::Recv(r) => cmd_traffic::recv(r),
        cli::Command::Imix(i) => cmd_imix::run(i),
        cli::Command::Tune(t) => {
            linerate_tune::machine(&t.interfaces, t.fix.as_deref(), t.revert.as_deref())
                .map_err(anyhow::Error::msg)
                .and_then(|r| print_report(t.json, &r))
        }
        cli::Command::Bench(b) => cmd_bench::run(b),
        cli::Command::Fib(f) => cmd_fib::run(f),
        cli::Command::Route(r) => cmd_route::run(r),
        cli::Command::CheckConfig(c) => cmd_route::check_config(c),
        cli::Command::Stats(s) => cmd_route::stats(s),
        cli::Command::Queues(q) => cmd_queues::run(q),
        cli::Command::Firewall(f) => cmd_firewall::run(f),
        cli::Command::Search(s) => cmd_search::run(s),
        cli::Command::Trial(t) => cmd_trial::run(t),
        cli::Command::Ministat(m) => std::process::exit(cmd_ministat::run(m)),
    };
    if let Err(e) = result {
        // Under systemd, at the journal's error priority.
        let priority = if log::to_journal() { "<3>" } else { "" };
        eprintln!("{priority}linerate: {e:#}");
        std::process::exit(1);
    }
}
