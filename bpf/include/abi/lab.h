/* Map layouts shared by the lab's XDP programs (generator, receiver) and
 * the Rust side. crates/bpf/src/layout.rs mirrors every struct here with
 * #[repr(C)] and a test that checks sizes and offsets. */
#ifndef LINERATE_LAB_MAPS_H
#define LINERATE_LAB_MAPS_H

#include <linux/types.h>

/* Largest header template the generator rewrites on each run:
 * Ethernet 14 + IPv6 40 + UDP 8 = 62, rounded up. */
#define GEN_TEMPLATE_MAX 64

/* Frame sizes a generator cycles through (IMIX needs 12 slots for 7:4:1). */
#define GEN_SIZES_MAX 16

/* Payload stamp at the start of the UDP payload, network byte order. 12
 * bytes, so that IMIX's 40-byte IPv4 packets (UDP payload 12) carry it. */
#define STAMP_MAGIC 0x4c52 /* "LR" */
struct stamp {
	__u16 magic;
	__u16 stream;
	__u32 seq;
	/* Low 32 bits of the sender's bpf_ktime_get_ns() (CLOCK_MONOTONIC):
	 * one-way latencies below 4.29 s are exact modulo 2^32. */
	__u32 tx_ns;
} __attribute__((packed));

/* One frame size: the frame's length without FCS and the IP packet's
 * length (smaller when the frame is padded to Ethernet's 60 bytes). */
struct gen_size {
	__u16 frame_len;
	__u16 ip_len;
};

/* The parts a generator's traffic may mix, and the slots of a mix's
 * round (a part sends as many frames a round as it has slots). */
#define GEN_PARTS 4
#define GEN_MIX_SLOTS 32
/* clear_to's bound: the largest headers, IPv6 and TCP, and a stamp. */
#define GEN_CLEAR_MAX 128

/* One generator configuration (array map, an entry for each part of a
 * mix). Addresses and ports
 * are host byte order; ranges are [first, first + count). For IPv6 only the
 * low 32 bits of each address vary. The UDP payload is all zero apart from
 * the stamp, which the checksum relies on. */
