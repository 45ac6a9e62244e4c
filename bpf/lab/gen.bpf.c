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
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "abi/lab.h"
#include "csum.h"
#include "vlan_tag.h"

#define V4_IP (sizeof(struct ethhdr) + sizeof(struct iphdr))
#define V6_IP (sizeof(struct ethhdr) + sizeof(struct ipv6hdr))

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GEN_PARTS);
	__type(key, __u32);
	__type(value, struct gen_config);
} gen_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GEN_PARTS);
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
 * the frame. A carry out of the last range is a pass over all the flows. */
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
	/* TCP: this CPU's share of the source ports (set by user space). */
	__u32 sport_first = st->sport_count ? st->sport_first : c->src_port_first;
	__u32 sport_count = st->sport_count ? st->sport_count : c->src_port_count;
	int carry = 1;

	f->sport = sport_first + st->sport_off;
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
	step(&st->sport_off, sport_count, &carry);
	step(&st->saddr_off, c->src_addr_count, &carry);
	step(&st->dport_off, c->dst_port_count, &carry);
	step(&st->daddr_off, c->dst_addr_count, &carry);
	st->cycle += carry;
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

/* A mix's frame: from byte `from` (the end of what this frame wrote), `n`
 * bytes zeroed within the frame, so that what another part's frame left
 * in the page is not taken for payload (gen_config.clear_to). A function
 * of its own, verified once (global): its loops inlined at each builder
 * made the program's load take a second longer. */
__attribute__((noinline)) int clear_left(struct xdp_md *ctx, __u32 from, int n)
{
	__u8 *p = (__u8 *)(long)ctx->data;
	__u8 *data_end = (__u8 *)(long)ctx->data_end;

	if (n <= 0 || from > 256)
		return 0;
	p += from;
#pragma unroll
	for (int i = 0; i < GEN_CLEAR_MAX; i += 8) {
		if (i < n) {
			if (p + i + 8 <= data_end) {
				*(__u64 *)(p + i) = 0;
			} else {
				/* The frame ends inside this word. */
#pragma unroll
				for (int j = 0; j < 8; j++)
					if (p + i + j + 1 <= data_end)
						p[i + j] = 0;
			}
		}
	}
	return 0;
}

/* The UDP datagram after the IP header: ports, length, the stamp if it
 * fits, the checksum from `sum` (the pseudo-header's addresses) and the
 * values written. The payload is zero apart from the stamp. */
static __always_inline int build_udp(struct xdp_md *ctx, void *l4, void *data_end,
				     const struct gen_config *c, __u32 l4_off, const struct flow *f,
				     const struct frame_id *id, __u16 udp_len, __u64 sum)
{
	struct udphdr *udp = l4;
	__u16 sport = bpf_htons(f->sport), dport = bpf_htons(f->dport), len = bpf_htons(udp_len);
	__u32 end = l4_off + sizeof(struct udphdr);

	if ((void *)(udp + 1) > data_end)
		return XDP_ABORTED;
	sum += bpf_htons(IPPROTO_UDP) + 2 * (__u64)len + sport + dport;
	udp->source = sport;
	udp->dest = dport;
	udp->len = len;
	if (udp_len >= sizeof(struct udphdr) + sizeof(struct stamp)) {
		if ((void *)(udp + 1) + sizeof(struct stamp) > data_end)
			return XDP_ABORTED;
		sum += write_stamp((void *)(udp + 1), id);
		end += sizeof(struct stamp);
	}
	__u16 check = csum_fold(sum);
	udp->check = check ? check : 0xffff; /* RFC 768: zero means "no checksum" */
	/* Last: a call leaves no packet pointer usable after it. */
	if (c->clear_to)
		clear_left(ctx, end, (int)c->clear_to - (int)end);
	return XDP_TX;
}

/* A connection's initial sequence number: a mix of its tuple, so that
 * connections differ as real ones do, computed again for each segment;
 * `reuse` tells apart the connections of one tuple (churn). */
static __always_inline __u32 tcp_isn(const struct flow *f, __u32 reuse)
{
	return (f->saddr * 0x9e3779b1u ^ f->daddr ^ ((__u32)f->sport << 16 | f->dport)) +
	       reuse * 0x01000193u;
}

/* The MSS and window scale options of a SYN, as 16-bit words in memory
 * order: kind 2 length 4 MSS, NOP, kind 3 length 3 shift. */
#define SYN_OPTIONS 8

/* Which segment of its connection a frame is: the phase (GEN_TCP_*, never
 * CHURN), its data segment's number, the data bytes before the first of
 * them, and which connection of its tuple. */
struct segment {
	__u32 phase;
	__u32 number;
	__u32 from;
	__u32 reuse;
};

