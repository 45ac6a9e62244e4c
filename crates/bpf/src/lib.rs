//! linerate's XDP programs and the thin layer that loads and runs them.
//!
//! The C sources live in the workspace's `bpf/` directory and are compiled
//! with `clang -target bpf` by this crate's build script; the objects are
//! embedded in the binary. Loading, attaching (through BPF links, so a crashed
//! process detaches) and map access go through libbpf-rs; the one call
//! libbpf-rs does not expose in full, `BPF_PROG_RUN` with live frames and a
//! batch size, goes to libbpf-sys directly (see [`test_run`]).

pub mod btf_layout;
pub mod fib_arena;
pub mod layout;
pub mod loader;
pub mod maps;
pub mod objects;
pub mod test_run;

pub use loader::{load, XdpAttachment};
