/* Header checks for the fast path: which addresses the kernel must see
 * (it drops martians, answers for multicast and link-local scope). The
 * IPv4 header's checksum is csum.h's. */
#ifndef LINERATE_PARSE_H
#define LINERATE_PARSE_H

#include <linux/types.h>
#include <bpf/bpf_endian.h>

#include "csum.h"

/* An 802.1Q or 802.1ad tag after the MACs (the kernel's own definition
 * is not in its UAPI): the TPID is the Ethernet header's h_proto. */
#define VLAN_HLEN 4
#define VLAN_VID_MASK 0x0fff
struct vlan_hdr {
	__be16 h_vlan_TCI;
	__be16 h_vlan_encapsulated_proto;
};

/* Where the IP header of a frame the router routes begins, its first 14
 * bytes checked: after the MACs, the tag of a frame routed as a VLAN
 * device (the router leaves it in place: router.bpf.c, route_frame) and
 * the EtherType. A TPID where the EtherType would be is 4 bytes more,
 * found without a branch: a branch would be two paths through everything
 * after it for the verifier. */
static __always_inline __u32 frame_l3_off(const __u8 *data)
{
	__u16 type = *(const __u16 *)(data + 12);
	__u64 q = (__u64)(type ^ bpf_htons(0x8100)) - 1;
	__u64 ad = (__u64)(type ^ bpf_htons(0x88a8)) - 1;

	/* x - 1 has its top bit set for x == 0 alone (x below 2^16); hidden
	 * from the compiler, which would compare and branch. */
	asm volatile("" : "+r"(q), "+r"(ad));
	return 14 + (((q | ad) >> 63) << 2);
}

/* IPv4 addresses (host order) the fast path never forwards to or from:
 * 0/8, 127/8, multicast and above (224/3, so also 240/4 and broadcast). */
static __always_inline int ipv4_special(__u32 a)
{
	__u32 top = a >> 24;
	return top == 0 || top == 127 || top >= 224;
}

/* IPv6 (high 64 bits, host order): multicast ff00::/8, link-local
 * fe80::/10, and ::/64 (unspecified, loopback, mapped). */
static __always_inline int ipv6_special(__u64 hi)
{
	return (hi >> 56) == 0xff || (hi >> 54) == (0xfe80 >> 6) || hi == 0;
}

#endif
