/* The router's layouts shared with the control plane: why a frame got its
 * verdict, the counters, next hops and interfaces, and the sizes of their
 * maps (router/maps.h). crates/dataplane/src/layout.rs mirrors every struct
 * and constant and checks the structs against the BTF clang emits. */
#ifndef LINERATE_ABI_ROUTER_H
#define LINERATE_ABI_ROUTER_H

#include <linux/types.h>

/* Interfaces are slots of small arrays indexed by ifindex; larger ifindexes
 * share slot 0 (counters) and are not ours (ifaces). */
#define ROUTER_IFACES 1024
#define ROUTER_NEXTHOPS 65536
/* VLAN devices on the router's ports (their entries in ifaces past the
 * ports'), on at most ROUTER_VLAN_PORTS of them: a port with VLAN devices
 * has a table of VLAN_TABLE_SLOTS in vlan_slots (iface.vlans), a slot for
 * each TPID (802.1Q, then 802.1ad) and VLAN id. */
#define ROUTER_VLANS 4096
#define ROUTER_VLAN_PORTS 32
#define VLAN_TABLE_SLOTS 8192

/* Why a frame got its verdict: one counter each, per interface and CPU. */
enum reason {
	R_FORWARDED = 0,
	R_BRIDGED,           /* bridged between a bridge's ports, as the kernel's bridge would */
	R_PASS_NOT_IP,       /* ARP, LLDP, anything not IPv4/IPv6 */
	R_PASS_NOT_OURS,     /* unicast to another MAC, or an interface not configured */
	R_PASS_SPECIAL,      /* multicast, broadcast, link-local, loopback, martians */
	R_PASS_TTL,          /* TTL / hop limit <= 1: the kernel sends the ICMP error */
	R_PASS_OPTIONS,      /* IPv4 options */
	R_PASS_FRAGMENT,     /* IPv4 fragments */
	R_PASS_BAD_CSUM,     /* IPv4 header checksum wrong: the kernel drops and counts */
	R_PASS_EXT_HDR,      /* IPv6 hop-by-hop options */
	R_PASS_LOCAL,        /* for the router: its addresses, broadcast, multicast, anycast routes */
	R_PASS_KERNEL_ROUTE, /* a route the fast path leaves to the kernel: a next hop it does not
			      * carry, another table's connected network, a FIB block that did not fit */
	R_PASS_NO_ROUTE,
	R_PASS_NO_NEIGH,     /* next hop not resolved yet, or a host on a connected network the fast
			      * path holds no neighbour entry of */
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
	 * conntrack must see this packet (router/ct_judge.h): */
	R_PASS_CT_NONE,      /* no entry in the kernel's table: a new connection, or one gone */
	R_PASS_CT_YOUNG,     /* an entry not yet established and assured */
	R_PASS_CT_UNCARRIED, /* an entry with NAT, a helper, offloaded, or dying */
	R_PASS_CT_PROTO,     /* a protocol the fast path does not carry connections of (TCP, ICMP, ...) */
	R_PASS_CT_INVALID,   /* conntrack would find it invalid (length, checksum, TCP flags) */
	R_PASS_CT_STATE,     /* a TCP SYN, FIN or RST: the kernel tracks the connection's state */
	R_PASS_CT_WINDOW,    /* TCP with its windows checked: each segment moves them, in the kernel */
	R_PASS_CT_OFF,       /* the stateful stage is off (no conntrack kfuncs in this kernel) */
	/* On a bridge's port, a frame for another MAC than the bridge's: */
	R_PASS_BRIDGE_LEARN, /* its source is not known behind this port: the kernel learns it */
	R_PASS_BRIDGE_FLOOD, /* its destination is not known (or is the bridge's own): the kernel's */
	R_PASS_BRIDGE_KERNEL, /* ARP, netfilter sees what the bridge forwards of its kind, or the
			       * destination's port is not one the fast path bridges to */
	R_PASS_VLAN,         /* a tagged frame the fast path does not route: no VLAN device of its
			      * tag on the port, a priority tag, a second tag (QinQ) */
	R_DROP_MALFORMED,    /* shorter than the headers it claims */
	R_DROP_FIREWALL,     /* dropped by the nftables ruleset, as the kernel would */
	R_DROP_BLACKHOLE,    /* a `blackhole` policy rule took it, as the kernel's would */
	R_MAX
};

struct router_counters {
	__u64 packets[R_MAX];
	__u64 bytes[R_MAX];
	/* Frames of each pass reason dropped by the policer (router/police.h)
	 * instead of passed: not in packets[]. */
	__u64 policed[R_MAX];
};

