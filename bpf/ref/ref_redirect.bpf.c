// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The machine's XDP limit, as a reference DUT (`lab run`'s xdp-redirect):
 * every IPv4 or IPv6 frame gets the fixed next hop's MACs and
 * is redirected through a devmap, as linerate's fast path sends; no
 * header but Ethernet's read, no lookup, no check. Whatever a forwarder
 * does on top of this costs it rate against this DUT in the same run.
 * Anything else (ARP, ND is IPv6 and goes along) passes to the kernel. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* Written by user space after loading: the next hop's MAC, the egress's
 * own, and the egress's index (for the record; the devmap holds it). */
struct next_hop {
	__u8 dst[ETH_ALEN];
	__u8 src[ETH_ALEN];
	__u32 ifindex;
};

struct next_hop ref_next SEC(".data.next");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} ref_out SEC(".maps");

SEC("xdp")
int ref_redirect(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	if (eth->h_proto != bpf_htons(ETH_P_IP) && eth->h_proto != bpf_htons(ETH_P_IPV6))
		return XDP_PASS;
	__builtin_memcpy(eth->h_dest, ref_next.dst, ETH_ALEN);
	__builtin_memcpy(eth->h_source, ref_next.src, ETH_ALEN);
	return bpf_redirect_map(&ref_out, 0, 0);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
