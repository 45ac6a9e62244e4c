//! The kernel's routing policy (`ip rule`), as far as the fast path needs
//! it: which tables the kernel looks a transit packet arriving on an
//! interface up in, in order ([`Policy::tables`]), for the fast path to
//! walk the same tables (each a FIB of its own); where a rule may send
//! some packets elsewhere than such a walk can tell, the walk ends before
//! it, and what it has not routed by then goes to the kernel.
//!
//! A rule is walked as the kernel's fib_rules_lookup walks it for a packet
//! being forwarded: no mark (the fast path runs before netfilter), no
//! tunnel id, uid 0, no output interface. Rules that cannot match such a
//! packet from the interface (`iif` another device, `fwmark 1`, `oif X`,
//! `uidrange 1000-2000`, an l3mdev rule on a device not enslaved) are
//! skipped. A rule the walk cannot judge (a goto, an attribute it does not
//! know) counts as one that may route elsewhere: slower, never wrong.
mod program;
pub use program::{mask, walk, Compiled, Flow, Outcome, Selectors, Step, View};

use netlink_packet_core::Nla;
use netlink_packet_route::rule::{RuleAction, RuleAttribute, RuleFlags, RuleMessage};

/// FRA_SPORT_MASK, FRA_DPORT_MASK (Linux 6.15; netlink-packet-route does
/// not name them): a mask over the port, which the kernel dumps as 0xffff
/// for a single port.
const FRA_SPORT_MASK: u16 = 28;
const FRA_DPORT_MASK: u16 = 29;

/// An attribute's value bytes.
fn nla_value(nla: &netlink_packet_core::DefaultNla) -> Vec<u8> {
    let mut b = vec![0u8; nla.value_len()];
    nla.emit_value(&mut b);
    b
}
use netlink_packet_route::AddressFamily;

const TABLE_MAIN: u32 = 254;
const TABLE_LOCAL: u32 = 255;
const TABLE_DEFAULT: u32 = 253;

/// What a rule does with the packets it matches.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Action {
    /// Look up a table. With a suppressor (`suppress_prefixlength`,
    /// `suppress_ifgroup`) some results are refused and the walk goes on.
    Table {
        id: u32,
        suppress: bool,
    },
    Nop,
    /// Go on at the first rule of this priority.
    Goto(u32),
    Blackhole,
    /// unreachable, prohibit: the kernel answers with an ICMP error.
    Refuse,
    /// An action not known here.
    Other,
}

/// The selectors of a rule that depend on the packet, as read from its
/// message: addresses as 128-bit words (IPv4 in the low bits).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Packet {
    src: Option<(u128, u8)>,
    dst: Option<(u128, u8)>,
    tos: u8,
    proto: Option<u8>,
    sport: Option<(u16, u16)>,
    dport: Option<(u16, u16)>,
    suppress_len: Option<u32>,
    suppress_group: Option<u32>,
    /// An attribute this reading does not know.
    unknown: bool,
}

/// One rule, reduced to what decides whether it can match a forwarded
/// packet and what it then does. Its identity too: a deletion names the
/// rule by the same attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    priority: u32,
    action: Action,
    invert: bool,
    iif: Option<String>,
    oif: bool,
    /// fwmark & mask: a forwarded packet's mark is 0.
    marked: bool,
    tun_id: bool,
    l3mdev: bool,
    /// A uid range without 0 (a forwarded packet's flow has uid 0).
    uid_excludes_root: bool,
    /// Source or destination prefix, tos/dscp, protocol, ports, or an
    /// attribute not known here: matches some packets, not others.
    selective: bool,
    /// As `ip rule` shows it, for what linerate says about it.
    text: String,
    packet: Packet,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Match {
    Never,
    Some,
    All,
}

impl Rule {
    /// A rule without selectors: it matches every packet.
    fn all(priority: u32, action: Action) -> Rule {
        Rule {
            priority,
            action,
            invert: false,
            iif: None,
            oif: false,
            marked: false,
            tun_id: false,
            l3mdev: false,
            uid_excludes_root: false,
            selective: false,
            text: String::new(),
            packet: Packet::default(),
        }
    }

