/* The firewall's classifier in the fast path (abi/firewall.h, fwc_*;
 * crates/firewall/src/classify, whose Tables::walk is this walk in Rust):
 * a key its verdict cache does not hold is judged here, by the tables of
 * the generation it was built by, and its verdict written to the cache
 * for the key's next packets. For each key field, one lookup gives the
 * row of terms its value meets; the first term every row has, from the
 * cursor, is the one the packet meets: a count goes on past it, a skip
 * moves the cursor, a verdict ends the walk. */
#ifndef LINERATE_CLASSIFY_H
#define LINERATE_CLASSIFY_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "fib.h"
#include "router/maps.h"

/* What a hit brings: the rules whose counters the frame reaches. */
struct fw_hit {
	__u16 n;
	/* The NAT stage's rewrites for the frame (CT_NAT_*), set by fw_judge:
	 * the frame's own, on its stack, where the scratch's would cost a
	 * lookup on every frame. */
	__u8 nat;
	__u8 pad;
	__u16 id[FW_ENTRY_COUNTERS];
};

/* crates/dataplane/src/fwc.rs lays the tables out by these sizes. */
_Static_assert(sizeof(struct fwc_field) == 40, "fwc_field: 40 bytes");
_Static_assert(sizeof(struct fwc_header) == 24 + FWC_FIELDS * 40, "fwc_header: 24 bytes, then the fields");
_Static_assert(sizeof(struct fwc_range) == 24, "fwc_range: 24 bytes");

/* Reads of the arena, by byte offset from its base. */
static __always_inline __u32 fwc_u32(__u64 at)
{
	return fib_read(at);
}

static __always_inline __u64 fwc_u64(__u64 at)
{
	return fib_read64(at);
}

/* The region of tables for [generation & 1][ipv6]. */
static __always_inline __u64 fwc_region(__u64 base, __u32 generation, int v6)
{
	return base + FWC_ARENA_OFF + (__u64)((generation & 1) * 2 + (v6 ? 1 : 0)) * FWC_REGION;
}

/* Byte `i` of the key's transport bytes (loaded as two words). */
static __always_inline __u64 fwc_tbyte(__u64 t0, __u64 t1, __u32 i)
{
	return ((i < 8 ? t0 >> (8 * i) : t1 >> (8 * (i - 8)))) & 0xff;
}

/* The field's value in key `k` as hi:lo; 1 (lacking) if the packet does
 * not have it. */
static __always_inline int fwc_value(const struct fw_key *k, __u8 source, __u32 offset, __u32 len,
				     int v6, __u64 *hi, __u64 *lo)
{
	*hi = 0;
	switch (source) {
	case FWC_SRC_IIF:
		*lo = k->iif;
		return 0;
	case FWC_SRC_OIF:
		*lo = k->oif;
		return 0;
	case FWC_SRC_SADDR:
	case FWC_SRC_DADDR: {
		const __u8 *a = source == FWC_SRC_SADDR ? k->saddr : k->daddr;

		if (v6) {
			*hi = __builtin_bswap64(*(const __u64 *)a);
			*lo = __builtin_bswap64(*(const __u64 *)(a + 8));
		} else {
			*lo = __builtin_bswap32(*(const __u32 *)a);
		}
		return 0;
	}
	case FWC_SRC_L4PROTO:
		*lo = k->l4proto;
		return 0;
	case FWC_SRC_NEXTHDR:
		*lo = k->nexthdr;
		return 0;
	case FWC_SRC_CT:
		*lo = k->ct;
		return 0;
	}
	/* Transport: `len` bytes from `offset`, big-endian. */
	if (offset + len > k->transport_len || offset + len > FW_TRANSPORT_BYTES) {
		*hi = FWC_LACKING_HI;
		*lo = 0;
		return 1;
	}
	__u64 t0 = *(const __u64 *)k->transport, t1 = *(const __u64 *)(k->transport + 8);
	__u64 v = 0;

#pragma unroll
	for (int i = 0; i < 4; i++)
		if (i < len)
			v = v << 8 | fwc_tbyte(t0, t1, offset + i);
	*lo = v;
	return 0;
}