struct gen_config {
	__u8  template[GEN_TEMPLATE_MAX];
	__u32 family;          /* 4 or 6 */
	__u32 src_addr_first;
	__u32 src_addr_count;
	__u32 dst_addr_first;
	__u32 dst_addr_count;
	__u32 src_port_first;
	__u32 src_port_count;
	__u32 dst_port_first;
	__u32 dst_port_count;
	__u32 stream_base;     /* stream id = stream_base + cpu */
	__u32 size_count;      /* frame n has size sizes[n % size_count] */
	__u32 flags;           /* GEN_RANDOM_DST, GEN_RANDOM_SRC */
	struct gen_size sizes[GEN_SIZES_MAX];
	/* Frames per second per CPU; 0 = as fast as possible. Frames ahead of
	 * the schedule are dropped before they leave (XDP_DROP), so the wire
	 * sees a steady rate whatever the size of a BPF_PROG_RUN call. */
	__u64 rate_pps;
	/* CLOCK_MONOTONIC ns: the pacing epoch, and the end of the run (0:
	 * none); frames due after stop_ns are dropped, so a run sends exactly
	 * what its duration allows however late its last call returns. */
	__u64 start_ns;
	__u64 stop_ns;
	/* Runs per clock read: the kernel's batch size. A live-frames batch
	 * runs without preemption and is flushed to the wire at its end, so
	 * one read at its start stamps all its frames as well as a read per
	 * frame would (each frame leaves at the flush), at a 64th of the
	 * cost: the clock was 18% of the generator's CPU (docs/lab.md). */
	__u32 clock_every;
	/* IPPROTO_UDP or IPPROTO_TCP: what the frames carry. */
	__u32 l4;
	/* TCP: which segment of each connection this run sends (GEN_TCP_*),
	 * the data bytes each connection sent before this run, and how far a
	 * connection's sequence advances a segment (the mix's largest payload:
	 * a smaller segment leaves a gap, as a lost one would). */
	__u32 tcp_phase;
	__u32 tcp_from;
	__u32 tcp_stride;
	/* GEN_TCP_CHURN: the frames of a connection (SYN, its data segments,
	 * FIN, the last ACK), and the rounds between two of them (a round is
	 * one frame of each step, each of another connection): time for the
	 * answer to come back through the DUT before the next step. */
	__u32 tcp_steps;
	__u32 tcp_lag;
	/* GEN_TCP_CHURN paced: the least time between two frames. A paced
	 * generator behind its schedule catches up at full speed; so would a
	 * connection's steps, and a last ACK would overtake the FIN|ACK it
	 * acknowledges. Half the schedule's interval: catching up at twice
	 * the rate keeps the steps half their lag apart. */
	__u32 tcp_min_gap_ns;
	/* A traffic mix (entry 0's config only): frame n of a CPU is part
	 * mix[n % mix_count]'s, each part a config and a state entry of its
	 * own (flows, protocol, TCP run, streams, rate); 0: part 0 alone. */
	__u32 mix_count;
	/* A mix: where what any part writes ends (its headers, options or
	 * stamp). A live-frame page keeps what another part's frame left in
	 * it, which a frame's checksum would take for its payload's zeros:
	 * each frame zeroes its payload up to here. 0: no mix. */
	__u32 clear_to;
	__u8  mix[GEN_MIX_SLOTS];
	/* UDP frames with an extension of the IP header, in the template
	 * after the fixed header: IPv4 options, an IPv6 hop-by-hop or
	 * fragment header (GEN_L3_EXTRA bytes); 0: none. */
	__u32 l3_extra;
	/* Frames tagged: the tag pushed after the MACs, as on the wire (TPID,
	 * TCI); 0: untagged. The IP packet is the size's, the frame 4 bytes
	 * longer. */
	__u32 vlan_tag;
	/* The port this part's frames leave by: 0, the port the generator
	 * runs on (XDP_TX); else that interface's index (a redirect), for a
	 * lab whose generator has a second port into the DUT. */
	__u32 out_ifindex;
};

#define GEN_L3_EXTRA 8

/* TCP connections (gen_config.l4 = IPPROTO_TCP): a lab opens them by
 * running the phases in order, the answering receiver replying to each
 * SYN and FIN; data segments then follow one another in sequence, every
 * connection one segment per pass over the flows. */
#define GEN_TCP_SYN 1      /* SYN, MSS and window scale options, no payload */
#define GEN_TCP_DATA 2     /* the next segment (ACK, PSH with a payload) */
#define GEN_TCP_FIN 3      /* FIN|ACK after the data sent, no payload */
#define GEN_TCP_LAST_ACK 4 /* ACK of the receiver's FIN */
/* Short connections, one after the other: every frame is a step of one
 * connection, connection n's step k in round n + k * tcp_lag, so that a
 * connection's frames are tcp_lag rounds apart and every round opens
 * one. Connections are numbered from tcp_from, each its flow (n modulo
 * the flows) and, as a tuple comes back, another initial sequence. */
#define GEN_TCP_CHURN 5
#define GEN_TCP_STEPS_MIN 4 /* SYN, one data segment, FIN, last ACK */

/* The receiver's initial sequence number is the SYN's plus this: it
 * answers without state, and the generator knows what it will say. */
#define LAB_TCP_ISN_GAP 0x40000000u
/* Both ends advertise the largest window, scaled by 14 (1 GiB), and the
 * receiver acknowledges a connection's first segment (the SYN's window is
 * never scaled: 64 KiB until then) and each that crosses a multiple of
 * 2^LAB_TCP_ACK_SHIFT bytes of the connection's data: conntrack checking
 * windows then accepts every segment the generator sends. */
#define LAB_TCP_WSCALE 14
#define LAB_TCP_MSS 1460
#define LAB_TCP_ACK_SHIFT 20

