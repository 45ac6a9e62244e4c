/* NAT for established connections (docs/firewall-stateful.md "NAT"): a
 * family whose ruleset has nat chains (FW_READ_NAT) has every packet's
 * connection found in the kernel's table before the route lookup, and
 * its addresses and ports rewritten as the kernel's entry maps them.
 *
 * The kernel stays the owner of every mapping: a connection's first
 * packets go to it (no entry, or one not yet established and assured),
 * its nat chains choose the mapping, and from then on the entry holds it
 * (the kernel's flowtable reads it from there too, nf_flow_table_core.c).
 * What the kernel would do to a packet of the entry's direction `dir`
 * (nf_nat_packet, nf_nat_manip_pkt): the destination rewritten at
 * prerouting if the entry is DNAT'd in that direction (IPS_DST_NAT for
 * the original, IPS_SRC_NAT for the reply), before the route lookup and
 * the forward chain; the source at postrouting if SNAT'd that way
 * (IPS_SRC_NAT for the original, IPS_DST_NAT for the reply), after them;
 * each to the inverse of the other direction's tuple
 * (nf_ct_invert_tuple). The checksums patched by the kernel's own
 * arithmetic in the kernel's order (nf_nat_ipv4_manip_pkt, tcp_manip_pkt,
 * udp_manip_pkt): the port, the transport checksum for the address and
 * the port, then the IP header's; a UDP checksum of 0 left 0 and one that
 * comes to 0 sent as 0xffff (CSUM_MANGLED_0); the TTL decrement between
 * the two rewrites, as ip_forward does it.
 *
 * Found once in the kernel's table (about 200 ns), a connection is kept
 * in the stage's own ways (`nat_cache4`, `nat_cache6`), mapped or not
 * (with nat chains loaded the kernel makes every entry a null binding):
 * one way per direction, found by the direction's tuple as its packets
 * arrive (the two are not each other's inverse once mapped), holding the
 * rewrite. The connection cache's rules hold for them (router/ct_cache.h,
 * router/ct_judge.h): a way per set's victim, forgotten at a FIN or RST,
 * at the entry's destroy event or when the sweep finds the entry gone,
 * the kernel's timeout kept from `seen` by the sweep. */
#ifndef LINERATE_NAT_H
#define LINERATE_NAT_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>

#include "kernel.h"
#include "parse.h"
#include "router/maps.h"
#include "router/ct_judge.h"

/* The kernel's checksum arithmetic (include/net/checksum.h; x86's
 * csum_add and csum_fold compute the same): 32-bit ones'-complement adds,
 * folded to 16 bits and complemented. Values as they lie in memory. */
static __always_inline __u32 nat_csum_add(__u32 a, __u32 b)
{
	__u32 r = a + b;

	return r + (r < b);
}

static __always_inline __u16 nat_csum_fold(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)~s;
}

/* csum_replace4, and inet_proto_csum_replace4 of a packet whose checksum
 * is not left to the device: `from` taken out of checksum `sum`, `to` put
 * in; the new checksum. (Values in registers: one load and one store of
 * a checksum for all its steps, the kernel's steps each.) */
static __always_inline __u16 nat_csum4(__u16 sum, __u32 from, __u32 to)
{
	return nat_csum_fold(nat_csum_add(nat_csum_add(~(__u32)sum, ~from), to));
}

/* inet_proto_csum_replace16: an IPv6 address in a transport checksum
 * (csum_partial over the eight words: the same 16-bit sum as adding them
 * one by one, never 0 as it starts from a complement with its high half
 * set). */
static __always_inline __u16 nat_csum16(__u16 sum, const __u32 *from, const __u32 *to)
{
	__u64 s = ~(__u32)sum;

#pragma unroll
	for (int i = 0; i < 4; i++)
		s += (__u32)~from[i] + (__u64)to[i];
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffffffff) + (s >> 32);
	return nat_csum_fold((__u32)s);
}

/* The frame's packet (its headers at their places, frame_l3_off, checked for 4
 * transport bytes), its protocol `l4proto`; 0 past the frame. */
