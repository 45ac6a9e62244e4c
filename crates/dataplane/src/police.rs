//! The limits of what the fast path passes to the kernel, per class of
//! frame and per CPU (bpf/include/router/police.h): as a user writes them
//! (`control=20k/5k`: 20,000 frames a second, bursts of 5,000; `off`: no
//! limit), the defaults, and the program's cell rates.
use crate::layout::{PuntLimit, PuntPolicy, PUNT_CLASSES};
use std::fmt;

/// A class's limit: frames a second and the burst let through at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub rate: u64,
    pub burst: u64,
}

/// Every class's limit (None: not policed), in [`PUNT_CLASSES`]' order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Police {
    pub limits: [Option<Limit>; PUNT_CLASSES.len()],
}

/// The limits a router starts with, per CPU. What a network needs of each
/// class, with room (docs/policing.md has the reasoning and the
/// measurements): the kernel spends about a microsecond on each frame it
/// takes, so the classes an attacker can fill are held to a few percent
/// of a core, and what the router must see (neighbours, routing
/// protocols, new connections) gets more than real networks send.
const DEFAULTS: [(&str, Option<(u64, u64)>); PUNT_CLASSES.len()] = [
    ("neighbour", Some((10_000, 2_000))),
    ("control", Some((20_000, 5_000))),
    ("icmp", Some((5_000, 1_000))),
    ("local", Some((10_000, 2_000))),
    ("errors", Some((5_000, 1_000))),
    ("slow", Some((50_000, 5_000))),
    ("unresolved", Some((5_000, 1_000))),
    ("connections", Some((200_000, 20_000))),
    ("transit", None),
];

impl Default for Police {
    fn default() -> Self {
        let mut limits = [None; PUNT_CLASSES.len()];
        for (i, (_, l)) in DEFAULTS.iter().enumerate() {
            limits[i] = l.map(|(rate, burst)| Limit { rate, burst });
        }
        Police { limits }
    }
}

impl Police {
    /// No class limited.
    pub fn off() -> Self {
        Police {
            limits: [None; PUNT_CLASSES.len()],
        }
    }

    /// The index of class `name`, or why not.
    pub fn class(name: &str) -> Result<usize, String> {
        PUNT_CLASSES.iter().position(|c| *c == name).ok_or_else(|| {
            format!(
                "{name:?} is not a class (one of {})",
                PUNT_CLASSES.join(", ")
            )
        })
    }

    /// Sets class `name` to `limit` as written ("20k/5k", "off").
    pub fn set(&mut self, name: &str, limit: &str) -> Result<(), String> {
        let i = Self::class(name)?;
        self.limits[i] = parse_limit(limit).map_err(|why| format!("{name}: {why}"))?;
        Ok(())
    }

    /// Applies `--police`'s list on top: `off`, or `CLASS=LIMIT,...`.
    pub fn apply_list(&mut self, list: &str) -> Result<(), String> {
        if list == "off" {
            *self = Police::off();
            return Ok(());
        }
        for item in list.split(',') {
            let (name, limit) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?}: give CLASS=RATE/BURST or CLASS=off"))?;
            self.set(name.trim(), limit.trim())?;
        }
        Ok(())
    }

    /// The program's cell rates on a clock of `jiffy_ns` ticks. A burst
    /// is at least a tick's worth of frames: the clock moves a tick at a
    /// time, and a shorter one would hold a class under its rate.
    pub fn program(&self, jiffy_ns: u64) -> PuntPolicy {
        let mut p = PuntPolicy {
            jiffy_ns,
            ..Default::default()
        };
        for (i, l) in self.limits.iter().enumerate() {
            if let Some(l) = l {
                let interval = (1_000_000_000 / l.rate).max(1);
                p.class[i] = PuntLimit {
                    interval_ns: interval,
                    burst_ns: (interval * (l.burst - 1)).max(jiffy_ns),
                };
            }
        }
        p
    }
}

impl fmt::Display for Police {
    /// `neighbour 10k/2k, ..., transit off`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = PUNT_CLASSES
            .iter()
            .zip(&self.limits)
            .map(|(name, l)| match l {
                Some(l) => format!("{name} {}/{}", count(l.rate), count(l.burst)),
                None => format!("{name} off"),
            })
            .collect();
        f.write_str(&parts.join(", "))
    }
}

/// A count as written back: 20000 as "20k", 1500000 as "1.5M".
fn count(n: u64) -> String {
    if n >= 1_000_000 && n.is_multiple_of(100_000) {
        format!("{}M", n as f64 / 1e6)
    } else if n >= 1_000 && n.is_multiple_of(100) {
        format!("{}k", n as f64 / 1e3)
    } else {
        n.to_string()
    }
}

