/* Ones'-complement checksum helpers (RFC 1071). Sums are accumulated
 * unfolded in 64 bits over 16-bit words loaded in memory order, so the
 * folded result can be stored back as-is. */
#ifndef LINERATE_CSUM_H
#define LINERATE_CSUM_H

#include <linux/types.h>

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

#endif