/* The TCP segment after the IP header, the checksum from `sum` (the
 * pseudo-header's addresses) and the values written. Everything after
 * the header is written too (zeros and the stamp): a live-frame page
 * keeps what an earlier frame left in it. */
static __always_inline int build_tcp(struct xdp_md *ctx, void *l4, void *data_end,
				     const struct gen_config *c, __u32 l4_off, const struct flow *f,
				     const struct frame_id *id,
				     __u16 tcp_len, const struct segment *g, __u64 sum)
{
	__u32 written = sizeof(struct tcphdr);
	struct tcphdr *t = l4;
	__u32 isn = tcp_isn(f, g->reuse);
	__u32 peer = isn + LAB_TCP_ISN_GAP + 1; /* the receiver's next sequence number */
	__u32 seq = isn + 1 + g->from, ack = peer;
	__u16 flags = 0x10, doff = 5; /* ACK */
	__u16 payload = tcp_len - sizeof(struct tcphdr);

	if ((void *)(t + 1) > data_end)
		return XDP_ABORTED;
	switch (g->phase) {
	case GEN_TCP_SYN:
		flags = 0x02;
		seq = isn;
		ack = 0;
		doff = 5 + SYN_OPTIONS / 4;
		payload = 0;
		break;
	case GEN_TCP_FIN:
		flags = 0x11; /* FIN|ACK */
		payload = 0;
		break;
	case GEN_TCP_LAST_ACK:
		seq += 1;
		ack += 1;
		payload = 0;
		break;
	default:
		seq += g->number * c->tcp_stride;
		if (payload)
			flags |= 0x08; /* PSH */
	}
	__u16 sport = bpf_htons(f->sport), dport = bpf_htons(f->dport);
	__u32 nseq = bpf_htonl(seq), nack = bpf_htonl(ack);
	__u16 word = bpf_htons(doff << 12 | flags), win = 0xffff;

	t->source = sport;
	t->dest = dport;
	t->seq = nseq;
	t->ack_seq = nack;
	*(__u16 *)((void *)t + 12) = word;
	t->window = win;
	t->urg_ptr = 0;
	sum += bpf_htons(IPPROTO_TCP) + bpf_htons(tcp_len) + sport + dport + csum_word32(nseq) +
	       csum_word32(nack) + word + win;
	if (doff > 5) {
		__u16 *o = (void *)(t + 1);

		if ((void *)(o + SYN_OPTIONS / 2) > data_end)
			return XDP_ABORTED;
		o[0] = bpf_htons(0x0204);
		o[1] = bpf_htons(LAB_TCP_MSS);
		o[2] = bpf_htons(0x0103);
		o[3] = bpf_htons(0x0300 | LAB_TCP_WSCALE);
		sum += o[0] + o[1] + o[2] + o[3];
		written += SYN_OPTIONS;
	} else if (payload >= sizeof(struct stamp)) {
		if ((void *)(t + 1) + sizeof(struct stamp) > data_end)
			return XDP_ABORTED;
		sum += write_stamp((void *)(t + 1), id);
		written += sizeof(struct stamp);
	} else if (payload) {
		written += SYN_OPTIONS;
		/* Too short for a stamp (a 60-byte IPv4 frame carries 6 bytes):
		 * zeros over what a SYN's options may have left. */
		__u8 *p = (void *)(t + 1);
#pragma unroll
		for (int i = 0; i < SYN_OPTIONS; i++)
			if (i < payload && (void *)(p + i + 1) <= data_end)
				p[i] = 0;
	}
	t->check = csum_fold(sum);
	if (c->clear_to)
		clear_left(ctx, l4_off + written, (int)c->clear_to - (int)(l4_off + written));
	return XDP_TX;
}

/* Churn: the next frame's connection and step (GEN_TCP_CHURN in abi/lab.h),
 * its flow found from the connection's number (a division a range: the
 * odometer serves a sequence of flows, not a number), the round and step
 * advanced. 0 while the run's first rounds reach back to connections it
 * never opened (their frames are not sent). */
static __always_inline int churn_next(const struct gen_config *c, struct gen_state *st,
				      struct flow *f, struct segment *g)
{
	__u32 k = st->slot, steps = c->tcp_steps;
	__u64 r = st->round;

	if (++st->slot >= steps) {
		st->slot = 0;
		st->round = r + 1;
	}
	__u64 behind = (__u64)k * c->tcp_lag;
	if (r < behind || steps < GEN_TCP_STEPS_MIN)
		return 0;
	__u64 n = (__u64)c->tcp_from + r - behind;
	__u32 sport_first = st->sport_count ? st->sport_first : c->src_port_first;
	__u32 sport_count = st->sport_count ? st->sport_count : c->src_port_count;
	__u64 m = n;

