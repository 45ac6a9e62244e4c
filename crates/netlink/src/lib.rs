//! linerate's netlink library: what the control plane reads of the
//! kernel, and nothing of linerate's own. In layers: [`wire`] checks
//! bytes, [`socket`] sends and receives, the parsers read messages
//! ([`nhobj`], [`netconf`], [`tc`], [`netfilter`], [`nft_elements`], [`nft_events`],
//! [`ctnetlink`], [`xdp_features`], [`policy`], and netlink-packet-route
//! for links, addresses, neighbours, routes and rules), and [`route`]
//! dumps the kernel's tables and follows their notifications;
//! [`read_all`] runs every parser on a buffer (the fuzz targets').
pub mod ctnetlink;
pub mod netconf;
pub mod netfilter;
pub mod nft_elements;
pub mod nft_events;
pub mod nhobj;
pub mod policy;
pub mod read_all;
pub mod route;
pub mod route_get;
pub mod socket;
pub mod tc;
pub mod wire;
pub mod xdp_features;
