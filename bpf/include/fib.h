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

#define FIB_CHILD 0x80000000u

/* IPv4: DIR-24-8. The root's 2^24 entries as 65536 rows of 256 (key = top
 * 16 bits); a group is 256 entries (the last 8 bits). */
#define FIB4_ROOT_ROWS 65536
#define FIB4_GROUPS 24576
/* IPv6: 16 bits, then 4 at a time. The root's 2^16 entries as 256 rows of
 * 256 (key = top 8 bits); a group is 16 entries, one cache line. */
#define FIB6_ROOT_ROWS 256
#define FIB6_GROUPS 917504

struct fib_row256 {
	__u32 e[256];
};

struct fib_group16 {
	__u32 e[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FIB4_ROOT_ROWS);
	__type(key, __u32);
	__type(value, struct fib_row256);
} fib4_root SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FIB4_GROUPS);
	__type(key, __u32);
	__type(value, struct fib_row256);
} fib4_groups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FIB6_ROOT_ROWS);
	__type(key, __u32);
	__type(value, struct fib_row256);
} fib6_root SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FIB6_GROUPS);
	__type(key, __u32);
	__type(value, struct fib_group16);
} fib6_groups SEC(".maps");

/* Next-hop id for an IPv4 destination (host byte order); 0: no route. */
static __always_inline __u32 fib4_lookup(__u32 daddr)
{
	__u32 key = daddr >> 16;
	struct fib_row256 *row = bpf_map_lookup_elem(&fib4_root, &key);

	if (!row)
		return 0;
	__u32 e = row->e[(daddr >> 8) & 0xff];
	if (!(e & FIB_CHILD))
		return e;
	key = e & ~FIB_CHILD;
	row = bpf_map_lookup_elem(&fib4_groups, &key);
	if (!row)
		return 0;
	return row->e[daddr & 0xff];
}

/* Next-hop id for an IPv6 destination given as its high and low 64 bits
 * (host byte order); 0: no route. At most 28 group reads (a /128). */
static __always_inline __u32 fib6_lookup(__u64 hi, __u64 lo)
{
	__u32 key = hi >> 56;
	struct fib_row256 *row = bpf_map_lookup_elem(&fib6_root, &key);

	if (!row)
		return 0;
	__u32 e = row->e[(hi >> 48) & 0xff];
	/* Nibble i holds bits 4i..4i+3: 4..15 in hi, 16..31 in lo. */
	for (int i = 4; i < 32; i++) {
		if (!(e & FIB_CHILD))
			return e;
		__u32 g = e & ~FIB_CHILD;
		struct fib_group16 *grp = bpf_map_lookup_elem(&fib6_groups, &g);
		if (!grp)
			return 0;
		__u64 word = i < 16 ? hi : lo;
		__u32 shift = 60 - 4 * (i & 15);
		e = grp->e[(word >> shift) & 0xf];
	}
	return e & FIB_CHILD ? 0 : e;
}

#endif
