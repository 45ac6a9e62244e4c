//! How the mirror follows the kernel: notifications applied as they come
//! ([`apply_notifications`]), and what no notification announces (legacy
//! iptables tables and netfilter's hooks, tc programs, the interfaces' XDP
//! features, IPv6 switched off) read again when something hints at a
//! change and once a second, on a thread of its own ([`Poller`]).
use crate::mirror::Mirror;
use anyhow::Result;
use linerate_dataplane::dataplane::Dataplane;
use linerate_netlink::netfilter::Hooks;
use linerate_netlink::route;
use linerate_netlink::tc::TcHooks;
use linerate_netlink::xdp_features::XdpXmit;
use std::collections::BTreeMap;

/// What no notification announces, read once a second: legacy iptables
/// tables, tcx programs, XDP features.
pub enum Job {
    /// Read them, for these interfaces.
    Read(Vec<u32>),
    /// Tell the kernel these neighbours were used (NTF_USE).
    MarkUsed(Vec<(u32, std::net::IpAddr)>),
    /// Tell the kernel's bridges frames came from these MACs on these
    /// ports (NTF_USE).
    MarkFdbUsed(Vec<(u32, [u8; 6])>),
}

pub struct Unnotified {
    pub netfilter: Hooks,
    pub tc: BTreeMap<u32, TcHooks>,
    pub xdp: Option<BTreeMap<u32, XdpXmit>>,
}

/// Reads them on a thread of its own, so that the loop following the
/// routes never waits for them: tc's qdisc dump waits for the kernel's
/// rtnl lock behind every route a BGP daemon installs, up to 840 ms in a
/// 1.1M-route FRR run (docs/route-changes-measured.md), and the routes would wait behind
/// it. The loop asks with its interfaces and a generation (`ask`), and
/// applies the answer when it comes (`answer`), unless it has read any of
/// them itself since it asked (a notification's re-read is newer). The
/// thread also tells the kernel which neighbours the fast path used
/// (`mark_used`): that takes rtnl too.
pub struct Poller {
    asks: std::sync::mpsc::Sender<Job>,
    answers: std::sync::mpsc::Receiver<Unnotified>,
    /// The generation the outstanding question was asked at.
    asked: Option<u64>,
}

impl Poller {
    /// The thread inherits the caller's network namespace, and ends when
    /// the poller is dropped.
    pub fn start() -> Result<Poller> {
        let (asks, jobs) = std::sync::mpsc::channel::<Job>();
        let (tell, answers) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("linerate-poll".into())
            .spawn(move || {
                for job in jobs {
                    match job {
                        Job::Read(ifindexes) => {
                            let u = Unnotified {
                                netfilter: read_netfilter(),
                                tc: read_tc(&ifindexes),
                                xdp: read_xdp_features(),
                            };
                            if tell.send(u).is_err() {
                                break;
                            }
                        }
                        Job::MarkUsed(neighbours) => {
                            if let Err(e) = route::mark_neighbours_used(&neighbours) {
                                tracing::warn!("{e:#}");
                            }
                        }
                        Job::MarkFdbUsed(entries) => {
                            if let Err(e) = route::mark_fdb_used(&entries) {
                                tracing::warn!("{e:#}");
                            }
                        }
                    }
                }
            })?;
        Ok(Poller {
            asks,
            answers,
            asked: None,
        })
    }

    /// Asks for a reading unless one is outstanding.
    pub fn ask(&mut self, ifindexes: Vec<u32>, generation: u64) {
        if self.asked.is_none() && self.asks.send(Job::Read(ifindexes)).is_ok() {
            self.asked = Some(generation);
        }
    }

    /// Has the kernel told these neighbours were used (after what is
    /// queued before: at most a second late).
    pub fn mark_used(&mut self, neighbours: Vec<(u32, std::net::IpAddr)>) {
        if !neighbours.is_empty() {
            let _ = self.asks.send(Job::MarkUsed(neighbours));
        }
    }

    /// Has the kernel's bridges refresh these FDB entries (port, MAC).
    pub fn mark_fdb_used(&mut self, entries: Vec<(u32, [u8; 6])>) {
        if !entries.is_empty() {
            let _ = self.asks.send(Job::MarkFdbUsed(entries));
        }
    }

    /// The reading, if one came and nothing newer was read since it was
    /// asked for.
    pub fn answer(&mut self, generation: u64) -> Option<Unnotified> {
        let u = self.answers.try_recv().ok()?;
        let asked = self.asked.take()?;
        (asked == generation).then_some(u)
    }
}

