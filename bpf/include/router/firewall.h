/* The fast path's firewall stage (docs/firewall.md): a forwarded
 * frame's verdict under the kernel's nftables ruleset, from the verdict
 * cache the control plane fills (router/maps.h, fw_*). Runs after the FIB
 * lookup, so that the output interface is known, and before anything is
 * written to the frame. crates/dataplane/src/model.rs decides the same. */
#ifndef LINERATE_FIREWALL_H
#define LINERATE_FIREWALL_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>

#include "router/maps.h"
#include "router/ct_judge.h"
#include "router/classify.h"

/* The set of a key: four independent multiplies over its eight words
 * folded in pairs (side by side, where a chain of eight waits on each
 * other's result: 0.6-0.7 ns a packet less in `linerate bench firewall`),
 * then a xorshift and a last multiply; top bits. Keys are compared whole, so a
 * weaker mix only costs collisions, never a wrong verdict.
 * crates/dataplane/src/fw_cache.rs computes the same. */
static __always_inline __u32 fw_set_of(const struct fw_key *k, __u32 bits)
{
	const __u64 *w = (const __u64 *)k;
	__u64 h = ((w[0] ^ w[4]) * 0x9e3779b97f4a7c15ull) ^ ((w[1] ^ w[5]) * 0xc2b2ae3d27d4eb4full) ^
		  ((w[2] ^ w[6]) * 0x165667b19e3779f9ull) ^ ((w[3] ^ w[7]) * 0xd6e8feb86659fd93ull);

	h ^= h >> 29;
	h *= 0xff51afd7ed558ccdull;
	if (bits == 0 || bits > FW_SET_BITS_ALL)
		bits = FW_SET_BITS_ALL;
	return h >> (64 - bits);
}

_Static_assert(FW_CACHE_SETS == 1 << FW_SET_BITS_ALL, "fw_set_of takes up to FW_SET_BITS_ALL bits");
_Static_assert(sizeof(struct fw_key) == 64, "fw_key is eight words");
_Static_assert(sizeof(struct fw_slot) == 96, "fw_slot: two slots in three lines");
/* crates/dataplane/src/layout.rs asserts the same (no BTF for it). */
_Static_assert(sizeof(struct fw_miss) == 72 && __builtin_offsetof(struct fw_miss, generation) == 64,
	       "fw_miss: the key, then the generation");

/* The verdict slot `i` holds for `k` under `generation`: FW_* with its
 * counters copied to `hit`, or 0 (another key, another generation, being
 * written). */
static __always_inline __u32 fw_probe(__u32 i, const struct fw_key *k, __u32 generation,
				      struct fw_hit *hit)
{
	struct fw_slot *s = bpf_map_lookup_elem(&fw_cache, &i);

	if (!s)
		return 0;
	__u32 seq = *(volatile __u32 *)&s->seq;
	if (seq & 1)
		return 0;
	const __u64 *a = (const __u64 *)k, *b = (const __u64 *)&s->key;
	__u64 diff = 0;

#pragma unroll
	for (int w = 0; w < 8; w++)
		diff |= a[w] ^ b[w];
	__u32 g = s->generation, verdict = s->verdict, n = s->counters_n;
	__builtin_memcpy(hit->id, s->counters, sizeof(hit->id));
	/* (x86 keeps loads in order: the slot was not rewritten between the
	 * two reads of its sequence word if they agree.) */
	if (*(volatile __u32 *)&s->seq != seq || diff || g != generation)
		return 0;
	hit->n = n;
	return verdict;
}

/* Bytes 0..n-1 of a little-endian word (n up to 8). */
static __always_inline __u64 fw_low_bytes(__u32 n)
{
	return n >= 8 ? ~0ull : (1ull << (n * 8)) - 1;
}

/* Judges a forwarded frame: R_FORWARDED (accept), R_DROP_FIREWALL,
 * R_PASS_FW_MISS (reported to the control plane), R_PASS_FW_KERNEL, or
 * R_PASS_MULTIBUF (the transport bytes the ruleset reads are past the
 * first buffer). `l3` is the IP header (checked to the frame's end), `l4`
 * the transport header's start and `avail` its bytes within the IP
 * packet; `l4proto` and `nexthdr` as nftables sees them. With nat
 * chains, the connection is the NAT stage's (router/nat.h, in the CPU's
 * ct_scratch, for this generation: `nat_ran` says the stage ran for this
 * frame; a frame whose generation changed since goes to the kernel), the
 * key holds the destination it mapped, as the forward chain sees it, and
 * `hit->nat` what it rewrites. Nothing is
 * counted here: fw_count, once the frame is sure to leave. */
