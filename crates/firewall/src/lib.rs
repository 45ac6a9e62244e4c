//! linerate's firewall: the kernel's nftables ruleset, read as the
//! forwarding path sees it.
//!
//! The ruleset stays the kernel's (`nft -f`, firewalld, whatever the admin
//! uses). [`read`] turns `nft -j list ruleset` into [`ruleset::Ruleset`]:
//! per IP family the filter base chains a forwarded packet crosses
//! (prerouting, forward, postrouting, in the kernel's order), their regular
//! chains and sets; or the table, chain and rule handle that keeps that
//! family from being judged anywhere but in the kernel. [`eval`] judges a
//! forwarded packet by it exactly as nf_tables does: the reference the
//! compiled fast path is held to (docs/firewall.md).
//!
//! Around it, the firewall's control of the fast path: [`compile`] turns
//! a ruleset into one generation of the verdict cache's contents, with a
//! classifier the program judges new keys by ([`classify`]), and applies
//! changes of rules and elements to it in place (the thread that follows
//! nf_tables and fills the cache is crates/fwfollow's); [`conntrack`]
//! keeps the kernel's entries of the connections the fast path carries,
//! and [`listing`] and [`view`] set the fast path's rule counters beside
//! the kernel's.
pub mod cache;
pub mod carry;
pub mod classify;
pub mod compile;
pub mod conntrack;
pub mod eval;
pub mod listing;
pub mod raw_elements;
pub mod read;
pub mod ruleset;
pub mod seeds;
pub mod symbols;
pub mod tcp_carry;
pub mod view;

pub use eval::{judge, Judgement, Packet, Verdict};
pub use read::{parse, read_current};
pub use ruleset::{NotCompiled, Ruleset};
