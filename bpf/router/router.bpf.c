// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* linerate's fast path, FreeBSD ip_tryforward style: forward the common
 * packet (plain unicast IPv4/IPv6 transit, TTL > 1, no options, a route
 * with a resolved neighbour, fits the egress MTU) with a FIB lookup, a TTL
 * decrement and a MAC rewrite; hand every other frame to the kernel
 * untouched (XDP_PASS), counting why, within the limit of its class
 * (router/police.h). Only frames shorter than the headers they claim are
 * dropped, as the kernel would, and those over their class's limit. What a frame carries after
 * its IP packet is cut before it is sent, as the kernel cuts it. A tagged
 * frame is routed as the VLAN device its port and tag name (vlan_slots),
 * its tag left in place, and leaves with the tag of the VLAN device it is
 * sent out of, or without one (route_frame, send). Three entries: `router`
 * for single-buffer frames, `router_vlan` for the tagged ones among them
 * (the first hands them over), `router_mb` declared for multi-buffer XDP
 * (xdp.frags), which attaches at any MTU: a jumbo frame may arrive in
 * several buffers, its headers in the first. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "fib.h"
#include "router/maps.h"
#include "parse.h"
#include "router/firewall.h"
#include "router/nat.h"
#include "router/police.h"

#define IP_MF_OFFSET 0x3fff
#define NEXTHDR_HOP 0

static __always_inline int verdict(struct router_counters *c, enum reason r, __u64 len, int action)
{
	__u32 i = r;

	/* (One register for the bound and the index: clang may otherwise
	 * check a copy and index with another, which the verifier takes for
	 * unbounded when a stage's code moves.) */
	asm volatile("" : "+r"(i));
	if (c && i < R_MAX) {
		c->packets[i]++;
		c->bytes[i] += len;
	}
	return action;
}

/* A frame for the kernel: counted, or policed (router/police.h). */
#define PASS(r) punt(ctx, (r), len)
/* Headers that run past the frame's first buffer: a frame that short is
 * malformed, unless more of it sits in further buffers (multi-buffer XDP),
 * which the kernel reads whole. */
#define HEADERS_CUT() \
	(len > linear ? PASS(R_PASS_MULTIBUF) : verdict(c, R_DROP_MALFORMED, len, XDP_DROP))

/* Why a family the interface does not forward in XDP passes: its flags
 * name it (IFACE_POLICY*, IFACE_TC, IFACE_NETFILTER*), else the kernel
 * does not forward it from here at all. */
static __always_inline enum reason not_forwarded(__u16 flags, __u16 policy, __u16 netfilter)
{
	if (flags & policy)
		return R_PASS_POLICY;
	if (flags & IFACE_TC)
		return R_PASS_TC;
	if (flags & netfilter)
		return R_PASS_NETFILTER;
	return R_PASS_NOT_FORWARDING;
}

/* Two loads a side, not six: a MAC as a 32-bit and a 16-bit word. Both
 * are 2-byte aligned (the frame's start and struct iface's mac), and the
 * verifier lets x86 read packet words at any alignment. */
static __always_inline int mac_eq(const __u8 *a, const __u8 *b)
{
	const __u16 *a16 = (const __u16 *)a, *b16 = (const __u16 *)b;

	return *(const __u32 *)a16 == *(const __u32 *)b16 && a16[2] == b16[2];
}

/* A flow's hash for ECMP, from its source and destination (the kernel's
 * default policy hashes the addresses too): a 64-bit multiply-xorshift,
 * whose top bits pick the bucket. */
static __always_inline __u32 flow_bucket(__u64 src, __u64 dst)
{
	__u64 h = (src * 0x9e3779b97f4a7c15ull) ^ dst;

	h *= 0xff51afd7ed558ccdull;
	return (h ^ (h >> 29)) >> (64 - 6);
}

/* The bucket of the flow whose IPv4 or IPv6 header (`v6`, a constant at
 * each call) is at `l3`, checked against the frame's end already. Read
 * only for ECMP routes: other frames never load the words or keep them. */
static __always_inline __u32 flow_bucket_of(const void *l3, const int v6)
{
	if (v6) {
		const struct ipv6hdr *ip6 = l3;
		const __u32 *s = ip6->saddr.in6_u.u6_addr32, *d = ip6->daddr.in6_u.u6_addr32;

		return flow_bucket(((__u64)s[0] << 32 | s[1]) ^ ((__u64)s[2] << 32 | s[3]),
				   ((__u64)d[0] << 32 | d[1]) ^ ((__u64)d[2] << 32 | d[3]));
	}
	const struct iphdr *ip = l3;

	return flow_bucket(ip->saddr, ip->daddr);
}

/* The interface the kernel routes out of through next hop `n`. */
static __always_inline __u32 nh_l3(const struct nexthop *n)
{
	return n->l3 ? n->l3 : n->ifindex;
}

/* The next hop for `nh` (for an ECMP route, the member the flow of the
 * header at `l3` hashes to), or a reason to pass. */
static __always_inline enum reason next_hop(__u32 nh, __u32 l3_len, __u32 ingress,
					    const void *l3, const int v6, struct nexthop **out,
					    const int multibuf)
{
	struct nexthop *n;

	if (!nh)
		return R_PASS_NO_ROUTE;
	n = bpf_map_lookup_elem(&nexthops, &nh);
	if (!n || !(n->flags & NH_VALID))
		return R_PASS_NO_ROUTE;
	if (n->flags & NH_GROUP) {
		struct nh_group *g = bpf_map_lookup_elem(&nh_groups, &n->ifindex);

		if (!g)
			return R_PASS_NO_ROUTE;
		__u32 member = g->bucket[flow_bucket_of(l3, v6) & (NH_GROUP_BUCKETS - 1)];
		n = bpf_map_lookup_elem(&nexthops, &member);
		/* Members are plain next hops; anything else is the kernel's. */
		if (!n || !(n->flags & NH_VALID) || (n->flags & NH_GROUP))
			return R_PASS_NO_ROUTE;
	}
	if (n->flags & NH_KERNEL) {
		if (n->flags & NH_ONLINK)
			return R_PASS_NO_NEIGH;
		if (n->flags & NH_UNREACHABLE)
			return R_PASS_NO_ROUTE;
		return n->flags & NH_UNSUPPORTED ? R_PASS_KERNEL_ROUTE : R_PASS_LOCAL;
	}
	if (!(n->flags & NH_RESOLVED))
		return n->flags & NH_TC ? R_PASS_TC : R_PASS_NO_NEIGH;
	if (l3_len > n->mtu)
		return R_PASS_MTU;
	if (nh_l3(n) == ingress)
		return R_PASS_SAME_IF;
	if (!bpf_map_lookup_elem(TX_PORTS(multibuf), &n->ifindex))
		return R_PASS_NO_PORT;
	*out = n;
	return R_FORWARDED;
}

