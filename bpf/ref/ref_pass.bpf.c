// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What XDP on the DUT's ports costs the kernel's own path, as a reference
 * DUT (`lab run`'s xdp-pass): every frame passed to the kernel unread,
 * which forwards it as it would without XDP. A driver may do work for a
 * frame only because a program is attached (a veth turns each socket
 * buffer into an XDP frame, copying a paged one): that work is this DUT's
 * cost beside the kernel alone, and part of any XDP forwarder's that
 * passes a frame. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int ref_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
