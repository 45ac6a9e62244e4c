/* Policing what the fast path passes to the kernel (abi/router.h, enum
 * punt_class): the frame's class, each class's limit per CPU, and the one
 * function every pass goes through, which counts it as passed or, over
 * its class's limit, drops and counts it as policed. Only passed frames
 * come here: what XDP forwards, bridges or drops never reads the clock. */
#ifndef LINERATE_ROUTER_POLICE_H
#define LINERATE_ROUTER_POLICE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "parse.h"
#include "router/maps.h"

/* The limits, written whole by the control plane; all zero (no limit)
 * until it does. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct punt_policy);
} punt_policy SEC(".maps");

/* Each class's theoretical arrival time on this CPU (the GCRA's state):
 * per CPU, so no CPU waits on another's line. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PUNT_CLASSES);
	__type(key, __u32);
	__type(value, __u64);
} punt_tat SEC(".maps");

#define PUNT_IPPROTO_OSPF 89
#define PUNT_IPPROTO_VRRP 112
#define PUNT_ETH_P_SLOW 0x8809 /* LACP, marker */
#define PUNT_ETH_P_LLDP 0x88cc

/* A TCP or UDP port of a routing protocol: BGP, LDP, MSDP (TCP, either
 * end); RIP, RIPng, LDP's discovery, single- and multi-hop BFD (UDP, the
 * destination). */
static __always_inline int punt_routing_port(__u8 proto, __u16 sport, __u16 dport)
{
	if (proto == IPPROTO_TCP)
		return sport == 179 || dport == 179 || sport == 646 || dport == 646 ||
		       sport == 639 || dport == 639;
	return dport == 520 || dport == 521 || dport == 646 || dport == 3784 || dport == 3785 ||
	       dport == 4784;
}

/* What a frame is to the router where its reason cannot tell: neighbour
 * discovery (PUNT_NEIGHBOUR), a routing or link protocol (PUNT_CONTROL),
 * ICMP (PUNT_ICMP), else `other`. Read from the headers as they come,
 * after a VLAN tag: IPv6's first next header, an IPv4 fragment's ports
 * only in its first. */
static __always_inline __u32 punt_content(struct xdp_md *ctx, __u32 other)
{
	const __u8 *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	const __u8 *l4;
	__u8 proto;
	int mcast, ports = 1;

	if ((void *)(data + ETH_HLEN) > data_end)
		return other;
	const __u8 *l3 = data + frame_l3_off(data);
	if ((void *)l3 > data_end)
		return other;
	__u16 type = bpf_ntohs(*(const __be16 *)(l3 - 2));

	if (type == ETH_P_ARP)
		return PUNT_NEIGHBOUR;
	/* 802.3 lengths (STP, IS-IS), LACP, LLDP. */
	if (type < ETH_P_802_3_MIN || type == PUNT_ETH_P_SLOW || type == PUNT_ETH_P_LLDP)
		return PUNT_CONTROL;
	if (type == ETH_P_IP) {
		const struct iphdr *ip = (const void *)l3;

		if ((void *)(ip + 1) > data_end)
			return other;
		proto = ip->protocol;
		l4 = (const __u8 *)ip + (ip->ihl & 0xf) * 4;
		mcast = (bpf_ntohl(ip->daddr) >> 28) == 0xe;
		ports = !(ip->frag_off & bpf_htons(0x1fff));
	} else if (type == ETH_P_IPV6) {
		const struct ipv6hdr *ip6 = (const void *)l3;

		if ((void *)(ip6 + 1) > data_end)
			return other;
		proto = ip6->nexthdr;
		l4 = (const __u8 *)(ip6 + 1);
		mcast = ip6->daddr.in6_u.u6_addr8[0] == 0xff;
	} else {
		return other;
	}
	switch (proto) {
	case IPPROTO_IGMP:
	case PUNT_IPPROTO_OSPF:
	case IPPROTO_PIM:
	case PUNT_IPPROTO_VRRP:
		return PUNT_CONTROL;
	case IPPROTO_ICMP:
		return PUNT_ICMP;
	case IPPROTO_HOPOPTS:
		/* MLD's reports carry a router alert in a hop-by-hop header. */
		return mcast ? PUNT_CONTROL : other;
	case IPPROTO_ICMPV6:
		if (l4 + 1 > (const __u8 *)data_end)
			return other;
		if (l4[0] >= 133 && l4[0] <= 137) /* router and neighbour discovery, redirect */
			return PUNT_NEIGHBOUR;
		if ((l4[0] >= 130 && l4[0] <= 132) || l4[0] == 143) /* MLD */
			return PUNT_CONTROL;
		return PUNT_ICMP;
	case IPPROTO_TCP:
	case IPPROTO_UDP:
		if (!ports || l4 + 4 > (const __u8 *)data_end)
			return other;
		return punt_routing_port(proto, (__u16)l4[0] << 8 | l4[1], (__u16)l4[2] << 8 | l4[3])
			       ? PUNT_CONTROL
			       : other;
	}
	return other;
}