	if (!sport_count || !c->src_addr_count || !c->dst_port_count || !c->dst_addr_count)
		return 0;
	f->sport = sport_first + m % sport_count;
	m /= sport_count;
	f->saddr = c->src_addr_first + m % c->src_addr_count;
	m /= c->src_addr_count;
	f->dport = c->dst_port_first + m % c->dst_port_count;
	m /= c->dst_port_count;
	f->daddr = c->dst_addr_first + m % c->dst_addr_count;
	g->reuse = m / c->dst_addr_count;
	g->from = 0;
	g->number = k - 1;
	if (k == 0) {
		g->phase = GEN_TCP_SYN;
	} else if (k == steps - 2) {
		g->phase = GEN_TCP_FIN;
		g->from = (steps - 3) * c->tcp_stride;
	} else if (k == steps - 1) {
		g->phase = GEN_TCP_LAST_ACK;
		g->from = (steps - 3) * c->tcp_stride;
	} else {
		g->phase = GEN_TCP_DATA;
	}
	return 1;
}

/* The IPv4 header and what follows it. The builders only store into the
 * frame, never load from it: every checksum is summed from the template
 * (in the map, local) and from the values in registers. The receiver, on
 * another CPU, reads each frame; a load here of a line it has read waits
 * for the line to come back, and reading the header back for its
 * checksum halved the rate into a receiver that reads frames
 * (docs/lab.md). */
static __always_inline int build_v4(struct xdp_md *ctx, const struct gen_config *c,
				    const struct flow *f, const struct frame_id *id,
				    const struct segment *g, const int extra)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u16 ip_len = id->ip_len;

	if (data + V4_IP + extra > data_end)
		return XDP_ABORTED;
	__builtin_memcpy(data, c->template, V4_IP + extra);

	const struct iphdr *tip = (const void *)(c->template + sizeof(struct ethhdr));
	struct iphdr *ip = data + sizeof(struct ethhdr);
	__u16 tot_len = bpf_htons(ip_len);
	__u32 saddr = bpf_htonl(f->saddr), daddr = bpf_htonl(f->daddr);
	/* The header's words: the template's (version to protocol, less the
	 * length; its options) and this frame's length and addresses; check
	 * counts as 0. */
	__u64 ip_sum = csum_words(tip, 1) + tip->id + tip->frag_off + csum_words(&tip->ttl, 1) +
		       tot_len + csum_word32(saddr) + csum_word32(daddr);
	__u64 pseudo = csum_word32(saddr) + csum_word32(daddr);

	if (extra)
		ip_sum += csum_words(c->template + V4_IP, extra / 2);
	ip->tot_len = tot_len;
	ip->saddr = saddr;
	ip->daddr = daddr;
	ip->check = csum_fold(ip_sum);
	if (extra)
		return build_udp(ctx, (void *)(ip + 1) + extra, data_end, c, V4_IP + extra, f, id,
				 ip_len - sizeof(struct iphdr) - extra, pseudo);
	if (c->l4 == IPPROTO_TCP)
		return build_tcp(ctx, ip + 1, data_end, c, V4_IP, f, id,
				 ip_len - sizeof(struct iphdr), g, pseudo);
	return build_udp(ctx, ip + 1, data_end, c, V4_IP, f, id, ip_len - sizeof(struct iphdr),
			 pseudo);
}