/* The row id of field `f` (its descriptor at arena address `fa`) for
 * value hi:lo; FWC_KERNEL_ROW for a value the kernel judges. */
static __always_inline __u32 fwc_row_id(__u64 base, __u64 fa, __u64 hi, __u64 lo, int lacking)
{
	__u32 kind = fwc_u32(fa) >> 24, count = fwc_u32(fa + 4);
	__u64 lookup = base + fwc_u64(fa + 24);

	if (kind == FWC_DIRECT) {
		__u64 i = lacking ? count - 1 : lo;

		if (!lacking && (hi || lo >= count - 1))
			return FWC_KERNEL_ROW;
		return fwc_u32(lookup + i * 4);
	}
	/* The last interval starting at or before the value. */
	__u32 first = 0, n = count;

#pragma clang loop unroll(disable)
	for (int i = 0; i < 28; i++) {
		if (n <= 1)
			break;
		__u32 half = n / 2, mid = first + half;
		__u64 at = lookup + (__u64)mid * sizeof(struct fwc_range);
		__u64 shi = fwc_u64(at), slo = fwc_u64(at + 8);

		if (shi < hi || (shi == hi && slo <= lo))
			first = mid;
		n -= half;
	}
	return fwc_u32(lookup + (__u64)first * sizeof(struct fwc_range) + 16);
}

/* What the word scan reads, for each field: its shared row's address,
 * its own bits' (word w at own + w * 8) and their words [own_first,
 * own_end); the AND of the rows' summaries (the words every row has a
 * bit in: the only ones read); the cursor, and the next word to try. */
struct fwc_scan {
	__u64 shared[FWC_FIELDS];
	__u64 own[FWC_FIELDS];
	__u32 own_first[FWC_FIELDS];
	__u32 own_end[FWC_FIELDS];
	__u64 summary[FWC_SUMMARY];
	__u32 fields;
	__u32 next;
	__u32 cursor;
	__u32 found;  /* the term met, or FWC_TERMS */
};

/* A walk's state, shared with bpf_loop's callbacks (each verified once,
 * rather than each iteration in every path). */
struct fwc_walk {
	struct fw_key key;
	__u64 base;       /* the arena's */
	__u64 header;     /* the region's header */
	__u64 acts;
	__u32 words;
	__u32 cursor;
	__u32 verdict;    /* FW_*, 0 while walking */
	__u32 n;          /* counters so far */
	__u16 id[FW_ENTRY_COUNTERS];
	int v6;
	struct fwc_scan scan;
};

/* The walk's state lives here, not on the stack: with the program's own
 * frame it would pass the stack's 512 bytes. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fwc_walk);
} fwc_scratch SEC(".maps");

/* Field `i`'s row for the key (bpf_loop's callback): a lookup, and its
 * first and last words narrow the scan. */
static long fwc_field(__u64 i, void *data)
{
	__u32 zero = 0;
	struct fwc_walk *w = bpf_map_lookup_elem(&fwc_scratch, &zero);

	if (!w)
		return 1;
	__u64 fa = w->header + 24 + (i & (FWC_FIELDS - 1)) * sizeof(struct fwc_field);
	__u32 d = fwc_u32(fa);
	__u64 hi, lo;
	int lacking = fwc_value(&w->key, d & 0xff, (d >> 8) & 0xff, (d >> 16) & 0xff, w->v6, &hi, &lo);

	if (!lacking) {
		hi &= fwc_u64(fa + 8);
		lo &= fwc_u64(fa + 16);
	}
	__u32 r = fwc_row_id(w->base, fa, hi, lo, lacking);

	if (r == FWC_KERNEL_ROW) {
		w->verdict = FW_KERNEL;
		return 1;
	}
	/* The field's shared row, then its rows (fwc.rs, Tables::encode):
	 * the row id is its place in u64s from the shared row. */
	__u64 shared = w->base + fwc_u64(fa + 32);
	__u64 row = shared + (__u64)r * 8;
	__u32 of = fwc_u32(row + FWC_SUMMARY * 8), on = fwc_u32(row + FWC_SUMMARY * 8 + 4);
	__u32 k = i & (FWC_FIELDS - 1);

#pragma unroll
	for (int j = 0; j < FWC_SUMMARY; j++)
		w->scan.summary[j] &= fwc_u64(row + j * 8);
	w->scan.shared[k] = shared;
	w->scan.own[k] = row + FWC_SUMMARY * 8 + 8 - (__u64)of * 8;
	w->scan.own_first[k] = of;
	w->scan.own_end[k] = of + on;
	return 0;
}

