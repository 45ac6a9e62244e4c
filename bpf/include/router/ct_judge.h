/* The stateful firewall's connection stage (docs/firewall.md "States"): for a ruleset that reads `ct state` or `ct direction`, the
 * packet's connection as the kernel's conntrack holds it.
 *
 * The kernel stays the judge of every connection and of its state machine:
 * the fast path carries a packet only where the kernel, seeing it, would
 * find an established connection and change nothing but the entry's
 * timeout. For UDP that is an entry confirmed, seen both ways and assured
 * (the kernel sets ASSURED on the first packet two seconds after the
 * first, nf_conntrack_udp_packet; after it every packet only refreshes
 * the timeout to nf_conntrack_udp_timeout_stream), without NAT, helper,
 * offload or template, and a packet conntrack would not find invalid
 * (udp_error: its length, and its checksum where nf_conntrack_checksum
 * is on). Everything else goes to the kernel, which creates, advances,
 * or judges the entry itself: no entry (a new connection, or one gone),
 * a young one, TCP (its window tracking changes the entry on every
 * packet, which nothing outside the kernel can write), other protocols.
 *
 * Finding a connection in the kernel's table costs about 200 ns (the
 * kfunc takes a reference, `linerate bench conntrack`): it is done once
 * per connection, which is then kept in a cache of the fast path's own
 * (`ct_cache4`, `ct_cache6`: router/ct_cache.h), keyed by the connection's two
 * ends in a canonical order, with the direction its original packets go
 * in: 2-way set-associative arrays like the verdict cache's, not a BPF
 * hash, whose lookup cost 70 ns a packet more (`linerate bench firewall
 * --states`, docs/firewall.md). A connection that finds its set's ways
 * busy with others is found in the kernel's table on each packet, and
 * each sets the entry's timeout as the kernel's own refresh would.
 * The control plane empties a way when the kernel's entry goes
 * (conntrack's destroy events) and keeps the kernel's timeout running for
 * carried flows from the `seen` time the fast path writes
 * (bpf_ct_change_timeout in ct_keeper, in batches): a flow that stops
 * expires on the kernel's schedule. */
#ifndef LINERATE_CT_JUDGE_H
#define LINERATE_CT_JUDGE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "csum.h"
#include "kernel.h"
#include "parse.h"
#include "router/ct_cache.h"
#include "router/maps.h"

/* An entry whose packets change more than its timeout, or do not go
 * where their tuple says. */
#define CT_NOT_CARRIED (IPS_NAT_MASK | CT_NOT_CARRIED_NAT)
/* ... of an entry whose NAT mapping the fast path applies (router/nat.h).
 * (IPS_*_NAT_DONE only say the nat hooks have seen the connection: with
 * nat chains loaded, every entry has them, mapped or not.) */
#define CT_NOT_CARRIED_NAT                                                                \
	(IPS_SEQ_ADJUST | IPS_DYING | IPS_TEMPLATE | IPS_UNTRACKED | IPS_HELPER |         \
	 IPS_OFFLOAD | IPS_HW_OFFLOAD)
#define CT_UDP_CARRIED (IPS_CONFIRMED | IPS_SEEN_REPLY | IPS_ASSURED)

/* Whether `len` bytes of the frame from `off`, summed in ones'-complement
 * arithmetic with `sum` (the pseudo-header), make a checksum that holds.
 * A function of its own, verified once (global): its loops, inlined, would
 * multiply the verifier's paths through the rest of the program. The
 * bytes in 512-byte blocks through bpf_csum_diff (the kernel's
 * csum_partial), then 64-bit words, a 32-bit one, the last bytes; summed
 * as loaded (little-endian), which only swaps the bytes of the folded
 * sum. */