static __always_inline int build_v6(struct xdp_md *ctx, const struct gen_config *c,
				    const struct flow *f, const struct frame_id *id,
				    const struct segment *g, const int extra)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u16 l4_len = id->ip_len - sizeof(struct ipv6hdr);

	if (data + V6_IP + extra > data_end)
		return XDP_ABORTED;
	__builtin_memcpy(data, c->template, V6_IP + extra);

	const struct ipv6hdr *tip6 = (const void *)(c->template + sizeof(struct ethhdr));
	struct ipv6hdr *ip6 = data + sizeof(struct ethhdr);
	__u32 saddr = bpf_htonl(f->saddr), daddr = bpf_htonl(f->daddr);
	/* Both addresses: the template's first 96 bits, this flow's last 32. */
	__u64 pseudo = csum_words(&tip6->saddr, 6) + csum_words(&tip6->daddr, 6) +
		       csum_word32(saddr) + csum_word32(daddr);

	/* (The payload length counts an extension header; the pseudo-header's
	 * length is the datagram's.) */
	ip6->payload_len = bpf_htons(l4_len);
	ip6->saddr.in6_u.u6_addr32[3] = saddr;
	ip6->daddr.in6_u.u6_addr32[3] = daddr;
	if (extra)
		return build_udp(ctx, (void *)(ip6 + 1) + extra, data_end, c, V6_IP + extra, f, id,
				 l4_len - extra, pseudo);
	if (c->l4 == IPPROTO_TCP)
		return build_tcp(ctx, ip6 + 1, data_end, c, V6_IP, f, id, l4_len, g, pseudo);
	return build_udp(ctx, ip6 + 1, data_end, c, V6_IP, f, id, l4_len, pseudo);
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
	__u32 part = 0;
	const struct gen_config *c = bpf_map_lookup_elem(&gen_config, &part);
	struct gen_state *st = bpf_map_lookup_elem(&gen_state, &part);
	struct frame_id id;
	struct flow f;

	if (!c || !st)
		return XDP_ABORTED;
	/* One clock read per batch serves the stop, the pacing and the stamp
	 * (part 0's, for every part: the batch is the runs'). */
	id.now = batch_clock(c, st);
	if (c->mix_count) {
		/* A mix: this frame's part, the slots stepped for the next. */
		part = c->mix[st->mix_slot & (GEN_MIX_SLOTS - 1)];
		if (++st->mix_slot >= c->mix_count)
			st->mix_slot = 0;
		if (part) {
			c = bpf_map_lookup_elem(&gen_config, &part);
			st = bpf_map_lookup_elem(&gen_state, &part);
			if (!c || !st)
				return XDP_ABORTED;
		}
	}
	if (!c->size_count || c->size_count > GEN_SIZES_MAX)
		return XDP_ABORTED;
	if ((c->stop_ns && id.now >= c->stop_ns) || (st->limit && st->seq >= st->limit)) {
		st->after_stop++;
		return XDP_DROP;
	}
	if (ahead_of_schedule(c, st, id.now)) {
		st->held++;
		return XDP_DROP;
	}

	/* Churn: which connection and step this frame is, before anything
	 * is counted (the run's first rounds send nothing of connections
	 * they never opened). */
	struct segment g = { .phase = c->tcp_phase, .from = c->tcp_from };
	int churn = c->l4 == IPPROTO_TCP && c->tcp_phase == GEN_TCP_CHURN;

	if (churn && c->tcp_min_gap_ns) {
		/* The clock of this run, not the batch's: a batch's frames leave
		 * together, the gap is between runs that build one. */
		id.now = bpf_ktime_get_ns();
		if (st->seq && id.now - st->last_ns < c->tcp_min_gap_ns) {
			st->held++;
			return XDP_DROP;
		}
	}
	if (churn && !churn_next(c, st, &f, &g))
		return XDP_DROP;
	id.seq = st->seq;
	id.stream = c->stream_base + bpf_get_smp_processor_id();
	const struct gen_size *sz = &c->sizes[st->size_idx & (GEN_SIZES_MAX - 1)];
	__u16 frame_len = sz->frame_len;

	id.ip_len = sz->ip_len;
	/* A TCP segment without data (SYN, FIN, ACK) has its own size: the
	 * headers, without Ethernet padding. A router forwarding a padded
	 * frame cuts the padding, and the page would come back to this
	 * program with that length at its head, which the kernel keeps for
	 * the next frame built in it that does not move its own end (a
	 * 60-byte segment left 54 bytes long: docs/lab.md, "Traffic
	 * mixes"). */
	if (c->l4 == IPPROTO_TCP && g.phase != GEN_TCP_DATA) {
		id.ip_len = (c->family == 6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr)) +
			    sizeof(struct tcphdr) + (g.phase == GEN_TCP_SYN ? SYN_OPTIONS : 0);
		frame_len = sizeof(struct ethhdr) + id.ip_len;
	}
	int delta = (int)frame_len - (int)(ctx->data_end - ctx->data);

	if (delta && bpf_xdp_adjust_tail(ctx, delta))
		return XDP_ABORTED;
	st->seq = id.seq + 1;
	st->bytes += frame_len + (c->vlan_tag ? VLAN_TAG_LEN : 0);
	st->last_ns = id.now;
	if (++st->size_idx >= c->size_count)
		st->size_idx = 0;
	if (!churn) {
		/* The segment number is the pass this frame's flow is in. */
		g.number = st->cycle;
		next_flow(c, st, &f);
	}
	/* (UDP alone carries an extension: one constant each, one body.) */
	int act;
	if (c->l3_extra)
		act = c->family == 6 ? build_v6(ctx, c, &f, &id, &g, GEN_L3_EXTRA)
				     : build_v4(ctx, c, &f, &id, &g, GEN_L3_EXTRA);
	else if (c->family == 6)
		act = build_v6(ctx, c, &f, &id, &g, 0);
	else
		act = build_v4(ctx, c, &f, &id, &g, 0);
	/* Tagged last: every part of the frame is built where it always is.
	 * (The kernel puts the frame's start back for the next run.) */
	if (act == XDP_TX && c->vlan_tag && !vlan_tag_push(ctx, c->vlan_tag))
		return XDP_ABORTED;
	/* A part of a second port: out of it (live frames redirect as they
	 * transmit, flushed at the batch's end). */
	if (act == XDP_TX && c->out_ifindex)
		return bpf_redirect(c->out_ifindex, 0);
	return act;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
