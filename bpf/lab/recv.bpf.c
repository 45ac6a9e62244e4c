// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Lab receiver: count every frame per CPU; for frames that carry the
 * generator's stamp, track each stream's sequence numbers (lost, duplicated,
 * reordered) and the one-way latency; drop them all (an XDP drop costs
 * about a sixth of letting the kernel stack drop, measured on the lab's
 * veths) but the segments of the probes' BGP session, which go to the
 * namespace's kernel.
 *
 * State is per CPU, without locks: a stream whose packets arrive on several
 * CPUs is merged by the reader, and duplicates or reordering across CPUs
 * are not seen (an RSS NIC keeps a flow on one queue). */
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

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct recv_counters);
} recv_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RECV_STREAMS);
	__type(key, __u32);
	__type(value, struct recv_stream);
} recv_streams SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct recv_latency);
} recv_latency SEC(".maps");

/* The stamp sits right after a UDP header, or an option-less TCP header,
 * that follows an option-less IPv4 header or a plain IPv6 header. */
static __always_inline struct stamp *find_stamp(void *data, void *data_end)
{
	struct ethhdr *eth = data;
	void *l4;
	__u8 proto;

	if ((void *)(eth + 1) > data_end)
		return 0;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end || ip->ihl != 5)
			return 0;
		proto = ip->protocol;
		l4 = ip + 1;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end)
			return 0;
		proto = ip6->nexthdr;
		l4 = ip6 + 1;
	} else {
		return 0;
	}
	struct stamp *s;
	if (proto == IPPROTO_UDP) {
		s = l4 + sizeof(struct udphdr);
	} else if (proto == IPPROTO_TCP) {
		struct tcphdr *t = l4;
		if ((void *)(t + 1) > data_end || t->doff != 5)
			return 0;
		s = (void *)(t + 1);
	} else {
		return 0;
	}
	if ((void *)(s + 1) > data_end || s->magic != bpf_htons(STAMP_MAGIC))
		return 0;
	return s;
}

/* Marks seq in the window; returns 1 if it was already marked. Each word
 * covers the 64 numbers from its tag; a word holding an older block is
 * recycled, one holding a newer block means seq is too old to tell (-1). */
static __always_inline int window_mark(struct recv_stream *s, __u32 seq)
{
	__u32 w = (seq >> 6) & (RECV_WINDOW_WORDS - 1);
	__u32 tag = seq & ~63u;
	__u64 bit = 1ULL << (seq & 63);

	if (s->tag[w] != tag) {
		if ((__s32)(tag - s->tag[w]) < 0)
			return -1;
		s->tag[w] = tag;
		s->bits[w] = 0;
	}
	if (s->bits[w] & bit)
		return 1;
	s->bits[w] |= bit;
	return 0;
}

/* Sequence numbers are 32 bits and compared modulo 2^32 (RFC 1982), so a
 * stream may wrap. */
static __always_inline void track(struct recv_stream *s, __u32 seq)
{
	s->received++;
	if (!s->seen) {
		/* Each word starts as the block at or below seq that it stands
		 * for, empty, so numbers just before the first are seen too. */
		__u32 block = seq & ~63u;
#pragma unroll
		for (int w = 0; w < RECV_WINDOW_WORDS; w++) {
			s->tag[w] = block - (((block >> 6) - w) & (RECV_WINDOW_WORDS - 1)) * 64;
			s->bits[w] = 0;
		}
		s->seen = 1;
		s->first = s->max = seq;
		s->span = 1;
		window_mark(s, seq);
		return;
	}
	__s32 ahead = seq - s->max;
	if (ahead > 0) {
		s->span += ahead;
		s->max = seq;
		window_mark(s, seq);
		return;
	}
	int r = window_mark(s, seq);
	if (r > 0) {
		s->duplicated++;
		return;
	}
	s->reordered++;
	if (r < 0)
		s->late++;
	if ((__s32)(seq - s->first) < 0) {
		s->span += s->first - seq;
		s->first = seq;
	}
}

