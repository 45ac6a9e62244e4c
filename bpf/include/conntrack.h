/* The stateful firewall's connection stage (issue 24, docs/firewall.md
 * "States"): for a ruleset that reads `ct state` or `ct direction`, the
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
 * (`ct_cache4`, `ct_cache6`: router_maps.h), keyed by the connection's two
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
#ifndef LINERATE_CONNTRACK_H
#define LINERATE_CONNTRACK_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "router_maps.h"

/* enum ip_conntrack_status (nf_conntrack_common.h). */
#define IPS_SEEN_REPLY (1 << 1)
#define IPS_ASSURED (1 << 2)
#define IPS_CONFIRMED (1 << 3)
#define IPS_NAT_MASK (3 << 4)
#define IPS_NAT_DONE_MASK (3 << 7)
#define IPS_DYING (1 << 9)
#define IPS_TEMPLATE (1 << 11)
#define IPS_UNTRACKED (1 << 12)
#define IPS_HELPER (1 << 13)
#define IPS_OFFLOAD (1 << 14)
#define IPS_HW_OFFLOAD (1 << 15)

/* An entry whose packets change more than its timeout, or do not go
 * where their tuple says. */
#define CT_NOT_CARRIED                                                                    \
	(IPS_NAT_MASK | IPS_NAT_DONE_MASK | IPS_DYING | IPS_TEMPLATE | IPS_UNTRACKED |    \
	 IPS_HELPER | IPS_OFFLOAD | IPS_HW_OFFLOAD)
#define CT_UDP_CARRIED (IPS_CONFIRMED | IPS_SEEN_REPLY | IPS_ASSURED)

/* The kernel's structs, as far as they are read here, relocated against
 * its BTF (CO-RE). Structs, not forward declarations: libbpf holds a
 * kfunc's argument types to the kernel's by kind. */
union nf_inet_addr {
	__u32 all[4];
} __attribute__((preserve_access_index));

union nf_conntrack_man_proto {
	__be16 all;
} __attribute__((preserve_access_index));

struct nf_conntrack_man {
	union nf_inet_addr u3;
	union nf_conntrack_man_proto u;
} __attribute__((preserve_access_index));

struct nf_conntrack_tuple {
	struct nf_conntrack_man src;
} __attribute__((preserve_access_index));

struct nf_conntrack_tuple_hash {
	struct nf_conntrack_tuple tuple;
} __attribute__((preserve_access_index));

struct ip_ct_tcp_state {
	__u8 flags;
} __attribute__((preserve_access_index));

struct ip_ct_tcp {
	struct ip_ct_tcp_state seen[2];
	__u8 state;
} __attribute__((preserve_access_index));

union nf_conntrack_proto {
	struct ip_ct_tcp tcp;
} __attribute__((preserve_access_index));

struct nf_conn {
	unsigned long status;
	__u32 timeout;
	struct nf_conntrack_tuple_hash tuplehash[2];
	union nf_conntrack_proto proto;
} __attribute__((preserve_access_index));

/* nf_conntrack_tcp.h, enum tcp_conntrack */
#define IP_CT_TCP_FLAG_BE_LIBERAL 0x08
#define TCP_CONNTRACK_ESTABLISHED 3

/* The kfuncs' options in their first, 12-byte shape, which the kernel
 * still takes (later kernels add zone fields up to 16 bytes). Not
 * relocated: relocated against a 16-byte kernel struct, the last field
 * would be written past the 12 bytes on the stack. */
struct bpf_ct_opts___local {
	__s32 netns_id;
	__s32 error;
	__u8 l4proto;
	__u8 reserved[3];
};

/* Weak: on a kernel without them the program still loads, and the
 * stateful part is off (ct_available). */
extern struct nf_conn *bpf_xdp_ct_lookup(struct xdp_md *, struct bpf_sock_tuple *, __u32,
					 struct bpf_ct_opts___local *, __u32) __ksym __weak;
