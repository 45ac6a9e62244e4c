//! linerate's router: what decides the routes the fast path holds. The
//! [`mirror::Mirror`] follows the kernel's links, addresses, neighbours,
//! routes, nexthop objects and policy rules (read by linerate_netlink) and
//! turns them into writes to the dataplane (linerate_dataplane's
//! `Dataplane` trait): the FIB's, the next hops' and the interfaces'; ECMP
//! groups are spread over buckets by weight ([`ecmp`]) and their ids
//! reused only after a grace period ([`ids`]); [`follow`] applies the
//! kernel's notifications and reads what none announces.
pub mod ecmp;
pub mod follow;
pub mod ids;
pub mod mirror;
