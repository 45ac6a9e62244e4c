//! Every parser of this crate on each message of a buffer, as a socket
//! reads them: what the route notifications decode to (the changes the
//! router applies), and the conntrack, nftables, tc and netfilter readers'
//! views of the same bytes. For the fuzz targets (crates/fuzz), which hold
//! that no bytes make any of them panic.
use crate::route::{self, Change};
use crate::wire;

/// The changes `buf`'s messages decode to (the other readers' views are
/// read and dropped); a message a reader refuses is skipped, as the
/// router skips it.
pub fn read_all(buf: &[u8]) -> Vec<Change> {
    let mut changes = Vec::new();
    for m in wire::messages(buf) {
        let Ok(m) = m else { break };
        if let Ok(Some(c)) = route::notification(&m) {
            if let Change::Rt(netlink_packet_route::RouteNetlinkMessage::NewRule(rule)) = &c {
                let _ = crate::policy::Rule::parse(rule);
            }
            changes.push(c);
        }
        let _ = crate::ctnetlink::destroyed(&m);
        let _ = crate::nft_events::event(m.bytes());
        let _ = crate::tc::parse_qdisc(m.bytes());
        let _ = crate::netfilter::parse_chain(m.bytes());
        let mut elements = Vec::new();
        let _ = crate::nft_elements::elements_of(m.bytes(), &mut elements);
    }
    changes
}