/* One word of the AND (bpf_loop's callback): the next word at or after
 * `next` that every row's summary has; the scan ends at the first with a
 * term every row has, at or after the cursor, or when no word is left. */
static long fwc_scan_word(__u64 i, void *data)
{
	__u32 zero = 0;
	struct fwc_walk *walk = bpf_map_lookup_elem(&fwc_scratch, &zero);

	if (!walk)
		return 1;
	struct fwc_scan *s = &walk->scan;
	__u32 p = s->next, w = FWC_WORDS;
	__u64 x = ~0ull;

#pragma unroll
	for (int j = 0; j < FWC_SUMMARY; j++) {
		if (w == FWC_WORDS && p < (j + 1) * 64) {
			__u64 m = s->summary[j];

			if (p > j * 64)
				m &= ~0ull << ((p - j * 64) & 63);
			if (m)
				w = j * 64 + __builtin_ctzll(m);
		}
	}
	if (w >= FWC_WORDS)
		return 1;
#pragma unroll
	for (int f = 0; f < FWC_FIELDS; f++) {
		if (f < s->fields) {
			__u64 v = fwc_u64(s->shared[f] + (__u64)w * 8);

			if (w >= s->own_first[f] && w < s->own_end[f])
				v |= fwc_u64(s->own[f] + (__u64)w * 8);
			x &= v;
		}
	}
	if (w == s->cursor / 64)
		x &= ~0ull << (s->cursor % 64);
	if (x) {
		s->found = w * 64 + __builtin_ctzll(x);
		return 1;
	}
	s->next = w + 1;
	return 0;
}

/* One term met (bpf_loop's callback): the first term at or after the
 * cursor every row has, and its action. */
static long fwc_step(__u64 i, void *data)
{
	__u32 zero = 0;
	struct fwc_walk *w = bpf_map_lookup_elem(&fwc_scratch, &zero);

	if (!w)
		return 1;
	__u32 fields = fwc_u32(w->header + 4);
	struct fwc_scan *sc = &w->scan;
	__u32 found;

	sc->fields = fields;
	sc->next = w->cursor / 64;
	sc->cursor = w->cursor;
	sc->found = FWC_TERMS;
	if (fields)
		bpf_loop(FWC_WORDS, fwc_scan_word, &zero, 0);
	found = fields ? sc->found : w->cursor;
	if (found >= FWC_TERMS) {
		w->verdict = FW_KERNEL;
		return 1;
	}
	__u32 act = fwc_u32(w->acts + (__u64)found * 4);
	__u32 arg = act & FWC_ACT_ARG;

	switch (act & FWC_ACT_KIND) {
	case FWC_ACT_COUNT:
		/* More counters than an entry holds: the kernel's. */
		if (w->n >= FW_ENTRY_COUNTERS) {
			w->verdict = FW_KERNEL;
			return 1;
		}
		w->id[w->n & (FW_ENTRY_COUNTERS - 1)] = arg;
		w->n++;
		w->cursor = found + 1;
		return 0;
	case FWC_ACT_SKIP:
		w->cursor = arg;
		return 0;
	case FWC_ACT_ACCEPT:
		w->verdict = FW_ACCEPT;
		return 1;
	case FWC_ACT_DROP:
		w->verdict = FW_DROP;
		return 1;
	}
	w->verdict = FW_KERNEL;
	return 1;
}

