/* The kernel's conntrack as BPF programs see it: its structs, as far as
 * they are read, relocated against the running kernel's BTF (CO-RE), the
 * status bits, and the XDP conntrack kfuncs. Production (router/ct_judge.h)
 * and probes (probe/ct_probe.bpf.c) include this one header. */
#ifndef LINERATE_KERNEL_H
#define LINERATE_KERNEL_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* enum ip_conntrack_status (nf_conntrack_common.h). */
#define IPS_SEEN_REPLY (1 << 1)
#define IPS_ASSURED (1 << 2)
#define IPS_CONFIRMED (1 << 3)
#define IPS_SRC_NAT (1 << 4)
#define IPS_DST_NAT (1 << 5)
#define IPS_NAT_MASK (3 << 4)
#define IPS_SEQ_ADJUST (1 << 6)
#define IPS_NAT_DONE_MASK (3 << 7)
#define IPS_DYING (1 << 9)
#define IPS_TEMPLATE (1 << 11)
#define IPS_UNTRACKED (1 << 12)
#define IPS_HELPER (1 << 13)
#define IPS_OFFLOAD (1 << 14)
#define IPS_HW_OFFLOAD (1 << 15)

/* The kernel's structs, as far as they are read here, relocated against
 * its BTF (CO-RE). Structs, not forward declarations: libbpf holds a
 * kfunc's argument types to the kernel's by kind. */
union nf_inet_addr {
	__u32 all[4];
} __attribute__((preserve_access_index));

union nf_conntrack_man_proto {
	__be16 all;
} __attribute__((preserve_access_index));

struct nf_conntrack_man {
	union nf_inet_addr u3;
	union nf_conntrack_man_proto u;
} __attribute__((preserve_access_index));

/* (The kernel's `dst` is a struct of its own, with the protocol and the
 * direction after: matched by its fields' names.) */
struct nf_conntrack_tuple {
	struct nf_conntrack_man src;
	struct nf_conntrack_man dst;
} __attribute__((preserve_access_index));

struct nf_conntrack_tuple_hash {
	struct nf_conntrack_tuple tuple;
} __attribute__((preserve_access_index));

struct ip_ct_tcp_state {
	__u8 flags;
} __attribute__((preserve_access_index));

struct ip_ct_tcp {
	struct ip_ct_tcp_state seen[2];
	__u8 state;
} __attribute__((preserve_access_index));

union nf_conntrack_proto {
	struct ip_ct_tcp tcp;
} __attribute__((preserve_access_index));

struct nf_conn {
	unsigned long status;
	__u32 timeout;
	struct nf_conntrack_tuple_hash tuplehash[2];
	union nf_conntrack_proto proto;
} __attribute__((preserve_access_index));

/* nf_conntrack_tcp.h, enum tcp_conntrack */
#define IP_CT_TCP_FLAG_BE_LIBERAL 0x08
#define TCP_CONNTRACK_ESTABLISHED 3

/* The kfuncs' options in their first, 12-byte shape, which the kernel
 * still takes (later kernels add zone fields up to 16 bytes). Not
 * relocated: relocated against a 16-byte kernel struct, the last field
 * would be written past the 12 bytes on the stack. */
struct bpf_ct_opts___local {
	__s32 netns_id;
	__s32 error;
	__u8 l4proto;
	__u8 reserved[3];
};

/* Weak: on a kernel without them the program still loads, and the
 * stateful part is off (ct_available). */
extern struct nf_conn *bpf_xdp_ct_lookup(struct xdp_md *, struct bpf_sock_tuple *, __u32,
					 struct bpf_ct_opts___local *, __u32) __ksym __weak;
extern void bpf_ct_release(struct nf_conn *) __ksym __weak;
extern int bpf_ct_change_timeout(struct nf_conn *, __u32) __ksym __weak;
/* Those only the probes use (they make entries of their own). */
extern struct nf_conn *bpf_xdp_ct_alloc(struct xdp_md *, struct bpf_sock_tuple *, __u32,
					struct bpf_ct_opts___local *, __u32) __ksym __weak;
extern struct nf_conn *bpf_ct_insert_entry(struct nf_conn *) __ksym __weak;
/* (An enum: libbpf holds a kfunc's declaration to the kernel's kinds.) */
enum nf_nat_manip_type {
	NF_NAT_MANIP_SRC,
	NF_NAT_MANIP_DST,
};
extern int bpf_ct_set_nat_info(struct nf_conn *, union nf_inet_addr *, int,
			       enum nf_nat_manip_type) __ksym __weak;
extern void bpf_ct_set_timeout(struct nf_conn *, __u32) __ksym __weak;
extern int bpf_ct_set_status(struct nf_conn *, __u32) __ksym __weak;

/* (libbpf's bpf_helpers.h has it from 1.2; Debian 12's is 1.1.) */
#ifndef bpf_ksym_exists
#define bpf_ksym_exists(sym) (!!(sym))
#endif

static __always_inline int ct_available(void)
{
	return bpf_ksym_exists(bpf_xdp_ct_lookup) && bpf_ksym_exists(bpf_ct_release) &&
	       bpf_ksym_exists(bpf_ct_change_timeout);
}

#endif
