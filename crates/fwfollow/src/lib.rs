//! linerate's firewall kept current (docs/firewall-fast-path.md): the firewall's
//! thread in `linerate route` ([`thread`]) reads the kernel's ruleset
//! (linerate_firewall::read), publishes each generation
//! (linerate_firewall::compile) and learns the keys the fast path reports.
//! It follows nf_tables itself: notifications gathered into transactions
//! ([`follow`]), a rule added read from what `nft monitor` prints
//! ([`monitor`]) and placed where the kernel says it went
//! ([`rule_order`]), so that a change of rules or set elements is applied
//! in place rather than by reading the whole ruleset again.
pub mod follow;
pub mod monitor;
pub mod rule_order;
pub mod thread;