/* Whether `saddr` (host order) may be one of the router's own addresses
 * or one of its networks' broadcast addresses. */
static __always_inline int local_source(__u32 saddr)
{
	__u32 bit = local_src_bit(saddr), word = bit >> 6;
	__u64 *w = bpf_map_lookup_elem(&local_src4, &word);

	return w && (*w >> (bit & 63)) & 1;
}

/* Makes the frame what the egress should see: the Ethernet header and the
 * IP packet of `frame` bytes, nothing after it. The kernel cuts whatever
 * lies beyond the IP length (Ethernet padding of a short packet, a sender's
 * trailer, a length field that says less than the frame) before it
 * forwards (pskb_trim_rcsum in ip_rcv_core and ipv6_rcv); without the cut,
 * bytes of the sender's memory would cross the router, and a frame within
 * the MTU by its IP length but not by its size would be dropped by the
 * egress. After it, the frame is 14 + IP length bytes, which the next hop's
 * MTU check bounds. `len` is the whole frame, `linear` its first buffer; a
 * frame still in several buffers goes only where the driver sends such
 * frames. R_FORWARDED, or why the frame passes (untouched). The packet
 * pointers are stale after a cut. */
static __always_inline enum reason fit_frame(struct xdp_md *ctx, const struct nexthop *n,
					     __u32 frame, __u64 len, __u64 linear)
{
	if (frame > linear) {
		__u32 oif = n->ifindex;
		struct iface *out = bpf_map_lookup_elem(&ifaces, &oif);

		if (!out || !(out->flags & IFACE_XMIT_SG))
			return R_PASS_MULTIBUF;
	}
	/* Fails only below an Ethernet header; the frame holds an IP header. */
	if (frame < len && bpf_xdp_adjust_tail(ctx, (int)frame - (int)len))
		return R_PASS_MULTIBUF;
	return R_FORWARDED;
}

_Static_assert(__builtin_offsetof(struct nexthop, dmac) == 8 &&
		       __builtin_offsetof(struct nexthop, smac) == 14,
	       "nexthop: the MACs side by side, the destination's 8-byte aligned (send)");

/* Sends the frame (which came with a tag `tag_len` bytes long after its
 * MACs, a constant: 0 or VLAN_HLEN) through next hop `n`. */
static __always_inline int send(struct xdp_md *ctx, struct ethhdr *eth, struct nexthop *n,
				const __u32 tag_len, const int multibuf)
{
	/* Written once per sweep of the control plane, read every time (the
	 * entry's line is in cache for the MACs anyway). */
	if (!n->used)
		n->used = 1;
	/* Out of a VLAN device: its tag between the MACs and the EtherType, as
	 * the kernel's vlan_dev_hard_start_xmit puts it: where the frame's own
	 * tag was, or pushed (a helper call, of which a return costs this
	 * machine's kernel the most: docs/router-measurements.md). */
	if (n->tag[0] | n->tag[1]) {
		/* (A frame that came tagged was checked past its IP header.) */
		if (!tag_len) {
			/* Cannot fail: XDP keeps headroom. */
			if (bpf_xdp_adjust_head(ctx, -VLAN_HLEN))
				return XDP_ABORTED;
			eth = (void *)(long)ctx->data;
			if ((void *)eth + ETH_HLEN + VLAN_HLEN > (void *)(long)ctx->data_end)
				return XDP_ABORTED;
		}
		*(__u32 *)((__u8 *)eth + 2 * ETH_ALEN) = *(__u32 *)n->tag;
	} else if (tag_len) {
		/* Out of a port: the tag taken off (the MACs are written below). */
		if (bpf_xdp_adjust_head(ctx, VLAN_HLEN))
			return XDP_ABORTED;
		eth = (void *)(long)ctx->data;
		if ((void *)(eth + 1) > (void *)(long)ctx->data_end)
			return XDP_ABORTED;
	}
	/* The MACs, side by side in the entry as in the frame: two moves (a
	 * memcpy of each is twelve byte loads and stores). */
	*(__u64 *)eth = *(const __u64 *)n->dmac;
	*(__u32 *)((__u8 *)eth + 8) = *(const __u32 *)(n->smac + 2);
	return bpf_redirect_map(TX_PORTS(multibuf), n->ifindex, XDP_PASS);
}

/* The next-hop id for a destination by an interface's tables
 * (iface.tables4, tables6: each table's root in MiB, four to the word):
 * each looked up in turn, a miss (no route, a throw route) going on to the
 * next, as the kernel's rules walk them; 0 when all miss (the kernel walks
 * on). Functions of their own, verified once (global): four walks inlined
 * would multiply the program's paths. */
__attribute__((noinline)) int fib4_walk_tables(__u64 tables, __u32 daddr)
{
#pragma unroll
	for (int i = 0; i < FIB_WALK_TABLES; i++) {
		__u32 mib = (tables >> (16 * i)) & 0xffff;

		if (mib == FIB_TABLES_END)
			break;
		__u32 nh = fib4_lookup_at((__u64)mib << 20, daddr);
		if (nh && nh != NH_ID_THROW)
			return nh;
	}
	return 0;
}

/* (Each table's walk takes its shortcut.) */
__attribute__((noinline)) int fib6_walk_tables(__u64 tables, __u64 hi, __u64 lo_be)
{
#pragma unroll
	for (int i = 0; i < FIB_WALK_TABLES; i++) {
		__u32 mib = (tables >> (16 * i)) & 0xffff;

		if (mib == FIB_TABLES_END)
			break;
		__u32 nh = fib6_lookup_at((__u64)mib << 20, hi, lo_be);
		if (nh && nh != NH_ID_THROW)
			return nh;
	}
	return 0;
}

