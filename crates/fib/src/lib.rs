//! linerate's FIB: longest-prefix match laid out for the XDP fast path.
//! [`trie::Fib`] is the table, [`synthetic`] makes realistic full tables, [`dump`]
//! reads route dumps.

pub mod dump;
pub mod key;
pub mod shortcut;
pub mod synthetic;
pub mod trie;

pub use key::Key;
pub use trie::{Fib, FibError, Ipv6Layout, Shape, Stats, Table, Tables, Write, CHILD, MAX_NEXTHOP};

/// A route: address (host bits zero), prefix length, next-hop id.
pub type Route<K> = (K, u8, u32);

/// A table's address family, by the name commands and reports give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Ipv4,
    Ipv6,
}

impl Family {
    /// Each family by the name commands and reports give it.
    pub const CHOICES: &'static [(&'static str, Family)] =
        &[("ipv4", Family::Ipv4), ("ipv6", Family::Ipv6)];
}
