// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Lab traffic generator, run with BPF_PROG_RUN and
 * BPF_F_TEST_XDP_LIVE_FRAMES: every run builds one frame and returns
 * XDP_TX, which the kernel turns into a redirect out of the ingress device
 * given in the run's context (the generator's interface).
 *
 * The kernel recycles live-frame pages without re-initialising their data
 * (docs/lab.md, OTHERHOST): whatever a DUT wrote into a frame (MACs, TTL) comes
 * back on the next run. So every run rewrites every header byte from the
 * template in the config map, then the lengths, the per-flow fields, the
 * stamp and both checksums. The frame pointers are reset for each run, so
 * shrinking a frame to the size of the moment (IMIX) is undone for the
 * next one: the run's input frame is the largest size. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "abi/lab.h"
#include "csum.h"

#define V4_HDR (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr))
#define V6_HDR (sizeof(struct ethhdr) + sizeof(struct ipv6hdr) + sizeof(struct udphdr))

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_config);
} gen_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_state);
} gen_state SEC(".maps");

struct flow {
	__u32 saddr, daddr;   /* host order */
	__u16 sport, dport;   /* host order */
};

/* Flows advance like netmap pkt-gen: source port fastest, then source
 * address, destination port, destination address; the state steps like an
 * odometer, because a division per range would cost more than the rest of
 * the frame. */
static __always_inline void step(__u32 *off, __u32 count, int *carry)
{
	if (!*carry)
		return;
	if (++*off >= count)
		*off = 0;
	else
		*carry = 0;
}

static __always_inline void next_flow(const struct gen_config *c, struct gen_state *st,
				      struct flow *f)
{
	int carry = 1;

	f->sport = c->src_port_first + st->sport_off;
	f->saddr = c->src_addr_first + st->saddr_off;
	f->dport = c->dst_port_first + st->dport_off;
	f->daddr = c->dst_addr_first + st->daddr_off;
	/* At random (pkt-gen's -Z and -z): a division a field, the price of
	 * every frame a new flow. */
	if (c->flags & GEN_RANDOM_DST) {
		if (c->dst_addr_count > 1)
			f->daddr = c->dst_addr_first + bpf_get_prandom_u32() % c->dst_addr_count;
		if (c->dst_port_count > 1)
			f->dport = c->dst_port_first + bpf_get_prandom_u32() % c->dst_port_count;
	}
	if (c->flags & GEN_RANDOM_SRC) {
		if (c->src_addr_count > 1)
			f->saddr = c->src_addr_first + bpf_get_prandom_u32() % c->src_addr_count;
		if (c->src_port_count > 1)
			f->sport = c->src_port_first + bpf_get_prandom_u32() % c->src_port_count;
	}
	step(&st->sport_off, c->src_port_count, &carry);
	step(&st->saddr_off, c->src_addr_count, &carry);
	step(&st->dport_off, c->dst_port_count, &carry);
	step(&st->daddr_off, c->dst_addr_count, &carry);
}

/* What one run writes: which frame, of which stream, at what time. */
struct frame_id {
	__u64 seq;
	__u64 now;
	__u32 stream;
	__u16 ip_len;
};

/* Writes the stamp and returns its share of the UDP checksum, summed from
 * the values, not read back: see build_v4. */
static __always_inline __u64 write_stamp(struct stamp *s, const struct frame_id *id)
{
	__u16 magic = bpf_htons(STAMP_MAGIC), stream = bpf_htons(id->stream);
	__u32 seq = bpf_htonl((__u32)id->seq), tx = bpf_htonl((__u32)id->now);

	s->magic = magic;
	s->stream = stream;
	s->seq = seq;
	s->tx_ns = tx;
	return magic + stream + csum_word32(seq) + csum_word32(tx);
}

/* Pseudo-header protocol and length plus the UDP length field: the part of
 * the UDP checksum that depends only on the size (the payload is zero). */
static __always_inline __u64 udp_len_sum(__u16 udp_len)
{
	return bpf_htons(IPPROTO_UDP) + 2 * (__u64)bpf_htons(udp_len);
}

/* The builders only store into the frame, never load from it: every
 * checksum is summed from the template (in the map, local) and from the
 * values in registers. The receiver, on another CPU, reads each frame; a
 * load here of a line it has read waits for the line to come back, and
 * reading the header back for its checksum halved the rate into a
 * receiver that reads frames (docs/lab.md). */
static __always_inline int build_v4(struct xdp_md *ctx, const struct gen_config *c,
				    const struct flow *f, const struct frame_id *id)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u16 ip_len = id->ip_len;
	__u16 udp_len = ip_len - sizeof(struct iphdr);

	if (data + V4_HDR + sizeof(struct stamp) > data_end)
		return XDP_ABORTED;
	__builtin_memcpy(data, c->template, V4_HDR);

	const struct iphdr *tip = (const void *)(c->template + sizeof(struct ethhdr));
	struct iphdr *ip = data + sizeof(struct ethhdr);
	struct udphdr *udp = (void *)(ip + 1);
	__u16 tot_len = bpf_htons(ip_len), sport = bpf_htons(f->sport), dport = bpf_htons(f->dport);
	__u32 saddr = bpf_htonl(f->saddr), daddr = bpf_htonl(f->daddr);
	/* The header's words: the template's (version to protocol, less the
	 * length) and this frame's length and addresses; check counts as 0. */
	__u64 ip_sum = csum_words(tip, 1) + tip->id + tip->frag_off + csum_words(&tip->ttl, 1) +
		       tot_len + csum_word32(saddr) + csum_word32(daddr);
	__u64 udp_sum = udp_len_sum(udp_len) + csum_word32(saddr) + csum_word32(daddr) +
			sport + dport;

	ip->tot_len = tot_len;
	ip->saddr = saddr;
	ip->daddr = daddr;
	ip->check = csum_fold(ip_sum);

	udp->source = sport;
	udp->dest = dport;
	udp->len = bpf_htons(udp_len);
	if (udp_len >= sizeof(struct udphdr) + sizeof(struct stamp))
		udp_sum += write_stamp((void *)(udp + 1), id);
	__u16 check = csum_fold(udp_sum);
	udp->check = check ? check : 0xffff; /* RFC 768: zero means "no checksum" */
	return XDP_TX;
}