/* The meta word of a rule key (abi/router.h, RULE_KEY4_WORDS). */
static __always_inline __u64 rule_meta(__u32 iif, __u8 tos, __u8 proto)
{
	return ((__u64)iif << 32) | ((__u32)tos << 8) | proto;
}

/* An IPv6 packet's rule key, its destination's low word also as it lies
 * in the packet (for the lookups), and its ports (source << 16 |
 * destination). */
struct rule_key6 {
	__u64 word[RULE_KEY6_WORDS];
	__u64 dst_lo_be;
	__u32 ports;
	__u32 pad;
};

/* Whether step `r`, its first words `off` away from the packet's `w` (0:
 * all match), misses the packet, for a step with flags (fib_rule_match):
 * IPv6's low words, the ports, then inverted with `not`. */
static __always_inline int rule_misses_by_flags(const struct policy_rule *r, __u64 off,
						const __u64 *w, __u32 ports, const int v6)
{
	__u8 f = r->flags;

	if (v6 && (f & RULE_LOW))
		off |= ((w[3] ^ r->word[3].value) & r->word[3].mask) |
		       ((w[4] ^ r->word[4].value) & r->word[4].mask);
	int m = !off;

	if (f & RULE_PORTS) {
		__u16 sp = ports >> 16, dp = ports;
		m = m && sp >= r->sport_lo && sp <= r->sport_hi && dp >= r->dport_lo &&
		    dp <= r->dport_hi;
	}
	return !(m ^ (f & RULE_INVERT));
}

/* How far the packet's words `w` are from step `r`'s (0: all match):
 * IPv6's first three (the rest with RULE_LOW). */
static __always_inline __u64 rule_off(const struct policy_rule *r, const __u64 *w, const int v6)
{
	__u64 off = ((w[0] ^ r->word[0].value) & r->word[0].mask) |
		    ((w[1] ^ r->word[1].value) & r->word[1].mask);

	if (v6)
		off |= (w[2] ^ r->word[2].value) & r->word[2].mask;
	return off;
}

/* What a step that matched does: ends the walk (1, its outcome in *out:
 * a next-hop id, POLICY_DROP, POLICY_KERNEL, 0 at the END) or lets it go
 * on (0: a lookup that missed, or a goto, which sets *from to its
 * target). IPv6's lookup is the one a step can inline (fib.h,
 * fib6_lookup_step). */
static __always_inline int policy_act(const struct policy_rule *r, const __u64 *w,
				      __u64 dst_lo_be, const int v6, __u32 *from, __u32 *out)
{
	__u8 step = r->step;

	if (step == RULE_GOTO) {
		*from = r->next;
		return 0;
	}
	if (step == RULE_LOOKUP) {
		__u64 root = (__u64)r->table_mib << 20;
		__u32 nh = v6 ? fib6_lookup_step(root, w[1], dst_lo_be) :
				fib4_lookup_at(root, (__u32)w[0]);

		if (!nh || nh == NH_ID_THROW)
			return 0;
		*out = nh;
	} else {
		*out = step == RULE_END ? 0 : step == RULE_BLACKHOLE ? POLICY_DROP : POLICY_KERNEL;
	}
	return 1;
}

/* Whether step `r` misses the packet of words `w` and ports. Most steps
 * have prefixes and a meta word alone: one compare. (The END matches
 * every packet: its words are zero.) */
static __always_inline int rule_missed(const struct policy_rule *r, const __u64 *w, __u32 ports,
				       const int v6)
{
	__u64 off = rule_off(r, w, v6);

	if (r->flags)
		return rule_misses_by_flags(r, off, w, ports, v6);
	return off != 0;
}

/* The next-hop id the family's rule program `p` gives the packet of key
 * words `w` and ports, as fib_rules_lookup walks the rules: each step that
 * matches looks its table up (a miss or a throw route going on), jumps,
 * or ends the walk (dropped: POLICY_DROP; the kernel's to decide:
 * POLICY_KERNEL); 0 when no step routes it (the kernel answers). A goto
 * only jumps forward (the kernel refuses one to an earlier rule): the
 * steps before its target are skipped by one compare each. Unrolled, each
 * step's loads at a constant offset and no index to bound: a step that
 * does not match costs a third of what it did in a loop (bench fastpath
 * --rule-steps). */
static __always_inline __u32 policy_walk(const struct policy_program *p, const __u64 *w,
					 __u32 ports, __u64 dst_lo_be, const int v6)
{
	__u32 from = 0, out = 0;

#pragma unroll
	for (int i = 0; i < POLICY_RULES; i++) {
		const struct policy_rule *r = &p->step[i];

		if (i < from || rule_missed(r, w, ports, v6))
			continue;
		if (policy_act(r, w, dst_lo_be, v6, &from, &out))
			return out;
	}
	return 0;
}

/* Verified once each (global), as the table walks; the program looked up
 * by the caller, so that no call inside keeps the key out of registers
 * (IPv4's: its two words). */
__attribute__((noinline)) int policy_walk4(const struct policy_program *p, __u64 addrs,
					   __u64 meta, __u32 ports)
{
	__u64 w[RULE_KEY4_WORDS] = { addrs, meta };

	if (!p)
		return 0;
	return (int)policy_walk(p, w, ports, 0, 0);
}

__attribute__((noinline)) int policy_walk6(const struct policy_program *p,
					   const struct rule_key6 *k)
{
	if (!p || !k)
		return 0;
	return (int)policy_walk(p, k->word, k->ports, k->dst_lo_be, 1);
}

/* The family's rule program the interface's word names. */
static __always_inline const struct policy_program *policy_program_of(__u64 tables)
{
	__u32 program = (tables >> 16) & 0xffff;

	return bpf_map_lookup_elem(&policy_rules, &program);
}

/* The ports the kernel's flow dissector reads for protocol `proto` from
 * its header at `l4` (the protocols whose first four bytes are ports, and
 * AH's SPI) into *ports (source << 16 | destination), 0 for the others;
 * -1 if the header is cut short (the kernel decides). */
static __always_inline int rule_ports(__u8 proto, const __u8 *l4, const void *data_end,
				      __u32 *ports)
{
	int off;

	switch (proto) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
	case IPPROTO_DCCP:
	case IPPROTO_ESP:
	case IPPROTO_SCTP:
	case IPPROTO_UDPLITE:
		off = 0;
		break;
	case IPPROTO_AH:
		off = 4;
		break;
	default:
		*ports = 0;
		return 0;
	}
	const __u32 *p = (const void *)(l4 + off);
	if ((const void *)(p + 1) > data_end)
		return -1;
	*ports = bpf_ntohl(*p);
	return 0;
}