/* Bucket of a latency: exact below 16 ns, then 16 linear steps for each
 * power of two (HdrHistogram with 4 bits of precision). */
static __always_inline __u32 latency_bucket(__u32 v)
{
	__u32 msb = 0, x = v;

	if (x >> 16) { x >>= 16; msb += 16; }
	if (x >> 8) { x >>= 8; msb += 8; }
	if (x >> 4) { x >>= 4; msb += 4; }
	if (x >> 2) { x >>= 2; msb += 2; }
	if (x >> 1) { msb += 1; }
	if (msb < 4)
		return v;
	return ((msb - 3) << 4) | ((v >> (msb - 4)) & 15);
}

static __always_inline void record_latency(struct stamp *st)
{
	__u32 zero = 0;
	struct recv_latency *l = bpf_map_lookup_elem(&recv_latency, &zero);
	__u32 lat = (__u32)bpf_ktime_get_ns() - bpf_ntohl(st->tx_ns);

	if (!l || (__s32)lat < 0) /* another host's clock */
		return;
	if (!l->count || lat < l->min_ns)
		l->min_ns = lat;
	if (lat > l->max_ns)
		l->max_ns = lat;
	l->count++;
	l->sum_ns += lat;
	l->hist[latency_bucket(lat) & (RECV_LAT_BUCKETS - 1)]++;
}

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RECV_WATCH);
	__type(key, __u32);
	__type(value, struct recv_watch);
} recv_watch SEC(".maps");

/* Transmit stamps compare modulo 2^32 (they are the low bits of ns). */
static __always_inline void watch(void *data, struct stamp *st)
{
	struct ethhdr *eth = data;
	__u32 tx = bpf_ntohl(st->tx_ns);

#pragma unroll
	for (__u32 i = 0; i < RECV_WATCH; i++) {
		__u32 k = i;
		struct recv_watch *w = bpf_map_lookup_elem(&recv_watch, &k);
		if (!w || w->mac[0] != eth->h_dest[0] || w->mac[1] != eth->h_dest[1] ||
		    w->mac[2] != eth->h_dest[2] || w->mac[3] != eth->h_dest[3] ||
		    w->mac[4] != eth->h_dest[4] || w->mac[5] != eth->h_dest[5])
			continue;
		if (!w->packets || (__s32)(tx - w->first_tx) < 0)
			w->first_tx = tx;
		if (!w->packets || (__s32)(tx - w->last_tx) > 0)
			w->last_tx = tx;
		w->packets++;
		return;
	}
}

enum recv_mode { FULL, WATCH, COUNT, FRAMES, ANSWER };

/* The answer to a TCP segment of the generator's connections, if it
 * needs one, written over the segment in place: SYN -> SYN|ACK (the
 * options echoed, the sequence number the SYN's plus LAB_TCP_ISN_GAP),
 * FIN -> FIN|ACK, and an ACK for a connection's first data segment and
 * for each that crosses a multiple of 2^LAB_TCP_ACK_SHIFT bytes of its
 * data (see abi/lab.h); without state, from what the segment says. The
 * headers' lengths and checksums are written anew, the payload dropped.
 * `l3_len`: the IP header's length; `pseudo`: the addresses' sum.
 * Returns the answer's frame length, 0 for no answer. */
