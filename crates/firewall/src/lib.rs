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
pub mod cache;
pub mod eval;
pub mod raw_elements;
pub mod read;
pub mod ruleset;
pub mod seeds;
pub mod symbols;

pub use eval::{judge, Judgement, Packet, Verdict};
pub use read::{parse, read_current};
pub use ruleset::{NotCompiled, Ruleset};
