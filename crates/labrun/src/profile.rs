//! Where the DUT's CPU goes: `lab run --profile` records the
//! DUT's core during every run with `perf record` on the cpu-clock event
//! (this machine has no PMU: a timer samples instead of a cycle counter),
//! folds the stacks with inferno (`perf script`'s text, as
//! stackcollapse-perf.pl folds it), and per DUT configuration writes a
//! flame graph (inferno's) and the functions that were on the CPU most, as
//! the seeds' pmcstat tables list them.
use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Samples a second on the DUT's core.
const FREQUENCY: &str = "999";

/// `perf record` of one CPU, running until [`Recording::finish`].
pub struct Recording {
    child: Option<Child>,
    data: PathBuf,
}

impl Recording {
    /// Starts recording CPU `cpu` (all of it: the DUT's NAPI threads, its
    /// softirqs, its XDP programs) into `data`.
    pub fn start(cpu: usize, data: &Path) -> Result<Recording> {
        let mut c = Command::new("perf");
        c.args(["record", "-e", "cpu-clock", "-F", FREQUENCY, "-g", "-C"])
            .arg(cpu.to_string())
            .arg("-o")
            .arg(data)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: prctl only, between fork and exec: perf dies with the
        // runner however it ends (kill -9 too), never left recording.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut c, || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = c
            .spawn()
            .context("--profile needs perf (Debian's linux-perf; scripts/setup.sh)")?;
        // perf has opened its events once it says nothing and still runs:
        // give it the moment it takes.
        std::thread::sleep(std::time::Duration::from_millis(300));
        if let Some(status) = child.try_wait()? {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            bail!("perf record ended ({status}): {}", err.trim());
        }
        Ok(Recording {
            child: Some(child),
            data: data.to_path_buf(),
        })
    }

    /// Stops it (SIGINT, as Ctrl-C would) and returns its stacks, folded:
    /// one `frame;frame;...;leaf count` line each, and with `program` (an
    /// XDP program's name and source lines, [`linerate_bpf::loader::program_lines`])
    /// the samples that fell in it, by source line.
    pub fn finish(
        mut self,
        program: Option<&(String, Vec<linerate_bpf::loader::JitLine>)>,
    ) -> Result<(String, LineCounts)> {
        let child = self.child.take().expect("a running perf");
        // SAFETY: signals our child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let o = child.wait_with_output()?;
        if !self.data.exists() {
            bail!(
                "perf record wrote nothing: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
        }
        let script = Command::new("perf")
            .args([
                "script",
                "-F",
                "comm,pid,tid,cpu,time,event,ip,sym,dso",
                "-i",
            ])
            .arg(&self.data)
            .output()
            .context("perf script")?;
        let mut lines = LineCounts::new();
        if let (Some((name, jit)), true) = (program, script.status.success()) {
            // Leaves only, with their offset in the symbol.
            let leaves = Command::new("perf")
                .args(["script", "-G", "-F", "ip,sym,symoff", "-i"])
                .arg(&self.data)
                .output()
                .context("perf script")?;
            lines = by_line(&String::from_utf8_lossy(&leaves.stdout), name, jit);
        }
        let _ = std::fs::remove_file(&self.data);
        if !script.status.success() {
            bail!(
                "perf script: {}",
                String::from_utf8_lossy(&script.stderr).trim()
            );
        }
        Ok((fold(&script.stdout)?, lines))
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
            let _ = std::fs::remove_file(&self.data);
        }
    }
}

/// Samples by source line of a program: "file:line" -> (the line's text,
/// samples).
pub type LineCounts = BTreeMap<String, (String, u64)>;

/// Counts the samples of `perf script -F ip,sym,symoff` output `leaves` that
/// fell in program `name` (perf's symbol `bpf_prog_TAG_NAME`) by the source
/// line whose JIT code holds their offset.
pub fn by_line(leaves: &str, name: &str, jit: &[linerate_bpf::loader::JitLine]) -> LineCounts {
    let mut sorted: Vec<&linerate_bpf::loader::JitLine> = jit.iter().collect();
    sorted.sort_by_key(|l| l.offset);
    let suffix = format!("_{name}");
    let mut counts = LineCounts::new();
    for leaf in leaves.lines() {
        let Some((sym, off)) = leaf
            .split_whitespace()
            .last()
            .and_then(|w| w.split_once("+0x"))
        else {
            continue;
        };
        if !(sym.starts_with("bpf_prog_") && sym.ends_with(&suffix)) {
            continue;
        }
        let Ok(off) = u64::from_str_radix(off.trim(), 16) else {
            continue;
        };
        let i = sorted.partition_point(|l| l.offset <= off);
        let Some(l) = i.checked_sub(1).map(|i| sorted[i]) else {
            continue;
        };
        let e = counts
            .entry(format!("{}:{}", l.file, l.line))
            .or_insert_with(|| (l.source.clone(), 0));
        e.1 += 1;
    }
    counts
}