extern void bpf_ct_release(struct nf_conn *) __ksym __weak;
extern int bpf_ct_change_timeout(struct nf_conn *, __u32) __ksym __weak;

/* (libbpf's bpf_helpers.h has it from 1.2; Debian 12's is 1.1.) */
#ifndef bpf_ksym_exists
#define bpf_ksym_exists(sym) (!!(sym))
#endif

static __always_inline int ct_available(void)
{
	return bpf_ksym_exists(bpf_xdp_ct_lookup) && bpf_ksym_exists(bpf_ct_release) &&
	       bpf_ksym_exists(bpf_ct_change_timeout);
}

/* Whether side (a, ap) sorts before (b, bp): the canonical order of a
 * connection's two ends in its key. Any total order will do. */
static __always_inline int ct_side_first(const __u32 *a, __be16 ap, const __u32 *b, __be16 bp,
					 const int v6)
{
	if (v6) {
#pragma unroll
		for (int i = 0; i < 4; i++)
			if (a[i] != b[i])
				return a[i] < b[i];
	} else if (a[0] != b[0]) {
		return a[0] < b[0];
	}
	return ap < bp;
}

/* A packet's transport, as the stage reads it: addresses and ports in
 * network order. */
struct ct_packet {
	const __u32 *saddr;
	const __u32 *daddr;
	__be16 sport;
	__be16 dport;
	__u8 l4proto;
};

/* The packet whose IP header (`v6`: IPv6) is at `l3`, its ports given. */
static __always_inline struct ct_packet ct_packet_of(const void *l3, const int v6, __be16 sport,
						     __be16 dport, __u8 l4proto)
{
	struct ct_packet p = { .sport = sport, .dport = dport, .l4proto = l4proto };

	if (v6) {
		const struct ipv6hdr *ip6 = l3;

		p.saddr = (const __u32 *)&ip6->saddr;
		p.daddr = (const __u32 *)&ip6->daddr;
	} else {
		const struct iphdr *ip = l3;

		p.saddr = &ip->saddr;
		p.daddr = &ip->daddr;
	}
	return p;
}

/* The end of a sum from byte `off` of `len` at `p` (fewer than 8 left):
 * a 32-bit word, the last bytes, then the fold; whether the checksum
 * holds (0 if the bytes run past the frame). */
static __always_inline int ct_sum_rest_holds(const __u8 *p, __u32 off, __u32 len,
					     const __u8 *end, __u64 sum)
{
	__u32 left = len - off;

	if (left >= 4) {
		if (p + off + 4 > end)
			return 0;
		sum += *(const __u32 *)(p + off);
		off += 4;
		left -= 4;
	}
	if (left) {
		__u32 tail = 0;

		if (p + off + 1 > end)
			return 0;
		tail = p[off];
		if (left > 1) {
			if (p + off + 2 > end)
				return 0;
			tail |= (__u32)p[off + 1] << 8;
		}
		if (left > 2) {
			if (p + off + 3 > end)
				return 0;
			tail |= (__u32)p[off + 2] << 16;
		}
		sum += tail;
	}
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

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
	return ct_sum_rest_holds(p, off, len, end, sum);
}

/* The ones'-complement sum of a datagram of at most 40 bytes (`len`) at
 * `p` with `sum`, folded to 16 bits, inline (a lab's 60-byte frame
 * carries 26): the call to ct_sum_holds costs more than the sum, about
 * 12 ns a packet. 0 if it runs past the frame. */
