//! `linerate gen` and `linerate recv`.
use crate::cli::{GenArgs, RecvArgs};
use crate::stop;
use anyhow::{bail, Result};
use linerate_bpf::loader::XdpMode;
use linerate_traffic::flows;
use linerate_traffic::frame::{parse_mac, FrameSpec};
use linerate_traffic::gen::{GenOptions, Generator};
use linerate_traffic::recv::{Receiver, Ticker};
use linerate_traffic::units::rate_line;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[allow(clippy::too_many_arguments)]
pub fn gen_options(
    ifname: &str,
    len: usize,
    src: &str,
    dst: &str,
    src_mac: &str,
    dst_mac: &str,
    seconds: Option<f64>,
    count: Option<u64>,
    batch: u32,
) -> Result<GenOptions> {
    let src = flows::parse("-s", src, 2000)?;
    let dst = flows::parse("-d", dst, 2000)?;
    if let Some(s) = seconds {
        if !(s > 0.0 && s.is_finite()) {
            bail!("-t: seconds must be a positive number, got {s}");
        }
    }
    if !(1..=256).contains(&batch) {
        bail!("--batch: must be 1..256, got {batch}");
    }
    let frame = FrameSpec {
        src_mac: parse_mac("-S", src_mac)?,
        dst_mac: parse_mac("-D", dst_mac)?,
        src: src.first,
        dst: dst.first,
        src_port: src.port_first,
        dst_port: dst.port_first,
        len,
        ttl: 64,
    };
    frame.validate()?;
    Ok(GenOptions {
        ifname: ifname.into(),
        frame,
        src,
        dst,
        duration: seconds.map(Duration::from_secs_f64),
        count,
        batch_size: batch,
        stream_base: 0,
    })
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
        None => interface_mac(&a.iface)?,
    };
    let opts = gen_options(
        &a.iface, a.len, &a.src, &a.dst, &src_mac, &a.dst_mac, a.seconds, a.count, a.batch,
    )?;
    if let Some(c) = a.cpu {
        linerate_host::cpu::pin(0, c)?;
    }
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
        println!(
            "Sent {} packets {} bytes in {:.3} seconds: {}",
            r.sent_packets,
            r.sent_bytes,
            r.seconds,
            rate_line(r.sent_packets, r.sent_bytes, (r.seconds * 1e6) as u64)
        );
    }
    Ok(())
}

fn interface_mac(ifname: &str) -> Result<String> {
    let out =
        linerate_host::cmd::ip(None, &["-j", "link", "show", "dev", ifname]).map_err(|_| {
            anyhow::anyhow!(
                "-i: interface {ifname} does not exist (in this network namespace; use --netns)"
            )
        })?;
    let v: serde_json::Value = serde_json::from_str(&out)?;
    v.pointer("/0/address")
        .and_then(|m| m.as_str())
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("interface {ifname} has no MAC address"))
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
    let r = Receiver::attach(&a.iface, a.netns.as_deref(), mode)?;
    let stop = stop::flag();
    let start = Instant::now();
    let mut ticker = Ticker::new(&r)?;
    let end = a.seconds.map(Duration::from_secs_f64);
    while !stop.load(Ordering::Relaxed) && end.is_none_or(|e| start.elapsed() < e) {
        std::thread::sleep(Duration::from_millis(20));
        if let Some(t) = ticker.poll(&r)? {
            if !a.json {
                println!("{}", rate_line(t.delta.packets, t.delta.bytes, t.usec));
            }
        }
    }
    let t = r.total()?;
    let secs = start.elapsed().as_secs_f64();
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "received_packets": t.packets, "received_bytes": t.bytes, "stamped_packets": t.stamped,
                "seconds": secs, "pps": t.packets as f64 / secs, "bps": t.bytes as f64 * 8.0 / secs,
            })
        );
    } else {
        println!(
            "Received {} packets {} bytes in {:.3} seconds ({} stamped)",
            t.packets, t.bytes, secs, t.stamped
        );
    }
    Ok(())
}
