/* The router's maps apart from the FIB (fib.h): next hops, interfaces,
 * egress ports, counters. crates/router/src/layout.rs mirrors the structs
 * and checks them against the BTF clang emits for this file. */
#ifndef LINERATE_ROUTER_MAPS_H
#define LINERATE_ROUTER_MAPS_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

/* Interfaces are slots of small arrays indexed by ifindex; larger ifindexes
 * share slot 0 (counters) and are not ours (ifaces). */
#define ROUTER_IFACES 1024
#define ROUTER_NEXTHOPS 65536

/* Why a frame got its verdict: one counter each, per interface and CPU. */
enum reason {
	R_FORWARDED = 0,
	R_PASS_NOT_IP,       /* ARP, LLDP, anything not IPv4/IPv6 */
	R_PASS_NOT_OURS,     /* unicast to another MAC, or an interface not configured */
	R_PASS_SPECIAL,      /* multicast, broadcast, link-local, loopback, martians */
	R_PASS_TTL,          /* TTL / hop limit <= 1: the kernel sends the ICMP error */
	R_PASS_OPTIONS,      /* IPv4 options */
	R_PASS_FRAGMENT,     /* IPv4 fragments */
	R_PASS_BAD_CSUM,     /* IPv4 header checksum wrong: the kernel drops and counts */
	R_PASS_EXT_HDR,      /* IPv6 hop-by-hop options */
	R_PASS_LOCAL,        /* local address, connected network, unsupported route */
	R_PASS_NO_ROUTE,
	R_PASS_NO_NEIGH,     /* next hop not resolved yet */
	R_PASS_MTU,          /* too big for the egress: fragmentation or ICMP */
	R_PASS_SAME_IF,      /* would leave where it came in: the kernel may redirect */
	R_PASS_NO_PORT,      /* egress interface not attached */
	R_PASS_NOT_FORWARDING, /* the kernel does not forward this family from here (sysctl) */
	R_PASS_RP_FILTER,    /* rp_filter on, and the source's route not one judged here */
	R_PASS_POLICY,       /* routed by policy rules (ip rule) or as an enslaved device */
	R_PASS_NETFILTER,    /* netfilter hooks (nftables, iptables) see forwarded packets */
	R_PASS_TC,           /* tc acts on the ingress or the egress (filters, a configured qdisc) */
	R_PASS_MULTIBUF,     /* a multi-buffer frame the fast path does not send: its headers run past
			      * the first buffer, or the egress cannot send multi-buffer XDP frames */
	R_PASS_FW_MISS,      /* the firewall's verdict on the flow is not cached: the kernel judges it */
	R_PASS_FW_KERNEL,    /* the firewall leaves it to the kernel (reject, too many counters) */
	/* The ruleset reads the connection (ct state), and the kernel's
	 * conntrack must see this packet (conntrack.h): */
	R_PASS_CT_NONE,      /* no entry in the kernel's table: a new connection, or one gone */
	R_PASS_CT_YOUNG,     /* an entry not yet established and assured */
	R_PASS_CT_UNCARRIED, /* an entry with NAT, a helper, offloaded, or dying */
	R_PASS_CT_PROTO,     /* a protocol the fast path does not carry connections of (TCP, ICMP, ...) */
	R_PASS_CT_INVALID,   /* conntrack would find it invalid (length, checksum, TCP flags) */
	R_PASS_CT_STATE,     /* a TCP SYN, FIN or RST: the kernel tracks the connection's state */
	R_PASS_CT_WINDOW,    /* TCP with its windows checked: each segment moves them, in the kernel */
	R_PASS_CT_OFF,       /* the stateful stage is off (no conntrack kfuncs in this kernel) */
	R_DROP_MALFORMED,    /* shorter than the headers it claims */
	R_DROP_FIREWALL,     /* dropped by the nftables ruleset, as the kernel would */
	R_MAX
};

struct router_counters {
	__u64 packets[R_MAX];
	__u64 bytes[R_MAX];
};

#define NH_VALID    1  /* the entry is in use */
#define NH_RESOLVED 2  /* dmac is the neighbour's */
#define NH_KERNEL   4  /* hand to the kernel: local, connected, unsupported */
#define NH_GROUP    8  /* ECMP: `ifindex` is the index of an nh_groups entry */
/* tc acts on the egress (a configured qdisc, egress filters), which a
 * redirected frame would skip: set without NH_RESOLVED, so that the fast
 * path's one test of that bit still decides; this one only names why. */
#define NH_TC      16

