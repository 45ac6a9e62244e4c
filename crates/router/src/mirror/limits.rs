//! The fast path's tables that can fill, and what did not fit. Whatever
//! a full table cannot take goes to the kernel, which forwards it as it
//! would without linerate: each such entry is counted by table (the
//! metrics' `linerate_table_overflows`), and a table's first overflow is
//! said as a warning naming its limit and what the kernel does instead,
//! once: a table that stays full does not fill the log. docs/reference/
//! limits.md lists them with the tests that fill each.
use linerate_dataplane::layout::{
    FDB_SETS, FDB_WAYS, NH_GROUP_BUCKETS, POLICY_RULES, ROUTER_NEXTHOPS, ROUTER_NH_GROUPS,
    ROUTER_VLANS, ROUTER_VLAN_PORTS,
};

/// FIB slots beside main's (linerate_dataplane::fastpath::FastPath::TABLE_SLOTS).
const OTHER_TABLE_SLOTS: usize = linerate_dataplane::fastpath::FastPath::TABLE_SLOTS - 1;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;

/// A table of the fast path with a fixed room.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    /// A FIB's arena (per family): its blocks.
    Fib4,
    Fib6,
    /// Next-hop entries (each gateway and MAC, each device route).
    Nexthops,
    /// ECMP groups.
    Groups,
    /// An ECMP route's members beyond a group's buckets.
    GroupMembers,
    /// A bridge's FDB: a MAC whose set is full.
    Fdb,
    /// Tables the policy rules look up beyond the FIB slots beside main's.
    OtherTables,
    /// A family's rules beyond the steps of its program.
    RuleSteps,
    /// VLAN devices beyond the devices or the ports with them it holds.
    VlanDevices,
}

impl Table {
    pub const ALL: [Table; 9] = [
        Table::Fib4,
        Table::Fib6,
        Table::Nexthops,
        Table::Groups,
        Table::GroupMembers,
        Table::Fdb,
        Table::OtherTables,
        Table::RuleSteps,
        Table::VlanDevices,
    ];

    /// Its name in metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            Table::Fib4 => "fib_ipv4",
            Table::Fib6 => "fib_ipv6",
            Table::Nexthops => "nexthops",
            Table::Groups => "nexthop_groups",
            Table::GroupMembers => "nexthop_group_members",
            Table::Fdb => "fdb",
            Table::OtherTables => "other_tables",
            Table::RuleSteps => "rule_steps",
            Table::VlanDevices => "vlan_devices",
        }
    }

    /// Its room, and what the kernel does with what does not fit.
    fn said(self) -> String {
        match self {
            Table::Fib4 | Table::Fib6 => {
                "its FIB's arena is full: the kernel forwards the route's whole first-level block"
                    .to_string()
            }
            Table::Nexthops => format!(
                "the {ROUTER_NEXTHOPS} next-hop entries are in use: the kernel forwards the route until a route's removal frees one"
            ),
            Table::Groups => format!(
                "the {ROUTER_NH_GROUPS} ECMP groups are in use: the kernel forwards the route until one is freed"
            ),
            Table::GroupMembers => format!(
                "an ECMP route of more than {NH_GROUP_BUCKETS} members: the kernel forwards it"
            ),
            Table::OtherTables => format!(
                "the {} FIB slots beside main's are taken: the kernel routes what the rules send to the table",
                OTHER_TABLE_SLOTS
            ),
            Table::RuleSteps => format!(
                "the rule program holds {} steps: the kernel routes what reaches the rules past them",
                POLICY_RULES - 1
            ),
            Table::VlanDevices => format!(
                "the fast path holds {ROUTER_VLANS} VLAN devices on {ROUTER_VLAN_PORTS} ports: the kernel routes the device's frames until one goes"
            ),
            Table::Fdb => format!(
                "its FDB set is full ({FDB_SETS} sets of {FDB_WAYS}): frames to and from the MAC are the kernel's until a MAC of the set goes"
            ),
        }
    }
}

/// Entries left to the kernel, by table, and the tables whose overflow
/// has been said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overflows {
    counts: BTreeMap<Table, u64>,
    said: BTreeSet<Table>,
}

impl Overflows {
    /// `what` did not fit in `table`: counted, and said if the table's
    /// first.
    pub fn left_out(&mut self, table: Table, what: &dyn Display) {
        *self.counts.entry(table).or_default() += 1;
        if self.said.insert(table) {
            tracing::warn!(
                "{what} left to the kernel: {} (counted in linerate_table_overflows{{table=\"{}\"}}; said once)",
                table.said(),
                table.name()
            );
        } else {
            tracing::debug!("{what} left to the kernel ({} full)", table.name());
        }
    }

    /// Entries of `table` left to the kernel so far.
    pub fn of(&self, table: Table) -> u64 {
        self.counts.get(&table).copied().unwrap_or(0)
    }

    /// Every table's count, those with none too (in Table::ALL's order).
    pub fn all(&self) -> Vec<(Table, u64)> {
        Table::ALL.iter().map(|&t| (t, self.of(t))).collect()
    }

    /// Adds `other`'s counts to these (what each part of the mirror
    /// counted, as one).
    pub fn merged(&self, other: &Overflows) -> Overflows {
        let mut m = self.clone();
        for (&t, &n) in &other.counts {
            *m.counts.entry(t).or_default() += n;
        }
        m.said.extend(other.said.iter().copied());
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_overflow_is_counted_and_each_table_said_once() {
        let mut o = Overflows::default();
        o.left_out(Table::Nexthops, &"route 10.0.0.0/24");
        o.left_out(Table::Nexthops, &"route 10.0.1.0/24");
        o.left_out(Table::Fdb, &"02:00:00:00:00:01");
        assert_eq!(o.of(Table::Nexthops), 2);
        assert_eq!(o.of(Table::Fdb), 1);
        assert_eq!(o.of(Table::Fib4), 0);
        assert_eq!(o.said, BTreeSet::from([Table::Nexthops, Table::Fdb]));
        let all = o.all();
        assert_eq!(all.len(), Table::ALL.len());
        assert_eq!(all[2], (Table::Nexthops, 2));
        let mut other = Overflows::default();
        other.left_out(Table::Nexthops, &"x");
        assert_eq!(o.merged(&other).of(Table::Nexthops), 3);
    }

    #[test]
    fn names_are_distinct() {
        let names: BTreeSet<&str> = Table::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(names.len(), Table::ALL.len());
    }
}