/* What a rule program's walk ends in for the frame: R_FORWARDED with the
 * next-hop id in *nh, or the verdict's reason (a blackhole drops, unless
 * the destination is one main's FIB gives the kernel: the router's own
 * addresses, which the local rule takes first). */
static __always_inline enum reason policy_route(__u32 walked, __u32 main_nh, __u32 *nh)
{
	if (walked == POLICY_KERNEL)
		return R_PASS_POLICY;
	if (walked == POLICY_DROP)
		return main_nh == NH_ID_KERNEL ? R_PASS_POLICY : R_DROP_BLACKHOLE;
	*nh = walked;
	return R_FORWARDED;
}

/* Reverse path filtering, as the kernel's fib_validate_source decides it,
 * where the fast path can tell. The kernel looks the source up as if the
 * packet came back: source and destination swapped, ports swapped, from
 * the forward route's egress (__mkroute_input gives its output interface
 * as the lookup's input), by the rules as they stand for packets from
 * there: the egress's entry's word (main's table alone, a list of tables,
 * or the rule program). The source's route must go through a resolved
 * gateway (for strict filtering, on the interface the frame came in on).
 * No route, a connected, local, blackhole or ECMP route, a rule the
 * kernel decides, an egress without a word: the kernel judges (it drops
 * what fails). */
static __always_inline int rpf_ok(const struct iphdr *ip, const void *data_end, __u32 ingress,
				  __u32 egress, __u16 ifflags)
{
	__u32 slot = egress < ROUTER_IFACES ? egress : 0;
	struct iface *out = bpf_map_lookup_elem(&ifaces, &slot);
	__u32 saddr = bpf_ntohl(ip->saddr), nh;

	if (!out || out->ifindex != egress)
		return 0;
	__u64 tables = out->tables4;
	if (tables == FIB_TABLES_MAIN4) {
		nh = fib4_lookup(saddr);
	} else if ((tables & 0xffff) != FIB_TABLES_RULES) {
		nh = fib4_walk_tables(tables, saddr);
	} else {
		__u32 ports;
		if (rule_ports(ip->protocol, (const __u8 *)(ip + 1), data_end, &ports))
			return 0;
		nh = (__u32)policy_walk4(policy_program_of(tables),
					 ((__u64)bpf_ntohl(ip->daddr) << 32) | saddr,
					 rule_meta(out->l3, ip->tos, ip->protocol),
					 (ports << 16) | (ports >> 16));
	}
	if (!nh || nh >= POLICY_KERNEL)
		return 0;
	struct nexthop *n = bpf_map_lookup_elem(&nexthops, &nh);
	if (!n || (n->flags & (NH_VALID | NH_RESOLVED | NH_KERNEL | NH_GROUP)) !=
			  (NH_VALID | NH_RESOLVED))
		return 0;
	return !(ifflags & IFACE_RPF_STRICT) || nh_l3(n) == ingress;
}

static __always_inline int forward_ipv4(struct xdp_md *ctx, struct ethhdr *eth,
					struct router_counters *c, __u64 len, __u64 linear,
					__u16 ifflags, __u32 iif, __u64 tables, const __u32 tag_len,
					const int multibuf)
{
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *ip = (void *)(eth + 1) + tag_len;
	struct nexthop *n = 0;

	if ((void *)(ip + 1) > data_end)
		return HEADERS_CUT();
	if (ip->version != 4 || ip->ihl < 5)
		return verdict(c, R_DROP_MALFORMED, len, XDP_DROP);
	__u32 l3_len = bpf_ntohs(ip->tot_len);
	if (l3_len < ip->ihl * 4 || ETH_HLEN + l3_len > len)
		return verdict(c, R_DROP_MALFORMED, len, XDP_DROP);
	if (ip->ihl != 5)
		return PASS(R_PASS_OPTIONS);
	if (ipv4_csum_bad(ip))
		return PASS(R_PASS_BAD_CSUM);
	if (ip->frag_off & bpf_htons(IP_MF_OFFSET))
		return PASS(R_PASS_FRAGMENT);
	/* (A constant `nat` each: one body apiece, as the stages'.) */
	if (ifflags & IFACE_NAT4)
		ct_prefetch(ip, 0, data_end, 1);
	else if (ifflags & IFACE_FIREWALL4)
		ct_prefetch(ip, 0, data_end, 0);
	__u32 daddr = bpf_ntohl(ip->daddr), saddr = bpf_ntohl(ip->saddr);
	if (ipv4_special(daddr) || ipv4_special(saddr) || local_source(saddr))
		return PASS(R_PASS_SPECIAL);
	if (ip->ttl <= 1)
		return PASS(R_PASS_TTL);
	enum reason r;
	if (ifflags & IFACE_NAT4) {
		r = fw_nat(ctx, ip, 0, (const __u8 *)(ip + 1), l3_len - sizeof(*ip), ip->protocol,
			   &daddr, 0, 0);
		if (r != R_FORWARDED)
			return PASS(r);
	}
	__u32 nh;
	if (!(ifflags & IFACE_TABLES4)) {
		nh = fib4_lookup(daddr);
	} else if ((tables & 0xffff) != FIB_TABLES_RULES) {
		nh = fib4_walk_tables(tables, daddr);
	} else {
		__u32 ports;
		if (rule_ports(ip->protocol, (const __u8 *)(ip + 1), data_end, &ports))
			return PASS(R_PASS_POLICY);
		__u32 walked = (__u32)policy_walk4(policy_program_of(tables),
						   ((__u64)saddr << 32) | daddr,
						   rule_meta(iif, ip->tos,
							     ip->protocol),
						   ports);
		r = policy_route(walked, walked == POLICY_DROP ? fib4_lookup(daddr) : 0, &nh);
		if (r == R_DROP_BLACKHOLE)
			return verdict(c, r, len, XDP_DROP);
		if (r != R_FORWARDED)
			return PASS(r);
	}
	r = next_hop(nh, l3_len, iif, ip, 0, &n, multibuf);
	if (r != R_FORWARDED || !n)
		return PASS(r);
	if ((ifflags & (IFACE_RPF_STRICT | IFACE_RPF_LOOSE)) &&
	    !rpf_ok(ip, data_end, iif, n->ifindex, ifflags))
		return PASS(R_PASS_RP_FILTER);
	struct fw_hit hit = { .n = 0 };
	if (ifflags & IFACE_FIREWALL4) {
		r = fw_judge(ctx, ip, 0, (const __u8 *)(ip + 1), l3_len - sizeof(*ip), ip->protocol,
			     ip->protocol, iif, nh_l3(n), &hit, ifflags & IFACE_NAT4);
		if (r == R_DROP_FIREWALL) {
			fw_count(&hit, l3_len);
			return verdict(c, R_DROP_FIREWALL, len, XDP_DROP);
		}
		if (r != R_FORWARDED)
			return PASS(r);
	}
	/* The common frame is one buffer holding exactly the packet. */
	__u32 frame = ETH_HLEN + l3_len;
	if (frame != linear || len != linear) {
		r = fit_frame(ctx, n, frame, len, linear);
		if (r != R_FORWARDED)
			return PASS(r);
		eth = (void *)(long)ctx->data;
		ip = (void *)(eth + 1) + tag_len;
		if ((void *)(ip + 1) > (void *)(long)ctx->data_end)
			return verdict(c, R_DROP_MALFORMED, len, XDP_DROP);
	}
	/* The mapped connection's rewrites, around the TTL's; nothing written
	 * if they cannot be (headers ct_segment checked: never). */
	if (hit.nat) {
		if (!nat_rewrite(ctx, ip->protocol))
			return PASS(R_PASS_MULTIBUF);
	} else {
		ipv4_decrease_ttl(ip);
	}
	/* Counted once the frame is sure to leave: one that passes after all
	 * is judged and counted by the kernel. */
	fw_count(&hit, l3_len);
	verdict(c, R_FORWARDED, len, 0);
	return send(ctx, eth, n, tag_len, multibuf);
}

