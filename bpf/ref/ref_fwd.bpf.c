// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The reference `linerate bench fastpath` measures the fast path against:
 * what the kernel's XDP samples (xdp_fwd) do, a bpf_fib_lookup() in the
 * kernel's FIB, then TTL, MACs and bpf_redirect(); everything else passes.
 * Written here from the samples' recipe, not copied. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "parse.h"

#define AF_INET 2
#define AF_INET6 10

/* The kernel routing table to look up in (0: the samples' way, the FIB
 * rules then main). The bench holds its one-route and full tables in two
 * tables of one namespace, so both are measured side by side in the same
 * run; a table id looks it up directly, as the rules would with none
 * configured. Written by user space after loading. */
__u32 ref_table SEC(".data.ref");

static __always_inline int ref_lookup(struct xdp_md *ctx, struct bpf_fib_lookup *p)
{
	__u32 table = ref_table;

	if (!table)
		return bpf_fib_lookup(ctx, p, sizeof(*p), 0);
	p->tbid = table;
	return bpf_fib_lookup(ctx, p, sizeof(*p), BPF_FIB_LOOKUP_DIRECT | BPF_FIB_LOOKUP_TBID);
}

SEC("xdp")
int ref_fwd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct bpf_fib_lookup p = {};

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end || ip->ttl <= 1)
			return XDP_PASS;
		p.family = AF_INET;
		p.tos = ip->tos;
		p.l4_protocol = ip->protocol;
		p.tot_len = bpf_ntohs(ip->tot_len);
		p.ipv4_src = ip->saddr;
		p.ipv4_dst = ip->daddr;
		p.ifindex = ctx->ingress_ifindex;
		if (ref_lookup(ctx, &p) != BPF_FIB_LKUP_RET_SUCCESS)
			return XDP_PASS;
		ipv4_decrease_ttl(ip);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end || ip6->hop_limit <= 1)
			return XDP_PASS;
		p.family = AF_INET6;
		p.l4_protocol = ip6->nexthdr;
		p.tot_len = bpf_ntohs(ip6->payload_len);
		__builtin_memcpy(p.ipv6_src, &ip6->saddr, sizeof(p.ipv6_src));
		__builtin_memcpy(p.ipv6_dst, &ip6->daddr, sizeof(p.ipv6_dst));
		p.ifindex = ctx->ingress_ifindex;
		if (ref_lookup(ctx, &p) != BPF_FIB_LKUP_RET_SUCCESS)
			return XDP_PASS;
		ip6->hop_limit--;
	} else {
		return XDP_PASS;
	}
	__builtin_memcpy(eth->h_dest, p.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, p.smac, ETH_ALEN);
	return bpf_redirect(p.ifindex, 0);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
