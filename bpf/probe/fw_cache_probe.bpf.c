// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What a verdict cache lookup costs the fast path (docs/firewall.md):
 * three programs build the same 64-byte flow key (the fast path's
 * fw_key, abi/firewall.h) from an IPv4 UDP frame;
 * `fw_key_only` stops there, `fw_lru` looks it up in a BPF LRU hash,
 * `fw_direct` in a direct-mapped table (a mappable array indexed by a
 * multiply-shift hash of the key, each slot holding its key, compared, and
 * a sequence word the writer makes odd while it writes). A hit returns
 * XDP_TX, a miss XDP_PASS, anything else XDP_DROP: `linerate bench
 * firewall-cache` checks every flow hits before it measures.
 * crates/bench/src/fw_cache.rs builds the same keys and hashes. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "abi/firewall.h"

#define FW_SLOTS (1 << 20)

/* The shapes measured: an LRU hash's value, and a direct-mapped slot. */
struct probe_entry {
	__u32 generation;
	__u8 verdict;
	__u8 counters_n;
	__u16 counters[4];
	__u16 pad;
};

struct probe_slot {
	__u32 seq;
	__u32 pad;
	struct fw_key key;
	struct probe_entry entry;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FW_SLOTS);
	__type(key, struct fw_key);
	__type(value, struct probe_entry);
} cache_lru SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_SLOTS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct probe_slot);
} cache_direct SEC(".maps");

/* The key of an IPv4 UDP frame: addresses, the ports (the transport
 * bytes a ruleset on ports reads), the protocol; the output interface a
 * constant (the FIB lookup would give it). 0 if the frame is not one. */
static __always_inline int build_key(struct xdp_md *ctx, struct fw_key *k)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);

	if ((void *)(udp + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->protocol != IPPROTO_UDP)
		return 0;
	__builtin_memset(k, 0, sizeof(*k));
	__builtin_memcpy(k->saddr, &ip->saddr, 4);
	__builtin_memcpy(k->daddr, &ip->daddr, 4);
	__builtin_memcpy(k->transport, udp, 4);
	k->iif = ctx->ingress_ifindex;
	k->oif = 3;
	k->transport_len = 4;
	k->l4proto = IPPROTO_UDP;
	k->nexthdr = IPPROTO_UDP;
	return 1;
}

/* A multiply-xorshift over the key's eight words; the top bits pick the
 * slot. */
static __always_inline __u32 slot_of(const struct fw_key *k)
{
	const __u64 *w = (const __u64 *)k;
	__u64 h = 0;

#pragma unroll
	for (int i = 0; i < 8; i++)
		h = (h ^ w[i]) * 0x9e3779b97f4a7c15ull;
	return (h ^ (h >> 29)) >> (64 - 20);
}

SEC("xdp")
int fw_key_only(struct xdp_md *ctx)
{
	struct fw_key k;

	if (!build_key(ctx, &k))
		return XDP_DROP;
	/* Uses the key, as a lookup would. */
	return slot_of(&k) == 0xffffffff ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int fw_lru(struct xdp_md *ctx)
{
	struct fw_key k;
	struct probe_entry *e;

	if (!build_key(ctx, &k))
		return XDP_DROP;
	e = bpf_map_lookup_elem(&cache_lru, &k);
	return e && e->generation == 1 ? XDP_TX : XDP_PASS;
}

SEC("xdp")
int fw_direct(struct xdp_md *ctx)
{
	struct fw_key k;
	struct probe_slot *s;
	__u32 i;

	if (!build_key(ctx, &k))
		return XDP_DROP;
	i = slot_of(&k);
	s = bpf_map_lookup_elem(&cache_direct, &i);
	if (!s)
		return XDP_DROP;
	__u32 seq = *(volatile __u32 *)&s->seq;
	if (seq & 1)
		return XDP_PASS;
	const __u64 *a = (const __u64 *)&k, *b = (const __u64 *)&s->key;
	__u64 diff = 0;

#pragma unroll
	for (int w = 0; w < 8; w++)
		diff |= a[w] ^ b[w];
	__u32 generation = s->entry.generation;
	if (diff || generation != 1 || *(volatile __u32 *)&s->seq != seq)
		return XDP_PASS;
	return XDP_TX;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