    /// Reads a rule message; None for a family other than IPv4 and IPv6.
    pub fn parse(m: &RuleMessage) -> Option<(bool, Rule)> {
        let ipv6 = match m.header.family {
            AddressFamily::Inet => false,
            AddressFamily::Inet6 => true,
            _ => return None,
        };
        let h = &m.header;
        let mut r = Rule::all(0, Action::Other);
        r.invert = h.flags.contains(RuleFlags::Invert);
        r.selective = h.src_len > 0 || h.dst_len > 0 || h.tos != 0;
        r.packet.tos = h.tos;
        let (mut table, mut goto) = (h.table as u32, None);
        let (mut mark, mut mask) = (0u32, None);
        let word = |ip: &std::net::IpAddr| match ip {
            std::net::IpAddr::V4(a) => u32::from(*a) as u128,
            std::net::IpAddr::V6(a) => u128::from(*a),
        };
        let range = |p: &netlink_packet_route::rule::RulePortRange| (p.start, p.end);
        let mut single_port_masks = Vec::new();
        for a in &m.attributes {
            match a {
                RuleAttribute::Priority(p) => r.priority = *p,
                RuleAttribute::Table(t) => table = *t,
                RuleAttribute::Iifname(n) => r.iif = Some(n.clone()),
                RuleAttribute::Oifname(_) => r.oif = true,
                RuleAttribute::FwMark(v) => mark = *v,
                RuleAttribute::FwMask(v) => mask = Some(*v),
                RuleAttribute::TunId(t) => r.tun_id = *t != 0,
                RuleAttribute::UidRange(u) => r.uid_excludes_root = u.start > 0,
                // -1 (which the kernel dumps for both) is none.
                RuleAttribute::SuppressPrefixLen(v) => {
                    r.packet.suppress_len = (*v != u32::MAX).then_some(*v)
                }
                RuleAttribute::SuppressIfGroup(v) => {
                    r.packet.suppress_group = (*v != u32::MAX).then_some(*v)
                }
                RuleAttribute::Source(ip) => r.packet.src = Some((word(ip), h.src_len)),
                RuleAttribute::Destination(ip) => r.packet.dst = Some((word(ip), h.dst_len)),
                RuleAttribute::IpProtocol(p) => {
                    r.selective = true;
                    r.packet.proto = Some(u8::from(*p));
                }
                RuleAttribute::SourcePortRange(p) => {
                    r.selective = true;
                    r.packet.sport = Some(range(p));
                }
                RuleAttribute::DestinationPortRange(p) => {
                    r.selective = true;
                    r.packet.dport = Some(range(p));
                }
                RuleAttribute::Goto(g) => goto = Some(*g),
                // Who installed it, the realm it sets: no bearing on which
                // packets match.
                RuleAttribute::Protocol(_) | RuleAttribute::Realm(_) => {}
                RuleAttribute::L3MDev(on) => r.l3mdev = *on,
                // A port mask the kernel gives a single port (0xffff:
                // that port, as the range says).
                RuleAttribute::Other(nla)
                    if matches!(nla.kind(), FRA_SPORT_MASK | FRA_DPORT_MASK)
                        && nla_value(nla) == 0xffffu16.to_ne_bytes() =>
                {
                    single_port_masks.push(nla.kind())
                }
                _ => {
                    r.selective = true;
                    r.packet.unknown = true;
                }
            }
        }
        let single = |r: Option<(u16, u16)>| r.is_some_and(|(lo, hi)| lo == hi);
        for kind in single_port_masks {
            let range = if kind == FRA_SPORT_MASK {
                r.packet.sport
            } else {
                r.packet.dport
            };
            r.packet.unknown |= !single(range);
        }
        // A prefix length without its address (or the other way round)
        // is not one this reading can match.
        if (h.src_len > 0) != r.packet.src.is_some() || (h.dst_len > 0) != r.packet.dst.is_some() {
            r.packet.unknown = true;
        }
        // As the kernel reads them: a mark alone is matched exactly.
        let mask = mask.unwrap_or(if mark != 0 { u32::MAX } else { 0 });
        r.marked = mark & mask != 0;
        r.text = rule_text(m, r.priority);
        let suppress = r.packet.suppress_len.is_some() || r.packet.suppress_group.is_some();
        r.action = match h.action {
            RuleAction::ToTable => Action::Table {
                id: table,
                suppress,
            },
            RuleAction::Nop => Action::Nop,
            RuleAction::Goto => goto.map_or(Action::Other, Action::Goto),
            RuleAction::Blackhole => Action::Blackhole,
            RuleAction::Unreachable | RuleAction::Prohibit => Action::Refuse,
            _ => Action::Other,
        };
        Some((ipv6, r))
    }

    /// The rule as a packet of a VRF of table `vrf` meets it: the l3mdev
    /// rule's lookup is of that table.
    fn in_vrf(&self, vrf: Option<u32>) -> Rule {
        let mut r = self.clone();
        if let (true, Some(t), Action::Table { id, .. }) = (r.l3mdev, vrf, &mut r.action) {
            *id = t;
        }
        r
    }

    /// Which of the packets forwarded from interface `iif` (its name, if
    /// known; with `vrf`, a VRF device, whose table the l3mdev rule looks
    /// up) this rule matches.
    fn matches(&self, iif: Option<&str>, vrf: Option<u32>) -> Match {
        let never = self.oif
            || self.marked
            || self.tun_id
            || self.l3mdev && vrf.is_none()
            || self.uid_excludes_root
            || matches!((&self.iif, iif), (Some(r), Some(i)) if r != i);
        let m = if never {
            Match::Never
        } else if self.selective || (self.iif.is_some() && iif.is_none()) {
            Match::Some
        } else {
            Match::All
        };
        match (self.invert, m) {
            (true, Match::Never) => Match::All,
            (true, Match::All) => Match::Never,
            (_, m) => m,
        }
    }
}