__attribute__((noinline)) int ct_sum_holds(struct xdp_md *ctx, __u32 off, __u32 len, __u64 sum)
{
	const __u8 *p = (const __u8 *)(long)ctx->data;
	const __u8 *end = (const __u8 *)(long)ctx->data_end;

	if (off > 256 || len > 9216)
		return 0;
	p += off;
	off = 0;
	for (int i = 0; i < 18; i++) {
		if (len - off < 512)
			break;
		if (p + off + 512 > end)
			return 0;
		sum += (__u32)bpf_csum_diff(0, 0, (__be32 *)(p + off), 512, 0);
		off += 512;
	}
	/* (At most 9216 already: the mask says so to older verifiers, which
	 * lose the bound where a loop ends; the empty asm keeps the compiler,
	 * which knows, from dropping it.) */
	asm volatile("" : "+r"(off));
	off &= 0x3fff;
	/* Then 8 bytes at a time, their halves added (no carry is lost in 64
	 * bits): for a small datagram, the whole sum. */
	for (int i = 0; i < 63; i++) {
		if (len - off < 8)
			break;
		if (p + off + 8 > end)
			return 0;
		__u64 w = *(const __u64 *)(p + off);
		sum += (w & 0xffffffff) + (w >> 32);
		off += 8;
	}
	asm volatile("" : "+r"(off));
	off &= 0x3fff;
	return csum_rest_holds(p, off, len, end, sum);
}

/* Whether the transport checksum of the IP payload (`avail` bytes at
 * `l4`, protocol `proto`) fails as nf_checksum checks it: over the whole
 * payload, the pseudo-header carrying the payload's length. */
static __always_inline int ct_sum_fails(struct xdp_md *ctx, const void *l3, const int v6,
					const __u8 *l4, __u32 avail, __u8 proto)
{
	const __u8 *end = (const __u8 *)(long)ctx->data_end;
	__u64 s = 0;

	if (v6) {
		const struct ipv6hdr *ip6 = l3;
		const __u32 *a = (const __u32 *)&ip6->saddr;
#pragma unroll
		for (int i = 0; i < 8; i++)
			s += a[i];
	} else {
		const struct iphdr *ip = l3;

		s += ip->saddr;
		s += ip->daddr;
	}
	s += bpf_htons((__u16)avail);
	s += bpf_htons(proto);
	if (avail <= 40)
		return !csum_small_holds(l4, avail, end, s);
	return !ct_sum_holds(ctx, l4 - (const __u8 *)(long)ctx->data, avail, s);
}

/* Whether conntrack would find this UDP datagram invalid (udp_error):
 * shorter than its header, a length field past the IP payload or below
 * the header, or, with `check_sum` (nf_conntrack_checksum), a non-zero
 * checksum that does not hold. */
static __always_inline int ct_udp_invalid(struct xdp_md *ctx, const void *l3, const int v6,
					  const __u8 *l4, __u32 avail, int check_sum)
{
	const __u8 *end = (const __u8 *)(long)ctx->data_end;
	const struct udphdr *u = (const void *)l4;

	if (avail < sizeof(*u) || (const __u8 *)(u + 1) > end)
		return 1;
	__u32 ulen = bpf_ntohs(u->len);
	if (ulen > avail || ulen < sizeof(*u))
		return 1;
	if (!u->check || !check_sum)
		return 0;
	return ct_sum_fails(ctx, l3, v6, l4, avail, IPPROTO_UDP);
}

#define TCPF_FIN 0x01
#define TCPF_SYN 0x02
#define TCPF_RST 0x04
#define TCPF_PSH 0x08
#define TCPF_ACK 0x10
#define TCPF_URG 0x20
#define TCPF_ECE 0x40
#define TCPF_CWR 0x80

/* What a TCP segment is to conntrack (tcp_error, then the state machine):
 * 0 a segment of an established connection's data or acknowledgements,
 * R_PASS_CT_STATE one that opens, closes or resets (the kernel tracks
 * it), R_PASS_CT_INVALID one conntrack finds invalid (a header shorter
 * than its data offset says, a bad checksum with `check_sum`, flags
 * tcp_valid_flags does not list). `flags` gets its flags. */