/* Policing what goes to the kernel, as a hardware router polices what it
 * punts to its control plane (CoPP): every frame a pass reason hands to the
 * kernel belongs to a class, and each class has a rate and a burst per
 * CPU; a frame over its class's limit is dropped in XDP and counted
 * (router_counters.policed). The class is the reason's, refined by what
 * the frame is where the reason alone cannot tell what the router must
 * see (router/police.h, docs/policing.md). */
enum punt_class {
	PUNT_NEIGHBOUR = 0, /* ARP, IPv6 neighbour and router discovery */
	PUNT_CONTROL,       /* routing and link protocols (BGP, OSPF, BFD, RIP, LDP, VRRP,
			     * PIM, IGMP, MLD; STP, LACP, LLDP, IS-IS) */
	PUNT_ICMP,          /* other ICMP and ICMPv6 for the router or its groups (ping) */
	PUNT_LOCAL,         /* the rest for the router, its groups, martians */
	PUNT_ERRORS,        /* what the kernel answers with an ICMP error or drops: TTL or
			     * hop limit expired, no route, a bad header checksum */
	PUNT_SLOW,          /* transit the kernel forwards and XDP does not: IP options,
			     * extension headers, fragments, too big, back out of the same
			     * interface, multi-buffer */
	PUNT_UNRESOLVED,    /* to a next hop whose neighbour is not resolved yet */
	PUNT_CONNECTIONS,   /* the first packets of flows: the firewall's misses, conntrack's
			     * new, young and invalid, SYN/FIN/RST; a bridge's learning and
			     * flooding */
	PUNT_TRANSIT,       /* what the kernel forwards by the configuration: netfilter, policy
			     * rules, tc, forwarding off, connections not carried, not ours */
	PUNT_CLASSES
};

/* A class's limit as a generic cell rate (GCRA): a frame is due
 * `interval_ns` after the last one let through, and may come up to
 * `burst_ns` early (the burst, less one, frames' worth, and at least a
 * tick); interval 0: no limit. */
struct punt_limit {
	__u64 interval_ns;
	__u64 burst_ns;
};

/* The clock is the kernel's tick, `jiffy_ns` long: bpf_jiffies64 costs a
 * load where bpf_ktime_get_ns cost 30 ns a policed frame (docs/policing.md). */
struct punt_policy {
	__u64 jiffy_ns;
	struct punt_limit class[PUNT_CLASSES];
};

#define NH_VALID    1  /* the entry is in use */
#define NH_RESOLVED 2  /* dmac is the neighbour's */
#define NH_KERNEL   4  /* hand to the kernel: local, connected, unsupported */
#define NH_GROUP    8  /* ECMP: `ifindex` is the index of an nh_groups entry */
/* tc acts on the egress (a configured qdisc, egress filters), which a
 * redirected frame would skip: set without NH_RESOLVED, so that the fast
 * path's one test of that bit still decides; this one only names why. */
#define NH_TC      16
/* With NH_KERNEL, what the kernel does with the packets, which names the
 * reason they pass for: none of these, they are for the router
 * (R_PASS_LOCAL); */
#define NH_UNREACHABLE 32 /* an unreachable, prohibit or blackhole route (R_PASS_NO_ROUTE) */
#define NH_ONLINK      64 /* a connected network, to a host without a neighbour entry
			   * here (R_PASS_NO_NEIGH) */
#define NH_UNSUPPORTED 128 /* a route the fast path does not carry (R_PASS_KERNEL_ROUTE) */

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
	__u32 ifindex;  /* the port the frame leaves by (a group: its index) */
	__u16 mtu;
	__u8  flags;
	/* Set by the fast path when it sends through this next hop; the
	 * control plane reads and clears it, and tells the kernel that the
	 * neighbour is in use (NTF_USE), as its own forwarding would. */
	__u8  used;
	__u8  dmac[6];
	__u8  smac[6];
	/* The interface the kernel routes the frame out of: `ifindex`, or the
	 * bridge whose port `ifindex` is (its FDB holds `dmac` there), or the
	 * VLAN device on it; 0 read as `ifindex`. The same-interface check,
	 * the reverse path's strict check and the firewall's oifname compare
	 * this one. */
	__u32 l3;
	/* Out of a VLAN device: the tag pushed after the MACs, as on the wire
	 * (TPID, then TCI); all zero: none. */
	__u8  tag[4];
};