/// A table's name as `ip rule` gives it.
fn table_name(id: u32) -> String {
    match id {
        TABLE_LOCAL => "local".into(),
        TABLE_MAIN => "main".into(),
        TABLE_DEFAULT => "default".into(),
        id => id.to_string(),
    }
}

/// A rule as `ip rule` shows it (the selectors linerate reads, the
/// action): `100: from all iif dut0 lookup 100`.
fn rule_text(m: &RuleMessage, priority: u32) -> String {
    let h = &m.header;
    let mut w: Vec<String> = vec![format!("{priority}:")];
    if h.flags.contains(RuleFlags::Invert) {
        w.push("not".into());
    }
    let (mut table, mut goto) = (h.table as u32, None);
    let (mut src, mut dst) = (None, None);
    for a in &m.attributes {
        match a {
            RuleAttribute::Source(ip) => src = Some(format!("{ip}/{}", h.src_len)),
            RuleAttribute::Destination(ip) => dst = Some(format!("{ip}/{}", h.dst_len)),
            RuleAttribute::Table(t) => table = *t,
            RuleAttribute::Goto(g) => goto = Some(*g),
            _ => {}
        }
    }
    w.push(format!("from {}", src.unwrap_or_else(|| "all".into())));
    if let Some(d) = dst {
        w.push(format!("to {d}"));
    }
    if h.tos != 0 {
        w.push(format!("tos {:#x}", h.tos));
    }
    for a in &m.attributes {
        match a {
            RuleAttribute::FwMark(v) => w.push(format!("fwmark {v:#x}")),
            RuleAttribute::FwMask(v) => w.push(format!("mask {v:#x}")),
            RuleAttribute::Iifname(n) => w.push(format!("iif {n}")),
            RuleAttribute::Oifname(n) => w.push(format!("oif {n}")),
            RuleAttribute::UidRange(u) => w.push(format!("uidrange {}-{}", u.start, u.end)),
            RuleAttribute::IpProtocol(p) => {
                w.push(format!("ipproto {}", format!("{p:?}").to_lowercase()))
            }
            RuleAttribute::SourcePortRange(r) => w.push(format!("sport {}-{}", r.start, r.end)),
            RuleAttribute::DestinationPortRange(r) => {
                w.push(format!("dport {}-{}", r.start, r.end))
            }
            RuleAttribute::TunId(t) => w.push(format!("tun_id {t}")),
            RuleAttribute::L3MDev(true) => w.push("l3mdev".into()),
            _ => {}
        }
    }
    w.push(match h.action {
        RuleAction::ToTable => format!("lookup {}", table_name(table)),
        RuleAction::Goto => format!("goto {}", goto.map_or("?".into(), |g| g.to_string())),
        RuleAction::Nop => "nop".into(),
        RuleAction::Blackhole => "blackhole".into(),
        RuleAction::Unreachable => "unreachable".into(),
        RuleAction::Prohibit => "prohibit".into(),
        a => format!("action {a:?}"),
    });
    for a in &m.attributes {
        match a {
            RuleAttribute::SuppressPrefixLen(v) if *v != u32::MAX => {
                w.push(format!("suppress_prefixlength {v}"))
            }
            RuleAttribute::SuppressIfGroup(v) if *v != u32::MAX => {
                w.push(format!("suppress_ifgroup {v}"))
            }
            _ => {}
        }
    }
    w.join(" ")
}

/// Where a walk of the rules goes for the transit packets of a family from
/// one interface ([`Policy::walk`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Walk {
    /// The tables looked up in turn, local's left out.
    pub tables: Vec<u32>,
    /// The rule the walk could not follow, as `ip rule` shows it, if it
    /// ended at one (before main): what misses the tables before it goes
    /// to the kernel.
    pub ended_by: Option<String>,
}

impl Walk {
    /// The tables as `ip rule` names them: `100, main`.
    pub fn names(&self) -> String {
        let names: Vec<String> = self.tables.iter().map(|t| table_name(*t)).collect();
        names.join(", ")
    }
}

/// The rules of both families, in the kernel's order (by priority, then
/// as added: a new rule goes after those of its priority).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    v4: Vec<Rule>,
    v6: Vec<Rule>,
}

