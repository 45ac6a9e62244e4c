//! `linerate gen` and `linerate recv`.
use crate::cli::{GenArgs, RecvArgs};
use anyhow::{bail, Result};
use linerate_bpf::loader::XdpMode;
use linerate_host::stop;
use linerate_traffic::flows;
use linerate_traffic::frame::{parse_mac, FrameSpec};
use linerate_traffic::gen::{GenOptions, Generator};
use linerate_traffic::recv::{self, Receiver};
use linerate_traffic::sizes::SizeMix;
use linerate_traffic::units::rate_line;
use std::time::Duration;

use linerate_traffic::profile::{DST_V4, DST_V6, SRC_V4, SRC_V6};

/// Checks the arguments and turns them into generator options; nothing is
/// touched before every argument is known good.
pub fn gen_options(a: &GenArgs, src_mac: &str) -> Result<GenOptions> {
    let (src_default, dst_default) = if a.ipv6 {
        (SRC_V6, DST_V6)
    } else {
        (SRC_V4, DST_V4)
    };
    let src = flows::parse("-s", a.src.as_deref().unwrap_or(src_default), 2000)?;
    let dst = flows::parse("-d", a.dst.as_deref().unwrap_or(dst_default), 2000)?;
    if a.ipv6 && !src.is_ipv6() {
        bail!("-6: the -s range {} is not IPv6", src.first);
    }
    if src.is_ipv6() != dst.is_ipv6() {
        bail!(
            "-s and -d: {} and {} are not of the same family",
            src.first,
            dst.first
        );
    }
    if let Some(s) = a.seconds {
        if !(s > 0.0 && s.is_finite()) {
            bail!("-t: seconds must be a positive number, got {s}");
        }
    }
    if a.count == Some(0) {
        bail!("-n: the count must be at least 1");
    }
    if a.stream_base >= linerate_bpf::layout::RECV_STREAMS as u16 {
        bail!(
            "--stream-base: must be below {} (the receiver's streams), got {}",
            linerate_bpf::layout::RECV_STREAMS,
            a.stream_base
        );
    }
    let rate_pps = a
        .rate
        .as_deref()
        .map(|r| linerate_imix::parse_rate("-R", r).map_err(anyhow::Error::msg))
        .transpose()?
        .map(|r| r.round() as u64);
    let online = linerate_host::cpu::online();
    if a.threads == 0 || a.threads > online {
        bail!("-p: {} threads, this machine has {online} CPUs", a.threads);
    }
    if let Some(c) = a.cpu {
        if c >= online {
            bail!("--cpu: CPU {c} does not exist (CPUs 0..{})", online - 1);
        }
    }
    // Senders are always pinned: pacing and sequence numbers are per CPU.
    let first = match a.cpu {
        Some(c) => c,
        None => linerate_host::cpu::current()?,
    };
    let cpus: Vec<usize> = (0..a.threads).map(|i| (first + i) % online).collect();
    let frame = FrameSpec {
        src_mac: parse_mac("-S", src_mac)?,
        dst_mac: parse_mac("-D", &a.dst_mac)?,
        src: src.first,
        dst: dst.first,
        src_port: src.port_first,
        dst_port: dst.port_first,
        sizes: SizeMix::parse(&a.len, src.is_ipv6()).map_err(|e| anyhow::anyhow!("-l: {e}"))?,
        ttl: a.ttl,
        l4: linerate_traffic::tcp::Proto::tcp_if(a.tcp.is_some()),
        headers: a.headers.unwrap_or_default(),
        vlan: a.vlan,
    };
    frame.validate()?;
    let opts = GenOptions {
        ifname: a.iface.clone(),
        frame,
        src,
        dst,
        duration: a.seconds.map(Duration::from_secs_f64),
        count: a.count,
        batch_size: a.batch,
        stream_base: a.stream_base,
        rate_pps,
        cpus,
        mode: a.mode,
        random_dst: a.random_dst,
        random_src: a.random_src,
        tcp: a.tcp.map(|phase| linerate_traffic::tcp::TcpRun {
            phase,
            from: a.tcp_from,
            segments: a.tcp_segments,
            lag: a.tcp_lag,
        }),
        mix: Vec::new(),
        weight: 1,
    };
    opts.check_flags()?;
    Ok(opts)
}

pub fn gen(a: GenArgs) -> Result<()> {
    linerate_host::privilege::require_root("linerate gen")?;
    if a.seconds.is_none() && a.count.is_none() {
        bail!("give -t SECONDS or -n COUNT");
    }
    if let Some(ns) = &a.netns {
        linerate_host::netns::enter_for_good(ns)?;
    }
    // `ip` runs in the namespace we are now in (/sys would show the
    // namespace it was mounted in, not ours).
    let src_mac = match &a.src_mac {
        Some(m) => m.clone(),
        None => linerate_host::cmd::interface_mac(None, &a.iface)?,
    };
    let opts = gen_options(&a, &src_mac)?;
    let g = Generator::new(&opts)?;
    let json = a.json;
    let r = g.run(&opts, stop::flag(), |iv| {
        if !json {
            println!("{}", rate_line(iv.packets, iv.bytes, iv.usec));
        }
    })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!("{}", r.summary());
    }
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
    Ok(())
}

pub fn recv(a: RecvArgs) -> Result<()> {
    linerate_host::privilege::require_root("linerate recv")?;
    if let Some(s) = a.seconds {
        if !(s > 0.0 && s.is_finite()) {
            bail!("-t: seconds must be a positive number, got {s}");
        }
    }
    let mode = if a.generic {
        XdpMode::Generic
    } else {
        XdpMode::Native
    };
    let r = Receiver::attach_as(a.receiver, &a.iface, a.netns.as_deref(), mode)?;
    // On stderr, once attached: a lab that starts a receiver on another
    // host over SSH starts its generator when it reads this line.
    eprintln!("linerate recv: counting on {}", a.iface);
    recv::count(&r, a.receiver, a.seconds, a.json, stop::flag())
}