static __always_inline int forward_ipv6(struct xdp_md *ctx, struct ethhdr *eth,
					struct router_counters *c, __u64 len, __u64 linear,
					__u16 ifflags, __u32 iif, __u64 tables, const __u32 tag_len,
					const int multibuf)
{
	void *data_end = (void *)(long)ctx->data_end;
	struct ipv6hdr *ip6 = (void *)(eth + 1) + tag_len;
	struct nexthop *n = 0;

	if ((void *)(ip6 + 1) > data_end)
		return HEADERS_CUT();
	if (ip6->version != 6)
		return verdict(c, R_DROP_MALFORMED, len, XDP_DROP);
	/* (Jumbograms, payload length 0, carry a hop-by-hop header: they pass.) */
	if (ip6->nexthdr == NEXTHDR_HOP)
		return PASS(R_PASS_EXT_HDR);
	__u32 l3_len = sizeof(*ip6) + bpf_ntohs(ip6->payload_len);
	if (ETH_HLEN + l3_len > len)
		return verdict(c, R_DROP_MALFORMED, len, XDP_DROP);
	__u32 *d = ip6->daddr.in6_u.u6_addr32;
	__u32 *s = ip6->saddr.in6_u.u6_addr32;
	__u64 dhi = ((__u64)bpf_ntohl(d[0]) << 32) | bpf_ntohl(d[1]);
	__u64 shi = ((__u64)bpf_ntohl(s[0]) << 32) | bpf_ntohl(s[1]);
	if (ipv6_special(dhi) || ipv6_special(shi))
		return PASS(R_PASS_SPECIAL);
	if (ip6->hop_limit <= 1)
		return PASS(R_PASS_TTL);
	/* (A constant `nat` each: one body apiece, as the stages'.) */
	if (ifflags & IFACE_NAT6)
		ct_prefetch(ip6, 1, data_end, 1);
	else if (ifflags & IFACE_FIREWALL6)
		ct_prefetch(ip6, 1, data_end, 0);
	__u64 dlo = *(const __u64 *)&d[2];
	enum reason r;
	if (ifflags & IFACE_NAT6) {
		if (fw_ipv6_ext(ip6->nexthdr))
			return PASS(R_PASS_EXT_HDR);
		r = fw_nat(ctx, ip6, 1, (const __u8 *)(ip6 + 1), l3_len - sizeof(*ip6), ip6->nexthdr,
			   0, &dhi, &dlo);
		if (r != R_FORWARDED)
			return PASS(r);
	}
	__u32 nh;
	if (!(ifflags & IFACE_TABLES6)) {
		nh = fib6_lookup(dhi, dlo);
	} else if ((tables & 0xffff) != FIB_TABLES_RULES) {
		nh = fib6_walk_tables(tables, dhi, dlo);
	} else {
		/* The rules' protocol is the one after extension headers. */
		if (fw_ipv6_ext(ip6->nexthdr))
			return PASS(R_PASS_EXT_HDR);
		__u8 *v = (__u8 *)ip6;
		struct rule_key6 k = {
			.word = { shi, dhi,
				  rule_meta(iif, (v[0] << 4) | (v[1] >> 4),
					    ip6->nexthdr),
				  fib6_low_bits(*(const __u64 *)&s[2]), fib6_low_bits(dlo) },
			.dst_lo_be = dlo,
		};
		if (rule_ports(ip6->nexthdr, (const __u8 *)(ip6 + 1), data_end, &k.ports))
			return PASS(R_PASS_POLICY);
		__u32 walked = (__u32)policy_walk6(policy_program_of(tables), &k);
		r = policy_route(walked, walked == POLICY_DROP ? fib6_lookup(dhi, dlo) : 0, &nh);
		if (r == R_DROP_BLACKHOLE)
			return verdict(c, r, len, XDP_DROP);
		if (r != R_FORWARDED)
			return PASS(r);
	}
	r = next_hop(nh, l3_len, iif, ip6, 1, &n, multibuf);
	if (r != R_FORWARDED || !n)
		return PASS(r);
	struct fw_hit hit = { .n = 0 };
	if (ifflags & IFACE_FIREWALL6) {
		r = fw_judge(ctx, ip6, 1, (const __u8 *)(ip6 + 1), l3_len - sizeof(*ip6),
			     ip6->nexthdr, ip6->nexthdr, iif, nh_l3(n), &hit,
			     ifflags & IFACE_NAT6);
		if (r == R_DROP_FIREWALL) {
			fw_count(&hit, l3_len);
			return verdict(c, R_DROP_FIREWALL, len, XDP_DROP);
		}
		if (r != R_FORWARDED)
			return PASS(r);
	}
	__u32 frame = ETH_HLEN + l3_len;
	if (frame != linear || len != linear) {
		r = fit_frame(ctx, n, frame, len, linear);
		if (r != R_FORWARDED)
			return PASS(r);
		eth = (void *)(long)ctx->data;
		ip6 = (void *)(eth + 1) + tag_len;
		if ((void *)(ip6 + 1) > (void *)(long)ctx->data_end)
			return verdict(c, R_DROP_MALFORMED, len, XDP_DROP);
	}
	if (hit.nat) {
		if (!nat_rewrite(ctx, ip6->nexthdr | 1 << 8))
			return PASS(R_PASS_MULTIBUF);
	} else {
		ip6->hop_limit--;
	}
	fw_count(&hit, l3_len);
	verdict(c, R_FORWARDED, len, 0);
	return send(ctx, eth, n, tag_len, multibuf);
}

