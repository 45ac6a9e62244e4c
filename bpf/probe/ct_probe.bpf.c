// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What finding a packet's connection costs the fast path (docs/firewall.md
 * "States"): in the kernel's conntrack table through the
 * XDP conntrack kfuncs, or in a BPF hash of our own, with as many states in
 * each. Run with BPF_PROG_TEST_RUN by `linerate bench conntrack`
 * (crates/bench/src/conntrack.rs), in a namespace of its own:
 *
 *   ct_fill       each run inserts the next flow's entry (UDP, seen both
 *                 ways) into the namespace's conntrack table: `next` picks
 *                 the flow, the frame is only the context; with
 *                 `masquerade`, its source mapped as masquerade would
 *                 (`linerate bench firewall --masquerade`);
 *   tuple_only    parses the frame and builds the tuple: the baseline;
 *   ct_lookup     then bpf_xdp_ct_lookup, reads the entry's status,
 *                 bpf_ct_release;
 *   ct_refresh    the same, and bpf_ct_change_timeout (what keeping the
 *                 kernel's entry alive for a flow the fast path carries
 *                 costs, done on every packet);
 *   own_hash      the tuple looked up in a BPF hash (`flows`).
 *
 * A found, established flow returns XDP_TX, a flow not found XDP_PASS,
 * anything else XDP_DROP: the bench checks every sampled flow is found
 * by each before it measures. Flow i is N.(i>>16).(i>>8).i:(1000 +
 * i % 50000) -> 198.19.0.1:53, N `src_net` (0: 10), as the bench's
 * frames. Masqueraded, flows go in pairs, each one's source mapped to
 * the other's (i ^ 1): a frame the fast path rewrote is then one of the
 * other's, which BPF_PROG_TEST_RUN's repetitions of it need. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "kernel.h"

#define FLOWS_MAX (1 << 21)

/* The flow ct_fill inserts next, what came of the fills, and the
 * timeouts: one entry, read and written by the bench. */
struct probe_state {
	__u32 next;
	__u32 filled;
	__u32 failed;
	__s32 last_error;
	/* A filled entry's timeout, and what ct_refresh sets a found one's to. */
	__u32 fill_timeout_ms;
	__u32 refresh_timeout_ms;
	/* The flows' source network's first byte (0: 10), and whether
	 * ct_fill maps their sources. */
	__u32 src_net;
	__u32 masquerade;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct probe_state);
} state SEC(".maps");

static __always_inline struct probe_state *probe_state(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&state, &zero);
}

struct flow_key {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u32 proto;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FLOWS_MAX);
	__type(key, struct flow_key);
	__type(value, __u32);
} flows SEC(".maps");

static __always_inline int tuple_of(struct xdp_md *ctx, struct bpf_sock_tuple *t)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);

	if ((void *)(udp + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->protocol != IPPROTO_UDP || ip->ihl != 5)
		return 0;
	__builtin_memset(t, 0, sizeof(t->ipv4));
	t->ipv4.saddr = ip->saddr;
	t->ipv4.daddr = ip->daddr;
	t->ipv4.sport = udp->source;
	t->ipv4.dport = udp->dest;
	return 1;
}

SEC("xdp")
int ct_fill(struct xdp_md *ctx)
{
	struct bpf_ct_opts___local opts = { .netns_id = -1, .l4proto = IPPROTO_UDP };
	struct probe_state *st = probe_state();
	struct bpf_sock_tuple t;
	struct nf_conn *ct, *ins;
	__u32 i;

	if (!st)
		return XDP_ABORTED;
	i = st->next++;
	__builtin_memset(&t, 0, sizeof(t.ipv4));
	t.ipv4.saddr = bpf_htonl(((st->src_net ? st->src_net : 10) << 24) | (i & 0x00ffffff));
	t.ipv4.daddr = bpf_htonl((198u << 24) | (19u << 16) | 1);
	t.ipv4.sport = bpf_htons(1000 + i % 50000);
	t.ipv4.dport = bpf_htons(53);
	ct = bpf_xdp_ct_alloc(ctx, &t, sizeof(t.ipv4), &opts, sizeof(opts));
	if (!ct) {
		st->failed++;
		st->last_error = opts.error;
		return XDP_DROP;
	}
	bpf_ct_set_timeout(ct, st->fill_timeout_ms);
	int nat_error = 0;
	if (st->masquerade) {
		__u32 pair = i ^ 1;
		union nf_inet_addr to = { .all = { bpf_htonl(((st->src_net ? st->src_net : 10) << 24) |
							      (pair & 0x00ffffff)) } };

		/* (The entry is inserted whatever comes of it: insertion is
		 * what gives up an allocated entry.) */
		nat_error = bpf_ct_set_nat_info(ct, &to, 1000 + pair % 50000, NF_NAT_MANIP_SRC);
	}
	/* Seen both ways: what `ct state established` matches. */
	bpf_ct_set_status(ct, IPS_SEEN_REPLY | IPS_ASSURED);
	ins = bpf_ct_insert_entry(ct);
	if (!ins) {
		st->failed++;
		return XDP_DROP;
	}
	bpf_ct_release(ins);
	if (nat_error) {
		st->failed++;
		st->last_error = nat_error;
		return XDP_DROP;
	}
	st->filled++;
	return XDP_PASS;
}

SEC("xdp")
int tuple_only(struct xdp_md *ctx)
{
	struct bpf_sock_tuple t;

	if (!tuple_of(ctx, &t))
		return XDP_DROP;
	/* Uses the tuple, as a lookup would. */
	return t.ipv4.saddr == 0xffffffff ? XDP_DROP : XDP_TX;
}

static __always_inline int lookup(struct xdp_md *ctx, int refresh)
{
	struct bpf_ct_opts___local opts = { .netns_id = -1, .l4proto = IPPROTO_UDP };
	struct bpf_sock_tuple t;
	struct nf_conn *ct;
	int verdict;

	if (!tuple_of(ctx, &t))
		return XDP_DROP;
	ct = bpf_xdp_ct_lookup(ctx, &t, sizeof(t.ipv4), &opts, sizeof(opts));
	if (!ct)
		return XDP_PASS;
	verdict = ct->status & IPS_SEEN_REPLY ? XDP_TX : XDP_DROP;
	if (refresh) {
		struct probe_state *st = probe_state();

		if (st)
			bpf_ct_change_timeout(ct, st->refresh_timeout_ms);
	}
	bpf_ct_release(ct);
	return verdict;
}

SEC("xdp")
int ct_lookup(struct xdp_md *ctx)
{
	return lookup(ctx, 0);
}

SEC("xdp")
int ct_refresh(struct xdp_md *ctx)
{
	return lookup(ctx, 1);
}

SEC("xdp")
int own_hash(struct xdp_md *ctx)
{
	struct bpf_sock_tuple t;
	struct flow_key k;
	__u32 *state;

	if (!tuple_of(ctx, &t))
		return XDP_DROP;
	k.saddr = t.ipv4.saddr;
	k.daddr = t.ipv4.daddr;
	k.sport = t.ipv4.sport;
	k.dport = t.ipv4.dport;
	k.proto = IPPROTO_UDP;
	state = bpf_map_lookup_elem(&flows, &k);
	if (!state)
		return XDP_PASS;
	return *state & IPS_SEEN_REPLY ? XDP_TX : XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
