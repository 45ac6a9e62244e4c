//! TCP connections from the generator. A lab opens them by running the
//! generator's phases in order (SYN, then data; FIN and the last ACK to
//! close), the answering receiver replying as each connection's peer
//! would, without state (bpf/include/abi/lab.h). Each connection's data
//! segments follow one another in sequence, one a pass over the flows; a
//! run starts where the one before left off (`from`), so that every
//! segment the DUT's conntrack sees is in its window.
use crate::sizes::{l3_header_len, SizeMix};
use linerate_bpf::layout::{
    GenState, GEN_TCP_CHURN, GEN_TCP_DATA, GEN_TCP_FIN, GEN_TCP_LAST_ACK, GEN_TCP_SYN,
};
use serde::{Deserialize, Serialize};

/// The TCP header without options.
pub const TCP_LEN: usize = 20;

/// What the generator's frames carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    #[default]
    Udp,
    Tcp,
}

impl Proto {
    /// TCP if `tcp`, else UDP.
    pub fn tcp_if(tcp: bool) -> Proto {
        if tcp {
            Proto::Tcp
        } else {
            Proto::Udp
        }
    }

    /// The L4 header's length (without TCP options).
    pub fn header_len(self) -> usize {
        match self {
            Proto::Udp => crate::sizes::UDP_LEN,
            Proto::Tcp => TCP_LEN,
        }
    }

    /// The IP protocol number.
    pub fn number(self) -> u32 {
        match self {
            Proto::Udp => 17,
            Proto::Tcp => 6,
        }
    }
}

/// Which segment of each connection a generator run sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TcpPhase {
    /// SYN with the MSS and window scale options.
    Syn,
    /// The next data segment (the first one completes the handshake).
    Data,
    /// FIN|ACK after the data sent.
    Fin,
    /// The ACK of the receiver's FIN.
    LastAck,
    /// Short connections one after the other, every frame a step of one:
    /// SYN, `segments` data segments, FIN, the last ACK, `lag` rounds
    /// apart (see [`TcpRun`]).
    Churn,
}

impl TcpPhase {
    /// Each phase by the name commands give it.
    pub const CHOICES: &'static [(&'static str, TcpPhase)] = &[
        ("syn", TcpPhase::Syn),
        ("data", TcpPhase::Data),
        ("fin", TcpPhase::Fin),
        ("last-ack", TcpPhase::LastAck),
        ("churn", TcpPhase::Churn),
    ];

    /// `gen_config.tcp_phase`.
    pub fn code(self) -> u32 {
        match self {
            TcpPhase::Syn => GEN_TCP_SYN,
            TcpPhase::Data => GEN_TCP_DATA,
            TcpPhase::Fin => GEN_TCP_FIN,
            TcpPhase::LastAck => GEN_TCP_LAST_ACK,
            TcpPhase::Churn => GEN_TCP_CHURN,
        }
    }

    pub fn label(self) -> &'static str {
        Self::CHOICES
            .iter()
            .find(|(_, p)| *p == self)
            .map_or("data", |(n, _)| n)
    }
}

/// One generator run of TCP segments: which, and where it starts: the
/// data bytes each connection sent before it, or (churn) the number of
/// the run's first connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpRun {
    pub phase: TcpPhase,
    pub from: u32,
    /// Churn: each connection's data segments, and the rounds between two
    /// of its frames (0: [`churn_lag`]'s, from the rate).
    pub segments: u32,
    pub lag: u32,
}

impl TcpRun {
    /// A run of `phase` from `from`, not churn.
    pub fn phase(phase: TcpPhase, from: u32) -> Self {
        TcpRun {
            phase,
            from,
            segments: 0,
            lag: 0,
        }
    }

    /// Frames a churn connection takes: SYN, its data, FIN, the last ACK.
    pub fn steps(&self) -> u32 {
        self.segments + 3
    }
}

/// The time a churned connection's frames are apart at least: for its
/// peer's answer to come back through the DUT first (a lab's round trip
/// under load is tens of microseconds to a millisecond).
pub const CHURN_GAP: std::time::Duration = std::time::Duration::from_millis(2);

/// The frames a churned connection's frames are apart at least: a DUT
/// that stalls holds what arrives in its receive ring (a veth's holds
/// 256) and then takes them together, a NAPI budget at a time, before
/// the answers waiting in the other port's ring. A connection's next step
/// queued behind its last one would be judged before the answer (seen in
/// a capture: SYN and data 72 us apart after a 6 ms stall, the data
/// invalid). Twice a ring apart, the next step arrives after the last one
/// has left the ring, and its answer with it.
pub const CHURN_FRAMES_APART: u32 = 512;