struct iface {
	__u32 ifindex;  /* 0: slot unused */
	__u8  mac[6];
	__u16 flags;    /* IFACE_* */
	/* The interface the kernel routes what arrives here as: this one, or
	 * the bridge it is a port of (its rules' iif, the firewall's iifname,
	 * the reverse path's interface, the same-interface check). */
	__u32 l3;
	/* With IFACE_TABLES4 (6): the routing tables a transit packet of the
	 * family from here is looked up in, in order (the kernel's policy
	 * rules walked for it: crates/netlink/src/policy.rs), each as the
	 * arena offset of its FIB's root in MiB, four to a word from the low
	 * bits, FIB_TABLES_END after the last. IPv4's is written whatever the
	 * flag: the reverse path filter walks the egress's
	 * (FIB_TABLES_MAIN4). */
	__u64 tables4;
	__u64 tables6;
	/* BRIDGE_*: what the fast path bridges of what arrives here for
	 * another MAC than `mac` (0: none of it). */
	__u16 bridging;
	/* A port with VLAN devices: 1 + its table in vlan_slots (0: none). */
	__u16 vlans;
	__u16 pad[2];
};

/* A bridge's port whose frames the fast path bridges: it forwards (STP),
 * is up, has no special flag (isolated, locked, proxy ARP, neighbour
 * suppression), no tc, and its bridge does not filter VLANs and has no
 * netfilter bridge chain that sees what it forwards. */
#define BRIDGE_PORT 1
/* br_netfilter shows the bridged frames of IPv4 (IPv6) to the ip (ip6)
 * hooks, and some are there: those frames are the kernel's. */
#define BRIDGE_NF4 2
#define BRIDGE_NF6 4
/* ... and VLAN- or PPPoE-tagged frames too (bridge-nf-filter-vlan-tagged,
 * -pppoe-tagged). */
#define BRIDGE_NF_TAGGED 8
/* A learning port of a bridge whose FDB the fast path holds: the bridge
 * learns from every frame it takes in, the ones it passes up to be routed
 * too, so a frame routed from here must have its source known behind this
 * port (else the kernel takes it, and learns), and marks its entry used. */
#define BRIDGE_LEARN 16
/* A bridge's port with VLAN devices on it: the kernel hands their tagged
 * frames to them before the bridge (vlan_do_receive comes before the
 * port's rx_handler), which the fast path leaves to it. */
#define BRIDGE_VLAN_DEVICES 32

/* The bridges' forwarding databases as the fast path bridges by them
 * (crates/router/src/mirror/bridges.rs): the port a (bridge, MAC) is
 * behind, written only for MACs the bridge learned or was given (not its
 * own), without a VLAN. A set-associative array, not a hash map: a lookup
 * is a multiply, one array element (a cache line) and four compares, all
 * inlined (a hash map's lookup is a call). The control plane places the
 * entries (crates/dataplane/src/fdb.rs); a MAC whose set is full is left
 * out (the kernel bridges to and from it). */
#define FDB_WAYS 4
#define FDB_SET_BITS 14
#define FDB_SETS (1 << FDB_SET_BITS)
#define ROUTER_FDB_ENTRIES (FDB_SETS * FDB_WAYS)
/* The fast path bridges to the entry's port (it has BRIDGE_PORT); without
 * it, frames to the MAC are the kernel's. */
#define FDB_TO_PORT 1

/* A slot: `key` the MAC's six bytes as a little-endian word, the bridge's
 * index (below 65536) in the top 16 bits, 0 for an empty slot; the rest
 * one 64-bit word the control plane writes at once. It fills a slot by
 * writing the value, then the key; empties it by writing the key 0 first:
 * a reader reads the key, the value, then the key again, and a key that
 * changed is a miss. */
struct fdb_slot {
	__u64 key;
	__u32 port;
	__u16 mtu;   /* the port's */
	__u8  flags; /* FDB_* */
	/* Set by the fast path when it bridges (or routes) a frame from this
	 * MAC; the control plane reads and clears it, and refreshes the
	 * kernel's entry (NTF_USE), as the kernel's learning from the frame
	 * would. */
	__u8  used;
};

