/* Header checks for the fast path: which addresses the kernel must see
 * (it drops martians, answers for multicast and link-local scope). The
 * IPv4 header's checksum is csum.h's. */
#ifndef LINERATE_PARSE_H
#define LINERATE_PARSE_H

#include <linux/types.h>

#include "csum.h"

/* An 802.1Q or 802.1ad tag after the MACs (the kernel's own definition
 * is not in its UAPI): the TPID is the Ethernet header's h_proto. */
#define VLAN_HLEN 4
#define VLAN_VID_MASK 0x0fff
struct vlan_hdr {
	__be16 h_vlan_TCI;
	__be16 h_vlan_encapsulated_proto;
};

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
