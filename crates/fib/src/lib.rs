//! linerate's FIB: longest-prefix match laid out for the XDP fast path.
//! [`trie::Fib`] is the table, [`gen`] makes realistic full tables, [`dump`]
//! reads route dumps.

pub mod bench;
pub mod dump;
pub mod gen;
pub mod key;
pub mod shortcut;
pub mod trie;

pub use key::Key;
pub use trie::{Fib, FibError, Ipv6Layout, Shape, Stats, Table, Tables, Write, CHILD, MAX_NEXTHOP};

/// A route: address (host bits zero), prefix length, next-hop id.
pub type Route<K> = (K, u8, u32);