static __always_inline int nat_packet(struct xdp_md *ctx, __u8 l4proto, const int v6,
				      struct ct_packet *p)
{
	const __u8 *data = (const __u8 *)(long)ctx->data;
	const __u8 *end = (const __u8 *)(long)ctx->data_end;
	if (data + ETH_HLEN > end)
		return 0;
	const __u8 *l3 = data + frame_l3_off(data);
	const __u8 *l4 = l3 + (v6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr));

	if (l4 + 4 > end)
		return 0;
	*p = ct_packet_of(l3, v6, *(const __be16 *)l4, *(const __be16 *)(l4 + 2), l4proto);
	return 1;
}

_Static_assert(sizeof(struct nat_way4) == 32 && __builtin_offsetof(struct nat_way4, l4proto) == 16,
	       "nat_way4: a set's two in one line, its key where a ct_way4's is");
_Static_assert(sizeof(struct nat_way6) == 128 && __builtin_offsetof(struct nat_way6, key) == 16,
	       "nat_way6: two lines, its first a ct_slot's");

static __always_inline int nat_key4_is(struct nat_way4 *w, const struct ct_key4 *k)
{
	return !((*(__u64 *)&w->saddr ^ k->ab) | (*(__u32 *)&w->sport ^ k->ports) |
		 (w->l4proto ^ k->l4proto));
}

static __always_inline int nat_key6_is(struct nat_way6 *w, const struct ct_flow_key *k)
{
	return ct_flow_key_eq(&w->key, k);
}

static __always_inline void nat_put4(struct nat_way4 *w, const struct ct_key4 *k)
{
	*(__u64 *)&w->saddr = k->ab;
	*(__u32 *)&w->sport = k->ports;
	w->l4proto = k->l4proto;
}

static __always_inline void nat_put6(struct nat_way6 *w, const struct ct_flow_key *k)
{
	__builtin_memcpy(&w->key, k, sizeof(*k));
}

/* What a NAT way holds for its direction: the `ct` byte, and the
 * rewrite (struct ct_nat). An IPv4 way's one rewrite is read into both
 * sides (only the one `manip` names is used). */
#define NAT_READ4(w, n)                                                 \
	do {                                                            \
		(n)->ct = (w)->ct;                                      \
		(n)->manip = (w)->manip;                                \
		(n)->sport = (n)->dport = (w)->to_port;                 \
		(n)->saddr[0] = (n)->daddr[0] = (w)->to_addr;           \
	} while (0)
#define NAT_WRITE4(w, n)                                                \
	do {                                                            \
		int dst_ = (n)->manip & CT_NAT_DST;                     \
		(w)->ct = (n)->ct;                                      \
		(w)->manip = (n)->manip;                                \
		(w)->to_port = dst_ ? (n)->dport : (n)->sport;          \
		(w)->to_addr = dst_ ? (n)->daddr[0] : (n)->saddr[0];    \
	} while (0)
/* Whether an IPv4 way holds rewrite `n`: one side at most. */
#define NAT_FITS4(n) ((n)->manip != (CT_NAT_DST | CT_NAT_SRC))
#define NAT_READ6(w, n)                                                \
	do {                                                           \
		(n)->ct = (w)->ct;                                     \
		(n)->manip = (w)->manip;                               \
		(n)->sport = (w)->to_sport;                            \
		(n)->dport = (w)->to_dport;                            \
		__builtin_memcpy((n)->saddr, (w)->to_saddr, 16);       \
		__builtin_memcpy((n)->daddr, (w)->to_daddr, 16);       \
	} while (0)
#define NAT_WRITE6(w, n)                                               \
	do {                                                           \
		(w)->ct = (n)->ct;                                     \
		(w)->manip = (n)->manip;                               \
		(w)->to_sport = (n)->sport;                            \
		(w)->to_dport = (n)->dport;                            \
		__builtin_memcpy((w)->to_saddr, (n)->saddr, 16);       \
		__builtin_memcpy((w)->to_daddr, (n)->daddr, 16);       \
	} while (0)

