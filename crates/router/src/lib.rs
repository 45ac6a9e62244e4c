//! linerate's router: the XDP fast path (`bpf/router.bpf.c`), its maps, and
//! (to come) the control plane that mirrors the kernel's tables into them.

pub mod fastpath;
pub mod layout;
