// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The cheapest sink: drop every frame without reading it. The generator's
 * benchmark sends into it to measure the generator alone (a sink that reads
 * the frames pulls their cache lines to its CPU, and the generator, which
 * rewrites the same recycled pages, slows down). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int lab_sink(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