/* An ECMP route's members, as next-hop ids spread over buckets in
 * proportion to their weights; a flow's hash picks the bucket, so a flow
 * keeps its path and flows spread like the kernel's (hash-threshold over
 * the weights, 1/64 granularity). */
#define NH_GROUP_BUCKETS 64
#define ROUTER_NH_GROUPS 4096

struct nh_group {
	__u32 bucket[NH_GROUP_BUCKETS];
};

struct nexthop {
	__u32 ifindex;
	__u16 mtu;
	__u8  flags;
	/* Set by the fast path when it sends through this next hop; the
	 * control plane reads and clears it, and tells the kernel that the
	 * neighbour is in use (NTF_USE), as its own forwarding would. */
	__u8  used;
	__u8  dmac[6];
	__u8  smac[6];
};

struct iface {
	__u32 ifindex;  /* 0: slot unused */
	__u8  mac[6];
	__u16 flags;    /* IFACE_* */
};

/* What the kernel forwards when it comes in on the interface: IPv4 by the
 * interface's own forwarding sysctl, IPv6 by conf.all's. */
#define IFACE_FORWARD4 1
#define IFACE_FORWARD6 2
/* IPv4 reverse path filtering on the interface (rp_filter 1 and 2: the
 * larger of conf.all's and the interface's). */
#define IFACE_RPF_STRICT 4
#define IFACE_RPF_LOOSE 8
/* The kernel forwards the family from here, but not by the main table
 * alone: a policy rule (ip rule) may route it elsewhere, or the interface
 * is enslaved (a VRF's, a bridge's port). Set without IFACE_FORWARD4/6,
 * so the fast path's one test of those bits still decides; this one only
 * names the reason. */
#define IFACE_POLICY4 16
#define IFACE_POLICY6 32
/* Netfilter sees what the kernel forwards of the family (a firewall, NAT,
 * conntrack): the kernel forwards it, so that they are not bypassed. As
 * above, set without IFACE_FORWARD4/6, naming the reason only. */
#define IFACE_NETFILTER4 64
#define IFACE_NETFILTER6 128
/* tc acts on what comes in here (ingress filters, tcx programs), which XDP
 * runs before: both families go to the kernel. Set without IFACE_FORWARD4
 * and IFACE_FORWARD6, naming the reason only. */
#define IFACE_TC 256
/* The driver sends multi-buffer XDP frames (NETDEV_XDP_ACT_NDO_XMIT_SG):
 * a jumbo frame that arrived in several buffers may be redirected here.
 * Without it the kernel would drop such a redirect, so the frame passes. */
#define IFACE_XMIT_SG 512
/* Netfilter sees what the kernel forwards of IPv4 (IPv6), and all it
 * sees is nftables filter chains linerate judges (docs/firewall.md): set
 * with IFACE_FORWARD4 (6), forwarded frames of the family are judged by
 * the firewall's verdict cache before they are sent. */
#define IFACE_FIREWALL4 1024
#define IFACE_FIREWALL6 2048

/* Mappable: the control plane sweeps the `used` marks of every gateway
 * once a second from its mapping, without a syscall per entry. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ROUTER_NEXTHOPS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct nexthop);
} nexthops SEC(".maps");

/* The router's own IPv4 addresses as a bit set of 2^16 bits, by a hash
 * (local_src_bit): a frame from one of them is a martian source the kernel
 * drops (fib_validate_source), so the fast path passes it. Another source
 * whose bit a local address shares passes too, to the same verdict. 8 KiB:
 * always cached, where a lookup of the source in the FIB would not be. */
#define LOCAL_SRC_WORDS 1024

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LOCAL_SRC_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} local_src4 SEC(".maps");

/* The bit of local_src4 for address `a` (host order): the top 16 bits of a
 * multiplicative hash. crates/router/src/local.rs computes the same. */
static __always_inline __u32 local_src_bit(__u32 a)
{
	return (a * 0x9E3779B1u) >> 16;
}

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ROUTER_NH_GROUPS);
	__type(key, __u32);
	__type(value, struct nh_group);
} nh_groups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ROUTER_IFACES);
	__type(key, __u32);
	__type(value, struct iface);
} ifaces SEC(".maps");

