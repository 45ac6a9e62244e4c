//! One forwarding-rate trial: a receiver on the far side, the generator on
//! its own pinned thread on the near side, and the per-second rates of both
//! (BSDRP's default measurement: the rate a DUT forwards under overload).
use crate::gen::{GenOptions, GenReport, Generator};
use crate::latency::Latency;
pub use crate::recv::ReceiverMode;
use crate::recv::{self, Receiver, SequenceTotals, Ticker};
use anyhow::{anyhow, Result};
use linerate_bpf::loader::XdpMode;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct TrialSetup {
    pub gen_netns: String,
    pub recv_netns: String,
    pub recv_ifname: String,
    /// The generator's options; its `cpus` pin the sending threads.
    pub gen: GenOptions,
    /// Sequence and latency tracking (full), or counting only.
    pub receiver: ReceiverMode,
}

#[derive(Clone, Debug, Serialize)]
pub struct TrialResult {
    pub offered: GenReport,
    /// Frames from the generator that arrived (stamped ones when the frames
    /// carry a stamp, so the kernel's own ND/MLD chatter is not counted).
    pub received_packets: u64,
    /// Other frames the receiver saw.
    pub other_packets: u64,
    pub received_bytes: u64,
    /// Received packets per second over the generator's run.
    pub received_pps: f64,
    pub loss_ratio: f64,
    /// Receiver's packets per second, one value a second.
    pub received_pps_per_second: Vec<f64>,
    /// From the stamps: lost, duplicated and reordered in the sequence,
    /// and latency (absent when the receiver only counted).
    pub sequence: Option<SequenceTotals>,
    pub latency_ns: Option<Latency>,
    /// A mix with the full receiver: the stamped frames of each part that
    /// arrived (its streams'), in the mix's order; a part whose frames
    /// carry no stamp the receiver reads (IP options, extension headers)
    /// counts none. Empty otherwise.
    pub received_by_part: Vec<u64>,
}

/// Grace period after the generator stops for frames still in flight.
const DRAIN: Duration = Duration::from_millis(200);

/// Runs one trial. `on_second` gets the receiver's packets and bytes of
/// each second as they come.
pub fn run_trial(
    t: &TrialSetup,
    stop: &AtomicBool,
    mut on_second: impl FnMut(u64, u64, u64),
) -> Result<TrialResult> {
    let receiver = Receiver::attach_as(
        t.receiver,
        &t.recv_ifname,
        Some(&t.recv_netns),
        XdpMode::Native,
    )?;
    let base = receiver.total()?;
    let done = Arc::new(AtomicBool::new(false));
    let gen_stop = Arc::new(AtomicBool::new(false));
    let handle = {
        let (t, done, gen_stop) = (t.clone(), done.clone(), gen_stop.clone());
        std::thread::Builder::new()
            .name("linerate-gen".into())
            .spawn(move || -> Result<GenReport> {
                let r = (|| {
                    linerate_host::netns::enter_for_good(&t.gen_netns)?;
                    let g = Generator::new(&t.gen)?;
                    g.run(&t.gen, &gen_stop, |_| {})
                })();
                done.store(true, Ordering::SeqCst);
                r
            })?
    };
    let mut per_second = Vec::new();
    let mut ticker = Ticker::new(&receiver)?;
    while !done.load(Ordering::SeqCst) {
        if stop.load(Ordering::Relaxed) {
            gen_stop.store(true, Ordering::SeqCst);
        }
        std::thread::sleep(Duration::from_millis(20));
        if let Some(t) = ticker.poll(&receiver)? {
            per_second.push(t.delta.packets as f64 * 1e6 / t.usec as f64);
            on_second(t.delta.packets, t.delta.bytes, t.usec);
        }
    }
    let offered = handle
        .join()
        .map_err(|_| anyhow!("generator thread panicked"))??;
    std::thread::sleep(DRAIN);
    let total = receiver.total()?;
    let all = total.packets - base.packets;
    // The frames receiver reads no stamps: it counts everything.
    let received_packets = if t.gen.every_frame_stamped() && t.receiver != ReceiverMode::Frames {
        total.stamped - base.stamped
    } else {
        all
    };
    let full = t.receiver == ReceiverMode::Full;
    let streams = full.then(|| receiver.streams()).transpose()?;
    let sequence = streams.as_deref().map(recv::totals);
    let received_by_part = match &streams {
        Some(streams) if !t.gen.mix.is_empty() => {
            by_part(streams, t.gen.stream_base, t.gen.mix.len() + 1)
        }
        _ => Vec::new(),
    };
    let latency_ns = full.then(|| receiver.latency()).transpose()?;
    Ok(TrialResult {
        received_by_part,
        sequence,
        latency_ns,
        received_bytes: total.bytes - base.bytes,
        received_pps: received_packets as f64 / offered.seconds,
        loss_ratio: if offered.sent_packets == 0 {
            0.0
        } else {
            1.0 - received_packets as f64 / offered.sent_packets as f64
        },
        received_pps_per_second: per_second,
        other_packets: all - received_packets,
        received_packets,
        offered,
    })
}

/// The frames received of each of a mix's `parts`, from its streams: part
/// i's are `base` + i * STREAMS_A_PART onwards (crate::mix).
fn by_part(streams: &[recv::StreamStats], base: u16, parts: usize) -> Vec<u64> {
    let mut v = vec![0; parts];
    for s in streams {
        let i = s.stream.saturating_sub(base as u32) / crate::mix::STREAMS_A_PART as u32;
        if let Some(n) = v.get_mut(i as usize) {
            *n += s.received;
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_add_up_by_part() {
        let s = |stream, received| recv::StreamStats {
            stream,
            received,
            ..Default::default()
        };
        let streams = [
            s(7, 10),
            s(8, 5),
            s(7 + 64, 3),
            s(7 + 128 + 1, 2),
            s(900, 1),
        ];
        assert_eq!(by_part(&streams, 7, 3), [15, 3, 2]);
    }
}
