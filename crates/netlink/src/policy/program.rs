//! A family's rules compiled for the fast path's walk, where a list of
//! tables cannot say what they do ([`Policy::walk`] ended before main):
//! selectors on the source, destination, tos, protocol and ports, `not`,
//! goto, blackhole, suppressors. Each rule that can match a forwarded
//! packet becomes a step with the selectors that depend on the packet
//! (those that cannot, a mark, an output interface, a uid range, are
//! decided here once), and what it does; the fast path walks the steps as
//! fib_rules_lookup walks the rules (bpf/router/router.bpf.c,
//! policy_walk). What a step cannot decide (an attribute or action not
//! known here, unreachable and prohibit, which the kernel answers with an
//! ICMP error) goes to the kernel, for the packets that reach it only.
use super::{Action, Policy, Rule, TABLE_LOCAL, TABLE_MAIN};

/// A table as a rule looks it up: with `suppress_prefixlength N`, a route
/// of N bits or fewer is refused and the walk goes on (as a throw route
/// would); with `suppress_ifgroup G`, a route whose device (its first next
/// hop's) is in interface group G.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct View {
    pub table: u32,
    pub suppress_len: Option<u8>,
    pub suppress_group: Option<u32>,
}

impl View {
    /// Main's table as it is.
    pub const MAIN: View = View {
        table: TABLE_MAIN,
        suppress_len: None,
        suppress_group: None,
    };

    /// A table as it is.
    pub fn table(table: u32) -> View {
        View {
            table,
            ..View::MAIN
        }
    }

    /// Whether a route of `len` bits that the kernel would use (a unicast
    /// route: its lookup returned no error) is refused.
    pub fn refuses(&self, len: u8) -> bool {
        self.suppress_len.is_some_and(|s| len <= s)
    }
}

impl std::fmt::Display for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", super::table_name(self.table))?;
        if let Some(n) = self.suppress_len {
            write!(f, " suppress_prefixlength {n}")?;
        }
        match self.suppress_group {
            Some(g) => write!(f, " suppress_ifgroup {g}"),
            None => Ok(()),
        }
    }
}

/// What a step does with the packets it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Look the view up; a miss (no route, a throw route, a refused one)
    /// goes on to the next step.
    Lookup(View),
    /// Go on at this step.
    Goto(usize),
    Blackhole,
    /// The kernel decides.
    Kernel,
}

/// What a step matches, beside `not`: each selector set must hold.
/// Addresses are 128-bit words (IPv4 in the low 32 bits).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selectors {
    /// The input interface's index.
    pub iif: Option<u32>,
    pub src: Option<(u128, u8)>,
    pub dst: Option<(u128, u8)>,
    /// The tos selector (IPv4: compared with the packet's tos & 0x1c, as
    /// the kernel compares the legacy selector; IPv6: with its DSCP).
    pub tos: Option<u8>,
    pub proto: Option<u8>,
    pub sport: Option<(u16, u16)>,
    pub dport: Option<(u16, u16)>,
}

/// One step of a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compiled {
    pub invert: bool,
    pub sel: Selectors,
    pub step: Step,
    /// The rule it comes from, as `ip rule` shows it.
    pub text: String,
}

/// A packet as the rules see it, for walking a program in Rust (the
/// model, tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flow {
    pub iif: u32,
    pub src: u128,
    pub dst: u128,
    /// IPv4's tos, IPv6's traffic class.
    pub tos: u8,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
}

impl Selectors {
    /// Whether every selector holds for `f` (`bits`: 32 or 128).
    pub fn hold(&self, f: &Flow, bits: u8) -> bool {
        let prefix = |p: Option<(u128, u8)>, a: u128| {
            p.is_none_or(|(net, len)| mask(a, len, bits) == mask(net, len, bits))
        };
        let tos_mask = if bits == 32 { 0x1c } else { 0xfc };
        let within = |r: Option<(u16, u16)>, p: u16| r.is_none_or(|(lo, hi)| lo <= p && p <= hi);
        self.iif.is_none_or(|i| i == f.iif)
            && prefix(self.src, f.src)
            && prefix(self.dst, f.dst)
            && self.tos.is_none_or(|t| f.tos & tos_mask == t)
            && self.proto.is_none_or(|p| p == f.proto)
            && within(self.sport, f.sport)
            && within(self.dport, f.dport)
    }
}

/// The `len` high bits of a `bits`-bit address held in a 128-bit word.
pub fn mask(a: u128, len: u8, bits: u8) -> u128 {
    let len = len.min(bits) as u32;
    let keep = if len == 0 {
        0
    } else {
        (u128::MAX << (128 - len)) >> (128 - bits as u32)
    };
    a & keep
}

/// How a walk of a program ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome<R> {
    /// A view's lookup gave this.
    Route(R),
    Blackhole,
    Kernel,
    /// No step routed it: the kernel answers (no route).
    Unrouted,
}

