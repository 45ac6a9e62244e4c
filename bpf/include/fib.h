/* The FIB as the fast path reads it: crates/fib's layout (docs/fib.md).
 *
 * Entries are __u32: a next-hop id (0 = no route) or, with FIB_CHILD set,
 * the index of the group holding the next `stride` bits. A 4-byte array
 * element would be padded to 8, so the maps hold rows of entries.
 * crates/fib/tests/bpf_contract.rs checks these sizes against the Rust
 * shapes and this lookup against the Rust one. */
#ifndef LINERATE_FIB_H
#define LINERATE_FIB_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* The tables live in a BPF arena (one sparse region shared with user space,
 * which writes the entries straight into it): a read is one load, with no
 * map lookup or key on the stack between the levels, and pages nobody wrote
 * are not allocated (and read as 0, no route). Byte offsets of the regions;
 * crates/bpf/src/fib_arena.rs has the same numbers and
 * crates/fib/tests/bpf_contract.rs holds both to the Rust shapes. */
#define FIB_ARENA_PAGES (1u << 20)          /* 4 GiB, the arena's limit */
/* IPv4: DIR-24-8. */
#define FIB4_FIRST 24
#define FIB4_STRIDE 8
#define FIB4_ROOT_OFF 0ull                  /* 2^24 entries, 64 MiB */
#define FIB4_GROUPS_OFF (64ull << 20)       /* up to 65536 groups, 64 MiB */
#define FIB4_GROUPS 65536
/* IPv6: FIB6_FIRST bits, then FIB6_STRIDE at a time. Wide (the default,
 * DPDK rte_lpm6's): a /48 is 4 reads, about 310 MiB for a full table.
 * Compact (-DFIB6_COMPACT): 9 reads, about 55 MiB. */
#ifdef FIB6_COMPACT
#define FIB6_FIRST 16
#define FIB6_STRIDE 4
#define FIB6_SC_LEVELS 2
#define FIB6_SC_PAIRS_LOG2 20
#else
#define FIB6_FIRST 24
#define FIB6_STRIDE 8
#define FIB6_SC_LEVELS 1
#define FIB6_SC_PAIRS_LOG2 21
#endif
#define FIB6_ROOT_OFF (128ull << 20)        /* up to 2^24 entries, 64 MiB */
#define FIB6_GROUPS_OFF (192ull << 20)      /* up to 2^20 groups */
/* The shortcut (crates/fib/src/shortcut.rs): 2^FIB6_SC_PAIRS_LOG2 pairs of
 * 64-bit slots, each the entry the walk reads after 48 bits (and in the
 * compact layout after 40 bits) in the low half, under a tag naming the
 * prefix in the high half. Wide 2^21 pairs, 32 MiB; compact 2^20, 16 MiB
 * (a full table's 330k held prefixes fill 16% of its slots).
 * FIB6_SC_LEVELS is the shape's shortcut_levels. */
#define FIB6_SC_OFF (2048ull << 20)
/* Another table's (a tenant's) shortcut: 2^18 pairs, 4 MiB, after its
 * root (64 MiB) and its pool (28 MiB): crates/bpf/src/fib_arena.rs,
 * table_layout. */
#define FIB6_OTHER_SC_DELTA (92ull << 20)
#define FIB6_OTHER_SC_PAIRS_LOG2 18

/* BPF_MAP_TYPE_ARENA (Linux 6.9), which Debian 12's headers predate. */
#define FIB_MAP_TYPE_ARENA 33

struct {
	__uint(type, FIB_MAP_TYPE_ARENA);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, FIB_ARENA_PAGES);
} fib_arena SEC(".maps");

/* User-space address of the arena's first page: the fast path addresses
 * the arena through its low 32 bits. Written by the control plane after
 * loading. */
__u64 fib_arena_base SEC(".data.fib");

/* The arena's encoding of an entry (the control plane translates): a
 * next-hop id n is n << 1 (0: no route); a link to a group is the group's
 * byte offset in the arena | 1. A step to the next level is then one add
 * and one load: the entry plus the chunk's byte offset, computed beside
 * the walk, addresses the next entry. */
static __always_inline __u32 fib_read(__u64 addr)
{
	return *(__u32 __attribute__((address_space(1))) *)addr;
}

static __always_inline __u64 fib_read64(__u64 addr)
{
	return *(__u64 __attribute__((address_space(1))) *)addr;
}

/* The next entry after link `e`, for the chunk at byte offset `chunk4` of
 * its group; `base1` is the arena base minus 1 (the link's tag). */