impl Policy {
    /// The rules of a dump (both families, in the kernel's order).
    /// Rules come whole, never one notification at a time: a deletion
    /// could not tell which of two alike rules went, and a notification
    /// replayed after a dump would add a rule twice.
    pub fn from_dump<'a>(rules: impl IntoIterator<Item = &'a RuleMessage>) -> Policy {
        let mut p = Policy::default();
        rules.into_iter().for_each(|r| p.add(r));
        p
    }

    /// The rules a namespace starts with: `0: lookup local`, `32766:
    /// lookup main`, and for IPv4 `32767: lookup default`.
    pub fn kernel_default() -> Policy {
        let rule = |prio, id| {
            let suppress = false;
            Rule {
                text: format!("{prio}: from all lookup {}", table_name(id)),
                ..Rule::all(prio, Action::Table { id, suppress })
            }
        };
        let v6 = vec![rule(0, TABLE_LOCAL), rule(32766, TABLE_MAIN)];
        let mut v4 = v6.clone();
        v4.push(rule(32767, TABLE_DEFAULT));
        Policy { v4, v6 }
    }

    /// Adds a rule after those of its priority, as the kernel does;
    /// messages of other families are ignored.
    pub fn add(&mut self, m: &RuleMessage) {
        let Some((ipv6, rule)) = Rule::parse(m) else {
            return;
        };
        let rules = if ipv6 { &mut self.v6 } else { &mut self.v4 };
        let at = rules.partition_point(|r| r.priority <= rule.priority);
        rules.insert(at, rule);
    }

    /// The tables the kernel looks a transit packet of the family up in,
    /// in order, when it arrives on interface `iif` (its name, None if not
    /// known): each rule's table in turn, a miss (no route, or a `throw`
    /// route) going on to the next, as fib_rules_lookup walks them. The
    /// local table is left out (each FIB holds its routes over its own).
    ///
    /// The list ends before the first rule the walk cannot follow for
    /// every such packet (a selector on the source, tos, protocol or
    /// ports, a suppressor, goto, blackhole and the other actions, an
    /// attribute not known here), after main (what main has no route for
    /// goes to the kernel anyway), or at [`MAX_TABLES`]: a packet that
    /// misses every table listed goes to the kernel, which walks on. So a
    /// shorter list is slower, never wrong; an empty one sends the family
    /// to the kernel.
    pub fn tables(&self, ipv6: bool, iif: Option<&str>) -> Vec<u32> {
        self.walk(ipv6, iif).tables
    }

    /// Whether a rule of either family names `iif` as its input
    /// interface: only then can the walk of an interface differ from its
    /// namesakes' by its name.
    pub fn names_iif(&self, iif: &str) -> bool {
        self.v4
            .iter()
            .chain(&self.v6)
            .any(|r| r.iif.as_deref() == Some(iif))
    }

    /// [`Policy::tables`], and the rule that ended the list, if one did.
    pub fn walk(&self, ipv6: bool, iif: Option<&str>) -> Walk {
        self.walk_in(ipv6, iif, None)
    }

    /// [`Policy::walk`] for a packet that arrived on an interface of a VRF
    /// (`vrf`: its table), routed as arriving on the VRF device (`iif`,
    /// as the kernel's vrf_l3_rcv makes it): the l3mdev rule
    /// (`lookup [l3mdev-table]`) looks the VRF's table up.
    pub fn walk_in(&self, ipv6: bool, iif: Option<&str>, vrf: Option<u32>) -> Walk {
        let rules = if ipv6 { &self.v6 } else { &self.v4 };
        // The rules a packet from `iif` may meet: those it never matches,
        // nop and local's are passed over.
        let live: Vec<(Rule, Match)> = rules
            .iter()
            .map(|r| (r.in_vrf(vrf), r.matches(iif, vrf)))
            .filter(|(r, m)| {
                *m != Match::Never
                    && r.action != Action::Nop
                    && !matches!(
                        r.action,
                        Action::Table {
                            id: TABLE_LOCAL,
                            ..
                        }
                    )
            })
            .collect();
        let mut out: Vec<u32> = Vec::new();
        let mut ended_by = None;
        for (i, (r, m)) in live.iter().enumerate() {
            match (&r.action, m) {
                (
                    Action::Table {
                        id,
                        suppress: false,
                    },
                    Match::All,
                ) => {
                    // A table looked up again misses again.
                    if !out.contains(id) {
                        out.push(*id);
                    }
                    if *id == TABLE_MAIN || out.len() == MAX_TABLES {
                        break;
                    }
                }
                // A lookup of a table some of the packets take (a selector,
                // a suppressor), right before a lookup of the same table
                // that all of them take: either way they get that table's
                // route.
                (Action::Table { id, .. }, _)
                    if matches!(live.get(i + 1),
                        Some((next, Match::All)) if next.action == (Action::Table { id: *id, suppress: false })) =>
                    {}
                _ => {
                    ended_by = Some(r.text.clone());
                    break;
                }
            }
        }
        Walk {
            tables: out,
            ended_by,
        }
    }

    /// Whether the kernel routes every transit packet of the family that
    /// arrives on interface `iif` by the main table (the local table
    /// first) and by no other.
    pub fn main_only(&self, ipv6: bool, iif: Option<&str>) -> bool {
        self.tables(ipv6, iif) == [TABLE_MAIN]
    }
}

