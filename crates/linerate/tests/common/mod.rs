//! What the CLI tests share.
#![allow(dead_code)] // not every test binary uses all of it
pub mod frames;
pub mod lab;
pub mod script;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

/// Runs linerate, and says whether the scratch namespace it makes
/// (`lrbench-<its pid>`) is still there once it has ended: the bench's
/// own, whatever else runs on the machine.
pub fn linerate_leaving_scratch(args: &[&str]) -> (std::process::Output, bool) {
    let child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run linerate");
    let pid = child.id();
    let o = child.wait_with_output().expect("wait for linerate");
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let left = String::from_utf8_lossy(&ns.stdout)
        .split_whitespace()
        .any(|n| n == format!("lrbench-{pid}"));
    (o, left)
}

/// `linerate stats --json` on the router in namespace `netns` for `secs`,
/// returned once its window is open (its "watching" line): frames sent
/// after this are in its totals, however slowly it started.
pub fn stats_window(netns: &str, secs: &str) -> Child {
    window(&["stats", "--netns", netns, "-t", secs, "--json"])
}

/// `linerate ARGS` (a command that watches counters and says "watching"
/// on stderr once its window is open: stats, queues), returned once it
/// has said so.
pub fn window(args: &[&str]) -> Child {
    let mut c = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(c.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("watching"), "linerate {args:?}: {line}");
    c
}