struct fdb_set {
	struct fdb_slot way[FDB_WAYS];
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
/* ... and has nat chains: each packet's connection is found, and its
 * mapping applied, before the route lookup (router/nat.h). */
#define IFACE_NAT4 4096
#define IFACE_NAT6 8192
/* The kernel's rules look the family up in other tables than main alone
 * (`iif dut0 lookup 100`, tenants): the fast path walks `tables4`
 * (`tables6`), a miss (no route, a throw route) going on to the next. */
#define IFACE_TABLES4 16384
#define IFACE_TABLES6 32768
/* The most tables an interface's walk holds, and the end of the list. */
#define FIB_WALK_TABLES 4
#define FIB_TABLES_END 0xffff
/* The first table of an interface's word is this: the fast path walks
 * the family's rule program (policy_rules), the entry the word's second
 * 16 bits give, not a list of tables. */
#define FIB_TABLES_RULES 0xfffe
/* The IPv4 word of an interface whose packets main's table alone routes
 * (its root, MiB 0, the one table): the forward lookup does not read it
 * (IFACE_TABLES4 unset), the reverse path filter walks it for packets
 * leaving there. A word that starts with FIB_TABLES_END: the kernel
 * routes them. */
#define FIB_TABLES_MAIN4 0xffffffffffff0000ull
/* The next hop a `throw` route has: a miss in its table, the walk goes on
 * to the next (with main's alone, the kernel's: its entry is not valid). */
#define NH_ID_THROW 2

/* The next hop of what goes to the kernel for the router (local addresses). */
#define NH_ID_KERNEL 1
/* ... and of the other kernel next hops: NH_UNREACHABLE's, NH_ONLINK's,
 * NH_UNSUPPORTED's. The control plane's ids start after them. */
#define NH_ID_UNREACHABLE 3
#define NH_ID_ONLINK 4
#define NH_ID_UNSUPPORTED 5

/* The kernel's policy rules (ip rule) of a family as the fast path walks
 * them where a list of tables cannot say it (selectors on the source, tos,
 * protocol, ports; goto, blackhole): crates/netlink/src/policy.rs compiles
 * them into a program, each step a rule with what it matches and does.
 * Four programs of POLICY_RULES steps: IPv4 and IPv6, each written to one
 * bank while the interfaces' words name the other. */
#define POLICY_RULES 64
#define POLICY_PROGRAMS 4

enum rule_step {
	RULE_END = 0,   /* no rule left: the kernel answers (no route) */
	RULE_LOOKUP,    /* the FIB at table_mib; a miss (none, throw) goes on */
	RULE_GOTO,      /* go on at step `next` */
	RULE_BLACKHOLE, /* dropped */
	RULE_KERNEL,    /* the kernel decides (unreachable, prohibit, what the fast path cannot) */
};

/* What a step's flags add to its words. */
#define RULE_INVERT 1
#define RULE_PORTS  2 /* source and destination ports within their ranges */
/* IPv6: the low words of the addresses (words 3-4) too, a prefix longer
 * than /64; without it a step compares three words. */
#define RULE_LOW    4

/* A rule key's word as a step matches it: the packet's word under `mask`
 * is `value` (a zero mask: any). */
struct rule_word {
	__u64 value;
	__u64 mask;
};

/* A transit packet as the rules see it (the kernel's flow for a forwarded
 * packet), as 64-bit words in host order: IPv4 word 0 the source << 32 |
 * the destination, word 1 the meta word; IPv6 words 0 and 1 the source's
 * and the destination's high 64 bits, 2 the meta word, 3 and 4 their low
 * 64 bits (RULE_LOW). The meta word: the ingress ifindex
 * << 32 | tos or traffic class << 8 | protocol (the one after IPv6's
 * extension headers). One masked compare a word decides every selector
 * but the ports: a prefix, an interface, the kernel's tos bits (IPv4's
 * 0x1c under the legacy selector, IPv6's DSCP), a protocol. */
#define RULE_KEY4_WORDS 2
#define RULE_KEY6_WORDS 5

struct policy_rule {
	__u8  step;  /* enum rule_step */
	__u8  flags; /* RULE_* */
	__u16 table_mib;
	__u16 next; /* a goto's: the step it jumps to */
	__u16 pad;
	__u16 sport_lo;
	__u16 sport_hi;
	__u16 dport_lo;
	__u16 dport_hi;
	struct rule_word word[RULE_KEY6_WORDS];
};

struct policy_program {
	struct policy_rule step[POLICY_RULES];
};

/* A walk's outcome beside next-hop ids. */
#define POLICY_DROP 0xffffffffu
#define POLICY_KERNEL 0xfffffffeu

/* The router's own IPv4 addresses as a bit set of 2^16 bits, by a hash
 * (local_src_bit, router/maps.h): a frame from one of them is a martian source the kernel
 * drops (fib_validate_source), so the fast path passes it. Another source
 * whose bit a local address shares passes too, to the same verdict. 8 KiB:
 * always cached, where a lookup of the source in the FIB would not be. */
#define LOCAL_SRC_WORDS 1024

/* Frames by interface and receive queue (`linerate queues`, in the spirit
 * of nic-queue-usage): entry ifindex * ROUTER_RXQ + queue, the
 * last queue slot taking the queues beyond it. Every frame the program
 * sees, whatever becomes of it. */
#define ROUTER_RXQ 64

#endif
