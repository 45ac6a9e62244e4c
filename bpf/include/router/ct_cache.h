/* The fast path's connection cache (docs/firewall.md "States"): a
 * connection's canonical key from a packet, the set it hashes to, and the
 * ways of each family's table (abi/conntrack.h, router/maps.h): found,
 * kept, forgotten, each write fenced by the way's sequence word. The judge
 * (router/ct_judge.h) decides what goes in. */
#ifndef LINERATE_CT_CACHE_H
#define LINERATE_CT_CACHE_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "router/maps.h"

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

_Static_assert(CT4_SETS_MAX == 1 << CT_SET_BITS_TOP && CT6_SETS_MAX < CT4_SETS_MAX,
	       "a set is found among the top CT_SET_BITS_TOP bits of its hash");

/* The set of hash `h` among the first 2^`bits` (see CT_SET_BITS_TOP). */
static __always_inline __u32 ct_span(__u64 h, __u32 bits)
{
	return (__u32)(h >> (64 - CT_SET_BITS_TOP)) & ((1u << bits) - 1);
}

/* The set of IPv4 connection `k`: its two words multiplied, folded, the
 * low `bits` bits (fw_state.ct_bits) of the top CT_SET_BITS_TOP
 * (abi/conntrack.h). crates/dataplane/src/ct_cache.rs computes the
 * same. */
static __always_inline __u32 ct_set4(const struct ct_key4 *k, __u32 bits)
{
	__u64 h = (k->ab * 0x9e3779b97f4a7c15ull) ^
		  (((__u64)k->ports | (__u64)k->l4proto << 32) * 0xc2b2ae3d27d4eb4full);

	h ^= h >> 29;
	h *= 0xff51afd7ed558ccdull;
	return ct_span(h, bits);
}

/* The set of IPv6 connection `k`: its five words multiplied in pairs and
 * folded, `bits` bits as ct_set4's. crates/dataplane/src/ct_cache.rs
 * computes the same. */
static __always_inline __u32 ct_set6(const struct ct_flow_key *k, __u32 bits)
{
	const __u64 *w = (const __u64 *)k;
	__u64 h = ((w[0] ^ w[4]) * 0x9e3779b97f4a7c15ull) ^ (w[1] * 0xc2b2ae3d27d4eb4full) ^
		  ((w[2] ^ w[3]) * 0x165667b19e3779f9ull);

	h ^= h >> 29;
	h *= 0xff51afd7ed558ccdull;
	return ct_span(h, bits);
}

/* The NAT stage's ways (abi/conntrack.h, router/nat.h), keyed by a direction's tuple:
 * for IPv4 a ct_key4 with the source for side a, for IPv6 a ct_flow_key
 * likewise. */
static __always_inline void nat_key4_of(const struct ct_packet *p, struct ct_key4 *k)
{
	k->ab = (__u64)p->saddr[0] | (__u64)p->daddr[0] << 32;
	k->ports = (__u32)p->sport | (__u32)p->dport << 16;
	k->l4proto = p->l4proto;
}

