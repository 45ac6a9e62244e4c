// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Lab receiver: count every frame per CPU, note the ones that carry the
 * generator's stamp, and drop them all (an XDP drop costs about a sixth of
 * letting the kernel stack drop, DESIGN.md section 1). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "lab_maps.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct recv_counters);
} recv_counters SEC(".maps");

/* The stamp sits right after a UDP header that follows an option-less IPv4
 * header or a plain IPv6 header. */
static __always_inline struct stamp *find_stamp(void *data, void *data_end)
{
	struct ethhdr *eth = data;
	void *l4;

	if ((void *)(eth + 1) > data_end)
		return 0;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
			return 0;
		l4 = ip + 1;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end || ip6->nexthdr != IPPROTO_UDP)
			return 0;
		l4 = ip6 + 1;
	} else {
		return 0;
	}
	struct stamp *s = l4 + sizeof(struct udphdr);
	if ((void *)(s + 1) > data_end || s->magic != bpf_htons(STAMP_MAGIC))
		return 0;
	return s;
}

SEC("xdp")
int lab_recv(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct recv_counters *cnt = bpf_map_lookup_elem(&recv_counters, &zero);

	if (!cnt)
		return XDP_DROP;
	cnt->packets++;
	cnt->bytes += data_end - data;
	if (find_stamp(data, data_end))
		cnt->stamped++;
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