/// Walks `program` for `f` as the fast path does; `lookup` gives a view's
/// route for the packet, None for a miss.
pub fn walk<R>(
    program: &[Compiled],
    f: &Flow,
    bits: u8,
    mut lookup: impl FnMut(View) -> Option<R>,
) -> Outcome<R> {
    let mut i = 0;
    while let Some(c) = program.get(i) {
        if c.sel.hold(f, bits) == c.invert {
            i += 1;
            continue;
        }
        match c.step {
            Step::Goto(to) => {
                assert!(to > i, "a goto jumps forward");
                i = to;
            }
            Step::Blackhole => return Outcome::Blackhole,
            Step::Kernel => return Outcome::Kernel,
            Step::Lookup(v) => match lookup(v) {
                Some(r) => return Outcome::Route(r),
                None => i += 1,
            },
        }
    }
    Outcome::Unrouted
}

impl Policy {
    /// The family's rules as a program of at most `max_steps` steps, the
    /// input interfaces named by their indexes (`ifindex`; a rule on an
    /// interface that does not exist matches no packet, as the kernel's).
    ///
    /// Left out: rules that match no forwarded packet, nop, lookups of
    /// the local table (each FIB holds its routes over its own), a goto
    /// whose target is gone (the kernel goes on past it). The program
    /// stops after a lookup of main that every packet makes, unless a goto
    /// jumps past it (what main misses goes to the kernel, as with the
    /// default rules). A program
    /// longer than `max_steps` ends in a step that sends what reaches it
    /// to the kernel.
    pub fn program(
        &self,
        ipv6: bool,
        ifindex: impl Fn(&str) -> Option<u32>,
        max_steps: usize,
    ) -> Vec<Compiled> {
        let rules = if ipv6 { &self.v6 } else { &self.v4 };
        let mut out: Vec<Compiled> = Vec::new();
        // The step each rule starts at (the next one if it has none).
        let mut at = vec![usize::MAX; rules.len() + 1];
        let mut gotos: Vec<(usize, u32, usize)> = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            at[i] = out.len();
            let Some(c) = compile(r, &ifindex) else {
                continue;
            };
            if let Step::Goto(_) = c.step {
                if let Action::Goto(target) = r.action {
                    gotos.push((out.len(), target, i));
                }
            }
            let everyone = c.sel == Selectors::default() && !c.invert;
            // (Unless a goto before it jumps past it.)
            let jumped_past = gotos.iter().any(|&(_, target, _)| {
                rules[i + 1..].iter().any(|r| r.priority == target) && target > r.priority
            });
            let ends = everyone && c.step == Step::Lookup(View::MAIN) && !jumped_past;
            out.push(c);
            if ends {
                break;
            }
        }
        let end = out.len();
        at.iter_mut()
            .filter(|a| **a == usize::MAX)
            .for_each(|a| *a = end);
        for (step, target, from) in gotos {
            // The first rule of the target's priority, as the kernel
            // resolves it; none (it went): on to the next step.
            out[step].step = match rules.iter().position(|r| r.priority == target) {
                Some(j) if j > from => Step::Goto(at[j]),
                Some(_) => Step::Kernel,
                None => Step::Goto(step + 1),
            };
        }
        if out.len() > max_steps {
            out.truncate(max_steps - 1);
            out.push(Compiled {
                invert: false,
                sel: Selectors::default(),
                step: Step::Kernel,
                text: format!("(the rules past the fast path's {max_steps} steps)"),
            });
            for c in &mut out {
                if let Step::Goto(to) = &mut c.step {
                    *to = (*to).min(max_steps - 1);
                }
            }
        }
        out
    }

    /// The tables (as views) the family's program looks up, in order.
    pub fn program_views(program: &[Compiled]) -> Vec<View> {
        let mut v = Vec::new();
        for c in program {
            if let Step::Lookup(view) = c.step {
                if !v.contains(&view) {
                    v.push(view);
                }
            }
        }
        v
    }
}

/// A rule as a step; None if no forwarded packet reaches its action.
fn compile(r: &Rule, ifindex: &impl Fn(&str) -> Option<u32>) -> Option<Compiled> {
    let iif = r.iif.as_ref().map(|name| ifindex(name));
    let never = r.oif
        || r.marked
        || r.tun_id
        || r.l3mdev
        || r.uid_excludes_root
        || matches!(iif, Some(None));
    let p = &r.packet;
    let step = match r.action {
        _ if p.unknown && !never => Step::Kernel,
        Action::Table {
            id: TABLE_LOCAL, ..
        }
        | Action::Nop => return None,
        Action::Table { id, .. } => Step::Lookup(View {
            table: id,
            suppress_len: p.suppress_len.map(|n| n.min(128) as u8),
            suppress_group: p.suppress_group,
        }),
        Action::Goto(_) => Step::Goto(0),
        Action::Blackhole => Step::Blackhole,
        Action::Refuse | Action::Other => Step::Kernel,
    };
    let text = r.text.clone();
    if never {
        // `not` a rule that matches no forwarded packet: every packet.
        return r.invert.then_some(Compiled {
            invert: false,
            sel: Selectors::default(),
            step,
            text,
        });
    }
    if p.unknown {
        // What reaches it goes to the kernel, whatever it selects.
        return Some(Compiled {
            invert: false,
            sel: Selectors::default(),
            step,
            text,
        });
    }
    Some(Compiled {
        invert: r.invert,
        sel: Selectors {
            iif: iif.flatten(),
            src: p.src,
            dst: p.dst,
            tos: (p.tos != 0).then_some(p.tos),
            proto: p.proto,
            sport: p.sport,
            dport: p.dport,
        },
        step,
        text,
    })
}