static __always_inline enum reason ct_tcp_kind(struct xdp_md *ctx, const void *l3, const int v6,
					       const __u8 *l4, __u32 avail, int check_sum,
					       __u8 *flags)
{
	const __u8 *end = (const __u8 *)(long)ctx->data_end;

	if (avail < 20 || l4 + 20 > end)
		return R_PASS_CT_INVALID;
	__u32 doff = (l4[12] >> 4) * 4;
	if (doff < 20 || doff > avail)
		return R_PASS_CT_INVALID;
	*flags = l4[13];
	/* (PSH, ECE and CWR do not count: tcp_error masks them.) */
	__u8 f = *flags & ~(TCPF_PSH | TCPF_ECE | TCPF_CWR);
	if (f & (TCPF_SYN | TCPF_FIN | TCPF_RST))
		return R_PASS_CT_STATE;
	if (f != TCPF_ACK && f != (TCPF_ACK | TCPF_URG))
		return R_PASS_CT_INVALID;
	if (check_sum && ct_sum_fails(ctx, l3, v6, l4, avail, IPPROTO_TCP))
		return R_PASS_CT_INVALID;
	return 0;
}

/* Whether the fast path may carry packets of entry `ct` (protocol
 * `l4proto`), `ct_flags` as fw_state has them: confirmed, seen both ways
 * and assured, with no status in `not_carried` (CT_NOT_CARRIED: no NAT,
 * helper or offload; CT_NOT_CARRIED_NAT: NAT mapped); for TCP also established
 * and with its windows unchecked (nf_conntrack_tcp_be_liberal, or the
 * entry's own liberal flags both ways): a TCP data segment then changes
 * nothing of the entry that decides a verdict (tcp_in_window accepts it
 * whatever its sequence numbers; docs/firewall.md says what else it
 * changes), where with windows checked every segment moves the window
 * the next is held to, which nothing outside the kernel can write.
 * R_FORWARDED, or why not. */
static __always_inline enum reason ct_carried(struct nf_conn *ct, __u8 l4proto, __u32 ct_flags,
					       unsigned long not_carried)
{
	unsigned long status = ct->status;

	if (status & not_carried)
		return R_PASS_CT_UNCARRIED;
	if ((status & CT_UDP_CARRIED) != CT_UDP_CARRIED)
		return R_PASS_CT_YOUNG;
	if (l4proto != IPPROTO_TCP)
		return R_FORWARDED;
	if (ct->proto.tcp.state != TCP_CONNTRACK_ESTABLISHED)
		return R_PASS_CT_YOUNG;
	if (!(ct_flags & FW_CT_TCP_LIBERAL) &&
	    !(ct->proto.tcp.seen[0].flags & ct->proto.tcp.seen[1].flags & IP_CT_TCP_FLAG_BE_LIBERAL))
		return R_PASS_CT_WINDOW;
	return R_FORWARDED;
}

/* Finds the packet's connection in the kernel's table: R_FORWARDED if the
 * fast path may carry it, with its original direction's side in
 * `orig_from_a` (given too for R_PASS_CT_WINDOW: an established TCP
 * connection but for its windows), or why the packet goes to the kernel. A packet carried
 * sets the entry's timeout to `timeout_ms` from now (0: left alone), as
 * the kernel does for each packet it sees: a connection that finds its
 * set's ways busy is carried this way packet after packet, never in the
 * cache the sweep refreshes from, and its entry would otherwise run out
 * under traffic. */
static __always_inline enum reason ct_ask_kernel(struct xdp_md *ctx, const struct ct_packet *p,
						 const int v6, int from_a, __u32 ct_flags,
						 __u32 timeout_ms, __u8 *orig_from_a,
						 struct ct_scratch *sc)
{
	struct bpf_ct_opts___local *opts = &sc->opts;
	struct bpf_sock_tuple *t = &sc->tuple;
	__u32 size;