static __always_inline __u32 answer_tcp(struct tcphdr *t, void *data_end, __u16 l4_len,
					__u16 l3_len, __u64 pseudo)
{
	if ((void *)(t + 1) > data_end)
		return 0;
	__u16 hlen = t->doff * 4;
	if (hlen < sizeof(*t) || hlen > l4_len || hlen > 60)
		return 0;
	__u32 seq = bpf_ntohl(t->seq), ack = bpf_ntohl(t->ack_seq);
	__u32 payload = l4_len - hlen;
	__u32 start = ack - LAB_TCP_ISN_GAP; /* the connection's first data byte */
	__u16 flags;

	if (t->rst)
		return 0;
	if (t->syn && !t->ack) {
		flags = 0x12; /* SYN|ACK */
		ack = seq + 1;
		seq += LAB_TCP_ISN_GAP;
	} else if (t->fin) {
		flags = 0x11; /* FIN|ACK */
		hlen = sizeof(*t);
		__u32 next = seq + payload + 1;
		seq = ack;
		ack = next;
	} else if (payload && t->ack &&
		   (seq == start || ((seq - start) >> LAB_TCP_ACK_SHIFT) !=
					    ((seq + payload - start) >> LAB_TCP_ACK_SHIFT))) {
		flags = 0x10; /* ACK */
		hlen = sizeof(*t);
		__u32 next = seq + payload;
		seq = ack;
		ack = next;
	} else {
		return 0;
	}
	__be16 p = t->source;
	t->source = t->dest;
	t->dest = p;
	t->seq = bpf_htonl(seq);
	t->ack_seq = bpf_htonl(ack);
	*(__u16 *)((void *)t + 12) = bpf_htons((__u16)(hlen / 4) << 12 | flags);
	t->window = 0xffff;
	t->check = 0;
	t->urg_ptr = 0;
	/* The header summed anew: at most 60 bytes. */
	__u64 sum = pseudo + bpf_htons(IPPROTO_TCP) + bpf_htons(hlen);
	const __u16 *w = (const void *)t;
#pragma unroll
	for (int i = 0; i < 30; i++)
		if (i * 2 < hlen && (void *)(w + i + 1) <= data_end)
			sum += w[i];
	t->check = csum_fold(sum);
	return sizeof(struct ethhdr) + l3_len + hlen;
}

/* The largest answer (IPv6, TCP with a SYN's options: 82 bytes), and how
 * far an answer moves towards its page's start. */
#define ANSWER_MAX 96
#define ANSWER_SHIFT 8

/* Makes the answer's first `len` bytes the whole frame, moved ANSWER_SHIFT
 * bytes towards the page's start, without Ethernet padding (which a router
 * forwarding it would cut). The generator's live-frame pages come back to
 * it with the length their last holder wrote at their head, and the kernel
 * resets a page whose frame start moved (net/bpf/test_run.c,
 * frame_was_changed), not one whose length alone did: an answer cut at
 * its end came back as the generator's next frame, cut as short (docs/
 * lab.md, "Traffic mixes"). 0, or -1 if the frame could not be made. */
static __always_inline int shift_answer(struct xdp_md *ctx, __u32 len)
{
	if (len > ANSWER_MAX || bpf_xdp_adjust_head(ctx, -ANSWER_SHIFT))
		return -1;
	/* Whole words moved: room for the answer rounded up (a 54-byte FIN's
	 * FIN|ACK is 56 bytes of words), the tail grown if need be. */
	__u32 words = (len + 7) / 8;
	int room = (int)(words * 8 + ANSWER_SHIFT) - (int)(ctx->data_end - ctx->data);
	if (room > 0 && bpf_xdp_adjust_tail(ctx, room))
		return -1;
	__u8 *d = (void *)(long)ctx->data;
	__u8 *end = (void *)(long)ctx->data_end;

	/* Forward: each word is read before the one it moves into is
	 * written. */
#pragma unroll
	for (int i = 0; i < ANSWER_MAX / 8; i++)
		if (i < words && d + i * 8 + ANSWER_SHIFT + 8 <= end)
			*(__u64 *)(d + i * 8) = *(__u64 *)(d + i * 8 + ANSWER_SHIFT);
	int delta = (int)len - (int)(end - d);
	if (delta && bpf_xdp_adjust_tail(ctx, delta))
		return -1;
	return 0;
}

/* Sends a frame back where it came from: MACs, addresses and ports
 * swapped, which leaves a UDP datagram's checksum as it was (a
 * ones'-complement sum does not care about order); a TCP segment gets
 * what its connection's peer would say (answer_tcp). The answer a
 * stateful firewall needs to see before it holds a flow established.
 * XDP_DROP for anything else.
 *
 * Redirected out of the interface it came in on, not XDP_TX: a veth kicks
 * its peer's NAPI after XDP_TX only if the peer has an XDP program
 * (veth_xdp_flush), so a DUT without one there (the kernel) would never
 * take the answers (the peer's ring fills, the rest are xdp_tx_errors);
 * a redirect goes through ndo_xdp_xmit, which flushes to the peer's NAPI
 * (GRO on: the lab's setup). */