/// A source line of an XDP program and its share of the program's samples.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct HotLine {
    pub location: String,
    pub source: String,
    pub samples: u64,
    pub share: f64,
}

/// The `n` lines with the most samples, most first, and the program's
/// samples in all.
pub fn top_lines(counts: &LineCounts, n: usize) -> (u64, Vec<HotLine>) {
    let total: u64 = counts.values().map(|v| v.1).sum();
    let mut hot: Vec<HotLine> = counts
        .iter()
        .map(|(loc, (src, c))| HotLine {
            location: loc.clone(),
            source: src.clone(),
            samples: *c,
            share: *c as f64 / total.max(1) as f64,
        })
        .collect();
    hot.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.location.cmp(&b.location)));
    hot.truncate(n);
    (total, hot)
}

/// `perf script` output folded by inferno's perf collapser.
pub fn fold(script: &[u8]) -> Result<String> {
    use inferno::collapse::Collapse;
    let mut folded = Vec::new();
    inferno::collapse::perf::Folder::default()
        .collapse(script, &mut folded)
        .map_err(|e| anyhow!("folding perf's stacks: {e}"))?;
    Ok(String::from_utf8_lossy(&folded).into_owned())
}

/// The XDP program on interface `ifname` of namespace `netns`, to read
/// its run-time statistics from ([`linerate_bpf::loader::program_runs`]).
pub fn xdp_program(netns: &str, ifname: &str) -> Result<std::os::fd::OwnedFd> {
    let (netns, name) = (netns.to_string(), ifname.to_string());
    std::thread::spawn(move || {
        let _in = linerate_host::netns::NetnsGuard::enter(&netns)?;
        let idx = linerate_bpf::loader::ifindex(&name)?;
        linerate_bpf::loader::attached_xdp_program(idx)
    })
    .join()
    .map_err(|_| anyhow!("the thread reading {ifname}'s XDP program panicked"))?
}

/// Nanoseconds a run of the program took, on average, between two
/// readings of [`linerate_bpf::loader::program_runs`] (None: it did not
/// run).
pub fn ns_per_run(before: (u64, u64), after: (u64, u64)) -> Option<f64> {
    let runs = after.0.checked_sub(before.0)?;
    (runs > 0).then(|| after.1.saturating_sub(before.1) as f64 / runs as f64)
}

/// A function and its share of the samples (0 to 1).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Hot {
    pub function: String,
    /// On the CPU itself (the stack's leaf).
    pub self_share: f64,
    /// On the stack at all (itself or what it called).
    pub total_share: f64,
}

/// One DUT configuration's profile over all its runs.
#[derive(Clone, Debug, Serialize)]
pub struct DutProfile {
    pub dut: String,
    /// An XDP DUT: its program's own nanoseconds a frame on dut0, from
    /// the kernel's run-time statistics, median over the runs.
    pub xdp_ns_per_frame: Option<f64>,
    /// Samples of the DUT's core (999 a second).
    pub samples: u64,
    /// The flame graph, relative to the output directory.
    pub flame_graph: String,
    /// The functions most on the CPU itself, most first.
    pub top: Vec<Hot>,
    /// An XDP DUT: the samples in its program, and its source lines most
    /// sampled (the JIT's line info), most first.
    pub program_samples: u64,
    pub program_lines: Vec<HotLine>,
}