/// Applies the kernel's notifications; errors are said and the rest goes
/// on. A change of the policy rules reloads them whole (linerate_netlink::policy).
/// Whether it read netfilter's, tc's hooks or the XDP features again.
pub fn apply_notifications<D: Dataplane>(mirror: &mut Mirror<D>, msgs: &[route::Change]) -> bool {
    let again = route::rereads(msgs);
    // What the routing lines say changes with a rule or a link (a VLAN
    // device, a VRF's port), not with the routes of a table's load.
    let before = (again.rules || again.xdp_features).then(|| mirror.routing());
    for m in msgs {
        if let Err(e) = mirror.apply_change(m) {
            tracing::warn!("{e:#}");
        }
    }
    let tc = again.tc || mirror.take_links_up_or_down();
    if again.netfilter {
        follow_netfilter(mirror);
    }
    if tc {
        follow_tc(mirror);
    }
    if again.xdp_features {
        follow_xdp_features(mirror);
    }
    if again.rules {
        if let Err(e) = route::dump_rules().and_then(|r| mirror.set_rules(&r)) {
            tracing::warn!("the policy rules: {e:#}");
        }
    }
    if let Some(before) = before {
        say_routing_changed(&before, &mirror.routing());
    }
    again.netfilter || tc || again.xdp_features
}

/// Asks `strips` whether each of the router's ports strips VLAN tags
/// (the driver's rx-vlan-offload, by name: no notification says when
/// `ethtool -K` changes it), and says what that changes for their VLAN
/// devices.
pub fn follow_tag_stripping<D: Dataplane>(mirror: &mut Mirror<D>, strips: impl Fn(&str) -> bool) {
    let strips: std::collections::HashSet<u32> = mirror
        .ingress_names()
        .into_iter()
        .filter(|(_, n)| strips(n))
        .map(|(i, _)| i)
        .collect();
    // (Read each second: the lines only when it changed.)
    if !mirror.strips_tags_change(&strips) {
        return;
    }
    let before = mirror.routing();
    if let Err(e) = mirror.set_strips_tags(strips) {
        tracing::warn!("{e:#}");
    }
    say_routing_changed(&before, &mirror.routing());
}

/// Says what the policy rules now make of an interface's transit packets
/// where it changed (`now` against `before`, crate::mirror::Mirror::routing):
/// each new line, and main's table again where an interface's line went.
pub fn say_routing_changed(before: &[(String, String)], now: &[(String, String)]) {
    for (key, line) in now {
        if !before.iter().any(|(k, l)| k == key && l == line) {
            tracing::info!("{line}");
        }
    }
    for (key, _) in before {
        if !now.iter().any(|(k, _)| k == key) {
            tracing::info!("{key}: routed by main's table");
        }
    }
}

/// Reads which netfilter hooks see forwarded packets (linerate_netlink::netfilter)
/// and hands them to the mirror, saying so when a family starts or stops
/// going through them. Unreadable: both families are taken as hooked
/// (never bypass a firewall that may be there).
pub fn follow_netfilter<D: Dataplane>(mirror: &mut Mirror<D>) {
    apply_netfilter(mirror, read_netfilter());
}

fn read_netfilter() -> Hooks {
    Hooks::dump().unwrap_or_else(|e| {
        tracing::warn!("{e:#}; the kernel forwards everything until they can be read");
        let unknown = vec!["netfilter hooks that could not be read".to_string()];
        Hooks {
            ipv4: unknown.clone(),
            ipv6: unknown.clone(),
            nat: [false; 2],
            bridge: unknown.clone(),
            bridged: unknown,
            br_netfilter: Some(linerate_netlink::netfilter::BrNetfilter {
                call: [true; 2],
                tagged: true,
            }),
        }
    })
}

pub fn apply_netfilter<D: Dataplane>(mirror: &mut Mirror<D>, hooks: Hooks) {
    let before = mirror.netfilter();
    for (family, now, was) in [
        ("IPv4", &hooks.ipv4, &before.ipv4),
        ("IPv6", &hooks.ipv6, &before.ipv6),
    ] {
        say_hooks_changed(
            now,
            was,
            || {
                format!(
                    "no netfilter hook sees forwarded {family} any more: the fast path forwards it"
                )
            },
            |hooks| {
                format!("netfilter sees forwarded {family} ({hooks}): the kernel forwards it, through them, unless the firewall judges them all")
            },
        );
    }
    say_hooks_changed(
        &hooks.bridge,
        &before.bridge,
        || "no netfilter bridge chain sees what a bridge's port takes in any more".to_string(),
        |hooks| {
            format!("netfilter's bridge chains see what a bridge's port takes in ({hooks}): the kernel routes what arrives on the router's bridge ports")
        },
    );
    say_hooks_changed(
        &hooks.bridged,
        &before.bridged,
        || "no netfilter chain sees what a bridge forwards between its ports any more".to_string(),
        |hooks| {
            format!("netfilter sees what a bridge forwards between its ports ({hooks}): the kernel bridges it")
        },
    );
    if let Err(e) = mirror.set_netfilter(hooks) {
        tracing::warn!("{e:#}");
    }
}