static __always_inline int answer(struct xdp_md *ctx, void *data, void *data_end)
{
	struct ethhdr *eth = data;
	__u8 mac[ETH_ALEN];
	__u32 frame_len = 0;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end || ip->ihl != 5)
			return XDP_DROP;
		__be32 a = ip->saddr;
		ip->saddr = ip->daddr;
		ip->daddr = a;
		if (ip->protocol == IPPROTO_TCP) {
			__u16 len = bpf_ntohs(ip->tot_len);
			if (len < sizeof(*ip))
				return XDP_DROP;
			frame_len = answer_tcp((void *)(ip + 1), data_end, len - sizeof(*ip),
					       sizeof(*ip), csum_word32(ip->saddr) +
								    csum_word32(ip->daddr));
			if (!frame_len)
				return XDP_DROP;
			ip->tot_len = bpf_htons(frame_len - sizeof(*eth));
			ip->check = 0;
			ip->check = csum_fold(csum_words(ip, 10));
		} else if (ip->protocol != IPPROTO_UDP) {
			return XDP_DROP;
		}
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end)
			return XDP_DROP;
		struct in6_addr a = ip6->saddr;
		ip6->saddr = ip6->daddr;
		ip6->daddr = a;
		if (ip6->nexthdr == IPPROTO_TCP) {
			frame_len = answer_tcp((void *)(ip6 + 1), data_end,
					       bpf_ntohs(ip6->payload_len), sizeof(*ip6),
					       csum_words(&ip6->saddr, 16));
			if (!frame_len)
				return XDP_DROP;
			ip6->payload_len = bpf_htons(frame_len - sizeof(*eth) - sizeof(*ip6));
		} else if (ip6->nexthdr != IPPROTO_UDP) {
			return XDP_DROP;
		}
	} else {
		return XDP_DROP;
	}
	if (!frame_len) {
		/* UDP: the IP header is option-less (IPv4) or plain (IPv6). */
		struct udphdr *udp = data + sizeof(*eth) +
				     (eth->h_proto == bpf_htons(ETH_P_IP) ? sizeof(struct iphdr)
									  : sizeof(struct ipv6hdr));
		if ((void *)(udp + 1) > data_end)
			return XDP_DROP;
		__be16 p = udp->source;
		udp->source = udp->dest;
		udp->dest = p;
	}
	__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, ETH_ALEN);
	/* A TCP answer carries no payload: the frame cut to its headers. */
	if (frame_len && shift_answer(ctx, frame_len))
		return XDP_DROP;
	return bpf_redirect(ctx->ingress_ifindex, 0);
}

/* `multibuf`: the program is declared for multi-buffer frames (xdp.frags),
 * which an interface with an MTU above one page's needs; the stamp is in the
 * first buffer, the length is the whole frame's. */
/* A BGP segment over IPv4 (TCP port 179 at either end): the lab's probes
 * run a BGP session through the DUT to this namespace
 * (crates/labrun/src/probes.rs), whose kernel must see it. */
