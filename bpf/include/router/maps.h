/* Every map of the router program apart from the FIB's (fib.h): next
 * hops, local sources, ECMP groups, interfaces, egress ports, counters,
 * the connection cache and the firewall's. Their layouts are the ABI
 * headers' (abi/). */
#ifndef LINERATE_ROUTER_MAPS_H
#define LINERATE_ROUTER_MAPS_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#include "abi/router.h"
#include "abi/firewall.h"
#include "abi/conntrack.h"
#include "kernel.h"

/* Mappable: the control plane sweeps the `used` marks of every gateway
 * once a second from its mapping, without a syscall per entry. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ROUTER_NEXTHOPS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct nexthop);
} nexthops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LOCAL_SRC_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} local_src4 SEC(".maps");

/* The bit of local_src4 for address `a` (host order): the top 16 bits of a
 * multiplicative hash. crates/dataplane/src/local.rs computes the same. */
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

/* The router's ports by ifindex, then the VLAN devices on them from
 * ROUTER_IFACES on (vlan_slots gives their slots). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ROUTER_IFACES + ROUTER_VLANS);
	__type(key, __u32);
	__type(value, struct iface);
} ifaces SEC(".maps");

/* The VLAN devices on the router's ports: by the port's table
 * (iface.vlans - 1), TPID (802.1ad: + 4096) and VLAN id, the slot of
 * `ifaces` a tagged frame is routed as (0: none). An array, not a hash
 * map keyed by port and tag: its lookup is inlined, an index and a load,
 * where a hash's is a call that hashes the key (a quarter of a tagged
 * frame's time). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ROUTER_VLAN_PORTS * VLAN_TABLE_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} vlan_slots SEC(".maps");

/* The bridges' FDBs (abi/router.h), set by set; mappable: the control
 * plane places entries and sweeps their `used` marks from its mapping. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FDB_SETS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fdb_set);
} bridge_fdb SEC(".maps");

/* The policy rules' programs (abi/router.h), one to an entry: a walk
 * looks its program up once. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, POLICY_PROGRAMS);
	__type(key, __u32);
	__type(value, struct policy_program);
} policy_rules SEC(".maps");

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

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ROUTER_IFACES * ROUTER_RXQ);
	__type(key, __u32);
	__type(value, __u64);
} router_rxq SEC(".maps");

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

/* The NAT stage's ways (abi/conntrack.h), as many sets as the connection
 * cache's of the family, as many in use (fw_state.ct_bits). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CT4_SETS_MAX * CT_CACHE_WAYS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct nat_way4);
} nat_cache4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CT6_SETS_MAX * CT_CACHE_WAYS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct nat_way6);
} nat_cache6 SEC(".maps");

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

/* An IPv4 connection's key as its way holds it: the addresses in one
 * word (a low), the ports in another (aport low), the protocol. */
struct ct_key4 {
	__u64 ab;
	__u32 ports;
	__u8 l4proto;
};

/* What the NAT stage found of a frame's connection (router/nat.h): the
 * `ct` byte for the firewall's key, and what the kernel would rewrite
 * (CT_NAT_DST: the destination, before the route lookup; CT_NAT_SRC: the
 * source, after the forward chain), to what. */
#define CT_NAT_DST 1
#define CT_NAT_SRC 2

struct ct_nat {
	__u8 ct;
	__u8 manip;
	__u8 pad[2];
	__be16 sport;
	__be16 dport;
	__be32 saddr[4];
	__be32 daddr[4];
};

/* A CPU's room for the connection stage, beside the stack (the
 * program's, with the stage's on top, must fit in 512 bytes):
 * `offering`, whether the packet it is judging offers its connection
 * rather than being carried (ct_miss sets it, the firewall reads it), in
 * memory and not in a variable, so that the verifier does not walk the
 * rest of the judging once for each value; the kernel lookup's
 * arguments; the connection's key. */
struct ct_scratch {
	/* The firewall's generation the NAT stage read (router/nat.h,
	 * fw_nat): the frame is judged by it, or goes to the kernel. */
	__u32 generation;
	__u32 offering;
	/* fw_nat found the generation's ruleset with nat chains, and ran
	 * the stage. */
	__u8 nat_read;
	__u8 pad[3];
	struct ct_nat nat;
	struct bpf_ct_opts___local opts;
	struct bpf_sock_tuple tuple;
	/* The connection's key (router/ct_cache.h), by family; the NAT
	 * stage's, a direction's tuple. */
	struct ct_flow_key key6;
	struct ct_key4 key4;
	/* What the NAT stage keeps for a direction (nat_kernel). */
	struct ct_nat keeping;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ct_scratch);
} ct_scratch SEC(".maps");

/* Established TCP connections offered to be carried (FW_CT_TCP_CARRY,
 * struct ct_offer): a connection's packets offer it until the control
 * plane has marked it, so a full ring loses nothing for long. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 16);
} ct_offers SEC(".maps");

/* Per rule (an id the control plane gives: IPv4's below 32768, IPv6's
 * from it), what the fast path counted for its `counter`. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_RULE_COUNTERS);
	__type(key, __u32);
	__type(value, struct fw_rule_counter);
} fw_counters SEC(".maps");

#endif