/* The FDB key of a MAC (6 bytes, 2-byte aligned: one 32-bit and one 16-bit
 * load) on bridge `bridge` (abi/router.h, struct fdb_slot). */
static __always_inline __u64 fdb_key(const __u8 *mac, __u32 bridge)
{
	const __u16 *m = (const __u16 *)mac;

	return *(const __u32 *)m | (__u64)m[2] << 32 | (__u64)(bridge & 0xffff) << 48;
}

/* The slot of `key` in the FDB, its value read between two reads of its
 * key (the control plane's order: abi/router.h), in *port, *mtu, *flags;
 * NULL when the FDB does not hold it. */
static __always_inline struct fdb_slot *fdb_find(__u64 key, __u32 *port, __u16 *mtu,
						 __u8 *flags)
{
	__u32 set = (key * 0x9E3779B97F4A7C15ull) >> (64 - FDB_SET_BITS);
	struct fdb_set *s = bpf_map_lookup_elem(&bridge_fdb, &set);

	if (!s)
		return NULL;
#pragma unroll
	for (int w = 0; w < FDB_WAYS; w++) {
		struct fdb_slot *slot = &s->way[w];
		volatile __u64 *k = &slot->key;

		if (*k != key)
			continue;
		__u64 v = *(volatile __u64 *)&slot->port;

		if (*k != key)
			return NULL;
		*port = (__u32)v;
		*mtu = (__u16)(v >> 32);
		*flags = (__u8)(v >> 48);
		return slot;
	}
	return NULL;
}

/* The FDB slot of the frame's source if the bridge holds it behind the
 * port the frame came in by; NULL: the kernel is to learn from the frame. */
static __always_inline struct fdb_slot *fdb_source(const struct ethhdr *eth,
						     const struct iface *ifc, __u32 ingress)
{
	__u32 port;
	__u16 mtu;
	__u8 flags;
	struct fdb_slot *src = fdb_find(fdb_key(eth->h_source, ifc->l3), &port, &mtu, &flags);

	return src && port == ingress ? src : NULL;
}

/* Marks an FDB slot used: written once per sweep of the control plane. */
static __always_inline void fdb_mark_used(struct fdb_slot *slot)
{
	if (!slot->used)
		slot->used = 1;
}

/* A frame on a bridge's port (BRIDGE_PORT) for another MAC than the
 * bridge's: sent to the port the bridge's FDB holds its destination
 * behind, untouched, as br_forward sends it, when the FDB holds its source
 * behind the port it came in by (the kernel would learn nothing from it).
 * The kernel takes the rest: an unknown or moved source (it learns),
 * an unknown destination or one of its own (it floods or takes it), one
 * behind the same port (it drops), ARP (proxy and suppression are
 * its), the kinds netfilter sees (BRIDGE_NF*), and what does not fit the
 * egress. Multicast and broadcast were passed before. */
static __always_inline int bridge_frame(struct xdp_md *ctx, struct ethhdr *eth,
					struct router_counters *c, __u64 len, __u64 linear,
					const struct iface *ifc, const int multibuf)
{
	struct fdb_slot *src;
	__u16 proto = eth->h_proto;
	__u16 nf = ifc->bridging;
	__u32 port;
	__u16 mtu;
	__u8 flags;

	if (proto == bpf_htons(ETH_P_ARP) ||
	    ((nf & BRIDGE_NF4) && proto == bpf_htons(ETH_P_IP)) ||
	    ((nf & BRIDGE_NF6) && proto == bpf_htons(ETH_P_IPV6)) ||
	    ((nf & BRIDGE_NF_TAGGED) &&
	     (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD) ||
	      proto == bpf_htons(ETH_P_PPP_SES))))
		return PASS(R_PASS_BRIDGE_KERNEL);
	src = fdb_source(eth, ifc, ctx->ingress_ifindex);
	if (!src)
		return PASS(R_PASS_BRIDGE_LEARN);
	if (!fdb_find(fdb_key(eth->h_dest, ifc->l3), &port, &mtu, &flags))
		return PASS(R_PASS_BRIDGE_FLOOD);
	if (port == ctx->ingress_ifindex)
		return PASS(R_PASS_SAME_IF);
	if (!(flags & FDB_TO_PORT))
		return PASS(R_PASS_BRIDGE_KERNEL);
	if (len - ETH_HLEN > mtu)
		return PASS(R_PASS_MTU);
	if (len > linear)
		return PASS(R_PASS_MULTIBUF);
	if (!bpf_map_lookup_elem(TX_PORTS(multibuf), &port))
		return PASS(R_PASS_NO_PORT);
	fdb_mark_used(src);
	return verdict(c, R_BRIDGED, len, bpf_redirect_map(TX_PORTS(multibuf), port, XDP_PASS));
}

/* `multibuf`: the program is declared for multi-buffer frames. Only then
 * can a frame continue past its first buffer, and only then is the length
 * helper called: on the common frame it costs about a tenth of the
 * program's time (docs/router.md). */
/* A frame arriving as on interface `ifc` (a port, or a VLAN device on it,
 * its tag `tag_len` bytes after the MACs, a constant), its Ethernet header
 * at `eth`; `len` and `linear` without the tag. */
