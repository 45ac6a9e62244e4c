// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Runs the fast path's FIB lookup on a frame's destination and writes the
 * next-hop id (host order) into the 4 bytes after the IP header: the test
 * that holds bpf/include/fib.h and crates/fib to the same layout runs it
 * with BPF_PROG_RUN. */
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
		*out = fib4_lookup(bpf_ntohl(ip->daddr));
		return XDP_PASS;
	}
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		__u32 *out = (void *)(ip6 + 1);
		if ((void *)(out + 1) > data_end)
			return XDP_ABORTED;
		__u32 *d = ip6->daddr.in6_u.u6_addr32;
		__u64 hi = ((__u64)bpf_ntohl(d[0]) << 32) | bpf_ntohl(d[1]);
		*out = fib6_lookup(hi, *(const __u64 *)&d[2]);
		return XDP_PASS;
	}
	return XDP_ABORTED;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