/// The rounds between a churned connection's frames at `rate_pps` frames
/// a second per CPU (None: as fast as the generator goes, taken as 10
/// Mpps): CHURN_GAP and CHURN_FRAMES_APART at least.
pub fn churn_lag(rate_pps: Option<u64>, steps: u32) -> u32 {
    let steps = steps.max(1);
    let rounds_per_second = rate_pps.unwrap_or(10_000_000) / steps as u64;
    let in_time = (rounds_per_second as f64 * CHURN_GAP.as_secs_f64()).ceil() as u32;
    in_time.max(CHURN_FRAMES_APART.div_ceil(steps))
}

/// Whether a run of `tcp` (None: UDP) sends data only: a SYN, a FIN or a
/// bare ACK has no payload, so no stamp, and a run that sends them counts
/// every frame that arrives rather than the stamped ones.
pub fn data_only(tcp: Option<TcpRun>) -> bool {
    tcp.is_none_or(|t| t.phase == TcpPhase::Data)
}

/// How far a connection's sequence advances a segment: the mix's largest
/// payload (a smaller segment leaves a gap, as a lost one would).
pub fn stride(sizes: &SizeMix, ipv6: bool) -> u32 {
    let headers = (l3_header_len(ipv6) + TCP_LEN) as u32;
    sizes
        .sizes
        .iter()
        .map(|s| (s.ip_len as u32).saturating_sub(headers))
        .max()
        .unwrap_or(0)
}

/// Each sending CPU's share of `count` source ports from `first`: a
/// connection is sent by one CPU only, each with its own sequence. None if
/// there are fewer ports than CPUs.
pub fn port_shares(first: u32, count: u32, cpus: usize) -> Option<Vec<(u32, u32)>> {
    let n = cpus as u32;
    if n == 0 || count < n {
        return None;
    }
    Some(
        (0..n)
            .map(|i| {
                let lo = first + i * count / n;
                let hi = first + (i + 1) * count / n;
                (lo, hi - lo)
            })
            .collect(),
    )
}

/// The data bytes each connection has sent after a data run from
/// `from` that left the sending CPUs in `states`: the most segments
/// any connection sent, times the stride (a connection that sent fewer
/// has a gap, which conntrack takes as data lost).
pub fn seq_next(run: TcpRun, stride: u32, states: &[GenState]) -> u32 {
    if run.phase == TcpPhase::Churn {
        // The next run's first connection: after every one this run's
        // CPUs reached (each numbers its own from `from`).
        let rounds = states.iter().map(|s| s.round).max().unwrap_or(0);
        return run.from.wrapping_add(rounds as u32);
    }
    if run.phase != TcpPhase::Data {
        return run.from;
    }
    let segments = states
        .iter()
        .map(|s| {
            let partial = s.sport_off | s.saddr_off | s.dport_off | s.daddr_off != 0;
            s.cycle + u32::from(partial)
        })
        .max()
        .unwrap_or(0);
    run.from.wrapping_add(segments.wrapping_mul(stride))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_shared_out_without_overlap() {
        assert_eq!(
            port_shares(2000, 10, 3).unwrap(),
            [(2000, 3), (2003, 3), (2006, 4)]
        );
        assert_eq!(port_shares(2000, 1, 1).unwrap(), [(2000, 1)]);
        assert!(port_shares(2000, 2, 3).is_none());
    }

    #[test]
    fn the_stride_is_the_largest_payload() {
        let v4 = SizeMix::parse("60", false).unwrap();
        assert_eq!(stride(&v4, false), 6);
        let imix = SizeMix::parse("imix", false).unwrap();
        assert_eq!(stride(&imix, false), 1460);
    }

    #[test]
    fn the_next_run_starts_after_the_most_segments_sent() {
        let run = TcpRun::phase(TcpPhase::Data, 100);
        let mut a = GenState {
            cycle: 3,
            ..Default::default()
        };
        let b = GenState {
            cycle: 3,
            ..Default::default()
        };
        assert_eq!(seq_next(run, 6, &[a, b]), 118);
        a.saddr_off = 1;
        assert_eq!(seq_next(run, 6, &[a, b]), 124);
        let syn = TcpRun {
            phase: TcpPhase::Syn,
            ..run
        };
        assert_eq!(seq_next(syn, 6, &[a]), 100);
        let churn = TcpRun {
            phase: TcpPhase::Churn,
            ..run
        };
        let (c, d) = (
            GenState {
                round: 70,
                ..Default::default()
            },
            GenState {
                round: 90,
                ..Default::default()
            },
        );
        assert_eq!(seq_next(churn, 6, &[c, d]), 190);
    }

    #[test]
    fn churned_frames_are_two_milliseconds_and_two_rings_apart_at_least() {
        // 6 Mpps of 6-frame connections: 1M rounds a second, 2000 in 2 ms.
        assert_eq!(churn_lag(Some(6_000_000), 6), 2000);
        assert_eq!(churn_lag(None, 5), 4000);
        // Slower, 512 frames apart: 86 rounds of 6.
        assert_eq!(churn_lag(Some(600_000), 6), 200);
        assert_eq!(churn_lag(Some(10_000), 6), 86);
    }
}