/* The class of a frame passed for reason `r`. */
static __always_inline __u32 punt_class(struct xdp_md *ctx, __u32 r)
{
	switch (r) {
	case R_PASS_NOT_IP:
	case R_PASS_SPECIAL:
	case R_PASS_LOCAL:
		return punt_content(ctx, PUNT_LOCAL);
	case R_PASS_TTL:
		/* eBGP and the link protocols' packets come with TTL 1. */
		return punt_content(ctx, PUNT_ERRORS) == PUNT_CONTROL ? PUNT_CONTROL : PUNT_ERRORS;
	case R_PASS_OPTIONS:
	case R_PASS_EXT_HDR:
		/* IGMP and MLD carry a router alert. */
		return punt_content(ctx, PUNT_SLOW) == PUNT_CONTROL ? PUNT_CONTROL : PUNT_SLOW;
	case R_PASS_FRAGMENT:
	case R_PASS_MTU:
	case R_PASS_SAME_IF:
	case R_PASS_MULTIBUF:
		return PUNT_SLOW;
	case R_PASS_BAD_CSUM:
	case R_PASS_NO_ROUTE:
		return PUNT_ERRORS;
	case R_PASS_NO_NEIGH:
		return PUNT_UNRESOLVED;
	case R_PASS_FW_MISS:
	case R_PASS_CT_NONE:
	case R_PASS_CT_YOUNG:
	case R_PASS_CT_INVALID:
	case R_PASS_CT_STATE:
	case R_PASS_BRIDGE_LEARN:
	case R_PASS_BRIDGE_FLOOD:
		return PUNT_CONNECTIONS;
	}
	return PUNT_TRANSIT;
}

/* Whether a frame of `class` is over its limit on this CPU; if not, it
 * takes its place in the schedule. */
static __always_inline int punt_over(__u32 class)
{
	__u32 zero = 0;
	struct punt_policy *p = bpf_map_lookup_elem(&punt_policy, &zero);

	/* (One register for the bound and the index, as in verdict().) */
	asm volatile("" : "+r"(class));
	if (!p || class >= PUNT_CLASSES)
		return 0;
	/* Both read before the lookup, which takes the key's address. */
	__u64 interval = p->class[class].interval_ns;
	__u64 burst = p->class[class].burst_ns;
	__u64 jiffy_ns = p->jiffy_ns;

	if (!interval)
		return 0;
	__u32 key = class;
	__u64 *tat = bpf_map_lookup_elem(&punt_tat, &key);

	if (!tat)
		return 0;
	__u64 now = bpf_jiffies64() * jiffy_ns;
	__u64 t = *tat > now ? *tat : now;

	if (t - now > burst)
		return 1;
	*tat = t + interval;
	return 0;
}

/* A frame the fast path passes for reason `r`, `len` bytes: XDP_PASS and
 * counted as passed, or XDP_DROP and counted as policed. A function of
 * its own, verified once (global): every pass of the program calls it. */
__attribute__((noinline)) int punt(struct xdp_md *ctx, __u32 r, __u64 len)
{
	__u32 slot = ctx->ingress_ifindex < ROUTER_IFACES ? ctx->ingress_ifindex : 0;
	struct router_counters *c = bpf_map_lookup_elem(&router_stats, &slot);

	asm volatile("" : "+r"(r));
	if (!c || r >= R_MAX)
		return XDP_PASS;
	if (punt_over(punt_class(ctx, r))) {
		c->policed[r]++;
		return XDP_DROP;
	}
	c->packets[r]++;
	c->bytes[r] += len;
	return XDP_PASS;
}

#endif