static __always_inline enum reason fw_judge(struct xdp_md *ctx, const void *l3, const int v6,
					    const __u8 *l4, __u32 avail, __u8 l4proto,
					    __u8 nexthdr, __u32 iif, __u32 oif, struct fw_hit *hit,
					    __u16 nat_ran)
{
	const __u8 *data_end = (const __u8 *)(long)ctx->data_end;
	__u32 zero = 0;
	struct fw_state *st = bpf_map_lookup_elem(&fw_state, &zero);
	struct fw_key k;

	if (!st)
		return R_PASS_FW_MISS;
	__u32 generation = *(volatile __u32 *)&st->generation;
	const struct fw_reads *rd = &st->reads[generation & 1][v6];
	__u8 fields = rd->fields;
	__u32 end = rd->transport_end;

	__builtin_memset(&k, 0, sizeof(k));
	if (fields & FW_READ_IIF)
		k.iif = iif;
	if (fields & FW_READ_OIF)
		k.oif = oif;
	if (v6) {
		const struct ipv6hdr *ip6 = l3;

		if (fields & FW_READ_SADDR)
			__builtin_memcpy(k.saddr, &ip6->saddr, 16);
		if (fields & FW_READ_DADDR)
			__builtin_memcpy(k.daddr, &ip6->daddr, 16);
	} else {
		const struct iphdr *ip = l3;

		if (fields & FW_READ_SADDR)
			__builtin_memcpy(k.saddr, &ip->saddr, 4);
		if (fields & FW_READ_DADDR)
			__builtin_memcpy(k.daddr, &ip->daddr, 4);
	}
	if (fields & FW_READ_L4PROTO)
		k.l4proto = l4proto;
	if (fields & FW_READ_NEXTHDR)
		k.nexthdr = nexthdr;
	k.ipv6 = v6;
	/* Whether the segment offers its connection (ct_miss, nat_kernel)
	 * rather than being carried: read from memory, a value the verifier
	 * does not walk the rest of the judging once for each of. */
	__u32 *offering = 0;
	if (fields & FW_READ_NAT) {
		struct ct_scratch *sc = bpf_map_lookup_elem(&ct_scratch, &zero);

		/* (The interface's flags and the ruleset's generation change
		 * apart: a frame the stage did not run for under this
		 * generation, in the moment they disagree, is the kernel's.) */
		if (!nat_ran || !sc || !sc->nat_read || sc->generation != generation)
			return R_PASS_FW_MISS;
		offering = &sc->offering;
		/* (0 where the ruleset does not read ct.) */
		k.ct = sc->nat.ct & -(__u8)((fields / FW_READ_CT) & 1);
		hit->nat = sc->nat.manip;
	} else if (fields & FW_READ_CT) {
		enum reason why = R_PASS_CT_OFF;
		__u8 tcp_flags = 0;
		struct ct_scratch *sc = bpf_map_lookup_elem(&ct_scratch, &zero);

		if (!sc)
			return why;
		offering = &sc->offering;
		*offering = 0;
		why = ct_segment(ctx, l3, v6, l4, avail, l4proto, st, &tcp_flags);
		if (why && why != R_PASS_CT_STATE)
			return why;
		k.ct = ct_judge(ctx, l3, v6, l4, l4proto, st, why, tcp_flags, &why);
		if (!k.ct)
			return why;
	}
	if (end && avail >= end && l4 + FW_TRANSPORT_BYTES <= data_end) {
		/* The common packet: every byte the rules read is there, so the
		 * mask alone (zero past transport_end) makes the key's bytes.
		 * Two word loads, unaligned: x86 takes them, and so does the
		 * verifier for packet data. (A memcpy from a byte pointer is
		 * sixteen byte loads shifted together: clang assumes BPF cannot
		 * load unaligned.) */
		__u64 t[2] = { *(const __u64 *)l4 & rd->transport_mask[0],
			       *(const __u64 *)(l4 + 8) & rd->transport_mask[1] };

		__builtin_memcpy(k.transport, t, FW_TRANSPORT_BYTES);
		k.transport_len = end;
	} else if (end) {
		__u32 have = avail < end ? avail : end;
		__u64 t[2] = { 0, 0 };

		if (have > FW_TRANSPORT_BYTES)
			have = FW_TRANSPORT_BYTES;
		if (l4 + FW_TRANSPORT_BYTES <= data_end) {
			t[0] = *(const __u64 *)l4;
			t[1] = *(const __u64 *)(l4 + 8);
		} else {
			__u8 *b = (__u8 *)t;

			if (l4 + have > data_end)
				return R_PASS_MULTIBUF;
#pragma unroll
			for (int i = 0; i < FW_TRANSPORT_BYTES; i++)
				if (l4 + i + 1 <= data_end)
					b[i] = l4[i];
		}
		t[0] &= rd->transport_mask[0] & fw_low_bytes(have);
		t[1] &= rd->transport_mask[1] & (have > 8 ? fw_low_bytes(have - 8) : 0);
		__builtin_memcpy(k.transport, t, FW_TRANSPORT_BYTES);
		k.transport_len = have;
	}

	/* The forward chain sees the destination the NAT stage mapped (the
	 * source is mapped after it). */
	if (hit->nat & CT_NAT_DST) {
		struct ct_scratch *sc = bpf_map_lookup_elem(&ct_scratch, &zero);

		if (!sc)
			return R_PASS_FW_MISS;
		if (fields & FW_READ_DADDR)
			__builtin_memcpy(k.daddr, sc->nat.daddr, v6 ? 16 : 4);
		if (k.transport_len >= 4) {
			__u16 *port = (__u16 *)k.transport + 1;

			*port = sc->nat.dport & (__u16)(rd->transport_mask[0] >> 16);
		}
	}
	__u32 set = fw_set_of(&k, rd->set_bits);
	__u32 verdict = fw_probe(set * FW_CACHE_WAYS, &k, generation, hit);
	if (!verdict)
		verdict = fw_probe(set * FW_CACHE_WAYS + 1, &k, generation, hit);
	if (!verdict) {
		/* Not cached: the classifier judges it, where the family has
		 * one in this generation, and its verdict is cached. */
		verdict = fwc_judge(&k, generation, v6, hit);
		if (verdict)
			fwc_learn(set, &k, generation, verdict, hit);
	}
	if (offering && *offering) {
		/* The kernel moves the windows, whatever the verdict: every
		 * such segment is its. */
		if (verdict == FW_ACCEPT)
			ct_offer(ctx, l3, v6, l4, l4proto);
		if (verdict)
			return R_PASS_CT_WINDOW;
	}
	switch (verdict) {
	case FW_ACCEPT:
		return R_FORWARDED;
	case FW_DROP:
		return R_DROP_FIREWALL;
	case FW_KERNEL:
		return R_PASS_FW_KERNEL;
	}
	/* Written in the ring, not on the stack (the classifier's calls need
	 * its room). Default wake-up: only when the reader has caught up, so
	 * a burst of misses wakes it once. A full ring loses the report, not
	 * the frame. */
	struct fw_miss *m = bpf_ringbuf_reserve(&fw_misses, sizeof(*m), 0);

	if (m) {
		__builtin_memcpy(&m->key, &k, sizeof(k));
		m->generation = generation;
		m->pad = 0;
		bpf_ringbuf_submit(m, 0);
	}
	return R_PASS_FW_MISS;
}

/* Counts a judged frame (`bytes`: its IP packet) at the rules it reached. */
static __always_inline void fw_count(const struct fw_hit *hit, __u32 bytes)
{
#pragma unroll
	for (int i = 0; i < FW_ENTRY_COUNTERS; i++) {
		if (i >= hit->n)
			break;
		__u32 id = hit->id[i];
		struct fw_rule_counter *c = bpf_map_lookup_elem(&fw_counters, &id);

		if (c) {
			c->packets++;
			c->bytes += bytes;
		}
	}
}

/* Whether IPv6 next header `h` is one nftables walks past to find the
 * transport protocol (ipv6_find_hdr), or one the fast path does not
 * classify: with a firewall, such packets go to the kernel. */
static __always_inline int fw_ipv6_ext(__u8 h)
{
	switch (h) {
	case 0:   /* hop-by-hop */
	case 43:  /* routing */
	case 44:  /* fragment */
	case 50:  /* ESP */
	case 51:  /* AH */
	case 59:  /* no next header */
	case 60:  /* destination options */
	case 135: /* mobility */
	case 139: /* HIP */
	case 140: /* shim6 */
	case 253:
	case 254: /* experiments */
		return 1;
	}
	return 0;
}

#endif