CT_WAYS(_nat4, nat_cache4, struct nat_way4, struct ct_key4, nat_key4_is, nat_put4, l4proto,
	struct ct_nat, NAT_READ4, NAT_WRITE4)
CT_WAYS(_nat6, nat_cache6, struct nat_way6, struct ct_flow_key, nat_key6_is, nat_put6,
	key.l4proto, struct ct_nat, NAT_READ6, NAT_WRITE6)

/* Direction `i`'s key (the scratch's, of its family) from entry `ct`'s
 * tuple for it. (Constant indexes: the verifier takes no other into the
 * entry.) */
#define NAT_KEY_OF(sc, ct, i, l4proto, v6)                                               \
	do {                                                                             \
		const struct nf_conntrack_tuple *t_ = &(ct)->tuplehash[i].tuple;         \
		if (v6) {                                                                \
			__builtin_memset(&(sc)->key6, 0, sizeof((sc)->key6));           \
			for (int w_ = 0; w_ < 4; w_++) {                                 \
				((__u32 *)(sc)->key6.a)[w_] = t_->src.u3.all[w_];        \
				((__u32 *)(sc)->key6.b)[w_] = t_->dst.u3.all[w_];        \
			}                                                                \
			(sc)->key6.aport = t_->src.u.all;                                \
			(sc)->key6.bport = t_->dst.u.all;                                \
			(sc)->key6.l4proto = (l4proto);                                  \
			(sc)->key6.ipv6 = 1;                                             \
		} else {                                                                 \
			(sc)->key4.ab = (__u64)t_->src.u3.all[0] |                       \
					(__u64)t_->dst.u3.all[0] << 32;                  \
			(sc)->key4.ports = (__u32)t_->src.u.all |                        \
					   (__u32)t_->dst.u.all << 16;                   \
			(sc)->key4.l4proto = (l4proto);                                  \
		}                                                                        \
	} while (0)

/* What the kernel does to a packet of entry `ct`'s direction `i` (see
 * the top: with its `status`), into `n`: the `ct` byte, and each rewrite
 * to the inverse of the other direction's tuple. */
#define NAT_OF(ct, i, status, n)                                                          \
	do {                                                                              \
		const struct nf_conntrack_tuple *o_ = &(ct)->tuplehash[1 - (i)].tuple;    \
		(n)->ct = FW_CT_ESTABLISHED | ((i) ? FW_CT_REPLY : 0);                    \
		(n)->manip = ((status) & ((i) ? IPS_SRC_NAT : IPS_DST_NAT) ? CT_NAT_DST : 0) | \
			     ((status) & ((i) ? IPS_DST_NAT : IPS_SRC_NAT) ? CT_NAT_SRC : 0);  \
		for (int w_ = 0; w_ < 4; w_++) {                                          \
			(n)->daddr[w_] = o_->src.u3.all[w_];                              \
			(n)->saddr[w_] = o_->dst.u3.all[w_];                              \
		}                                                                         \
		(n)->dport = o_->src.u.all;                                               \
		(n)->sport = o_->dst.u.all;                                               \
	} while (0)

/* The NAT stage's first look: the packet's direction in the stage's
 * ways (`l4proto` its protocol). The `ct` byte, its rewrite in the
 * scratch's `nat`, if found there; 0 if the kernel's table is to be
 * asked (nat_kernel), or why not in bits 8-15. */
static __always_inline int nat_cached(struct xdp_md *ctx, __u32 l4proto, const int v6)
{
	__u32 zero = 0;
	struct fw_state *st = bpf_map_lookup_elem(&fw_state, &zero);
	struct ct_scratch *sc = bpf_map_lookup_elem(&ct_scratch, &zero);
	struct ct_packet p;

	if (!st || !sc)
		return R_PASS_CT_OFF << 8;
	__u32 bits = st->ct_bits[v6];
	if (!ct_available() || !bits)
		return R_PASS_CT_OFF << 8;
	if (!nat_packet(ctx, l4proto, v6, &p))
		return R_PASS_CT_INVALID << 8;
	__u64 now = bpf_jiffies64();
	int found;

	if (v6) {
		nat_key6_of(&p, &sc->key6);
		found = ct_find_nat6(ct_set6(&sc->key6, bits), &sc->key6, now, &sc->nat);
	} else {
		nat_key4_of(&p, &sc->key4);
		found = ct_find_nat4(ct_set4(&sc->key4, bits), &sc->key4, now, &sc->nat);
	}
	/* (A miss leaves what it read of the set's ways in `nat`: nat_kernel
	 * writes it whole.) */
	return found ? sc->nat.ct : 0;
}