/// The most tables [`Policy::tables`] lists: the fast path's walk for an
/// interface holds as many.
pub const MAX_TABLES: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_route::rule::RuleUidRange;

    /// A rule message: IPv4, `prio`, the action (lookup `table` for
    /// ToTable), `invert`, and its selectors.
    fn rule(prio: u32, action: RuleAction, table: u32, attrs: Vec<RuleAttribute>) -> RuleMessage {
        let mut m = RuleMessage::default();
        m.header.family = AddressFamily::Inet;
        m.header.action = action;
        m.header.table = table.min(252) as u8;
        m.attributes = vec![RuleAttribute::Priority(prio), RuleAttribute::Table(table)];
        m.attributes.extend(attrs);
        m
    }

    fn lookup(prio: u32, table: u32, attrs: Vec<RuleAttribute>) -> RuleMessage {
        rule(prio, RuleAction::ToTable, table, attrs)
    }

    fn not(mut m: RuleMessage) -> RuleMessage {
        m.header.flags |= RuleFlags::Invert;
        m
    }

    fn defaults() -> Policy {
        let mut p = Policy::default();
        // As the kernel dumps them: suppress_prefixlength -1 is none.
        for (prio, table) in [(0, 255), (32766, 254), (32767, 253)] {
            let unset = RuleAttribute::SuppressPrefixLen(u32::MAX);
            p.add(&lookup(prio, table, vec![unset]));
        }
        p
    }

    fn with(extra: &[RuleMessage]) -> Policy {
        let mut p = defaults();
        extra.iter().for_each(|m| p.add(m));
        p
    }

    const IIF: Option<&str> = Some("dut0");

    #[test]
    fn the_kernels_default_rules_are_those_it_dumps() {
        // `defaults()` parses them as the kernel dumps them.
        let (start, dumped) = (Policy::kernel_default(), defaults());
        assert_eq!(start.v4, dumped.v4);
        assert_eq!(start.v6, dumped.v4[..2]);
    }

    /// The l3mdev rule (`ip rule add l3mdev pref 1000`, which a VRF's
    /// setup adds) looks up the table of the VRF a packet arrived in, and
    /// nothing for a packet of no VRF.
    #[test]
    fn the_l3mdev_rule_looks_up_the_vrfs_table() {
        let p = with(&[lookup(1000, 0, vec![RuleAttribute::L3MDev(true)])]);
        assert_eq!(p.walk_in(false, Some("red"), Some(10)).tables, [10, 254]);
        assert_eq!(p.walk_in(false, Some("blue"), Some(20)).tables, [20, 254]);
        assert_eq!(p.walk(false, IIF).tables, [254]);
        // A rule of another interface than the VRF device is not met.
        let q = with(&[
            lookup(900, 30, vec![RuleAttribute::Iifname("dut0".into())]),
            lookup(1000, 0, vec![RuleAttribute::L3MDev(true)]),
        ]);
        assert_eq!(q.walk_in(false, Some("red"), Some(10)).tables, [10, 254]);
        assert_eq!(q.walk(false, IIF).tables, [30, 254]);
    }

    #[test]
    fn the_default_rules_route_by_main_and_none_does_not() {
        assert!(defaults().main_only(false, IIF));
        assert!(defaults().main_only(false, None));
        // No IPv6 rules known: the kernel would have none to walk either.
        assert!(!defaults().main_only(true, IIF));
        assert!(!Policy::default().main_only(false, IIF));
    }

    #[test]
    fn rules_no_forwarded_packet_matches_are_skipped() {
        let iif = |n: &str| RuleAttribute::Iifname(n.into());
        let cases: Vec<(&str, RuleMessage)> = vec![
            ("iif lo", lookup(100, 100, vec![iif("lo")])),
            ("iif dut1", lookup(100, 100, vec![iif("dut1")])),
            ("fwmark 1", lookup(100, 100, vec![RuleAttribute::FwMark(1)])),
            (
                "fwmark 0x100/0xff00",
                lookup(
                    100,
                    100,
                    vec![RuleAttribute::FwMark(0x100), RuleAttribute::FwMask(0xff00)],
                ),
            ),
            (
                "oif dut1",
                lookup(100, 100, vec![RuleAttribute::Oifname("dut1".into())]),
            ),
            (
                "uidrange 1000-2000",
                lookup(
                    100,
                    100,
                    vec![RuleAttribute::UidRange(RuleUidRange {
                        start: 1000,
                        end: 2000,
                    })],
                ),
            ),
            ("tun_id 5", lookup(100, 100, vec![RuleAttribute::TunId(5)])),
            ("nop", rule(100, RuleAction::Nop, 0, vec![])),
            ("after main", lookup(40000, 100, vec![])),
            (
                "blackhole after main",
                rule(40000, RuleAction::Blackhole, 0, vec![]),
            ),
            ("lookup local again", lookup(100, 255, vec![])),
            (
                "main, suppressing the default route",
                lookup(100, 254, vec![RuleAttribute::SuppressPrefixLen(0)]),
            ),
        ];
        for (what, m) in cases {
            assert!(with(&[m]).main_only(false, IIF), "{what}");
        }
    }

    #[test]
    fn rules_that_may_route_elsewhere_take_the_family() {
        let iif = |n: &str| RuleAttribute::Iifname(n.into());
        let mut from = lookup(100, 100, vec![]);
        from.header.src_len = 16;
        let cases: Vec<(&str, RuleMessage)> = vec![
            ("all", lookup(100, 100, vec![])),
            ("from 198.18.0.0/16", from),
            ("iif dut0", lookup(100, 100, vec![iif("dut0")])),
            ("not iif lo", not(lookup(100, 100, vec![iif("lo")]))),
            (
                "not fwmark 0xca6c (wg-quick)",
                not(lookup(100, 100, vec![RuleAttribute::FwMark(0xca6c)])),
            ),
            (
                "fwmark 0/1",
                lookup(
                    100,
                    100,
                    vec![RuleAttribute::FwMark(0), RuleAttribute::FwMask(1)],
                ),
            ),
            (
                "uidrange 0-0",
                lookup(
                    100,
                    100,
                    vec![RuleAttribute::UidRange(RuleUidRange { start: 0, end: 0 })],
                ),
            ),
            ("blackhole", rule(100, RuleAction::Blackhole, 0, vec![])),
            (
                "goto",
                rule(100, RuleAction::Goto, 0, vec![RuleAttribute::Goto(32767)]),
            ),
            ("lookup default first", lookup(100, 253, vec![])),
        ];
        for (what, m) in cases {
            assert!(!with(&[m]).main_only(false, IIF), "{what}");
        }
        // An iif rule, the interface's name unknown: it may be this one.
        assert!(!with(&[lookup(100, 100, vec![iif("dut1")])]).main_only(false, None));
        // Main's priority, added before main's rule: walked first.
        let mut p = Policy::default();
        for (prio, table) in [(0, 255), (32766, 100), (32766, 254)] {
            p.add(&lookup(prio, table, vec![]));
        }
        assert!(!p.main_only(false, IIF));
    }

    #[test]
    fn rules_are_walked_in_the_kernels_order() {
        let (local, main) = (lookup(0, 255, vec![]), lookup(32766, 254, vec![]));
        let (early, late) = (lookup(10, 100, vec![]), lookup(32766, 100, vec![]));
        let p = |rules: &[&RuleMessage]| Policy::from_dump(rules.iter().copied());
        assert!(!p(&[&local]).main_only(false, IIF), "main's rule deleted");
        assert!(p(&[&local, &main]).main_only(false, IIF));
        // Same priority as main, after it in the dump: after it.
        assert!(p(&[&local, &main, &late]).main_only(false, IIF));
        assert!(!p(&[&local, &late, &main]).main_only(false, IIF));
        // A lower priority goes first wherever it is listed.
        assert!(!p(&[&local, &main, &early]).main_only(false, IIF));
        // The IPv6 list is its own.
        let mut v6 = early.clone();
        v6.header.family = AddressFamily::Inet6;
        assert!(p(&[&local, &main, &v6]).main_only(false, IIF));
        assert!(!p(&[&local, &main, &v6]).main_only(true, IIF));
    }

    /// The tables a packet from the interface is looked up in: each rule
    /// it meets in turn, up to main, the first rule that only some
    /// packets match, or the walk's length; local's left out.
    #[test]
    fn tables_are_listed_in_the_order_the_walk_looks_them_up() {
        let iif = |n: &str| RuleAttribute::Iifname(n.into());
        assert_eq!(defaults().tables(false, IIF), [254]);
        // A tenant's table chosen by the incoming interface: its routes,
        // then main's for what it misses; another interface: main alone.
        let tenant = with(&[lookup(100, 100, vec![iif("dut0")])]);
        assert_eq!(tenant.tables(false, IIF), [100, 254]);
        assert_eq!(tenant.tables(false, Some("dut1")), [254]);
        // The interface's name unknown: the rule may match or not.
        assert!(tenant.tables(false, None).is_empty());
        // Two tables before main, the same one twice (a miss again).
        let two = with(&[
            lookup(100, 100, vec![iif("dut0")]),
            lookup(200, 200, vec![]),
            lookup(300, 100, vec![]),
        ]);
        assert_eq!(two.tables(false, IIF), [100, 200, 254]);
        // Past the walk's length: cut (a miss goes to the kernel).
        let many: Vec<RuleMessage> = (1..=6).map(|t| lookup(100 + t, t, vec![])).collect();
        assert_eq!(with(&many).tables(false, IIF), [1, 2, 3, 4]);
        // A rule only some packets match ends the list before it.
        let mut from = lookup(150, 200, vec![]);
        from.header.src_len = 16;
        let cut = with(&[lookup(100, 100, vec![iif("dut0")]), from.clone()]);
        assert_eq!(cut.tables(false, IIF), [100]);
        assert!(with(&[from]).tables(false, IIF).is_empty());
        for ends in [
            rule(150, RuleAction::Blackhole, 0, vec![]),
            rule(150, RuleAction::Goto, 0, vec![RuleAttribute::Goto(32766)]),
            lookup(150, 200, vec![RuleAttribute::SuppressPrefixLen(0)]),
        ] {
            let p = with(&[lookup(100, 100, vec![]), ends]);
            assert_eq!(p.tables(false, IIF), [100], "{p:?}");
        }
        // A table only some take, right before all of them take it: the
        // same route either way.
        let mut from100 = lookup(90, 100, vec![]);
        from100.header.src_len = 8;
        let p = with(&[from100, lookup(100, 100, vec![])]);
        assert_eq!(p.tables(false, IIF), [100, 254]);
        // wg-quick's pair, main with a suppressor before a table all take.
        let wg = with(&[
            lookup(32764, 254, vec![RuleAttribute::SuppressPrefixLen(0)]),
            not(lookup(32765, 51820, vec![RuleAttribute::FwMark(0xca6c)])),
        ]);
        assert!(wg.tables(false, IIF).is_empty());
    }

    /// A walk says which rule it stopped at, as `ip rule` shows it.
    #[test]
    fn a_walk_names_the_rule_it_could_not_follow() {
        let src = RuleAttribute::Source("198.18.0.0".parse().unwrap());
        let mut from = lookup(150, 200, vec![src]);
        from.header.src_len = 16;
        let iif = RuleAttribute::Iifname("dut0".into());
        let p = with(&[lookup(100, 100, vec![iif]), from]);
        let w = p.walk(false, IIF);
        assert_eq!(w.tables, [100]);
        assert_eq!(
            w.ended_by.as_deref(),
            Some("150: from 198.18.0.0/16 lookup 200")
        );
        assert_eq!(w.names(), "100");
        assert_eq!(p.v4[1].text, "100: from all iif dut0 lookup 100");
        let d = defaults().walk(false, IIF);
        assert_eq!((d.names(), d.ended_by), ("main".to_string(), None));
        let b = with(&[not(rule(90, RuleAction::Blackhole, 0, vec![]))]);
        assert_eq!(b.v4[1].text, "90: not from all blackhole");
    }

    /// The walk against the kernel's: random rule sets (lookups, nop,
    /// blackhole, goto, suppressors, marks, interfaces, sources, `not`),
    /// random table contents for one packet (a route of some length, no
    /// route, a throw route), and a packet from one of two interfaces and
    /// sources. The kernel's walk (fib_rules_lookup, as a reference written
    /// from its rules here, not from `Policy`) picks a table or an action;
    /// the fast path's walk looks up `Policy::tables` in turn, the first
    /// route found deciding. Wherever the fast path routes, the kernel
    /// routes by the same table.
    #[test]
    fn the_fast_paths_walk_routes_as_the_kernels_walk_does() {
        #[derive(Clone, Copy, Debug, PartialEq)]
        enum Content {
            Route(u8),
            Miss,
            Throw,
        }
        #[derive(Clone, Copy, Debug, PartialEq)]
        enum Done {
            Table(u32),
            Blackhole,
            Unrouted,
        }
        #[derive(Clone, Debug)]
        struct Gen {
            prio: u32,
            invert: bool,
            iif: Option<&'static str>,
            mark: Option<u32>,
            from10: Option<bool>,
            action: RuleAction,
            table: u32,
            goto: u32,
            suppress: Option<u8>,
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let tables = [100u32, 101, 102, TABLE_MAIN];
        const TABLE_MAIN_PRIORITY: u32 = 32766;
        let (mut routed, mut cases, mut programmed) = (0, 0, 0);
        for _ in 0..20_000 {
            let n = 1 + next(8) as usize;
            let mut gens: Vec<Gen> = (0..n)
                .map(|_| Gen {
                    prio: 1 + next(400) as u32,
                    invert: next(8) == 0,
                    iif: [None, None, Some("dut0"), Some("dut1"), Some("lo")][next(5) as usize],
                    mark: [None, None, None, Some(0), Some(1)][next(5) as usize],
                    from10: [None, None, None, Some(true), Some(false)][next(5) as usize],
                    action: [
                        RuleAction::ToTable,
                        RuleAction::ToTable,
                        RuleAction::ToTable,
                        RuleAction::ToTable,
                        RuleAction::Nop,
                        RuleAction::Blackhole,
                        RuleAction::Goto,
                    ][next(7) as usize],
                    table: tables[next(4) as usize],
                    goto: 1 + next(400) as u32,
                    suppress: [None, None, None, Some(0), Some(24)][next(5) as usize],
                })
                .collect();
            // The kernel's defaults after them.
            gens.sort_by_key(|g| g.prio);
            // A goto's target is later (the kernel refuses others): a
            // later rule's priority, main's, or one no rule has.
            let prios: Vec<u32> = gens.iter().map(|g| g.prio).collect();
            for g in gens.iter_mut() {
                let later: Vec<u32> = prios.iter().copied().filter(|p| *p > g.prio).collect();
                g.goto = match next(3) {
                    0 if !later.is_empty() => later[next(later.len() as u64) as usize],
                    1 => TABLE_MAIN_PRIORITY,
                    _ => g.prio + 1 + next(50) as u32,
                };
            }
            let content: Vec<Content> = tables
                .iter()
                .map(|_| {
                    [
                        Content::Route(8),
                        Content::Route(24),
                        Content::Miss,
                        Content::Throw,
                    ][next(4) as usize]
                })
                .collect();
            let of = |t: u32| content[tables.iter().position(|x| *x == t).unwrap()];
            let iif = ["dut0", "dut1"][next(2) as usize];
            let src10 = next(2) == 0;

            let matches = |g: &Gen| {
                let mut m = g.iif.is_none_or(|i| i == iif);
                // A forwarded packet's mark is 0: `fwmark 0` matches it.
                m &= g.mark.is_none_or(|v| v == 0);
                m &= g.from10.is_none_or(|_| src10);
                m != g.invert
            };
            // The kernel: rules in order (then main's and default's).
            let mut all: Vec<(u32, Gen)> = gens.iter().map(|g| (g.prio, g.clone())).collect();
            let plain = |prio, table| Gen {
                prio,
                invert: false,
                iif: None,
                mark: None,
                from10: None,
                action: RuleAction::ToTable,
                table,
                goto: 0,
                suppress: None,
            };
            all.push((32766, plain(32766, TABLE_MAIN)));
            let mut kernel = Done::Unrouted;
            let mut i = 0;
            while i < all.len() {
                let g = &all[i].1;
                i += 1;
                if !matches(g) {
                    continue;
                }
                match g.action {
                    RuleAction::ToTable => match of(g.table) {
                        Content::Route(len) if g.suppress.is_none_or(|s| len > s) => {
                            kernel = Done::Table(g.table);
                            break;
                        }
                        _ => {}
                    },
                    RuleAction::Blackhole => {
                        kernel = Done::Blackhole;
                        break;
                    }
                    RuleAction::Goto => {
                        // To the first rule of its target's priority (a
                        // later one: the kernel refuses others); none:
                        // on to the next rule.
                        if let Some(j) = all.iter().position(|(p, _)| *p == g.goto) {
                            if j >= i {
                                i = j;
                            }
                        }
                    }
                    _ => {}
                }
            }

            let mut msgs: Vec<RuleMessage> = vec![lookup(0, TABLE_LOCAL, vec![])];
            for g in &gens {
                let mut attrs = Vec::new();
                if let Some(n) = g.iif {
                    attrs.push(RuleAttribute::Iifname(n.into()));
                }
                if let Some(v) = g.mark {
                    attrs.push(RuleAttribute::FwMark(v));
                    attrs.push(RuleAttribute::FwMask(u32::MAX));
                }
                if let Some(s) = g.suppress {
                    attrs.push(RuleAttribute::SuppressPrefixLen(s as u32));
                }
                if g.action == RuleAction::Goto {
                    attrs.push(RuleAttribute::Goto(g.goto));
                }
                if g.from10.is_some() {
                    attrs.push(RuleAttribute::Source("10.0.0.0".parse().unwrap()));
                }
                let mut m = rule(g.prio, g.action, g.table, attrs);
                if g.from10.is_some() {
                    m.header.src_len = 16;
                }
                if g.invert {
                    m.header.flags |= RuleFlags::Invert;
                }
                msgs.push(m);
            }
            msgs.push(lookup(32766, TABLE_MAIN, vec![]));
            let p = Policy::from_dump(&msgs);
            let fast = p
                .tables(false, Some(iif))
                .into_iter()
                .find(|t| matches!(of(*t), Content::Route(_)));
            cases += 1;
            if let Some(t) = fast {
                routed += 1;
                assert_eq!(
                    kernel,
                    Done::Table(t),
                    "{iif}, from 10/16 {src10}, tables {content:?}, rules {gens:#?}"
                );
            }
            // The rule program, walked as the fast path walks it: the
            // kernel's outcome wherever it does not leave the packet to it.
            let index = |n: &str| {
                ["lo", "dut0", "dut1"]
                    .iter()
                    .position(|x| *x == n)
                    .map(|i| i as u32 + 1)
            };
            let program = p.program(false, index, 63);
            let flow = Flow {
                iif: index(iif).unwrap(),
                src: if src10 { 0x0a00_0001 } else { 0xc000_0201 },
                dst: 0xc633_6401,
                ..Default::default()
            };
            let walked = walk(&program, &flow, 32, |v| match of(v.table) {
                Content::Route(len) if !v.refuses(len) => Some(v.table),
                _ => None,
            });
            // (Unrouted: no step routed it, the kernel walks on and
            // answers; Kernel: a step left it to the kernel.)
            let done = match walked {
                Outcome::Route(t) => Done::Table(t),
                Outcome::Blackhole => Done::Blackhole,
                Outcome::Unrouted | Outcome::Kernel => continue,
            };
            programmed += 1;
            assert_eq!(
                kernel, done,
                "the program: {iif}, from 10/16 {src10}, tables {content:?}, rules {gens:#?}, steps {program:#?}"
            );
        }
        // The walk is followed often enough to mean something.
        assert!(
            routed * 5 > cases,
            "{routed} of {cases} routed in the fast path"
        );
        // The program decides most: what it leaves to the kernel is what
        // main's table misses.
        assert!(
            programmed * 10 > cases * 6,
            "{programmed} of {cases} decided by the program"
        );
        eprintln!(
            "{routed} of {cases} routed by the walk of tables, {programmed} decided by the program"
        );
    }
}
