/* Map layouts shared by the lab's XDP programs (generator, receiver) and
 * the Rust side. crates/bpf/src/layout.rs mirrors every struct here with
 * #[repr(C)] and a test that checks sizes and offsets. */
#ifndef LINERATE_LAB_MAPS_H
#define LINERATE_LAB_MAPS_H

#include <linux/types.h>

/* Largest header template the generator rewrites on each run:
 * Ethernet 14 + IPv6 40 + UDP 8 + stamp 16 = 78, rounded up. */
#define GEN_TEMPLATE_MAX 96

/* Payload stamp at the start of the UDP payload, network byte order. */
#define STAMP_MAGIC 0x4c52 /* "LR" */
struct stamp {
	__u16 magic;
	__u16 stream;
	__u32 seq;
	__u64 tx_ns; /* bpf_ktime_get_ns() of the sender (CLOCK_MONOTONIC) */
} __attribute__((packed));

/* One generator configuration (array map, one entry). Addresses and ports
 * are host byte order; ranges are [first, first + count). For IPv6 only the
 * low 32 bits of each address vary. */
struct gen_config {
	__u8  template[GEN_TEMPLATE_MAX];
	__u32 family;          /* 4 or 6 */
	__u32 hdr_len;         /* bytes of template[] copied: eth + ip + udp */
	__u32 stamp;           /* 1: write a stamp after the UDP header */
	__u32 src_addr_first;
	__u32 src_addr_count;
	__u32 dst_addr_first;
	__u32 dst_addr_count;
	__u32 src_port_first;
	__u32 src_port_count;
	__u32 dst_port_first;
	__u32 dst_port_count;
	__u32 stream_base;     /* stream id = stream_base + cpu */
	/* Unfolded ones'-complement sum of everything the UDP checksum covers
	 * except the addresses, ports, checksum and stamp: protocol and length
	 * of the pseudo-header, the UDP length, the constant payload. */
	__u32 udp_csum_base;
	__u32 _pad;
};

/* Generator per-CPU state. */
struct gen_state {
	__u64 seq;   /* next sequence number, also the flow counter */
};

/* Receiver per-CPU counters. */
struct recv_counters {
	__u64 packets;
	__u64 bytes;
	__u64 stamped;   /* packets that carried a valid stamp */
};

#endif