/* nat_kernel's `arg`: the protocol, and NAT_FORGET for a segment that
 * ends its connection (a FIN or RST, which goes to the kernel): both
 * directions' ways emptied, the tuples the kernel's entry has for them,
 * or the packet's own if it has none. */
#define NAT_FORGET (1 << 8)

/* The NAT stage's second look, for a direction its ways lack: the
 * kernel's table. Fills the scratch's `nat` with what the kernel would
 * do, and answers as ct_miss does (the `ct` byte, or why not in bits
 * 8-15); with FW_CT_TCP_CARRY an established TCP connection whose
 * windows the kernel checks gets its byte and `sc->offering`. A
 * connection the fast path may carry is kept, both directions at once. */
static __always_inline int nat_kernel(struct xdp_md *ctx, __u32 arg, const int v6)
{
	__u8 l4proto = arg;
	__u32 zero = 0;
	struct fw_state *st = bpf_map_lookup_elem(&fw_state, &zero);
	struct ct_scratch *sc = bpf_map_lookup_elem(&ct_scratch, &zero);
	struct ct_packet p;

	if (!st || !sc)
		return R_PASS_CT_OFF << 8;
	__u32 ct_flags = st->ct_flags, ct_idle = st->ct_idle, bits = st->ct_bits[v6];
	__u32 timeout_ms = st->ct_timeout_ms[l4proto == IPPROTO_TCP];
	if (!ct_available() || !bits)
		return R_PASS_CT_OFF << 8;
	if (!nat_packet(ctx, l4proto, v6, &p))
		return R_PASS_CT_INVALID << 8;
	struct bpf_ct_opts___local *opts = &sc->opts;
	struct bpf_sock_tuple *t = &sc->tuple;
	__u32 size;

	__builtin_memset(opts, 0, sizeof(*opts));
	opts->netns_id = -1;
	opts->l4proto = l4proto;
	if (v6) {
		__builtin_memcpy(t->ipv6.saddr, p.saddr, 16);
		__builtin_memcpy(t->ipv6.daddr, p.daddr, 16);
		t->ipv6.sport = p.sport;
		t->ipv6.dport = p.dport;
		size = sizeof(t->ipv6);
	} else {
		t->ipv4.saddr = p.saddr[0];
		t->ipv4.daddr = p.daddr[0];
		t->ipv4.sport = p.sport;
		t->ipv4.dport = p.dport;
		size = sizeof(t->ipv4);
	}
	struct nf_conn *ct = bpf_xdp_ct_lookup(ctx, t, size, opts, sizeof(*opts));
	if (arg & NAT_FORGET) {
		if (!ct) {
			if (v6) {
				nat_key6_of(&p, &sc->key6);
				ct_forget_nat6(ct_set6(&sc->key6, bits), &sc->key6);
			} else {
				nat_key4_of(&p, &sc->key4);
				ct_forget_nat4(ct_set4(&sc->key4, bits), &sc->key4);
			}
			return R_PASS_CT_NONE << 8;
		}
#define NAT_FORGET_DIR(i)                                                    \
	do {                                                                 \
		NAT_KEY_OF(sc, ct, i, l4proto, v6);                          \
		if (v6)                                                      \
			ct_forget_nat6(ct_set6(&sc->key6, bits), &sc->key6); \
		else                                                         \
			ct_forget_nat4(ct_set4(&sc->key4, bits), &sc->key4); \
	} while (0)
		NAT_FORGET_DIR(0);
		NAT_FORGET_DIR(1);
#undef NAT_FORGET_DIR
		bpf_ct_release(ct);
		return R_PASS_CT_STATE << 8;
	}
	if (!ct)
		return R_PASS_CT_NONE << 8;
	enum reason carried = ct_carried(ct, l4proto, ct_flags, CT_NOT_CARRIED_NAT);
	unsigned long status = ct->status;
	/* The packet goes the reply way unless it leaves from the original
	 * direction's source. */
	int reply = ct->tuplehash[0].tuple.src.u3.all[0] != p.saddr[0] ||
		    ct->tuplehash[0].tuple.src.u.all != p.sport;
	if (v6)
		reply = reply || ct->tuplehash[0].tuple.src.u3.all[1] != p.saddr[1] ||
			ct->tuplehash[0].tuple.src.u3.all[2] != p.saddr[2] ||
			ct->tuplehash[0].tuple.src.u3.all[3] != p.saddr[3];
	if (carried == R_FORWARDED || carried == R_PASS_CT_WINDOW) {
		if (reply)
			NAT_OF(ct, 1, status, &sc->nat);
		else
			NAT_OF(ct, 0, status, &sc->nat);
	}
	if (carried == R_FORWARDED) {
		__u64 now = bpf_jiffies64();

		/* Both directions, each under its tuple as it arrives. */
#define NAT_KEEP_DIR(i)                                                                     \
	do {                                                                                \
		NAT_KEY_OF(sc, ct, i, l4proto, v6);                                         \
		NAT_OF(ct, i, status, &sc->keeping);                                        \
		if (v6)                                                                     \
			ct_keep_nat6(ct_set6(&sc->key6, bits), &sc->key6, &sc->keeping, now, \
				     ct_idle);                                              \
		else if (NAT_FITS4(&sc->keeping))                                           \
			ct_keep_nat4(ct_set4(&sc->key4, bits), &sc->key4, &sc->keeping, now, \
				     ct_idle);                                              \
	} while (0)
		NAT_KEEP_DIR(0);
		NAT_KEEP_DIR(1);
#undef NAT_KEEP_DIR
		if (timeout_ms)
			bpf_ct_change_timeout(ct, timeout_ms);
	}
	bpf_ct_release(ct);
	if (carried == R_PASS_CT_WINDOW && (ct_flags & FW_CT_TCP_CARRY)) {
		sc->offering = 1;
		carried = R_FORWARDED;
	}
	if (carried != R_FORWARDED)
		return carried << 8;
	return sc->nat.ct;
}