/* Each frame's destination address and port are drawn at random from
 * their ranges (netmap pkt-gen's -Z), instead of stepping through them:
 * to spread lookups over a large routing table, or to make every frame a
 * new flow. GEN_RANDOM_SRC does the same for the source (pkt-gen's -z). */
#define GEN_RANDOM_DST 1
#define GEN_RANDOM_SRC 2

/* Generator per-CPU state, an entry for each part of a mix. Entry 0's
 * clock serves every part. */
struct gen_state {
	__u64 seq;       /* frames sent (XDP_TX), also the flow counter */
	__u64 bytes;     /* their bytes without FCS */
	__u64 held;      /* runs that dropped a frame to keep the rate */
	__u64 after_stop;/* runs after stop_ns or the limit */
	__u64 limit;     /* frames this CPU may send (-n share); 0: no limit */
	__u64 last_ns;   /* when the last frame was built */
	/* The next frame's flow as offsets into the four ranges, stepped
	 * like an odometer (no division per frame); flow n is the same as
	 * the Rust side's flow_of(n) when seq and these start at zero. */
	__u32 sport_off, saddr_off, dport_off, daddr_off;
	__u32 size_idx;  /* next frame's index into sizes[] */
	__u32 clock_runs;/* runs left before the next clock read */
	__u64 clock_ns;  /* the last clock read */
	/* Passes over all the flows completed: a TCP connection's segment
	 * number. */
	__u32 cycle;
	/* This CPU's share of the source ports (TCP: connections are apart
	 * per CPU, each with one sequence); count 0: the config's range. */
	__u32 sport_first;
	__u32 sport_count;
	/* GEN_TCP_CHURN: the next frame's step, and the round it is in. */
	__u32 slot;
	__u64 round;
	/* Entry 0: the next frame's slot in the mix. */
	__u32 mix_slot;
	__u32 _pad;
};

/* Receiver per-CPU counters. */
struct recv_counters {
	__u64 packets;
	__u64 bytes;
	__u64 stamped;   /* packets that carried a valid stamp */
	__u64 bad_stream;/* stamped, but the stream id is >= RECV_STREAMS */
};

/* Per-stream sequence tracking (per CPU). A window of the last
 * RECV_WINDOW_WORDS * 64 sequence numbers tells duplicates from packets
 * that arrive late (RFC 4737: seq below the highest seen = reordered). */
#define RECV_STREAMS 256
#define RECV_WINDOW_WORDS 16
struct recv_stream {
	__u64 received;
	__u64 duplicated;
	__u64 reordered;   /* arrived after a higher sequence number */
	__u64 late;        /* reordered too far back to check for duplicates */
	__u64 span;        /* sequence numbers from the lowest to the highest */
	__u32 first;       /* lowest sequence number seen */
	__u32 max;         /* highest sequence number seen */
	__u32 seen;
	__u32 _pad;
	__u32 tag[RECV_WINDOW_WORDS];   /* seq & ~63 each word stands for */
	__u64 bits[RECV_WINDOW_WORDS];
};

/* One-way latency (per CPU): 16 linear sub-buckets per power of two
 * (values below 16 ns exact, above about 6% wide), see latency_bucket(). */
#define RECV_LAT_BUCKETS 512
struct recv_latency {
	__u64 count;
	__u64 sum_ns;
	__u64 min_ns;
	__u64 max_ns;
	__u64 hist[RECV_LAT_BUCKETS];
};

/* Next-hop watch (lab_recv_watch only): stamped frames by destination
 * MAC, so that a test can see which next hop the DUT sent each frame to,
 * and when (by the generator's transmit stamp). */
#define RECV_WATCH 4
struct recv_watch {
	__u8 mac[6];       /* written by the reader; all-zero: unused */
	__u16 _pad;
	__u32 first_tx;    /* lowest transmit stamp seen (low 32 bits of ns) */
	__u32 last_tx;     /* highest */
	__u64 packets;     /* 0: first_tx and last_tx not set yet */
};

#endif