static __always_inline __u32 fib_step(__u64 base1, __u32 e, __u32 chunk4)
{
	__u64 at = base1 + chunk4;

	/* Keeps clang from adding the entry first: then two adds would wait
	 * for the load instead of one. */
	asm volatile("" : "+r"(at));
	return fib_read(at + e);
}

/* Next-hop id for an IPv4 destination (host byte order) in the table
 * whose root is at byte offset `root` of the arena; 0: no route. */
static __always_inline __u32 fib4_lookup_at(__u64 root, __u32 daddr)
{
	__u64 base = fib_arena_base;
	/* Makes the arena this program's (the verifier needs the reference). */
	asm volatile("" :: "r"(&fib_arena));
	__u32 e = fib_read(base + root + ((__u64)(daddr >> 8) << 2));

	if (e & 1)
		e = fib_step(base - 1, e, (daddr & 0xff) << 2);
	return e >> 1;
}

/* ... in the main table. */
static __always_inline __u32 fib4_lookup(__u32 daddr)
{
	return fib4_lookup_at(FIB4_ROOT_OFF, daddr);
}

/* The low 64 bits of a destination, from its last 8 bytes in the packet
 * (network order). Read only by a walk that gets past bit 64 (a route
 * longer than /64): loaded up front, they were 7 instructions and a stack
 * spill on every lookup that left the root. */
static __always_inline __u64 fib6_low_bits(__u64 lo_be)
{
	return ((__u64)bpf_ntohl((__u32)lo_be) << 32) | bpf_ntohl((__u32)(lo_be >> 32));
}

/* One level of a walk: the entry after link `e` for the FIB6_STRIDE bits
 * of the destination from bit `start` (a constant). */
static __always_inline __u32 fib6_level(__u64 base1, __u32 e, __u64 hi, __u64 lo_be,
					const int start)
{
	__u64 word = start < 64 ? hi : fib6_low_bits(lo_be);
	__u32 chunk = (word >> (64 - FIB6_STRIDE - (start & 63))) & ((1u << FIB6_STRIDE) - 1);

	return fib_step(base1, e, chunk << 2);
}

/* The walk from a link `e` read at bit `from` (a constant, so the loop
 * unrolls) to a next hop. */
static __always_inline __u32 fib6_walk(__u64 base1, __u32 e, __u64 hi, __u64 lo_be,
				       const int from)
{
#pragma unroll
	for (int start = from; start < 128; start += FIB6_STRIDE) {
		if (!(e & 1))
			return e >> 1;
		e = fib6_level(base1, e, hi, lo_be, start);
	}
	return e & 1 ? 0 : e >> 1;
}

/* Address of the pair for key `k` in the shortcut at byte offset `sc` of
 * 2^log2 pairs, and the tag `k` has there. */
static __always_inline __u64 fib6_sc_pair(__u64 base, __u64 sc, __u32 log2, __u64 k)
{
	__u64 pair = (k ^ (k >> log2)) & ((1ull << log2) - 1);

	return base + sc + (pair << 4);
}

static __always_inline __u32 fib6_sc_tag(__u64 k, __u32 log2)
{
	return 0x80000000u | (__u32)(k >> log2);
}

/* Next-hop id for an IPv6 destination given as its high 64 bits (host byte
 * order) and its low 64 bits as they lie in memory (network order, loaded
 * as one word: swapped only by a walk that reaches them), in the table
 * whose root is at byte offset `root` and its shortcut at `sc` (2^log2
 * pairs); 0: no route. */