static __always_inline void nat_key6_of(const struct ct_packet *p, struct ct_flow_key *k)
{
	__builtin_memset(k, 0, sizeof(*k));
	__builtin_memcpy(k->a, p->saddr, 16);
	__builtin_memcpy(k->b, p->daddr, 16);
	k->aport = p->sport;
	k->bport = p->dport;
	k->l4proto = p->l4proto;
	k->ipv6 = 1;
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

/* Whether keys `x` and `y` are the same, compared whole. */
static __always_inline int ct_flow_key_eq(const struct ct_flow_key *x, const struct ct_flow_key *y)
{
	const __u64 *a = (const __u64 *)x, *b = (const __u64 *)y;
	__u64 diff = 0;

#pragma unroll
	for (int w = 0; w < 5; w++)
		diff |= a[w] ^ b[w];
	return !diff;
}

/* Whether slot `s` holds `k`. */
static __always_inline int ct_key6_is(struct ct_slot *s, const struct ct_flow_key *k)
{
	return ct_flow_key_eq(&s->key, k);
}

/* Whether way `w` holds `k`, what it holds for it read into `out` by
 * `read(w, out)`, all read between two equal even sequence words. (x86
 * keeps loads in order: see fw_probe.) */
#define CT_HOLDS(w, k, key_is, read, out)                                                   \
	({                                                                                 \
		__u32 seq_ = *(volatile __u32 *)&(w)->seq;                                 \
		int same_ = !(seq_ & 1) && key_is((w), (k));                               \
		read((w), (out));                                                          \
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
static __always_inline int ct_victim(__u8 proto0, __u32 age0, __u8 proto1, __u32 age1,
				     __u32 idle)
{
	if (!proto0)
		return 0;
	if (!proto1)
		return 1;
	int older = age1 > age0;
	__u32 age = older ? age1 : age0;

	if (idle && age < idle)
		return -1;
	return older;
}

/* How many jiffies ago way `w` carried a packet, `now` the jiffies: in
 * 32 bits, as a way may keep only the low half of the clock. */
#define CT_AGE(w, now) ((__u32)(now) - (__u32)(w)->seen)

/* Writes IPv4 connection `k` into way `w` (claimed), its key's fields. */
static __always_inline void ct_put4(struct ct_way4 *w, const struct ct_key4 *k)
{
	*(__u64 *)&w->a = k->ab;
	*(__u32 *)&w->aport = k->ports;
	w->l4proto = k->l4proto;
}

/* Writes IPv6 connection `k` into slot `s` (claimed), its key whole. */
static __always_inline void ct_put6(struct ct_slot *s, const struct ct_flow_key *k)
{
	__builtin_memcpy(&s->key, k, sizeof(*k));
}

/* The ways of one table, one body for all four (each family's
 * connection cache, and the NAT stage's): `table` the map, `way_t` its
 * value, `key_t` the key it is found by, `key_is` and `put` its
 * comparison and its key's write, `proto` the way's l4proto field (0:
 * empty), `val_t` what it holds for the key beside `seen`, `read(w,
 * out)` and `write(w, v)` its copies. For table N it defines
 *
 *   ct_findN    finds `k` in its set, marking it carried at `now`;
 *   ct_keepN    writes `k` into a way of its set (ct_victim), or nothing
 *               if another CPU is writing the way;
 *   ct_forgetN  empties the way holding `k`, if one does and no other
 *               CPU is writing it. */
#define CT_WAYS(N, table, way_t, key_t, key_is, put, proto, val_t, read, write)               \
	static __always_inline int ct_find##N(__u32 set, const key_t *k, __u64 now, val_t *out) \
	{                                                                                       \
		_Pragma("unroll") for (int i = 0; i < CT_CACHE_WAYS; i++)                       \
		{                                                                               \
			__u32 idx = set * CT_CACHE_WAYS + i;                                    \
			way_t *w = bpf_map_lookup_elem(&table, &idx);                           \
                                                                                                \
			if (w && CT_HOLDS(w, k, key_is, read, out)) {                           \
				/* A word written once a jiffy per flow, not per packet. */     \
				if (w->seen != (__typeof__(w->seen))now)                        \
					w->seen = now;                                          \
				return 1;                                                       \
			}                                                                       \
		}                                                                               \
		return 0;                                                                       \
	}                                                                                       \
                                                                                                \
	static __always_inline void ct_keep##N(__u32 set, const key_t *k, const val_t *v,      \
					       __u64 now, __u32 idle)                           \
	{                                                                                       \
		__u32 i0 = set * CT_CACHE_WAYS, i1 = i0 + 1;                                    \
		way_t *w0 = bpf_map_lookup_elem(&table, &i0);                                   \
		way_t *w1 = bpf_map_lookup_elem(&table, &i1);                                   \
                                                                                                \
		if (!w0 || !w1)                                                                 \
			return;                                                                 \
		int v_ = ct_victim(w0->proto, CT_AGE(w0, now), w1->proto, CT_AGE(w1, now), idle); \
		if (v_ < 0)                                                                     \
			return;                                                                 \
		way_t *w = v_ ? w1 : w0;                                                        \
		__u32 seq = ct_claim(&w->seq);                                                  \
		if (seq & 1)                                                                    \
			return;                                                                 \
		put(w, k);                                                                      \
		write(w, v);                                                                    \
		w->seen = now;                                                                  \
		ct_release(&w->seq, seq);                                                       \
	}                                                                                       \
                                                                                                \
	static __always_inline void ct_forget##N(__u32 set, const key_t *k)                    \
	{                                                                                       \
		_Pragma("unroll") for (int i = 0; i < CT_CACHE_WAYS; i++)                       \
		{                                                                               \
			__u32 idx = set * CT_CACHE_WAYS + i;                                    \
			way_t *w = bpf_map_lookup_elem(&table, &idx);                           \
                                                                                                \
			if (!w || !key_is(w, k))                                                \
				continue;                                                       \
			__u32 seq = ct_claim(&w->seq);                                          \
			if (seq & 1)                                                            \
				continue;                                                       \
			if (key_is(w, k))                                                       \
				w->proto = 0;                                                   \
			ct_release(&w->seq, seq);                                               \
		}                                                                               \
	}

/* A connection cache's way holds the direction its original packets go
 * in. */
#define CT_READ_ORIG(w, out) (*(out) = (w)->orig_from_a)
#define CT_WRITE_ORIG(w, v) ((w)->orig_from_a = *(v))

CT_WAYS(4, ct_cache4, struct ct_way4, struct ct_key4, ct_key4_is, ct_put4, l4proto, __u8,
	CT_READ_ORIG, CT_WRITE_ORIG)
CT_WAYS(6, ct_cache6, struct ct_slot, struct ct_flow_key, ct_key6_is, ct_put6, key.l4proto, __u8,
	CT_READ_ORIG, CT_WRITE_ORIG)

/* Whether the firewall's ruleset for family `v6` reads `read` (FW_READ_CT:
 * the connection stage runs; FW_READ_NAT: the NAT stage) and the stage is
 * on: the bits of its connection's hash, or 0. */
static __always_inline __u32 ct_read_bits(const struct fw_state *st, const int v6, __u32 read)
{
	__u32 generation = *(volatile __u32 *)&st->generation;

	if (!(st->reads[generation & 1][v6].fields & read) || !(st->ct_flags & FW_CT_ON))
		return 0;
	return st->ct_bits[v6];
}

/* Starts loading the cache line of a packet's connection (`l3` its IP
 * header, checked to the frame's end), early in the frame's parse (before
 * the FIB lookup), where the firewall reads ct: with a million
 * connections that line is a miss on every frame, and the work before the
 * connection stage runs while it comes (the lab's program: 548 ns a frame
 * at 1M states without, 447 with). On an interface the NAT stage runs on
 * (`nat`: IFACE_NAT4/6), the line of the packet's direction's set in the
 * stage's ways instead (IPv6: its first way's first line). Decides
 * nothing: the stage reads the way again, from the cache by then. */
static __always_inline void ct_prefetch(const void *l3, const int v6, const void *data_end,
					const int nat)
{
	__u32 zero = 0;
	struct fw_state *st = bpf_map_lookup_elem(&fw_state, &zero);
	const __be16 *ports = v6 ? (const void *)((const struct ipv6hdr *)l3 + 1) :
				   (const void *)((const struct iphdr *)l3 + 1);

	if (!st || (const void *)(ports + 2) > data_end)
		return;
	__u32 bits = ct_read_bits(st, v6, nat ? FW_READ_NAT : FW_READ_CT);
	if (!bits)
		return;
	__u8 l4proto = v6 ? ((const struct ipv6hdr *)l3)->nexthdr :
			    ((const struct iphdr *)l3)->protocol;
	struct ct_packet p = ct_packet_of(l3, v6, ports[0], ports[1], l4proto);
	/* (Every table's way begins with its sequence word.) */
	__u32 *seq;

	if (v6) {
		struct ct_flow_key k;

		if (nat)
			nat_key6_of(&p, &k);
		else
			ct_key_of(&p, 1, &k);
		__u32 idx = ct_set6(&k, bits) * CT_CACHE_WAYS;
		seq = nat ? bpf_map_lookup_elem(&nat_cache6, &idx) :
			    bpf_map_lookup_elem(&ct_cache6, &idx);
	} else {
		struct ct_key4 k;

		if (nat)
			nat_key4_of(&p, &k);
		else
			ct_key4_of(&p, &k);
		__u32 idx = ct_set4(&k, bits) * CT_CACHE_WAYS;
		seq = nat ? bpf_map_lookup_elem(&nat_cache4, &idx) :
			    bpf_map_lookup_elem(&ct_cache4, &idx);
	}
	if (seq)
		(void)*(volatile __u32 *)seq;
}

#endif