static __always_inline int build_v6(struct xdp_md *ctx, const struct gen_config *c,
				    const struct flow *f, const struct frame_id *id)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u16 udp_len = id->ip_len - sizeof(struct ipv6hdr);

	if (data + V6_HDR > data_end)
		return XDP_ABORTED;
	__builtin_memcpy(data, c->template, V6_HDR);

	const struct ipv6hdr *tip6 = (const void *)(c->template + sizeof(struct ethhdr));
	struct ipv6hdr *ip6 = data + sizeof(struct ethhdr);
	struct udphdr *udp = (void *)(ip6 + 1);
	__u16 sport = bpf_htons(f->sport), dport = bpf_htons(f->dport);
	__u32 saddr = bpf_htonl(f->saddr), daddr = bpf_htonl(f->daddr);
	/* Both addresses: the template's first 96 bits, this flow's last 32. */
	__u64 udp_sum = udp_len_sum(udp_len) + csum_words(&tip6->saddr, 6) +
			csum_words(&tip6->daddr, 6) + csum_word32(saddr) + csum_word32(daddr) +
			sport + dport;

	ip6->payload_len = bpf_htons(udp_len);
	ip6->saddr.in6_u.u6_addr32[3] = saddr;
	ip6->daddr.in6_u.u6_addr32[3] = daddr;
	udp->source = sport;
	udp->dest = dport;
	udp->len = bpf_htons(udp_len);
	if (udp_len >= sizeof(struct udphdr) + sizeof(struct stamp)) {
		if ((void *)(udp + 1) + sizeof(struct stamp) > data_end)
			return XDP_ABORTED;
		udp_sum += write_stamp((void *)(udp + 1), id);
	}
	__u16 check = csum_fold(udp_sum);
	udp->check = check ? check : 0xffff;
	return XDP_TX;
}

/* The clock as read at the start of this run's batch: user space makes
 * every call a whole number of batches, so counting runs down from
 * clock_every finds the batch starts. Were the count ever off (a call
 * interrupted by a signal), a read would fall inside a batch instead:
 * still at most a batch's time stale. */
static __always_inline __u64 batch_clock(const struct gen_config *c, struct gen_state *st)
{
	if (!st->clock_runs) {
		st->clock_ns = bpf_ktime_get_ns();
		st->clock_runs = c->clock_every ? c->clock_every : 1;
	}
	st->clock_runs--;
	return st->clock_ns;
}

/* Rate control: a frame may leave once the schedule (rate_pps since
 * start_ns) allows it; until then runs are spent dropping. Nothing leaves
 * before start_ns: the senders warm up (their first calls are short and
 * end in idle waits) without the schedule falling behind. A CPU that fell
 * behind (both its senders in their idle wait) catches up at full speed,
 * as pkt-gen does: capping the catch-up lost a fifth of the rate at 80%
 * of the maximum, where the idle waits are made up for this way. */
static __always_inline int ahead_of_schedule(const struct gen_config *c,
					     const struct gen_state *st, __u64 now)
{
	if (now < c->start_ns)
		return 1;
	if (!c->rate_pps)
		return 0;
	__u64 allowed = (now - c->start_ns) / 1000 * c->rate_pps / 1000000 + 1;
	return st->seq >= allowed;
}

SEC("xdp")
int lab_gen(struct xdp_md *ctx)
{
	__u32 zero = 0;
	const struct gen_config *c = bpf_map_lookup_elem(&gen_config, &zero);
	struct gen_state *st = bpf_map_lookup_elem(&gen_state, &zero);
	struct frame_id id;
	struct flow f;

	if (!c || !st || !c->size_count || c->size_count > GEN_SIZES_MAX)
		return XDP_ABORTED;
	/* One clock read per batch serves the stop, the pacing and the stamp. */
	id.now = batch_clock(c, st);
	if ((c->stop_ns && id.now >= c->stop_ns) || (st->limit && st->seq >= st->limit)) {
		st->after_stop++;
		return XDP_DROP;
	}
	if (ahead_of_schedule(c, st, id.now)) {
		st->held++;
		return XDP_DROP;
	}

	id.seq = st->seq;
	id.stream = c->stream_base + bpf_get_smp_processor_id();
	const struct gen_size *sz = &c->sizes[st->size_idx & (GEN_SIZES_MAX - 1)];
	int delta = (int)sz->frame_len - (int)(ctx->data_end - ctx->data);

	if (delta && bpf_xdp_adjust_tail(ctx, delta))
		return XDP_ABORTED;
	id.ip_len = sz->ip_len;
	st->seq = id.seq + 1;
	st->bytes += sz->frame_len;
	st->last_ns = id.now;
	if (++st->size_idx >= c->size_count)
		st->size_idx = 0;
	next_flow(c, st, &f);
	if (c->family == 6)
		return build_v6(ctx, c, &f, &id);
	return build_v4(ctx, c, &f, &id);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