/* Both looks for each family, each verified once (global). */
__attribute__((noinline)) int nat_cached4(struct xdp_md *ctx, __u32 l4proto)
{
	return nat_cached(ctx, l4proto, 0);
}

__attribute__((noinline)) int nat_cached6(struct xdp_md *ctx, __u32 l4proto)
{
	return nat_cached(ctx, l4proto, 1);
}

__attribute__((noinline)) int nat_kernel4(struct xdp_md *ctx, __u32 arg)
{
	return nat_kernel(ctx, arg, 0);
}

__attribute__((noinline)) int nat_kernel6(struct xdp_md *ctx, __u32 arg)
{
	return nat_kernel(ctx, arg, 1);
}

/* ct_segment as a function of its own for each family, verified once
 * (global): its packet checks, inlined before the route lookup, would
 * leave each path's packet pointers with a range of their own for the
 * verifier to follow through the rest. The headers at their places;
 * `arg` the IP payload's bytes, and the protocol in bits 16-23. Its
 * reason, and the TCP flags in bits 8-15. */
static __always_inline int ct_segment_of(struct xdp_md *ctx, __u32 arg, const int v6)
{
	const __u8 *data = (const __u8 *)(long)ctx->data;
	const __u8 *end = (const __u8 *)(long)ctx->data_end;
	__u32 zero = 0;
	struct fw_state *st = bpf_map_lookup_elem(&fw_state, &zero);
	__u8 tcp_flags = 0;

	if (!st)
		return R_PASS_CT_OFF;
	if (data + ETH_HLEN > end)
		return R_PASS_CT_INVALID;
	const __u8 *l3 = data + frame_l3_off(data);
	const __u8 *l4 = l3 + (v6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr));
	if (l4 > end)
		return R_PASS_CT_INVALID;
	enum reason kind = ct_segment(ctx, l3, v6, l4, arg & 0xffff, arg >> 16, st, &tcp_flags);
	return kind | (__u32)tcp_flags << 8;
}

