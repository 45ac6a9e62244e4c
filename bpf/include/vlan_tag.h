/* A frame's outer VLAN tag taken off and put on, the MACs moved past it:
 * the lab's generator tags what it sends, its receiver takes what a DUT's
 * VLAN device sent. (The router leaves a tag in place and writes the
 * egress's over it: router_vlan, bpf/router/router.bpf.c.) */
#ifndef LINERATE_VLAN_TAG_H
#define LINERATE_VLAN_TAG_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#ifndef ETH_P_8021AD
#define ETH_P_8021AD 0x88A8
#endif
#define VLAN_TAG_LEN 4

/* Pops an 802.1Q or 802.1ad tag: its four bytes as they were on the wire
 * (TPID, TCI), or 0 for a frame without one (a tag never reads 0: its
 * TPID does not). */
static __always_inline __u32 vlan_tag_pop(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;

	if ((void *)(p + ETH_HLEN + VLAN_TAG_LEN) > end)
		return 0;
	__be16 tpid = *(__be16 *)(p + 2 * ETH_ALEN);
	if (tpid != bpf_htons(ETH_P_8021Q) && tpid != bpf_htons(ETH_P_8021AD))
		return 0;
	/* Word moves: unaligned packet access is the JIT's to do, and bytes
	 * would spill. */
	__u64 dst_src = *(__u64 *)p;
	__u32 src_end = *(__u32 *)(p + 8);
	__u32 tag = *(__u32 *)(p + 2 * ETH_ALEN);

	if (bpf_xdp_adjust_head(ctx, VLAN_TAG_LEN))
		return 0;
	p = (void *)(long)ctx->data;
	if ((void *)(p + 12) > (void *)(long)ctx->data_end)
		return 0;
	*(__u64 *)p = dst_src;
	*(__u32 *)(p + 8) = src_end;
	return tag;
}

/* Pushes `tag` (as on the wire) after the MACs: 0 if the frame has no
 * room before it or no Ethernet header. */
static __always_inline int vlan_tag_push(struct xdp_md *ctx, __u32 tag)
{
	if (bpf_xdp_adjust_head(ctx, -VLAN_TAG_LEN))
		return 0;
	__u8 *p = (void *)(long)ctx->data;
	if ((void *)(p + ETH_HLEN + VLAN_TAG_LEN) > (void *)(long)ctx->data_end)
		return 0;
	/* Ascending: nothing is read after it was overwritten. */
	*(__u64 *)p = *(__u64 *)(p + VLAN_TAG_LEN);
	*(__u32 *)(p + 8) = *(__u32 *)(p + VLAN_TAG_LEN + 8);
	*(__u32 *)(p + 2 * ETH_ALEN) = tag;
	return 1;
}

#endif
