//! docs/tutorial.md runs as written: its `sh` blocks, in order, as one
//! bash script (errors stop it), with this build's `linerate` first on the
//! PATH. The lab comes up, the kernel and then linerate forward the
//! trials, `linerate stats` sees the fast path forward, and everything the
//! tutorial made is gone at its end. (The set-up block, plain rather than
//! `sh`, is what CI itself runs.) Needs root.
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");
const LAB: &str = "tut";

/// The page's `sh` blocks, in order.
fn sh_blocks(page: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in page.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(String::new()),
            (Some(_), "```") => blocks.push(current.take().unwrap()),
            (Some(b), l) => {
                b.push_str(l);
                b.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(current.is_none(), "an `sh` block is not closed");
    blocks
}

/// What the tutorial makes goes, whatever becomes of the script: its
/// router, then its lab.
struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = Command::new("pkill")
            .args(["-f", "linerate route -i dut0,dut1 --netns tut-dut"])
            .status();
        let _ = Command::new(BIN)
            .args(["lab", "down", "--name", LAB])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

#[test]
fn the_blocks_are_read_in_order_and_only_sh_ones() {
    let page = "text\n```\nnot run\n```\n```sh\na\nb\n```\nmore\n```sh\nc\n```\n";
    assert_eq!(sh_blocks(page), ["a\nb\n", "c\n"]);
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_tutorial_runs_as_written() {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/tutorial.md"
    ))
    .unwrap();
    let blocks = sh_blocks(&page);
    assert!(blocks.len() >= 4, "{blocks:?}");
    let script = format!("set -euo pipefail\n{}", blocks.concat());
    let dir = Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let _cleanup = Cleanup;
    let out = Command::new("bash")
        .args(["-c", &script])
        .env("PATH", path)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "the tutorial's commands failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let all = format!("{stdout}{stderr}");
    for want in [
        "lab tut up",
        "attached to dut0, dut1",
        "detached from dut0, dut1",
        "lab tut down",
    ] {
        assert!(all.contains(want), "no {want:?} in:\n{all}");
    }
    // Three trials, each received something; stats saw dut0 forward.
    assert_eq!(all.matches("received ").count(), 3, "{all}");
    assert!(all.contains("dut0 in 2.0 s: forwarded "), "{all}");
    for ns in ["tut-gen", "tut-dut", "tut-recv"] {
        assert!(
            !Path::new(&format!("/run/netns/{ns}")).exists(),
            "{ns} left behind"
        );
    }
}
