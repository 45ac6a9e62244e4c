/* The firewall's layouts shared with the control plane: the verdict
 * cache's key and slots, what a ruleset reads, the state the control plane
 * publishes, misses and rule counters. crates/dataplane/src/layout.rs
 * mirrors them (checked against BTF). */
#ifndef LINERATE_ABI_FIREWALL_H
#define LINERATE_ABI_FIREWALL_H

#include <linux/types.h>

/* The firewall (docs/firewall.md): a verdict cache. A forwarded
 * frame's key holds the fields the family's ruleset reads (the others
 * zero, so that flows the ruleset cannot tell apart share an entry); a
 * direct-mapped table of two ways a set gives the verdict the control
 * plane judged for the key under the ruleset's current generation. A miss
 * passes the frame to the kernel, which judges it by its own nftables, and
 * reports the key (fw_misses) for the control plane to judge. The layout
 * of fw_key is the dataplane's FlowKey. */
#define FW_CACHE_SETS (1 << 17)
#define FW_CACHE_WAYS 2
#define FW_TRANSPORT_BYTES 16
#define FW_ENTRY_COUNTERS 4
#define FW_RULE_COUNTERS 65536

/* What a family's ruleset reads (fw_reads.fields). */
#define FW_READ_IIF 1
#define FW_READ_OIF 2
#define FW_READ_SADDR 4
#define FW_READ_DADDR 8
#define FW_READ_L4PROTO 16
#define FW_READ_NEXTHDR 32
#define FW_READ_CT 64
/* The family's ruleset has nat chains: every packet's connection is found
 * in the kernel's table before the route lookup (router/nat.h), and its
 * addresses and ports mapped as the kernel's entry says. */
#define FW_READ_NAT 128

struct fw_reads {
	/* 0xff for each transport byte some rule reads (little-endian words:
	 * byte i of the header is byte i of the pair). */
	__u64 transport_mask[2];
	__u8 fields;          /* FW_READ_* */
	__u8 transport_end;   /* one past the last transport byte read */
	__u8 set_bits;        /* the cache's sets the family's keys take: 1 << set_bits */
	__u8 pad[5];
};

/* With a classifier, a key the cache lacks costs a walk in the program,
 * not a trip to the kernel: the family's keys then take 2^13 of the sets
 * (1.5 MiB of slots), which stay in the CPU's caches, where a random new
 * key's probe of all of them (24 MiB) waits for memory. Every frame a new
 * flow through an access list of 10k rules: 1.1 Mpps over all the sets,
 * 1.9 over 2^13 (docs/results.md). Without one, a miss is the kernel's,
 * and the keys take every set. */
#define FW_SET_BITS_CLASSIFIED 13
#define FW_SET_BITS_ALL 17

/* The ruleset's generation, and what each family reads in it. The reads
 * are double-buffered by the generation's parity: the control plane fills
 * those of the next generation, then publishes it, so that a frame never
 * builds its key by one generation's reads and matches another's entries. */
/* fw_state.ct_flags */
#define FW_CT_ON 1        /* the conntrack kfuncs work here (the control plane checked) */
#define FW_CT_CHECKSUM 2  /* net.netfilter.nf_conntrack_checksum: conntrack checks checksums */
#define FW_CT_TCP_LIBERAL 4  /* net.netfilter.nf_conntrack_tcp_be_liberal: no TCP window checks */
/* The operator's choice (`carry_tcp`): an established TCP connection the
 * ruleset accepts, its windows checked, is offered (ct_offers) for the
 * control plane to mark liberal both ways, as the kernel's flowtable marks
 * the connections it offloads; carried from then on. */
#define FW_CT_TCP_CARRY 8

/* fw_key.ct */
#define FW_CT_ESTABLISHED 2  /* ct state established (NF_CT_STATE_BIT(IP_CT_ESTABLISHED)) */
#define FW_CT_REPLY 0x80

struct fw_state {
	__u32 generation;
	__u32 ct_flags;   /* FW_CT_* */
	/* Jiffies a connection's way is kept for after its last packet, while
	 * others want its set (0: none: the least recent goes). Written by the
	 * control plane, which knows the tick's length. */
	__u32 ct_idle;
	/* Bits of a connection's hash that pick its set: [ipv6], the sets in
	 * use the first 1 << bits of the family's tables (sized at load, from
	 * nf_conntrack_max), fitted by the control plane to the connections
	 * they hold (abi/conntrack.h, CT_SET_BITS_TOP;
	 * crates/dataplane/src/ct_cache.rs). */
	__u8 ct_bits[2];
	__u8 pad[2];
	struct fw_reads reads[2][2];  /* [generation & 1][ipv6] */
	/* What the kernel sets a carried connection's timeout to on each of
	 * its packets, in ms: [0] UDP (nf_conntrack_udp_timeout_stream), [1]
	 * TCP (nf_conntrack_tcp_timeout_established); 0 until the control
	 * plane has read them. */
	__u32 ct_timeout_ms[2];
};