__attribute__((noinline)) int ct_segment4(struct xdp_md *ctx, __u32 arg)
{
	return ct_segment_of(ctx, arg, 0);
}

__attribute__((noinline)) int ct_segment6(struct xdp_md *ctx, __u32 arg)
{
	return ct_segment_of(ctx, arg, 1);
}

/* A judged frame's first step, before the route lookup, where its
 * family's ruleset has nat chains (`l3` its IP header of family `v6`,
 * `l4`, `avail`, `l4proto` as for ct_segment): the NAT stage. The
 * packet's connection found (the stage's ways, else the kernel's table), its
 * mapping read into the CPU's ct_scratch with the generation it was read
 * by (fw_judge holds the frame to it), and the destination the route
 * lookup takes mapped: `daddr` (IPv4, host order) or `dhi` and `dlo` (as
 * fib6_lookup takes them). R_FORWARDED, or why the frame goes to the
 * kernel. Only for interfaces flagged IFACE_NAT4/6: others cost nothing. */
static __always_inline enum reason fw_nat(struct xdp_md *ctx, const void *l3, const int v6,
					  const __u8 *l4, __u32 avail, __u8 l4proto, __u32 *daddr,
					  __u64 *dhi, __u64 *dlo)
{
	__u32 zero = 0;
	struct fw_state *st = bpf_map_lookup_elem(&fw_state, &zero);

	if (!st)
		return R_PASS_FW_MISS;
	__u32 generation = *(volatile __u32 *)&st->generation;
	struct ct_scratch *sc = bpf_map_lookup_elem(&ct_scratch, &zero);
	if (!sc)
		return R_PASS_FW_MISS;
	/* (Written for every frame that comes here: fw_judge takes the
	 * scratch for this frame's only where it did.) */
	sc->generation = generation;
	sc->nat.manip = 0;
	sc->offering = 0;
	sc->nat_read = !!(st->reads[generation & 1][v6].fields & FW_READ_NAT);
	if (!sc->nat_read)
		return R_FORWARDED;
	/* (ct_segment in a function of its own: its packet checks, inlined
	 * here before the route lookup, would leave each path's packet
	 * pointers with a range of their own for the verifier to follow
	 * through the rest.) */
	__u32 arg = (avail & 0xffff) | (__u32)l4proto << 16;
	int seg = v6 ? ct_segment6(ctx, arg) : ct_segment4(ctx, arg);
	enum reason kind = seg & 0xff;
	if (kind) {
		/* A FIN or RST ends what the fast path may carry: the kernel's
		 * entry leaves ESTABLISHED. (A SYN finds none, or one the
		 * kernel reopens.) */
		if (kind == R_PASS_CT_STATE && ((seg >> 8) & (TCPF_FIN | TCPF_RST)))
			v6 ? nat_kernel6(ctx, l4proto | NAT_FORGET) :
			     nat_kernel4(ctx, l4proto | NAT_FORGET);
		return kind;
	}
	int r = v6 ? nat_cached6(ctx, l4proto) : nat_cached4(ctx, l4proto);
	if (!r)
		r = v6 ? nat_kernel6(ctx, l4proto) : nat_kernel4(ctx, l4proto);
	if (!(r & 0xff))
		return CT_MISS_WHY(r);
	if (sc->nat.manip & CT_NAT_DST) {
		if (v6) {
			*dhi = ((__u64)bpf_ntohl(sc->nat.daddr[0]) << 32) | bpf_ntohl(sc->nat.daddr[1]);
			*dlo = *(const __u64 *)&sc->nat.daddr[2];
		} else {
			*daddr = bpf_ntohl(sc->nat.daddr[0]);
		}
	}
	return R_FORWARDED;
}