static __always_inline int route_as(struct xdp_md *ctx, struct ethhdr *eth, struct iface *ifc,
				    struct router_counters *c, __u64 len, __u64 linear,
				    const __u32 tag_len, const int multibuf)
{
	if (eth->h_dest[0] & 1)
		return PASS(R_PASS_SPECIAL);
	if (!mac_eq(eth->h_dest, ifc->mac)) {
		if (ifc->bridging & BRIDGE_PORT)
			return bridge_frame(ctx, eth, c, len, linear, ifc, multibuf);
		return PASS(R_PASS_NOT_OURS);
	}
	if (ifc->bridging & BRIDGE_LEARN) {
		struct fdb_slot *src = fdb_source(eth, ifc, ctx->ingress_ifindex);

		if (!src)
			return PASS(R_PASS_BRIDGE_LEARN);
		fdb_mark_used(src);
	}
	/* With forwarding off the kernel drops transit packets (and still
	 * takes its own), with policy rules it may route them by another
	 * table, and tc or netfilter may filter or rewrite them: its call, not
	 * ours. */
	/* The EtherType, after the tag (route_frame checked the frame holds
	 * it). */
	__be16 proto = *(const __be16 *)((const __u8 *)eth + 2 * ETH_ALEN + tag_len);
	if (proto == bpf_htons(ETH_P_IP)) {
		if (!(ifc->flags & IFACE_FORWARD4))
			return PASS(not_forwarded(ifc->flags, IFACE_POLICY4, IFACE_NETFILTER4));
		return forward_ipv4(ctx, eth, c, len, linear, ifc->flags, ifc->l3, ifc->tables4,
				    tag_len, multibuf);
	}
	if (proto == bpf_htons(ETH_P_IPV6)) {
		if (!(ifc->flags & IFACE_FORWARD6))
			return PASS(not_forwarded(ifc->flags, IFACE_POLICY6, IFACE_NETFILTER6));
		return forward_ipv6(ctx, eth, c, len, linear, ifc->flags, ifc->l3, ifc->tables6,
				    tag_len, multibuf);
	}
	return PASS(R_PASS_NOT_IP);
}

/* The two single-buffer programs, each handing the other the frames that
 * are its: `router` the tagged frames of VLAN devices to `router_vlan`,
 * `router_vlan` (attached instead on the ports with VLAN devices, whose
 * frames are mostly tagged) the others to `router`. Each is the same code
 * with the tag's length a constant, verified on its own. (With the length
 * a value read at run time, the one program's packet pointers took a
 * variable offset, and the verifier's paths went past its limit; with a
 * pop and a push instead, each a helper call, a tagged frame cost 1.36
 * times an untagged one.) The hand-over is a tail call, direct (patched
 * into a jump), but it and the second program's start cost a frame about
 * 4%: what each port is given spares it to the frames it carries most. */
int router(struct xdp_md *ctx);
int router_vlan(struct xdp_md *ctx);
/* (Keyed by size: Debian 12's 6.12 kernel refuses a program array with
 * BTF types, and libbpf says so before it retries without.) */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__array(values, int(struct xdp_md *));
} vlan_program SEC(".maps") = {
	.values = { [0] = (void *)&router_vlan },
};

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__array(values, int(struct xdp_md *));
} port_program SEC(".maps") = {
	.values = { [0] = (void *)&router },
};

/* Whether a frame arriving on port `ifc` is for its VLAN devices: tagged,
 * and not on a bridge's port without VLAN devices (which hands its tagged
 * frames to the bridge, as untagged ones). */
static __always_inline int for_vlan_devices(const struct ethhdr *eth, const struct iface *ifc)
{
	return (eth->h_proto == bpf_htons(ETH_P_8021Q) || eth->h_proto == bpf_htons(ETH_P_8021AD)) &&
	       (ifc->bridging & (BRIDGE_PORT | BRIDGE_VLAN_DEVICES)) != BRIDGE_PORT;
}

/* A frame on one of the router's ports, routed as the port, or, tagged,
 * as the VLAN device its port and tag name (vlan_do_receive; counted as the
 * device counts it, without the tag), by `router_vlan` (`vlan`); each
 * single-buffer program hands the other the frames that are its before it
 * does anything else. The tag stays
 * where it is: a frame for the kernel goes as it came, and one sent out of
 * a VLAN device has its tag rewritten in place (send). A tag no device of
 * the port's holds (the kernel drops its frame), a priority tag and a
 * second tag are the kernel's; so are the tagged frames of a bridge's port
 * with VLAN devices (the kernel hands them to the devices first). The VLAN
 * devices' entries are in `ifaces` too, past the ports'. The multi-buffer
 * program leaves tagged frames to the kernel: its stack has no room for
 * the tag's key. */