static __always_inline __u32 fib6_lookup_sc(__u64 root, __u64 sc, const int log2, __u64 hi,
					    __u64 lo_be)
{
	__u64 base = fib_arena_base;
	asm volatile("" :: "r"(&fib_arena));
	__u32 e = fib_read(base + root + ((hi >> (64 - FIB6_FIRST)) << 2));

	if (!(e & 1))
		return e >> 1;
	/* The shortcut's pairs for this /48 and (compact layout) this /40:
	 * both slots of a pair in one 16-byte run. Their addresses depend on
	 * the destination only, so the CPU loads them while the root entry is
	 * still on its way. */
	__u64 k48 = hi >> 16;
	__u64 at48 = fib6_sc_pair(base, sc, log2, k48);
	__u64 a0 = fib_read64(at48), a1 = fib_read64(at48 + 8);
	__u32 t48 = fib6_sc_tag(k48, log2);
#if FIB6_SC_LEVELS > 1
	__u64 k40 = (1ull << 48) | (hi >> 24);
	__u64 at40 = fib6_sc_pair(base, sc, log2, k40);
	__u64 b0 = fib_read64(at40), b1 = fib_read64(at40 + 8);
	__u32 t40 = fib6_sc_tag(k40, log2);
#endif

	/* One walk per level, from whichever slot matched. */
	if ((__u32)(a0 >> 32) == t48 || (__u32)(a1 >> 32) == t48)
		return fib6_walk(base - 1, (__u32)((__u32)(a0 >> 32) == t48 ? a0 : a1), hi, lo_be, 48);
#if FIB6_SC_LEVELS > 1
	if ((__u32)(b0 >> 32) == t40 || (__u32)(b1 >> 32) == t40)
		return fib6_walk(base - 1, (__u32)((__u32)(b0 >> 32) == t40 ? b0 : b1), hi, lo_be, 40);
#endif
	return fib6_walk(base - 1, e, hi, lo_be, FIB6_FIRST);
}

/* ... in the main table. */
static __always_inline __u32 fib6_lookup(__u64 hi, __u64 lo_be)
{
	return fib6_lookup_sc(FIB6_ROOT_OFF, FIB6_SC_OFF, FIB6_SC_PAIRS_LOG2, hi, lo_be);
}

/* ... in another table than main, its root at byte offset `root` of the
 * arena (its shortcut after its pool). */
static __always_inline __u32 fib6_lookup_other(__u64 root, __u64 hi, __u64 lo_be)
{
	return fib6_lookup_sc(root, root + FIB6_OTHER_SC_DELTA, FIB6_OTHER_SC_PAIRS_LOG2, hi,
			      lo_be);
}

/* The walk from a link `e` read at bit `from`, a value (FIB6_FIRST or a
 * shortcut level), not a constant: one unrolled walk whose levels before
 * `from` are skipped, where fib6_walk is a copy a level. */
static __always_inline __u32 fib6_walk_from(__u64 base1, __u32 e, __u64 hi, __u64 lo_be,
					    __u32 from)
{
#pragma unroll
	for (int start = FIB6_FIRST; start < 128; start += FIB6_STRIDE) {
		if (start < 48 && start < from)
			continue;
		if (!(e & 1))
			return e >> 1;
		e = fib6_level(base1, e, hi, lo_be, start);
	}
	return e & 1 ? 0 : e >> 1;
}

/* ... in any table, for the rule program's steps, where the lookup is
 * inlined in each of them: its shortcut's /48 probed as fib6_lookup_sc
 * probes it, then one walk from the level it gave (a walk a level, as
 * fib6_lookup_sc has, or the compact layout's /40 probe too, would not
 * fit the stack beside the router's frame; a call apiece cost more than
 * the shortcut saves them). */
static __always_inline __u32 fib6_lookup_step(__u64 root, __u64 hi, __u64 lo_be)
{
	__u64 base = fib_arena_base;
	asm volatile("" :: "r"(&fib_arena));
	__u32 e = fib_read(base + root + ((hi >> (64 - FIB6_FIRST)) << 2));

	if (!(e & 1))
		return e >> 1;
	int main = root == FIB6_ROOT_OFF;
	__u64 sc = main ? FIB6_SC_OFF : root + FIB6_OTHER_SC_DELTA;
	__u32 log2 = main ? FIB6_SC_PAIRS_LOG2 : FIB6_OTHER_SC_PAIRS_LOG2;
	__u64 k48 = hi >> 16;
	__u64 at48 = fib6_sc_pair(base, sc, log2, k48);
	__u64 a0 = fib_read64(at48), a1 = fib_read64(at48 + 8);
	__u32 t48 = fib6_sc_tag(k48, log2);
	__u32 from = FIB6_FIRST;

	if ((__u32)(a0 >> 32) == t48) {
		e = (__u32)a0;
		from = 48;
	} else if ((__u32)(a1 >> 32) == t48) {
		e = (__u32)a1;
		from = 48;
	}
	return fib6_walk_from(base - 1, e, hi, lo_be, from);
}

/* ... in any table (main's root is FIB6_ROOT_OFF). */
static __always_inline __u32 fib6_lookup_at(__u64 root, __u64 hi, __u64 lo_be)
{
	return root == FIB6_ROOT_OFF ? fib6_lookup(hi, lo_be) : fib6_lookup_other(root, hi, lo_be);
}

#endif