/* Egress ports by ifindex. An array devmap, not a hash: the fast path
 * looks a port up twice per frame (is it attached, then the redirect), and
 * an array lookup is a bounds check and one load. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, ROUTER_IFACES);
	__type(key, __u32);
	__type(value, __u32);
} tx_ports SEC(".maps");

/* The same ports for the multi-buffer program: a devmap takes redirects
 * from programs of one kind only (the kernel records whether the first
 * program using it was declared for multi-buffer frames). The control
 * plane writes both. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, ROUTER_IFACES);
	__type(key, __u32);
	__type(value, __u32);
} tx_ports_mb SEC(".maps");

#define TX_PORTS(multibuf) ((multibuf) ? (void *)&tx_ports_mb : (void *)&tx_ports)

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ROUTER_IFACES);
	__type(key, __u32);
	__type(value, struct router_counters);
} router_stats SEC(".maps");

/* Frames by interface and receive queue (issue 25: `linerate queues`, in
 * the spirit of nic-queue-usage): entry ifindex * ROUTER_RXQ + queue, the
 * last queue slot taking the queues beyond it. Every frame the program
 * sees, whatever becomes of it. */
#define ROUTER_RXQ 64

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ROUTER_IFACES * ROUTER_RXQ);
	__type(key, __u32);
	__type(value, __u64);
} router_rxq SEC(".maps");

/* The firewall (issue 23, docs/firewall.md): a verdict cache. A forwarded
 * frame's key holds the fields the family's ruleset reads (the others
 * zero, so that flows the ruleset cannot tell apart share an entry); a
 * direct-mapped table of two ways a set gives the verdict the control
 * plane judged for the key under the ruleset's current generation. A miss
 * passes the frame to the kernel, which judges it by its own nftables, and
 * reports the key (fw_misses) for the control plane to judge. The layout
 * of fw_key is crates/firewall's FlowKey. */
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

struct fw_reads {
	/* 0xff for each transport byte some rule reads (little-endian words:
	 * byte i of the header is byte i of the pair). */
	__u64 transport_mask[2];
	__u8 fields;          /* FW_READ_* */
	__u8 transport_end;   /* one past the last transport byte read */
	__u8 pad[6];
};

/* The ruleset's generation, and what each family reads in it. The reads
 * are double-buffered by the generation's parity: the control plane fills
 * those of the next generation, then publishes it, so that a frame never
 * builds its key by one generation's reads and matches another's entries. */
/* fw_state.ct_flags */
#define FW_CT_ON 1        /* the conntrack kfuncs work here (the control plane checked) */
#define FW_CT_CHECKSUM 2  /* net.netfilter.nf_conntrack_checksum: conntrack checks checksums */
#define FW_CT_TCP_LIBERAL 4  /* net.netfilter.nf_conntrack_tcp_be_liberal: no TCP window checks */

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
	/* Bits of a connection's hash that pick its set: [ipv6], each table
	 * holding 2 << bits ways (sized at load, from nf_conntrack_max;
	 * crates/router/src/conntrack.rs). */
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

/* A connection the fast path carries (conntrack.h): its two ends in a
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

/* The fast path's connection cache (conntrack.h): sets of two ways, the
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

#define CT_CACHE_WAYS 2
/* The tables' largest sizes; the control plane sizes them at load (from
 * nf_conntrack_max: for the kernel's default of 262144, 256k sets of
 * IPv4 connections, 16 MiB, and 64k of IPv6 ones, 8 MiB). */
#define CT4_SETS_MAX (1 << 21)
#define CT6_SETS_MAX (1 << 19)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CT4_SETS_MAX * CT_CACHE_WAYS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct ct_way4);
} ct_cache4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CT6_SETS_MAX * CT_CACHE_WAYS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct ct_slot);
} ct_cache6 SEC(".maps");

/* One record of ct_keeper's batch (router.bpf.c). */
struct ct_keep {
	struct ct_flow_key key;
	__u32 timeout_ms;  /* in: the kernel's entry's timeout from now; 0: left alone */
	__u32 result;      /* out: CT_KEEP_* */
};

#define CT_KEEP_BATCH 64
#define CT_KEEP_GONE 1
#define CT_KEEP_KEPT 2

struct fw_rule_counter {
	__u64 packets;
	__u64 bytes;    /* IP packet bytes, as nftables' counter counts */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fw_state);
} fw_state SEC(".maps");

/* Set i's ways are slots 2i and 2i+1 (192 adjacent bytes). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_CACHE_SETS * FW_CACHE_WAYS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fw_slot);
} fw_cache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 18);
} fw_misses SEC(".maps");

/* Per rule (an id the control plane gives: IPv4's below 32768, IPv6's
 * from it), what the fast path counted for its `counter`. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_RULE_COUNTERS);
	__type(key, __u32);
	__type(value, struct fw_rule_counter);
} fw_counters SEC(".maps");

#endif