/* The transport checksum's place, for the protocols the stage carries. */
static __always_inline __u16 *nat_l4_check(__u8 *l4, __u8 l4proto, const void *end)
{
	if (l4proto == IPPROTO_TCP) {
		if (l4 + 18 > (__u8 *)end)
			return 0;
		return (__u16 *)(l4 + 16);
	}
	if (l4 + 8 > (__u8 *)end)
		return 0;
	return (__u16 *)(l4 + 6);
}

/* One rewrite of a packet (`l3` its IP header of family `v6`; `which`:
 * CT_NAT_DST or CT_NAT_SRC) as nf_nat_ipv4_manip_pkt and
 * nf_nat_ipv6_manip_pkt do it: the port, the transport checksum for the
 * address and the port (UDP's only if it has one), then the address and,
 * for IPv4, the header's checksum. */
static __always_inline void nat_manip(void *l3, const int v6, __u8 *l4, __u16 *check,
				      __u8 l4proto, const struct ct_nat *n, const int which)
{
	struct iphdr *ip = l3;
	struct ipv6hdr *ip6 = l3;
	__be16 *port = (__be16 *)l4 + (which == CT_NAT_DST ? 1 : 0);
	__be16 newport = which == CT_NAT_DST ? n->dport : n->sport;
	__u32 *addr = v6 ? (which == CT_NAT_DST ? ip6->daddr.in6_u.u6_addr32 :
						  ip6->saddr.in6_u.u6_addr32) :
			   (which == CT_NAT_DST ? &ip->daddr : &ip->saddr);
	const __u32 *newaddr = which == CT_NAT_DST ? n->daddr : n->saddr;
	__be16 oldport = *port;
	__u16 c = *check;

	if (l4proto == IPPROTO_TCP || c) {
		c = v6 ? nat_csum16(c, addr, newaddr) : nat_csum4(c, addr[0], newaddr[0]);
		c = nat_csum4(c, oldport, newport);
		*check = l4proto == IPPROTO_UDP && !c ? 0xffff : c;
	}
	*port = newport;
	if (v6) {
		__builtin_memcpy(addr, newaddr, 16);
	} else {
		ip->check = nat_csum4(ip->check, addr[0], newaddr[0]);
		addr[0] = newaddr[0];
	}
}

/* Rewrites a forwarded frame (`v6`: IPv6) as the kernel would between
 * prerouting and postrouting: the destination, the TTL or hop limit, the
 * source, each where its CPU's `ct_scratch.nat` says; the frame's headers
 * at their places (frame_l3_off). 0 if they run past it. */
static __always_inline int nat_rewrite_of(struct xdp_md *ctx, __u8 l4proto, const int v6)
{
	__u8 *data = (__u8 *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct ct_scratch *sc = bpf_map_lookup_elem(&ct_scratch, &zero);

	if (!sc || (void *)(data + ETH_HLEN) > end)
		return 0;
	__u8 *l3 = data + frame_l3_off(data);
	__u8 *l4 = l3 + (v6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr));
	if ((void *)(l4 + 4) > end)
		return 0;
	__u16 *check = nat_l4_check(l4, l4proto, end);
	if (!check)
		return 0;
	__u8 m = sc->nat.manip;
	if (m & CT_NAT_DST)
		nat_manip(l3, v6, l4, check, l4proto, &sc->nat, CT_NAT_DST);
	if (v6)
		((struct ipv6hdr *)l3)->hop_limit--;
	else
		ipv4_decrease_ttl((struct iphdr *)l3);
	if (m & CT_NAT_SRC)
		nat_manip(l3, v6, l4, check, l4proto, &sc->nat, CT_NAT_SRC);
	return 1;
}

/* nat_rewrite_of for the protocol in `proto_v6`'s low byte, IPv6 if bit
 * 8; global (verified once). */
__attribute__((noinline)) int nat_rewrite(struct xdp_md *ctx, __u32 proto_v6)
{
	return proto_v6 >> 8 ? nat_rewrite_of(ctx, proto_v6, 1) : nat_rewrite_of(ctx, proto_v6, 0);
}

#endif