	__builtin_memset(opts, 0, sizeof(*opts));
	opts->netns_id = -1;
	opts->l4proto = p->l4proto;
	if (v6) {
		__builtin_memcpy(t->ipv6.saddr, p->saddr, 16);
		__builtin_memcpy(t->ipv6.daddr, p->daddr, 16);
		t->ipv6.sport = p->sport;
		t->ipv6.dport = p->dport;
		size = sizeof(t->ipv6);
	} else {
		t->ipv4.saddr = p->saddr[0];
		t->ipv4.daddr = p->daddr[0];
		t->ipv4.sport = p->sport;
		t->ipv4.dport = p->dport;
		size = sizeof(t->ipv4);
	}
	struct nf_conn *ct = bpf_xdp_ct_lookup(ctx, t, size, opts, sizeof(*opts));
	if (!ct)
		return R_PASS_CT_NONE;
	enum reason carried = ct_carried(ct, p->l4proto, ct_flags, CT_NOT_CARRIED);
	/* The original direction's source: this packet's, or the other end's. */
	__u32 o0 = ct->tuplehash[0].tuple.src.u3.all[0], o1 = 0, o2 = 0, o3 = 0;
	__be16 oport = ct->tuplehash[0].tuple.src.u.all;
	if (v6) {
		o1 = ct->tuplehash[0].tuple.src.u3.all[1];
		o2 = ct->tuplehash[0].tuple.src.u3.all[2];
		o3 = ct->tuplehash[0].tuple.src.u3.all[3];
	}
	if (carried == R_FORWARDED && timeout_ms)
		bpf_ct_change_timeout(ct, timeout_ms);
	bpf_ct_release(ct);
	if (carried != R_FORWARDED && carried != R_PASS_CT_WINDOW)
		return carried;
	int orig_from_src = o0 == p->saddr[0] && oport == p->sport &&
			    (!v6 || (o1 == p->saddr[1] && o2 == p->saddr[2] && o3 == p->saddr[3]));
	/* The original direction leaves from a if this packet does and is
	 * original, or neither. */
	*orig_from_a = from_a == orig_from_src;
	return carried;
}

/* What the stage makes of a packet before it looks for its connection:
 * 0 a UDP datagram or TCP segment to look for, R_PASS_CT_STATE a TCP
 * segment that opens, closes or resets (its flags in `tcp_flags`), or why
 * it goes to the kernel (the stage off, invalid, another protocol). `l4`:
 * the transport header, `avail` its bytes within the IP packet. */
static __always_inline enum reason ct_segment(struct xdp_md *ctx, const void *l3, const int v6,
					       const __u8 *l4, __u32 avail, __u8 l4proto,
					       const struct fw_state *st, __u8 *tcp_flags)
{
	const __u8 *end = (const __u8 *)(long)ctx->data_end;
	__u32 ct_flags = st->ct_flags;

	/* (ct_judge checks the kfuncs and the cache's bits.) */
	if (!(ct_flags & FW_CT_ON))
		return R_PASS_CT_OFF;
	enum reason kind = 0;
	if (l4proto == IPPROTO_UDP) {
		if (ct_udp_invalid(ctx, l3, v6, l4, avail, ct_flags & FW_CT_CHECKSUM))
			kind = R_PASS_CT_INVALID;
	} else if (l4proto == IPPROTO_TCP) {
		/* With windows checked and nothing to carry them (carry_tcp
		 * off), the fast path carries no TCP: every segment goes to
		 * the kernel as it came, with neither the connection's lookup
		 * nor the checksum's sum here (the kernel does both again). */
		int carries = ct_flags & (FW_CT_TCP_LIBERAL | FW_CT_TCP_CARRY);

		kind = ct_tcp_kind(ctx, l3, v6, l4, avail, carries && (ct_flags & FW_CT_CHECKSUM),
				   tcp_flags);
		if (!kind && !carries)
			kind = R_PASS_CT_WINDOW;
	} else {
		kind = R_PASS_CT_PROTO;
	}
	if (!kind && l4 + 4 > end)
		return R_PASS_CT_INVALID;
	return kind;
}

/* ct_miss's answer: the `ct` byte, or 0 and why not in bits 8-15. */
#define CT_MISS_WHY(r) (((r) >> 8) & 0xff)

