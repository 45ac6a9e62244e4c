/* The connection cache's layouts shared with the control plane (the
 * stateful firewall, router/ct_cache.h): a connection's key, the ways of
 * each family's table, and the keeper's batch records.
 * crates/dataplane/src/layout.rs mirrors them (checked against BTF). */
#ifndef LINERATE_ABI_CONNTRACK_H
#define LINERATE_ABI_CONNTRACK_H

#include <linux/types.h>

/* A connection the fast path carries (router/ct_cache.h): its two ends in a
 * canonical order, a before b. */
struct ct_flow_key {
	__u8 a[16];       /* network order; IPv4 in the first four bytes */
	__u8 b[16];
	__be16 aport;
	__be16 bport;
	__u8 l4proto;
	__u8 ipv6;
	__u8 pad[2];
};

/* An established TCP connection the ruleset accepts, its windows checked,
 * as a packet of it gave it (FW_CT_TCP_CARRY, ct_offers): that packet's
 * source in `a`, its destination in `b` (not the canonical order), the
 * direction's tuple the kernel's table finds it by. */
struct ct_offer {
	struct ct_flow_key tuple;
};

/* The fast path's connection cache (router/ct_cache.h): sets of two ways, the
 * set chosen by the key's hash, one table per family. The fast path fills
 * ways (on several CPUs at once, for connections hashing to one set) and
 * the control plane empties them, each after making `seq` odd with a
 * compare-and-swap; `seq` even again after. A reader takes a way whose
 * `seq` is odd, or changed while it read, for a miss.
 *
 * An IPv4 connection's way: 32 bytes, a set's two in one cache line (the
 * table is a mappable array, its values page-aligned), so that a lookup
 * costs one line where a million connections make every one a miss. */
struct ct_way4 {
	__u32 seq;
	__be16 aport;
	__be16 bport;
	__be32 a;         /* a before b (ct_side_first) */
	__be32 b;
	__u8 l4proto;     /* 0: empty */
	__u8 orig_from_a; /* its original direction goes from a to b */
	__u8 pad[6];
	/* bpf_jiffies64 of the last packet carried: the control plane keeps
	 * the kernel's timeout running from it. */
	__u64 seen;
};

/* An IPv6 connection's way: 64 bytes. */
struct ct_slot {
	__u32 seq;
	__u8 orig_from_a;
	__u8 pad[3];
	__u64 seen;
	struct ct_flow_key key;  /* l4proto 0: empty */
	__u8 reserved[8];
};

/* The NAT stage's cache (router/nat.h): a connection's packets of each
 * direction, found by their tuple as they arrive (a way per direction:
 * under NAT the two directions' tuples are not each other's inverse),
 * with what the kernel's entry rewrites them to. Written and read as the
 * connection cache's ways are (`seq`, `seen`).
 *
 * An IPv4 direction's way: 32 bytes, a set's two in one cache line as
 * the connection cache's, its first 20 laid out as a ct_way4's with the
 * packet's source for side a. It holds one rewrite, the source's or the
 * destination's (a connection mapped both ways in one direction, DNAT
 * and SNAT at once, is found in the kernel's table on each packet), and
 * the low half of `seen`. */
struct nat_way4 {
	__u32 seq;
	__be16 sport;     /* the packet's, as it arrives */
	__be16 dport;
	__be32 saddr;
	__be32 daddr;
	__u8 l4proto;     /* 0: empty */
	__u8 ct;          /* the firewall's ct byte for its packets */
	__u8 manip;       /* what is rewritten: CT_NAT_DST or CT_NAT_SRC (or nothing) */
	__u8 pad;
	__be32 to_addr;   /* to what */
	__be16 to_port;
	__u8 pad2[2];
	__u32 seen;       /* bpf_jiffies64's low 32 bits */
};

/* An IPv6 direction's way: 128 bytes, its first half laid out as a
 * ct_slot with the packet's source for side a. */
struct nat_way6 {
	__u32 seq;
	__u8 ct;
	__u8 manip;
	__u8 pad[2];
	__u64 seen;
	struct ct_flow_key key;  /* a: the packet's source; l4proto 0: empty */
	__be16 to_sport;
	__be16 to_dport;
	__u8 pad2[4];
	__be32 to_saddr[4];
	__be32 to_daddr[4];
	__u8 reserved[32];
};

#define CT_CACHE_WAYS 2
/* The tables' largest sizes; the control plane sizes them at load (from
 * nf_conntrack_max: for the kernel's default of 262144, 256k sets of
 * IPv4 connections, 16 MiB, and 64k of IPv6 ones, 8 MiB). The NAT
 * stage's tables have as many sets each (16 MiB each). */
#define CT4_SETS_MAX (1 << 21)
#define CT6_SETS_MAX (1 << 19)
/* A connection's set is the low fw_state.ct_bits bits of the top
 * CT_SET_BITS_TOP bits of its hash: the sets the fast path uses are the
 * first 2^ct_bits of the table, a span the control plane widens and
 * narrows with the connections the table holds (a table far larger than
 * its connections scatters them over pages the TLB cannot hold), and
 * widened by a bit, a set's connections stay in it or move to the one
 * 2^ct_bits further. */
#define CT_SET_BITS_TOP 21

/* One record of ct_keeper's batch (router/router.bpf.c). */
struct ct_keep {
	struct ct_flow_key key;
	__u32 timeout_ms;  /* in: the kernel's entry's timeout from now; 0: left alone */
	__u8 nat;          /* in: a way of the NAT stage's (its key a tuple) */
	__u8 result;       /* out: CT_KEEP_* */
	__u8 pad[2];
};

#define CT_KEEP_BATCH 64
#define CT_KEEP_GONE 1
#define CT_KEEP_KEPT 2

#endif