/* Writes the verdict `verdict` for key `k` under `generation` into a way
 * of the key's set (fw_probe's): one that holds nothing of this
 * generation, else the one `evict` picks; nothing if another CPU or the
 * control plane is writing it. */
__attribute__((noinline)) int fwc_learn(__u32 set, const struct fw_key *k, __u32 generation,
					__u32 verdict, const struct fw_hit *hit)
{
	__u32 i0 = set * FW_CACHE_WAYS, i1 = i0 + 1;
	struct fw_slot *s0 = bpf_map_lookup_elem(&fw_cache, &i0);
	struct fw_slot *s1 = bpf_map_lookup_elem(&fw_cache, &i1);

	if (!k || !hit || !s0 || !s1)
		return 0;
	__u32 evict = k->saddr[3] ^ k->daddr[3] ^ k->transport[1] ^ k->transport[3];
	int stale0 = !s0->verdict || s0->generation != generation;
	int stale1 = !s1->verdict || s1->generation != generation;
	struct fw_slot *s = stale0 ? s0 : stale1 ? s1 : evict & 1 ? s1 : s0;
	__u32 seq = *(volatile __u32 *)&s->seq;

	if (seq & 1 || __sync_val_compare_and_swap(&s->seq, seq, seq + 1) != seq)
		return 0;
	s->generation = generation;
	__builtin_memcpy(&s->key, k, sizeof(*k));
	s->verdict = verdict;
	s->counters_n = verdict == FW_KERNEL ? 0 : hit->n;
	__builtin_memcpy(s->counters, hit->id, sizeof(s->counters));
	asm volatile("" ::: "memory");
	*(volatile __u32 *)&s->seq = seq + 2;
	return 0;
}

/* Judges key `k` (built under `generation`, family `v6`) by the
 * classifier: FW_ACCEPT, FW_DROP or FW_KERNEL with the counters in
 * `hit`; 0 if the family has no classifier in this generation. A global function: verified once, on its own, rather
 * than in every path of the program that reaches it. */
__attribute__((noinline)) int fwc_judge(const struct fw_key *k, __u32 generation, int v6,
					struct fw_hit *hit)
{
	__u32 zero = 0;
	struct fwc_walk *w = bpf_map_lookup_elem(&fwc_scratch, &zero);

	if (!k || !hit || !w)
		return 0;
	hit->n = 0;
	w->base = fib_arena_base;
	asm volatile("" :: "r"(&fib_arena));
	w->header = fwc_region(w->base, generation, v6);
	if (fwc_u32(w->header) != 1)
		return 0;
	__u32 fields = fwc_u32(w->header + 4);

	w->words = fwc_u32(w->header + 8);
	w->acts = w->base + fwc_u64(w->header + 16);
	if (fields > FWC_FIELDS || w->words == 0 || w->words > FWC_WORDS)
		return FW_KERNEL;
	/* Word by word: a memcpy goes through the stack, which the calls
	 * below need. */
#pragma unroll
	for (int i = 0; i < 8; i++) {
		__u64 x = ((const __u64 *)k)[i];

		asm volatile("" : "+r"(x));
		((__u64 *)&w->key)[i] = x;
	}
	w->v6 = v6;
#pragma unroll
	for (int j = 0; j < FWC_SUMMARY; j++)
		w->scan.summary[j] = ~0ull;
	w->cursor = 0;
	w->verdict = 0;
	w->n = 0;
	/* The callbacks find the walk in fwc_scratch (their context must be
	 * the stack's). */
	bpf_loop(fields, fwc_field, &zero, 0);
	if (!w->verdict)
		bpf_loop(FWC_MAX_STEPS, fwc_step, &zero, 0);
	__u32 verdict = w->verdict;

	if (verdict == FW_ACCEPT || verdict == FW_DROP) {
		hit->n = w->n;
		__builtin_memcpy(hit->id, w->id, sizeof(hit->id));
	} else {
		verdict = FW_KERNEL;
	}
	return verdict;
}

#endif
