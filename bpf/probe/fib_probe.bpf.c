// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Runs the fast path's FIB lookup on a frame's destination and writes the
 * next-hop id (host order) into the 4 bytes after the IP header: the test
 * that holds bpf/include/fib.h and crates/fib to the same layout runs it
 * with BPF_PROG_RUN. The source's first 32 bits name the table: 0 main's,
 * else its root's offset in the arena in MiB; IPv6's next 32, the lookup:
 * 0 the router's (fib6_lookup, fib6_lookup_at), 1 a rule step's
 * (fib6_lookup_step). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "fib.h"

SEC("xdp")
int fib_probe(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return XDP_ABORTED;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		__u32 *out = (void *)(ip + 1);
		if ((void *)(out + 1) > data_end)
			return XDP_ABORTED;
		__u32 mib = bpf_ntohl(ip->saddr), daddr = bpf_ntohl(ip->daddr);
		*out = mib ? fib4_lookup_at((__u64)mib << 20, daddr) : fib4_lookup(daddr);
		return XDP_PASS;
	}
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		__u32 *out = (void *)(ip6 + 1);
		if ((void *)(out + 1) > data_end)
			return XDP_ABORTED;
		__u32 *d = ip6->daddr.in6_u.u6_addr32;
		__u64 hi = ((__u64)bpf_ntohl(d[0]) << 32) | bpf_ntohl(d[1]);
		__u32 mib = bpf_ntohl(ip6->saddr.in6_u.u6_addr32[0]);
		__u64 root = mib ? (__u64)mib << 20 : FIB6_ROOT_OFF;
		__u64 lo_be = *(const __u64 *)&d[2];
		if (ip6->saddr.in6_u.u6_addr32[1])
			*out = fib6_lookup_step(root, hi, lo_be);
		else
			*out = mib ? fib6_lookup_at(root, hi, lo_be) : fib6_lookup(hi, lo_be);
		return XDP_PASS;
	}
	return XDP_ABORTED;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