/// The `n` functions with the largest self share in `folded` stacks, and
/// the number of samples.
pub fn top(folded: &str, n: usize) -> (u64, Vec<Hot>) {
    let mut own: BTreeMap<&str, u64> = BTreeMap::new();
    let mut on_stack: BTreeMap<&str, u64> = BTreeMap::new();
    let mut total = 0u64;
    for line in folded.lines() {
        let Some((stack, count)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(count) = count.parse::<u64>() else {
            continue;
        };
        total += count;
        let frames: Vec<&str> = stack.split(';').collect();
        if let Some(leaf) = frames.last() {
            *own.entry(leaf).or_default() += count;
        }
        // A function counted once a stack, however deep it recurses.
        let mut seen = std::collections::BTreeSet::new();
        for f in frames {
            if seen.insert(f) {
                *on_stack.entry(f).or_default() += count;
            }
        }
    }
    let mut hot: Vec<Hot> = own
        .iter()
        .map(|(f, &c)| Hot {
            function: f.to_string(),
            self_share: c as f64 / total.max(1) as f64,
            total_share: on_stack[f] as f64 / total.max(1) as f64,
        })
        .collect();
    hot.sort_by(|a, b| {
        b.self_share
            .total_cmp(&a.self_share)
            .then(a.function.cmp(&b.function))
    });
    hot.truncate(n);
    (total, hot)
}

/// Writes the flame graph of `folded` stacks to `svg`.
pub fn flame_graph(title: &str, folded: &str, svg: &Path) -> Result<()> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = "samples".into();
    let file =
        std::fs::File::create(svg).with_context(|| format!("cannot write {}", svg.display()))?;
    inferno::flamegraph::from_lines(&mut opts, folded.lines(), std::io::BufWriter::new(file))
        .map_err(|e| anyhow!("the flame graph {}: {e}", svg.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three samples as `perf script -F ...` prints them (kernel stacks,
    /// an XDP program's JIT symbol among them).
    const SCRIPT: &str = "napi/dut0-1  1234/1234  [001]  100.000001: cpu-clock:
\tffffffffa0001234 bpf_prog_6deef7357e7b4530_router (bpf_prog_6deef7357e7b4530_router)
\tffffffff81a00000 veth_xdp_rcv ([kernel.kallsyms])
\tffffffff81a10000 veth_poll ([kernel.kallsyms])
\tffffffff81b00000 __napi_poll ([kernel.kallsyms])

napi/dut0-1  1234/1234  [001]  100.001002: cpu-clock:
\tffffffff81a00000 veth_xdp_rcv ([kernel.kallsyms])
\tffffffff81a10000 veth_poll ([kernel.kallsyms])
\tffffffff81b00000 __napi_poll ([kernel.kallsyms])

napi/dut0-1  1234/1234  [001]  100.002003: cpu-clock:
\tffffffffa0001234 bpf_prog_6deef7357e7b4530_router (bpf_prog_6deef7357e7b4530_router)
\tffffffff81a00000 veth_xdp_rcv ([kernel.kallsyms])
\tffffffff81a10000 veth_poll ([kernel.kallsyms])
\tffffffff81b00000 __napi_poll ([kernel.kallsyms])

";

    #[test]
    fn stacks_fold_and_their_leaves_rank() {
        let folded = fold(SCRIPT.as_bytes()).unwrap();
        assert!(
            folded
                .contains("__napi_poll;veth_poll;veth_xdp_rcv;bpf_prog_6deef7357e7b4530_router 2"),
            "{folded}"
        );
        let (total, hot) = top(&folded, 10);
        assert_eq!(total, 3);
        assert_eq!(hot[0].function, "bpf_prog_6deef7357e7b4530_router");
        assert!((hot[0].self_share - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(hot[1].function, "veth_xdp_rcv");
        assert!((hot[1].self_share - 1.0 / 3.0).abs() < 1e-9);
        assert!((hot[1].total_share - 1.0).abs() < 1e-9);
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("f.svg");
        flame_graph("router", &folded, &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.starts_with("<?xml") && text.contains("<svg"), "{text}");
        assert!(text.contains("veth_xdp_rcv") && text.contains("bpf_prog_6deef7357e7b4530_router"));
    }

    #[test]
    fn samples_go_to_the_line_whose_code_holds_them() {
        use linerate_bpf::loader::JitLine;
        let l = |offset, line, source: &str| JitLine {
            offset,
            file: "router.bpf.c".into(),
            line,
            source: source.into(),
        };
        // JIT order need not be source order.
        let jit = vec![
            l(0, 375, "int router(...)"),
            l(0x40, 350, "if (eth->h_dest[0] & 1)"),
            l(0x80, 107, "if (!n)"),
        ];
        let leaves = "  ffffffffc0025bc9 bpf_prog_5361be8ff73d843a_router+0x3f\n bpf_prog_5361be8ff73d843a_router+0x40\n\
                      bpf_prog_5361be8ff73d843a_router+0x7f\n bpf_prog_5361be8ff73d843a_router+0x1000\n\
                      bpf_prog_aaaa_other+0x40\n veth_xdp_rcv+0x12\n [unknown]\n";
        let c = by_line(leaves, "router", &jit);
        assert_eq!(c["router.bpf.c:375"].1, 1);
        assert_eq!(c["router.bpf.c:350"].1, 2);
        assert_eq!(
            c["router.bpf.c:107"].1, 1,
            "past the last line: the last line's"
        );
        assert_eq!(c.values().map(|v| v.1).sum::<u64>(), 4);
        let (total, top) = top_lines(&c, 2);
        assert_eq!(total, 4);
        assert_eq!(
            top.iter().map(|h| h.location.as_str()).collect::<Vec<_>>(),
            ["router.bpf.c:350", "router.bpf.c:107"]
        );
        assert_eq!(top[0].share, 0.5);
    }
}