struct fw_key {
	__u8 saddr[16];   /* network order; IPv4 in the first four bytes */
	__u8 daddr[16];
	__u32 iif;
	__u32 oif;
	__u8 transport[FW_TRANSPORT_BYTES];
	__u8 transport_len; /* the packet's transport bytes up to transport_end */
	__u8 l4proto;
	__u8 nexthdr;
	__u8 ipv6;
	/* The connection as the fast path found it (FW_READ_CT): its ct state
	 * bit, FW_CT_REPLY for the reply direction. */
	__u8 ct;
	__u8 pad[3];
};

#define FW_ACCEPT 1
#define FW_DROP 2
#define FW_KERNEL 3

/* A cached verdict. The control plane makes `seq` odd while it writes the
 * slot and even after: a frame that sees it odd, or changed by the time it
 * has read the slot, takes it for a miss. */
struct fw_slot {
	__u32 seq;
	__u32 generation;
	struct fw_key key;
	__u8 verdict;     /* FW_*; 0: empty */
	__u8 counters_n;
	/* The rules whose counters the key's packets reach (fw_counters). */
	__u16 counters[FW_ENTRY_COUNTERS];
	__u8 reserved[14];
};

/* A miss, as reported: the key built by the generation's reads. */
struct fw_miss {
	struct fw_key key;
	__u32 generation;
	__u32 pad;
};

struct fw_rule_counter {
	__u64 packets;
	__u64 bytes;    /* IP packet bytes, as nftables' counter counts */
};

/* The classifier (crates/firewall/src/classify, docs/firewall.md): a
 * family's ruleset as bit-vector classification, judged in the program
 * for a key its verdict cache does not hold. Its tables live in the
 * router's arena (fib.h), one region per [generation & 1][ipv6]: a
 * header (fwc_header) at the region's start, the terms' actions (u32
 * each), then each field's lookup (a u32 row per value, or fwc_range
 * intervals) and its rows: first the bits every row of the field has
 * (`words` u64, the shared row), then each row as its summary
 * (FWC_SUMMARY u64: a bit for each word of the whole row with a bit set),
 * two u32 (the first word of its own bits and how many) and its own
 * bits. A row is named by its place in
 * u64s from the shared row. Offsets are from the arena's start. */
#define FWC_ARENA_OFF (2304ull << 20)
#define FWC_REGION (384ull << 20)
#define FWC_FIELDS 16
#define FWC_WORDS 256
#define FWC_TERMS (FWC_WORDS * 64)
#define FWC_SUMMARY (FWC_WORDS / 64)  /* u64s of a row's summary: a bit a word */
#define FWC_MAX_STEPS 32

/* Where a field's value comes from (fwc_field.source). */
#define FWC_SRC_IIF 0
#define FWC_SRC_OIF 1
#define FWC_SRC_SADDR 2
#define FWC_SRC_DADDR 3
#define FWC_SRC_L4PROTO 4
#define FWC_SRC_NEXTHDR 5
#define FWC_SRC_CT 6
#define FWC_SRC_TRANSPORT 7

/* How it finds its row (fwc_field.kind). */
#define FWC_DIRECT 0   /* a u32 row per value; the last for a lacking one */
#define FWC_RANGES 1   /* fwc_range by start, searched */

/* A row the kernel judges (an interface the firewall has no name for). */
#define FWC_KERNEL_ROW 0xffffffffu

/* A term's action: the kind in the top byte, its argument below. */
#define FWC_ACT_COUNT (1u << 24)   /* rule counter id, then the next term */
#define FWC_ACT_SKIP (2u << 24)    /* go on at term `arg` */
#define FWC_ACT_ACCEPT (3u << 24)
#define FWC_ACT_DROP (4u << 24)
#define FWC_ACT_KERNEL (5u << 24)
#define FWC_ACT_KIND 0xff000000u
#define FWC_ACT_ARG 0x00ffffffu

/* The value a transport field the packet lacks reads as: above every
 * 32-bit value (1 << 64 as the 128-bit hi:lo pair). */
#define FWC_LACKING_HI 1ull

struct fwc_field {
	__u8 source;      /* FWC_SRC_* */
	__u8 offset;      /* transport: its first byte */
	__u8 len;         /* transport: 1, 2 or 4 bytes */
	__u8 kind;        /* FWC_DIRECT, FWC_RANGES */
	__u32 count;      /* direct: values (the lacking one included); ranges: intervals */
	__u64 mask_hi;    /* the mask, all ones for none */
	__u64 mask_lo;
	__u64 lookup;     /* arena offset of the u32 rows or the fwc_range intervals */
	__u64 rows;       /* arena offset of the shared row, the rows after it */
};

struct fwc_header {
	__u32 on;         /* 1: the tables are whole and the family judged by them */
	__u32 fields;     /* how many of `field` */
	__u32 words;      /* words a row has */
	__u32 terms;
	__u64 acts;       /* arena offset of the terms' actions */
	struct fwc_field field[FWC_FIELDS];
};

/* An interval of a wide field: it starts at hi:lo and runs to the next. */
struct fwc_range {
	__u64 hi;
	__u64 lo;
	__u32 row;
	__u32 pad;
};

#endif
