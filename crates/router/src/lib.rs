//! linerate's router: the XDP fast path (`bpf/router.bpf.c`), its maps, and
//! the control plane that mirrors the kernel's tables into them.

pub mod conntrack;
pub mod dataplane;
pub mod ecmp;
pub mod fastpath;
pub mod firewall;
pub mod fw_maps;
pub mod fw_model;
pub mod fw_thread;
pub mod handover;
pub mod ids;
pub mod layout;
pub mod local;
pub mod metrics;
pub mod mirror;
pub mod model;
pub mod netconf;
pub mod netfilter;
pub mod netlink;
pub mod nft_elements;
pub mod nhobj;
pub mod policy;
pub mod run;
pub mod socket;
pub mod stats;
pub mod tc;
pub mod wire;
pub mod xdp_features;