/// Says when hooks the kernel's forwarding goes through (netfilter's, tc's)
/// are all gone (`gone`), or appear or change (`came`, given them joined).
fn say_hooks_changed(
    now: &[String],
    was: &[String],
    gone: impl FnOnce() -> String,
    came: impl FnOnce(String) -> String,
) {
    if now.is_empty() && !was.is_empty() {
        tracing::info!("{}", gone());
    } else if !now.is_empty() && now != was {
        tracing::info!("{}", came(now.join(", ")));
    }
}

/// Reads what tc does on the router's interfaces and the bridges they are
/// ports of (linerate_netlink::tc) and hands it to the mirror, saying so
/// when a side of an interface starts or stops going through it.
/// Unreadable: every side is taken as acted on.
pub fn follow_tc<D: Dataplane>(mirror: &mut Mirror<D>) {
    apply_tc(mirror, read_tc(&mirror.tc_interfaces()));
}

fn read_tc(ifindexes: &[u32]) -> BTreeMap<u32, TcHooks> {
    linerate_netlink::tc::dump(ifindexes).unwrap_or_else(|e| {
        tracing::warn!("{e:#}; the kernel forwards everything until tc can be read");
        let unknown = vec!["tc, which could not be read".to_string()];
        ifindexes
            .iter()
            .map(|&i| {
                let t = TcHooks {
                    ingress: unknown.clone(),
                    egress: unknown.clone(),
                };
                (i, t)
            })
            .collect()
    })
}

pub fn apply_tc<D: Dataplane>(mirror: &mut Mirror<D>, tc: BTreeMap<u32, TcHooks>) {
    let none = TcHooks::default();
    for (i, name) in mirror.names_of(&mirror.tc_interfaces()) {
        let (now, was) = (
            tc.get(&i).unwrap_or(&none),
            mirror.tc().get(&i).unwrap_or(&none),
        );
        for (side, now, was, what) in [
            ("ingress", &now.ingress, &was.ingress, "what comes in there"),
            ("egress", &now.egress, &was.egress, "what goes out there"),
        ] {
            say_hooks_changed(
                now,
                was,
                || format!("tc no longer acts on {name}'s {side}: the fast path forwards {what}"),
                |hooks| {
                    format!("tc acts on {name}'s {side} ({hooks}): the kernel forwards {what}, through it")
                },
            );
        }
    }
    if let Err(e) = mirror.set_tc(tc) {
        tracing::warn!("{e:#}");
    }
}

/// Reads what the router's interfaces take as XDP redirect targets
/// (linerate_netlink::xdp_features) and hands it to the mirror, saying when an
/// interface stops or starts taking redirected frames. A veth's changes
/// with its peer's settings, which no notification here reports: run once
/// a second and after link changes. A kernel without the netdev family:
/// single buffers are sent as before, multi-buffer frames pass.
pub fn follow_xdp_features<D: Dataplane>(mirror: &mut Mirror<D>) {
    if let Some(known) = read_xdp_features() {
        apply_xdp_features(mirror, known);
    }
}

/// None (said) when they cannot be read: the mirror keeps what it had.
fn read_xdp_features() -> Option<BTreeMap<u32, XdpXmit>> {
    match linerate_netlink::xdp_features::dump() {
        Ok(k) => Some(k.unwrap_or_default()),
        Err(e) => {
            tracing::warn!("{e:#}");
            None
        }
    }
}

pub fn apply_xdp_features<D: Dataplane>(mirror: &mut Mirror<D>, known: BTreeMap<u32, XdpXmit>) {
    for (ifindex, name) in mirror.ingress_names() {
        let (was, now) = (
            mirror.xmit(ifindex),
            known.get(&ifindex).copied().unwrap_or(XdpXmit::UNKNOWN),
        );
        if was.redirect != now.redirect {
            tracing::info!(
                "{}",
                if now.redirect {
                    format!("{name} takes XDP frames again: the fast path forwards through it")
                } else {
                    format!("linerate route: {name} does not take frames redirected in XDP (a veth whose peer has neither XDP nor GRO?): the kernel forwards what leaves there")
                }
            );
        }
    }
    if let Err(e) = mirror.set_xmit(known) {
        tracing::warn!("{e:#}");
    }
}

/// Reads whether IPv6 is on for each of the router's interfaces (no
/// notification says when it changes: run after notifications, which its
/// effects bring, and once a second).
pub fn follow_ipv6_switches<D: Dataplane>(mirror: &mut Mirror<D>) {
    let mut all = mirror.ingress_names();
    all.extend(mirror.vlan_names());
    for (ifindex, name) in all {
        let on = linerate_netlink::netconf::ipv6_enabled(&name);
        if let Err(e) = mirror.set_ipv6_enabled(ifindex, on) {
            tracing::warn!("{name}: {e:#}");
        }
    }
}
