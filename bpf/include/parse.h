/* Header checks for the fast path: which addresses the kernel must see
 * (it drops martians, answers for multicast and link-local scope), and the
 * IPv4 header checksum. */
#ifndef LINERATE_PARSE_H
#define LINERATE_PARSE_H

#include <linux/types.h>
#include <linux/ip.h>
#include <bpf/bpf_endian.h>

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

/* Ones'-complement sum of the 20-byte header; 0 when the checksum holds.
 * Five 32-bit words summed in 64 bits (the ones'-complement sum does not
 * care how the 16-bit words are grouped), then folded. */
static __always_inline __u16 ipv4_csum_bad(const struct iphdr *ip)
{
	const __u32 *w = (const __u32 *)ip;
	__u64 s = 0;
#pragma unroll
	for (int i = 0; i < 5; i++)
		s += w[i];
	s = (s & 0xffffffff) + (s >> 32);   /* at most 2^32 + 3 */
	s = (s & 0xffff) + (s >> 16);       /* at most 0x1fffe */
	s = (s & 0xffff) + (s >> 16);       /* at most 0xffff */
	return (__u16)~s;
}

/* TTL - 1 with the checksum patched in place (RFC 1624, as the kernel's
 * ip_decrease_ttl): the TTL is the high byte of its 16-bit word. */
static __always_inline void ipv4_decrease_ttl(struct iphdr *ip)
{
	__u32 check = ip->check;
	check += bpf_htons(0x0100);
	ip->check = (__u16)(check + (check >= 0xffff));
	ip->ttl--;
}

#endif