static __always_inline int bgp_segment(void *data, void *data_end)
{
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct tcphdr *t = (void *)(ip + 1);

	if ((void *)(t + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 ||
	    ip->protocol != IPPROTO_TCP)
		return 0;
	return t->source == bpf_htons(179) || t->dest == bpf_htons(179);
}

static __always_inline int receive(struct xdp_md *ctx, const enum recv_mode mode,
				   const int multibuf)
{
	__u32 zero = 0;
	struct recv_counters *cnt = bpf_map_lookup_elem(&recv_counters, &zero);
	struct stamp *st;

	if (!cnt)
		return XDP_DROP;
	cnt->packets++;
	cnt->bytes += multibuf ? bpf_xdp_get_buff_len(ctx) : (__u64)(ctx->data_end - ctx->data);
	if (mode == FRAMES)
		return XDP_DROP;
	/* A frame a VLAN device sent: read without its tag, and answered with
	 * it. The packet pointers only after: the frame's start may move. */
	__u32 tag = vlan_tag_pop(ctx);
	/* (The bounds read afresh: a value the compiler kept from before
	 * would reach the verifier as a plain number.) */
	asm volatile("" ::: "memory");
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	st = find_stamp(data, data_end);
	if (st)
		cnt->stamped++;
	else if (bgp_segment(data, data_end))
		return !tag || vlan_tag_push(ctx, tag) ? XDP_PASS : XDP_DROP;
	/* Any UDP frame is answered, stamped or not (the smallest IPv6 one,
	 * 62 bytes, has no room for a stamp), and the TCP segments that need
	 * an answer. */
	if (mode == ANSWER) {
		int act = answer(ctx, data, data_end);
		if (tag && act != XDP_DROP && !vlan_tag_push(ctx, tag))
			return XDP_DROP;
		return act;
	}
	if (!st || mode == COUNT)
		return XDP_DROP;

	__u32 stream = bpf_ntohs(st->stream);
	struct recv_stream *s = bpf_map_lookup_elem(&recv_streams, &stream);
	if (!s) {
		cnt->bad_stream++;
		return XDP_DROP;
	}
	track(s, bpf_ntohl(st->seq));
	record_latency(st);
	if (mode == WATCH)
		watch(data, st);
	return XDP_DROP;
}

SEC("xdp")
int lab_recv(struct xdp_md *ctx)
{
	return receive(ctx, FULL, 0);
}

SEC("xdp.frags")
int lab_recv_mb(struct xdp_md *ctx)
{
	return receive(ctx, FULL, 1);
}

/* The same, also telling next hops apart by destination MAC: a separate
 * program so that the plain receiver pays nothing for it. */
SEC("xdp")
int lab_recv_watch(struct xdp_md *ctx)
{
	return receive(ctx, WATCH, 0);
}

SEC("xdp.frags")
int lab_recv_watch_mb(struct xdp_md *ctx)
{
	return receive(ctx, WATCH, 1);
}

/* Counting only (frames, bytes, stamped frames): for throughput runs that
 * need no sequence or latency, at about a quarter of the cost, so that
 * less of the receiver's work lands on a shared DUT core. */
SEC("xdp")
int lab_recv_count(struct xdp_md *ctx)
{
	return receive(ctx, COUNT, 0);
}

SEC("xdp.frags")
int lab_recv_count_mb(struct xdp_md *ctx)
{
	return receive(ctx, COUNT, 1);
}

/* Frames and bytes only, from the frame's bounds: the frame itself is never
 * read, as pkt-gen's receiver reads only its ring's slot lengths. A read
 * pulls the frame's first cache line from the sender's CPU, and the sender
 * then waits to take it back when it rewrites the recycled page: against a
 * generator on another CPU this receiver takes what a program that reads
 * nothing takes (docs/lab.md), at the price of counting whatever arrives,
 * stamped or not. */
SEC("xdp")
int lab_recv_frames(struct xdp_md *ctx)
{
	return receive(ctx, FRAMES, 0);
}

SEC("xdp.frags")
int lab_recv_frames_mb(struct xdp_md *ctx)
{
	return receive(ctx, FRAMES, 1);
}

/* Counting frames and answering each UDP one (its addresses and ports
 * swapped, back out of the interface): a reverse path for the DUT's
 * connection tracking, before a stateful firewall's runs. */
SEC("xdp")
int lab_recv_answer(struct xdp_md *ctx)
{
	return receive(ctx, ANSWER, 0);
}

SEC("xdp.frags")
int lab_recv_answer_mb(struct xdp_md *ctx)
{
	return receive(ctx, ANSWER, 1);
}

/* Each program has a multi-buffer twin, `<name>_mb`, for interfaces whose
 * MTU is above Ethernet's: the single-buffer one spares plain frames the
 * length helper. */

char LICENSE[] SEC("license") = "Dual BSD/GPL";