/* A connection the fast path's cache lacks, found in the kernel's table
 * (ct_ask_kernel) and kept if it may be carried: a function of its own,
 * verified once (global), where inlined its paths would multiply those of
 * everything after it in the program, for each family (ct_miss4,
 * ct_miss6). The packet's headers at their places (the IP header after
 * the Ethernet header and a VLAN device's tag, frame_l3_off; the
 * transport header after a fixed IP header: options and IPv6's extension
 * headers went to the kernel before); `l4proto` its protocol. The answer packed (the verifier sees one
 * value, not one path per answer). With FW_CT_TCP_CARRY, an established
 * TCP connection whose windows the kernel checks gets its byte too, and
 * its CPU's ct_scratch.offering set (see there). */
static __always_inline int ct_miss(struct xdp_md *ctx, __u8 l4proto, const int v6)
{
	const __u8 *data = (const __u8 *)(long)ctx->data;
	const __u8 *end = (const __u8 *)(long)ctx->data_end;
	__u32 zero = 0;
	struct fw_state *st = bpf_map_lookup_elem(&fw_state, &zero);
	struct ct_scratch *sc = bpf_map_lookup_elem(&ct_scratch, &zero);

	if (!st || !sc)
		return R_PASS_CT_OFF << 8;
	__u32 ct_flags = st->ct_flags, ct_idle = st->ct_idle, bits = st->ct_bits[v6];
	__u32 timeout_ms = st->ct_timeout_ms[l4proto == IPPROTO_TCP];
	if (data + ETH_HLEN > end)
		return R_PASS_CT_INVALID << 8;
	const __u8 *l3 = data + frame_l3_off(data);
	const __u8 *l4 = l3 + (v6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr));
	if (l4 + 4 > end)
		return R_PASS_CT_INVALID << 8;
	struct ct_packet p =
		ct_packet_of(l3, v6, *(const __be16 *)l4, *(const __be16 *)(l4 + 2), l4proto);
	__u64 now = bpf_jiffies64();
	__u8 orig_from_a = 0;
	int from_a;
	enum reason r;

	if (v6) {
		struct ct_flow_key *k = &sc->key6;

		from_a = ct_key_of(&p, 1, k);
		r = ct_ask_kernel(ctx, &p, 1, from_a, ct_flags, timeout_ms, &orig_from_a, sc);
		if (r == R_FORWARDED)
			ct_keep6(ct_set6(k, bits), k, &orig_from_a, now, ct_idle);
	} else {
		struct ct_key4 *k = &sc->key4;

		from_a = ct_key4_of(&p, k);
		r = ct_ask_kernel(ctx, &p, 0, from_a, ct_flags, timeout_ms, &orig_from_a, sc);
		if (r == R_FORWARDED)
			ct_keep4(ct_set4(k, bits), k, &orig_from_a, now, ct_idle);
	}
	if (r == R_PASS_CT_WINDOW && (ct_flags & FW_CT_TCP_CARRY)) {
		sc->offering = 1;
		r = R_FORWARDED;
	}
	if (r != R_FORWARDED)
		return r << 8;
	return FW_CT_ESTABLISHED | (from_a == orig_from_a ? 0 : FW_CT_REPLY);
}

/* ct_miss for each family, verified once each (global): its room on the
 * stack is its family's alone. */
__attribute__((noinline)) int ct_miss4(struct xdp_md *ctx, __u32 l4proto)
{
	return ct_miss(ctx, l4proto, 0);
}

__attribute__((noinline)) int ct_miss6(struct xdp_md *ctx, __u32 l4proto)
{
	return ct_miss(ctx, l4proto, 1);
}

/* The packet's `ct` byte for the firewall's key (its state bit, FW_CT_REPLY
 * in the reply direction), or 0 and why it goes to the kernel in `why`;
 * `kind` and `tcp_flags` as ct_segment found them (a FIN or RST forgets
 * its connection, then goes to the kernel). The common packet finds its
 * connection in the cache, inline; a miss is ct_miss's. */
