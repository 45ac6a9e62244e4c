/* Every ones'-complement checksum of linerate's programs (RFC 1071): the
 * generator's sums (accumulated unfolded in 64 bits over 16-bit words
 * loaded in memory order, so the folded result can be stored back as-is),
 * the IPv4 header's check and its patch on a TTL decrement (RFC 1624),
 * and the pieces of an L4 checksum's check. */
#ifndef LINERATE_CSUM_H
#define LINERATE_CSUM_H

#include <linux/types.h>
#include <linux/ip.h>
#include <bpf/bpf_endian.h>

static __always_inline __u16 csum_fold(__u64 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

/* Sum of the two 16-bit halves of a 32-bit word as it lies in memory. */
static __always_inline __u64 csum_word32(__u32 w)
{
	return (w & 0xffff) + (w >> 16);
}

static __always_inline __u64 csum_words(const void *p, int nwords)
{
	const __u16 *w = p;
	__u64 sum = 0;
#pragma unroll
	for (int i = 0; i < nwords; i++)
		sum += w[i];
	return sum;
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

/* The sums of an L4 checksum (router/ct_judge.h, ct_sum_holds). */

/* The end of a sum from byte `off` of `len` at `p` (fewer than 8 left):
 * a 32-bit word, the last bytes, then the fold; whether the checksum
 * holds (0 if the bytes run past the frame). */
static __always_inline int csum_rest_holds(const __u8 *p, __u32 off, __u32 len,
					     const __u8 *end, __u64 sum)
{
	__u32 left = len - off;
	/* One pointer, checked and read through: older verifiers do not
	 * carry a check over to `p + off` computed again. */
	const __u8 *q = p + off;

	if (left >= 4) {
		if (q + 4 > end)
			return 0;
		sum += *(const __u32 *)q;
		q += 4;
		left -= 4;
	}
	if (left) {
		__u32 tail = 0;

		if (q + 1 > end)
			return 0;
		tail = q[0];
		if (left > 1) {
			if (q + 2 > end)
				return 0;
			tail |= (__u32)q[1] << 8;
		}
		if (left > 2) {
			if (q + 3 > end)
				return 0;
			tail |= (__u32)q[2] << 16;
		}
		sum += tail;
	}
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

/* The ones'-complement sum of a datagram of at most 40 bytes (`len`) at
 * `p` with `sum`, folded to 16 bits, inline (a lab's 60-byte frame
 * carries 26): the call to ct_sum_holds costs more than the sum, about
 * 12 ns a packet. 0 if it runs past the frame. */
static __always_inline int csum_small_holds(const __u8 *p, __u32 len, const __u8 *end,
					      __u64 sum)
{
	__u32 off = 0;

#pragma unroll
	for (int i = 0; i < 5; i++) {
		if (len - off < 8)
			break;
		if (p + off + 8 > end)
			return 0;
		__u64 w = *(const __u64 *)(p + off);
		sum += (w & 0xffffffff) + (w >> 32);
		off += 8;
	}
	return csum_rest_holds(p, off, len, end, sum);
}

#endif