static __always_inline int route_frame(struct xdp_md *ctx, const int multibuf, const int vlan)
{
	/* (Read once: each read is three loads, xdp_buff to its queue to its
	 * device.) */
	__u32 ingress = ctx->ingress_ifindex;
	__u32 slot = ingress < ROUTER_IFACES ? ingress : 0;
	struct iface *ifc = bpf_map_lookup_elem(&ifaces, &slot);

	/* (Handed over first: what one program did before it, the other would
	 * do again; it checks and counts the frame itself. The 6.12 verifier
	 * takes packet pointers for stale after a tail call: the ones below
	 * are read after it.) */
	if (!multibuf) {
		const struct ethhdr *e = (void *)(long)ctx->data;

		if ((void *)(e + 1) <= (void *)(long)ctx->data_end && ifc &&
		    for_vlan_devices(e, ifc) != vlan)
			bpf_tail_call(ctx, vlan ? (void *)&port_program : (void *)&vlan_program, 0);
	}
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	/* The first buffer, and the whole frame (more than the first only for
	 * a multi-buffer frame). */
	__u64 linear = data_end - data;
	__u64 len = multibuf ? bpf_xdp_get_buff_len(ctx) : linear;
	struct ethhdr *eth = data;
	struct router_counters *c = bpf_map_lookup_elem(&router_stats, &slot);
	__u32 rxq = slot * ROUTER_RXQ +
		    (ctx->rx_queue_index < ROUTER_RXQ ? ctx->rx_queue_index : ROUTER_RXQ - 1);
	__u64 *on_queue = bpf_map_lookup_elem(&router_rxq, &rxq);

	if (on_queue)
		(*on_queue)++;

	if ((void *)(eth + 1) > data_end)
		return HEADERS_CUT();
	if (!ifc || ifc->ifindex != ingress)
		return PASS(R_PASS_NOT_OURS);
	if (for_vlan_devices(eth, ifc)) {
		struct vlan_hdr *vh = (void *)(eth + 1);

		/* (Not router_vlan: the multi-buffer program, or `router` without
		 * it.) */
		if (!vlan || (ifc->bridging & BRIDGE_VLAN_DEVICES))
			return PASS(R_PASS_VLAN);
		if ((void *)(vh + 1) > data_end)
			return HEADERS_CUT();
		__u32 vid = bpf_ntohs(vh->h_vlan_TCI) & VLAN_VID_MASK;

		if (!vid || !ifc->vlans || vh->h_vlan_encapsulated_proto == bpf_htons(ETH_P_8021Q) ||
		    vh->h_vlan_encapsulated_proto == bpf_htons(ETH_P_8021AD))
			return PASS(R_PASS_VLAN);
		__u32 at = (__u32)(ifc->vlans - 1) * VLAN_TABLE_SLOTS + vid +
			   (eth->h_proto == bpf_htons(ETH_P_8021AD) ? 4096 : 0);
		__u32 *sub = bpf_map_lookup_elem(&vlan_slots, &at);
		if (!sub || !*sub)
			return PASS(R_PASS_VLAN);
		ifc = bpf_map_lookup_elem(&ifaces, sub);
		if (!ifc)
			return PASS(R_PASS_VLAN);
		return route_as(ctx, eth, ifc, c, len - VLAN_HLEN, linear - VLAN_HLEN, VLAN_HLEN,
				multibuf);
	}
	/* (Never: router_vlan hands the others to `router`.) */
	if (vlan)
		return PASS(R_PASS_VLAN);
	return route_as(ctx, eth, ifc, c, len, linear, 0, multibuf);
}

/* For interfaces up to Ethernet's MTU: the kernel hands a single-buffer
 * program every frame in one buffer (and refuses to attach it, or to raise
 * the MTU, where it could not). */
SEC("xdp")
int router(struct xdp_md *ctx)
{
	return route_frame(ctx, 0, 0);
}

/* The tagged frames of the ports, routed as their VLAN devices. */
SEC("xdp")
int router_vlan(struct xdp_md *ctx)
{
	return route_frame(ctx, 0, 1);
}

/* For larger MTUs (jumbo frames): frames may come in several buffers, the
 * headers in the first. */
SEC("xdp.frags")
int router_mb(struct xdp_md *ctx)
{
	return route_frame(ctx, 1, 0);
}

/* The control plane's keeper of the kernel's entries for the connections
 * the fast path carries (router/ct_cache.h), run with BPF_PROG_TEST_RUN: the
 * frame is up to CT_KEEP_BATCH records. For each, the kernel's entry is
 * looked up; if it is there and still one the fast path may carry
 * (ct_carried: a TCP connection only while established; mapped or not
 * for the NAT stage's ways, `nat`), its timeout is set to `timeout_ms`
 * from now (0: left alone) and the result is CT_KEEP_KEPT, else
 * CT_KEEP_GONE: the control plane then forgets the connection. XDP_PASS once the records are done, XDP_ABORTED without the
 * kfuncs. */
_Static_assert(sizeof(struct ct_keep) == 48 && __builtin_offsetof(struct ct_keep, timeout_ms) == 40 &&
		       __builtin_offsetof(struct ct_keep, nat) == 44 &&
		       __builtin_offsetof(struct ct_keep, result) == 45,
	       "ct_keep: crates/dataplane/src/layout.rs asserts the same");

SEC("xdp")
int ct_keeper(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct fw_state *st = bpf_map_lookup_elem(&fw_state, &zero);

	if (!ct_available() || !st)
		return XDP_ABORTED;
	__u32 ct_flags = st->ct_flags;
	for (int i = 0; i < CT_KEEP_BATCH; i++) {
		struct ct_keep *r = (void *)(long)ctx->data + i * sizeof(struct ct_keep);

		if ((void *)(r + 1) > (void *)(long)ctx->data_end)
			break;
		struct bpf_ct_opts___local opts = { .netns_id = -1, .l4proto = r->key.l4proto };
		struct bpf_sock_tuple t;
		__u32 size;

		if (r->key.ipv6) {
			__builtin_memcpy(t.ipv6.saddr, r->key.a, 16);
			__builtin_memcpy(t.ipv6.daddr, r->key.b, 16);
			t.ipv6.sport = r->key.aport;
			t.ipv6.dport = r->key.bport;
			size = sizeof(t.ipv6);
		} else {
			__builtin_memcpy(&t.ipv4.saddr, r->key.a, 4);
			__builtin_memcpy(&t.ipv4.daddr, r->key.b, 4);
			t.ipv4.sport = r->key.aport;
			t.ipv4.dport = r->key.bport;
			size = sizeof(t.ipv4);
		}
		struct nf_conn *ct = bpf_xdp_ct_lookup(ctx, &t, size, &opts, sizeof(opts));
		if (!ct) {
			r->result = CT_KEEP_GONE;
			continue;
		}
		if (ct_carried(ct, r->key.l4proto, ct_flags,
			       r->nat ? CT_NOT_CARRIED_NAT : CT_NOT_CARRIED) != R_FORWARDED) {
			r->result = CT_KEEP_GONE;
		} else {
			if (r->timeout_ms)
				bpf_ct_change_timeout(ct, r->timeout_ms);
			r->result = CT_KEEP_KEPT;
		}
		bpf_ct_release(ct);
	}
	return XDP_PASS;
}

/* The fast path's clock for the control plane (run with
 * BPF_PROG_TEST_RUN): the frame's first 16 bytes get bpf_jiffies64 (what
 * the caches' `seen` holds) and bpf_ktime_get_ns, from which it tells the
 * jiffy's length. */
SEC("xdp")
int ct_clock(struct xdp_md *ctx)
{
	__u64 *t = (void *)(long)ctx->data;

	if ((void *)(t + 2) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	t[0] = bpf_jiffies64();
	t[1] = bpf_ktime_get_ns();
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