static __always_inline int ct_small_sum_holds(const __u8 *p, __u32 len, const __u8 *end,
					      __u64 sum)
{
	__u32 off = 0;

#pragma unroll
	for (int i = 0; i < 5; i++) {
		if (len - off < 8)
			break;
		if (p + off + 8 > end)
			return 0;
		__u64 w = *(const __u64 *)(p + off);
		sum += (w & 0xffffffff) + (w >> 32);
		off += 8;
	}
	return ct_sum_rest_holds(p, off, len, end, sum);
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
		return !ct_small_sum_holds(l4, avail, end, s);
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

/* The key of a packet's connection, and whether the packet goes from the
 * key's side a. */
static __always_inline int ct_key_of(const struct ct_packet *p, const int v6,
				     struct ct_flow_key *k)
{
	int from_a = ct_side_first(p->saddr, p->sport, p->daddr, p->dport, v6);
	const __u32 *a = from_a ? p->saddr : p->daddr, *b = from_a ? p->daddr : p->saddr;

	__builtin_memset(k, 0, sizeof(*k));
	__builtin_memcpy(k->a, a, v6 ? 16 : 4);
	__builtin_memcpy(k->b, b, v6 ? 16 : 4);
	k->aport = from_a ? p->sport : p->dport;
	k->bport = from_a ? p->dport : p->sport;
	k->l4proto = p->l4proto;
	k->ipv6 = v6;
	return from_a;
}

/* Whether the fast path may carry packets of entry `ct` (protocol
 * `l4proto`), `ct_flags` as fw_state has them: confirmed, seen both ways
 * and assured, without NAT, helper or offload; for TCP also established
 * and with its windows unchecked (nf_conntrack_tcp_be_liberal, or the
 * entry's own liberal flags both ways): a TCP data segment then changes
 * nothing of the entry that decides a verdict (tcp_in_window accepts it
 * whatever its sequence numbers; docs/firewall.md says what else it
 * changes), where with windows checked every segment moves the window
 * the next is held to, which nothing outside the kernel can write.
 * R_FORWARDED, or why not. */
static __always_inline enum reason ct_carried(struct nf_conn *ct, __u8 l4proto, __u32 ct_flags)
{
	unsigned long status = ct->status;

	if (status & CT_NOT_CARRIED)
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

/* An IPv4 connection's key as its way holds it: the addresses in one
 * word (a low), the ports in another (aport low), the protocol. */
struct ct_key4 {
	__u64 ab;
	__u32 ports;
	__u8 l4proto;
};

/* The key of an IPv4 packet's connection, and whether the packet goes
 * from the key's side a. */
static __always_inline int ct_key4_of(const struct ct_packet *p, struct ct_key4 *k)
{
	int from_a = ct_side_first(p->saddr, p->sport, p->daddr, p->dport, 0);
	__u32 a = from_a ? p->saddr[0] : p->daddr[0], b = from_a ? p->daddr[0] : p->saddr[0];
	__u16 ap = from_a ? p->sport : p->dport, bp = from_a ? p->dport : p->sport;

	k->ab = (__u64)a | (__u64)b << 32;
	k->ports = (__u32)ap | (__u32)bp << 16;
	k->l4proto = p->l4proto;
	return from_a;
}

/* The set of IPv4 connection `k`: its two words multiplied, folded, top
 * `bits` bits (fw_state.ct_bits). crates/router/src/conntrack.rs computes
 * the same. */
static __always_inline __u32 ct_set4(const struct ct_key4 *k, __u32 bits)
{
	__u64 h = (k->ab * 0x9e3779b97f4a7c15ull) ^
		  (((__u64)k->ports | (__u64)k->l4proto << 32) * 0xc2b2ae3d27d4eb4full);

	h ^= h >> 29;
	h *= 0xff51afd7ed558ccdull;
	return h >> (64 - bits);
}

/* The set of IPv6 connection `k`: its five words multiplied in pairs and
 * folded, top `bits` bits. crates/router/src/conntrack.rs computes the
 * same. */
static __always_inline __u32 ct_set6(const struct ct_flow_key *k, __u32 bits)
{
	const __u64 *w = (const __u64 *)k;
	__u64 h = ((w[0] ^ w[4]) * 0x9e3779b97f4a7c15ull) ^ (w[1] * 0xc2b2ae3d27d4eb4full) ^
		  ((w[2] ^ w[3]) * 0x165667b19e3779f9ull);

	h ^= h >> 29;
	h *= 0xff51afd7ed558ccdull;
	return h >> (64 - bits);
}

_Static_assert(sizeof(struct ct_flow_key) == 40, "ct_flow_key is five words");
_Static_assert(sizeof(struct ct_way4) == 32, "ct_way4: a set's two in one line");
_Static_assert(__builtin_offsetof(struct ct_way4, aport) == 4 &&
		       __builtin_offsetof(struct ct_way4, a) == 8,
	       "ct_way4: the ports, then the addresses, each one word");
_Static_assert(sizeof(struct ct_slot) == 64, "ct_slot: one line");

/* Whether way `w` holds `k`, compared whole. */
static __always_inline int ct_key4_is(struct ct_way4 *w, const struct ct_key4 *k)
{
	return !((*(__u64 *)&w->a ^ k->ab) | (*(__u32 *)&w->aport ^ k->ports) |
		 (w->l4proto ^ k->l4proto));
}

/* Whether slot `s` holds `k`, compared whole. */
static __always_inline int ct_key6_is(struct ct_slot *s, const struct ct_flow_key *k)
{
	const __u64 *a = (const __u64 *)k, *b = (const __u64 *)&s->key;
	__u64 diff = 0;

#pragma unroll
	for (int w = 0; w < 5; w++)
		diff |= a[w] ^ b[w];
	return !diff;
}

/* Whether way `w` (IPv4: ct_way4, IPv6: ct_slot) holds `k`, its
 * orig_from_a set as read, read between two equal even sequence words.
 * (x86 keeps loads in order: see fw_probe.) */
#define CT_HOLDS(w, k, key_is, orig_from_a)                                                 \
	({                                                                                 \
		__u32 seq_ = *(volatile __u32 *)&(w)->seq;                                 \
		int same_ = !(seq_ & 1) && key_is((w), (k));                               \
		*(orig_from_a) = (w)->orig_from_a;                                         \
		same_ && *(volatile __u32 *)&(w)->seq == seq_;                             \
	})

/* Makes way `w`'s sequence word odd (this CPU writes it): the even word it
 * held, or 1 if it was odd or another CPU won it. */
static __always_inline __u32 ct_claim(__u32 *seq)
{
	__u32 s = *(volatile __u32 *)seq;

	if (s & 1 || __sync_val_compare_and_swap(seq, s, s + 1) != s)
		return 1;
	return s;
}

/* Ends this CPU's write of a way claimed with ct_claim (`s` the word it
 * returned): the writes before it, then the word even again. */
static __always_inline void ct_release(__u32 *seq, __u32 s)
{
	asm volatile("" ::: "memory");
	*(volatile __u32 *)seq = s + 2;
}

/* Which way of a set takes a new connection: an empty one, else the one
 * carried least recently, unless it carried a packet less than `idle`
 * jiffies ago (fw_state.ct_idle; 0: whatever its age): then none (-1),
 * and the new connection goes on being found in the kernel's table. Where
 * more connections hash to a set than it has ways and all are busy, they
 * would otherwise push each other out on every packet. */
static __always_inline int ct_victim(__u8 proto0, __u64 seen0, __u8 proto1, __u64 seen1,
				     __u64 now, __u32 idle)
{
	if (!proto0)
		return 0;
	if (!proto1)
		return 1;
	int older = seen1 < seen0;
	__u64 seen = older ? seen1 : seen0;

	if (idle && now - seen < idle)
		return -1;
	return older;
}

/* Finds IPv4 connection `k` in its set, marking it carried at `now`. */
static __always_inline int ct_find4(__u32 set, const struct ct_key4 *k, __u64 now,
				    __u8 *orig_from_a)
{
#pragma unroll
	for (int i = 0; i < CT_CACHE_WAYS; i++) {
		__u32 idx = set * CT_CACHE_WAYS + i;
		struct ct_way4 *w = bpf_map_lookup_elem(&ct_cache4, &idx);

		if (w && CT_HOLDS(w, k, ct_key4_is, orig_from_a)) {
			/* A word written once a jiffy per flow, not per packet. */
			if (w->seen != now)
				w->seen = now;
			return 1;
		}
	}
	return 0;
}

/* Finds IPv6 connection `k` in its set, marking it carried at `now`. */
static __always_inline int ct_find6(__u32 set, const struct ct_flow_key *k, __u64 now,
				    __u8 *orig_from_a)
{
#pragma unroll
	for (int i = 0; i < CT_CACHE_WAYS; i++) {
		__u32 idx = set * CT_CACHE_WAYS + i;
		struct ct_slot *s = bpf_map_lookup_elem(&ct_cache6, &idx);

		if (s && CT_HOLDS(s, k, ct_key6_is, orig_from_a)) {
			if (s->seen != now)
				s->seen = now;
			return 1;
		}
	}
	return 0;
}

/* Writes IPv4 connection `k` into a way of its set (ct_victim). Nothing
 * if another CPU is writing the way. */
static __always_inline void ct_keep4(__u32 set, const struct ct_key4 *k, __u8 orig_from_a,
				     __u64 now, __u32 idle)
{
	__u32 i0 = set * CT_CACHE_WAYS, i1 = i0 + 1;
	struct ct_way4 *w0 = bpf_map_lookup_elem(&ct_cache4, &i0);
	struct ct_way4 *w1 = bpf_map_lookup_elem(&ct_cache4, &i1);

	if (!w0 || !w1)
		return;
	int v = ct_victim(w0->l4proto, w0->seen, w1->l4proto, w1->seen, now, idle);
	if (v < 0)
		return;
	struct ct_way4 *w = v ? w1 : w0;
	__u32 seq = ct_claim(&w->seq);
	if (seq & 1)
		return;
	*(__u64 *)&w->a = k->ab;
	*(__u32 *)&w->aport = k->ports;
	w->l4proto = k->l4proto;
	w->orig_from_a = orig_from_a;
	w->seen = now;
	ct_release(&w->seq, seq);
}

/* Writes IPv6 connection `k` into a slot of its set (ct_victim). */
static __always_inline void ct_keep6(__u32 set, const struct ct_flow_key *k, __u8 orig_from_a,
				     __u64 now, __u32 idle)
{
	__u32 i0 = set * CT_CACHE_WAYS, i1 = i0 + 1;
	struct ct_slot *s0 = bpf_map_lookup_elem(&ct_cache6, &i0);
	struct ct_slot *s1 = bpf_map_lookup_elem(&ct_cache6, &i1);

	if (!s0 || !s1)
		return;
	int v = ct_victim(s0->key.l4proto, s0->seen, s1->key.l4proto, s1->seen, now, idle);
	if (v < 0)
		return;
	struct ct_slot *s = v ? s1 : s0;
	__u32 seq = ct_claim(&s->seq);
	if (seq & 1)
		return;
	__builtin_memcpy(&s->key, k, sizeof(*k));
	s->orig_from_a = orig_from_a;
	s->seen = now;
	ct_release(&s->seq, seq);
}

/* Empties the way of IPv4 connection `k`'s set holding it, if one does
 * and no other CPU is writing it. */
static __always_inline void ct_forget4(__u32 set, const struct ct_key4 *k)
{
#pragma unroll
	for (int i = 0; i < CT_CACHE_WAYS; i++) {
		__u32 idx = set * CT_CACHE_WAYS + i;
		struct ct_way4 *w = bpf_map_lookup_elem(&ct_cache4, &idx);

		if (!w || !ct_key4_is(w, k))
			continue;
		__u32 seq = ct_claim(&w->seq);
		if (seq & 1)
			continue;
		if (ct_key4_is(w, k))
			w->l4proto = 0;
		ct_release(&w->seq, seq);
	}
}

/* The same for IPv6 connection `k`. */
static __always_inline void ct_forget6(__u32 set, const struct ct_flow_key *k)
{
#pragma unroll
	for (int i = 0; i < CT_CACHE_WAYS; i++) {
		__u32 idx = set * CT_CACHE_WAYS + i;
		struct ct_slot *s = bpf_map_lookup_elem(&ct_cache6, &idx);

		if (!s || !ct_key6_is(s, k))
			continue;
		__u32 seq = ct_claim(&s->seq);
		if (seq & 1)
			continue;
		if (ct_key6_is(s, k))
			s->key.l4proto = 0;
		ct_release(&s->seq, seq);
	}
}

/* Finds the packet's connection in the kernel's table: R_FORWARDED if the
 * fast path may carry it, with its original direction's side in
 * `orig_from_a`, or why the packet goes to the kernel. A packet carried
 * sets the entry's timeout to `timeout_ms` from now (0: left alone), as
 * the kernel does for each packet it sees: a connection that finds its
 * set's ways busy is carried this way packet after packet, never in the
 * cache the sweep refreshes from, and its entry would otherwise run out
 * under traffic. */
static __always_inline enum reason ct_ask_kernel(struct xdp_md *ctx, const struct ct_packet *p,
						 const int v6, int from_a, __u32 ct_flags,
						 __u32 timeout_ms, __u8 *orig_from_a)
{
	struct bpf_ct_opts___local opts = { .netns_id = -1, .l4proto = p->l4proto };
	struct bpf_sock_tuple t;
	__u32 size;

	if (v6) {
		__builtin_memcpy(t.ipv6.saddr, p->saddr, 16);
		__builtin_memcpy(t.ipv6.daddr, p->daddr, 16);
		t.ipv6.sport = p->sport;
		t.ipv6.dport = p->dport;
		size = sizeof(t.ipv6);
	} else {
		t.ipv4.saddr = p->saddr[0];
		t.ipv4.daddr = p->daddr[0];
		t.ipv4.sport = p->sport;
		t.ipv4.dport = p->dport;
		size = sizeof(t.ipv4);
	}
	struct nf_conn *ct = bpf_xdp_ct_lookup(ctx, &t, size, &opts, sizeof(opts));
	if (!ct)
		return R_PASS_CT_NONE;
	enum reason carried = ct_carried(ct, p->l4proto, ct_flags);
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
	if (carried != R_FORWARDED)
		return carried;
	int orig_from_src = o0 == p->saddr[0] && oport == p->sport &&
			    (!v6 || (o1 == p->saddr[1] && o2 == p->saddr[2] && o3 == p->saddr[3]));
	/* The original direction leaves from a if this packet does and is
	 * original, or neither. */
	*orig_from_a = from_a == orig_from_src;
	return R_FORWARDED;
}

/* Whether the firewall's ruleset for family `v6` reads ct and the stage is
 * on: the bits of its connection's hash, or 0. */
static __always_inline __u32 ct_read_bits(const struct fw_state *st, const int v6)
{
	__u32 generation = *(volatile __u32 *)&st->generation;

	if (!(st->reads[generation & 1][v6].fields & FW_READ_CT) || !(st->ct_flags & FW_CT_ON))
		return 0;
	return st->ct_bits[v6];
}

/* Starts loading the cache line of a packet's connection (`l3` its IP
 * header, checked to the frame's end), early in the frame's parse (before
 * the FIB lookup), where the firewall reads ct: with a million
 * connections that line is a miss on every frame, and the work before the
 * connection stage runs while it comes (the lab's program: 548 ns a frame
 * at 1M states without, 447 with). Decides nothing: ct_judge reads the
 * way again, from the cache by then. */
static __always_inline void ct_prefetch(const void *l3, const int v6, const void *data_end)
{
	__u32 zero = 0;
	struct fw_state *st = bpf_map_lookup_elem(&fw_state, &zero);
	const __be16 *ports = v6 ? (const void *)((const struct ipv6hdr *)l3 + 1) :
				   (const void *)((const struct iphdr *)l3 + 1);

	if (!st || (const void *)(ports + 2) > data_end)
		return;
	__u32 bits = ct_read_bits(st, v6);
	if (!bits)
		return;
	__u8 l4proto = v6 ? ((const struct ipv6hdr *)l3)->nexthdr :
			    ((const struct iphdr *)l3)->protocol;
	struct ct_packet p = ct_packet_of(l3, v6, ports[0], ports[1], l4proto);

	if (v6) {
		struct ct_flow_key k;

		ct_key_of(&p, 1, &k);
		__u32 idx = ct_set6(&k, bits) * CT_CACHE_WAYS;
		struct ct_slot *s = bpf_map_lookup_elem(&ct_cache6, &idx);
		if (s)
			(void)*(volatile __u32 *)&s->seq;
	} else {
		struct ct_key4 k;

		ct_key4_of(&p, &k);
		__u32 idx = ct_set4(&k, bits) * CT_CACHE_WAYS;
		struct ct_way4 *w = bpf_map_lookup_elem(&ct_cache4, &idx);
		if (w)
			(void)*(volatile __u32 *)&w->seq;
	}
}

/* The packet's `ct` byte for the firewall's key (its state bit, FW_CT_REPLY
 * in the reply direction), or 0 and why it goes to the kernel in `why`.
 * `l4`: the transport header, `avail` its bytes within the IP packet. */
static __always_inline __u8 ct_judge(struct xdp_md *ctx, const void *l3, const int v6,
				     const __u8 *l4, __u32 avail, __u8 l4proto,
				     const struct fw_state *st, enum reason *why)
{
	const __u8 *end = (const __u8 *)(long)ctx->data_end;
	__u32 ct_flags = st->ct_flags, ct_idle = st->ct_idle, bits = st->ct_bits[v6];
	__u32 timeout_ms = st->ct_timeout_ms[l4proto == IPPROTO_TCP];

	/* (The bits are published before FW_CT_ON, and never 0 after.) */
	if (!ct_available() || !(ct_flags & FW_CT_ON) || !bits) {
		*why = R_PASS_CT_OFF;
		return 0;
	}
	__u8 tcp_flags = 0;
	enum reason kind = 0;
	if (l4proto == IPPROTO_UDP) {
		if (ct_udp_invalid(ctx, l3, v6, l4, avail, ct_flags & FW_CT_CHECKSUM))
			kind = R_PASS_CT_INVALID;
	} else if (l4proto == IPPROTO_TCP) {
		kind = ct_tcp_kind(ctx, l3, v6, l4, avail, ct_flags & FW_CT_CHECKSUM, &tcp_flags);
	} else {
		kind = R_PASS_CT_PROTO;
	}
	if (kind != R_PASS_CT_STATE && kind) {
		*why = kind;
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
		if (!ct_find6(set, &k, now, &orig_from_a)) {
			enum reason r = ct_ask_kernel(ctx, &p, 1, from_a, ct_flags, timeout_ms,
						      &orig_from_a);

			if (r != R_FORWARDED) {
				*why = r;
				return 0;
			}
			ct_keep6(set, &k, orig_from_a, now, ct_idle);
		}
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
		if (!ct_find4(set, &k, now, &orig_from_a)) {
			enum reason r = ct_ask_kernel(ctx, &p, 0, from_a, ct_flags, timeout_ms,
						      &orig_from_a);

			if (r != R_FORWARDED) {
				*why = r;
				return 0;
			}
			ct_keep4(set, &k, orig_from_a, now, ct_idle);
		}
	}
	return FW_CT_ESTABLISHED | (from_a == orig_from_a ? 0 : FW_CT_REPLY);
}

#endif