static __always_inline __u8 ct_judge(struct xdp_md *ctx, const void *l3, const int v6,
				     const __u8 *l4, __u8 l4proto, const struct fw_state *st,
				     enum reason kind, __u8 tcp_flags, enum reason *why)
{
	const __u8 *end = (const __u8 *)(long)ctx->data_end;
	__u32 bits = st->ct_bits[v6];

	/* (The bits are published before FW_CT_ON, and never 0 after.) */
	if (!ct_available() || !bits) {
		*why = R_PASS_CT_OFF;
		return 0;
	}
	if (l4 + 4 > end) {
		*why = R_PASS_CT_INVALID;
		return 0;
	}
	struct ct_packet p =
		ct_packet_of(l3, v6, *(const __be16 *)l4, *(const __be16 *)(l4 + 2), l4proto);
	/* (Inlined by the verifier: a load, where bpf_ktime_get_coarse_ns
	 * cost 25 ns a packet.) */
	__u64 now = bpf_jiffies64();
	/* A FIN or RST ends what the fast path may carry: the kernel's entry
	 * leaves ESTABLISHED. (A SYN finds none, or one the kernel reopens.) */
	int ends = kind == R_PASS_CT_STATE && (tcp_flags & (TCPF_FIN | TCPF_RST));
	__u8 orig_from_a = 0;
	int from_a;

	if (v6) {
		struct ct_flow_key k;

		from_a = ct_key_of(&p, 1, &k);
		__u32 set = ct_set6(&k, bits);
		if (ends)
			ct_forget6(set, &k);
		if (kind) {
			*why = kind;
			return 0;
		}
		if (ct_find6(set, &k, now, &orig_from_a))
			return FW_CT_ESTABLISHED | (from_a == orig_from_a ? 0 : FW_CT_REPLY);
	} else {
		struct ct_key4 k;

		from_a = ct_key4_of(&p, &k);
		__u32 set = ct_set4(&k, bits);
		if (ends)
			ct_forget4(set, &k);
		if (kind) {
			*why = kind;
			return 0;
		}
		if (ct_find4(set, &k, now, &orig_from_a))
			return FW_CT_ESTABLISHED | (from_a == orig_from_a ? 0 : FW_CT_REPLY);
	}
	int r = v6 ? ct_miss6(ctx, l4proto) : ct_miss4(ctx, l4proto);
	if (!(r & 0xff))
		*why = CT_MISS_WHY(r);
	return r;
}

_Static_assert(sizeof(struct ct_offer) == 40, "ct_offer: a ct_flow_key (crates/dataplane/src/layout.rs)");

/* Offers the connection of an accepted segment to be carried (see
 * ct_judge): the packet's tuple to the control plane, which marks the
 * kernel's entry liberal both ways. Until it has, each segment offers it
 * again: a full ring loses an offer, not the connection. */
static __always_inline void ct_offer(struct xdp_md *ctx, const void *l3, const int v6,
				     const __u8 *l4, __u8 l4proto)
{
	if (l4 + 4 > (const __u8 *)(long)ctx->data_end)
		return;
	struct ct_offer *o = bpf_ringbuf_reserve(&ct_offers, sizeof(*o), 0);

	if (!o)
		return;
	__builtin_memset(o, 0, sizeof(*o));
	if (v6) {
		const struct ipv6hdr *ip6 = l3;

		__builtin_memcpy(o->tuple.a, &ip6->saddr, 16);
		__builtin_memcpy(o->tuple.b, &ip6->daddr, 16);
	} else {
		const struct iphdr *ip = l3;

		__builtin_memcpy(o->tuple.a, &ip->saddr, 4);
		__builtin_memcpy(o->tuple.b, &ip->daddr, 4);
	}
	o->tuple.aport = *(const __be16 *)l4;
	o->tuple.bport = *(const __be16 *)(l4 + 2);
	o->tuple.l4proto = l4proto;
	o->tuple.ipv6 = v6;
	bpf_ringbuf_submit(o, 0);
}

#endif