/// "RATE/BURST" (frames a second and frames, each with an optional k or M)
/// or "off".
pub fn parse_limit(text: &str) -> Result<Option<Limit>, String> {
    if text == "off" {
        return Ok(None);
    }
    let (rate, burst) = text
        .split_once('/')
        .ok_or_else(|| format!("{text:?}: give RATE/BURST (\"20k/5k\") or \"off\""))?;
    let rate = number(rate).map_err(|why| format!("rate {why}"))?;
    let burst = number(burst).map_err(|why| format!("burst {why}"))?;
    if rate == 0 || rate > 1_000_000_000 {
        return Err(format!(
            "rate {rate}: 1 to 1G frames a second (\"off\": no limit)"
        ));
    }
    if burst == 0 || burst > 100_000_000 {
        return Err(format!("burst {burst}: 1 to 100M frames"));
    }
    Ok(Some(Limit { rate, burst }))
}

/// A whole number with an optional k (thousand), M (million) or G.
fn number(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, scale) = match t.char_indices().last() {
        Some((i, 'k')) => (&t[..i], 1_000.0),
        Some((i, 'M')) => (&t[..i], 1_000_000.0),
        Some((i, 'G')) => (&t[..i], 1_000_000_000.0),
        _ => (t, 1.0),
    };
    let v: f64 = digits
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| format!("{text:?} is not a number (20000, 20k, 1.5M)"))?;
    let n = v * scale;
    if n.fract() != 0.0 || n > u64::MAX as f64 {
        return Err(format!("{text:?} is not a whole number"));
    }
    Ok(n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_read_and_write_back() {
        assert_eq!(
            parse_limit("20k/5k"),
            Ok(Some(Limit {
                rate: 20_000,
                burst: 5_000
            }))
        );
        assert_eq!(
            parse_limit("1.5M/100"),
            Ok(Some(Limit {
                rate: 1_500_000,
                burst: 100
            }))
        );
        assert_eq!(parse_limit("off"), Ok(None));
        for (bad, why) in [
            ("20k", "give RATE/BURST"),
            ("0/10", "rate 0: 1 to 1G"),
            ("10/0", "burst 0: 1 to 100M"),
            ("x/10", "rate \"x\" is not a number"),
            ("1.5/10", "rate \"1.5\" is not a whole number"),
            ("-3/10", "is not a number"),
        ] {
            let e = parse_limit(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let p = Police::default();
        assert_eq!(
            p.to_string(),
            "neighbour 10k/2k, control 20k/5k, icmp 5k/1k, local 10k/2k, errors 5k/1k, \
             slow 50k/5k, unresolved 5k/1k, connections 200k/20k, transit off"
        );
    }

    #[test]
    fn a_list_sets_classes_on_top_of_the_defaults() {
        let mut p = Police::default();
        p.apply_list("local=1k/10, transit=1M/1k").unwrap();
        assert_eq!(
            p.limits[Police::class("local").unwrap()],
            Some(Limit {
                rate: 1000,
                burst: 10
            })
        );
        assert!(p.limits[Police::class("transit").unwrap()].is_some());
        assert_eq!(
            p.apply_list("locals=1k/10").unwrap_err(),
            "\"locals\" is not a class (one of neighbour, control, icmp, local, errors, slow, unresolved, connections, transit)"
        );
        assert_eq!(
            p.apply_list("local").unwrap_err(),
            "\"local\": give CLASS=RATE/BURST or CLASS=off"
        );
        assert_eq!(
            p.apply_list("icmp=5").unwrap_err(),
            "icmp: \"5\": give RATE/BURST (\"20k/5k\") or \"off\""
        );
        p.apply_list("off").unwrap();
        assert_eq!(p, Police::off());
    }

    #[test]
    fn cell_rates() {
        const TICK: u64 = 4_000_000;
        let mut p = Police::off();
        p.set("errors", "1k/10").unwrap();
        let prog = p.program(TICK);
        let e = Police::class("errors").unwrap();
        // A frame a millisecond, nine of them early at most: ten at once.
        assert_eq!(prog.jiffy_ns, TICK);
        assert_eq!(
            prog.class[e],
            PuntLimit {
                interval_ns: 1_000_000,
                burst_ns: 9_000_000
            }
        );
        assert!(prog
            .class
            .iter()
            .enumerate()
            .all(|(i, l)| i == e || l.interval_ns == 0));
        // A rate beyond a frame a nanosecond still limits; its burst is
        // a tick's worth.
        p.set("errors", "1G/1").unwrap();
        assert_eq!(
            p.program(TICK).class[e],
            PuntLimit {
                interval_ns: 1,
                burst_ns: TICK
            }
        );
    }
}
