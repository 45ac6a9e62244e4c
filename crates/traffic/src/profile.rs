//! Traffic profiles: what a lab run or a search offers a DUT (family,
//! frame sizes, flows), as a scenario names them, and the same checked
//! once into typed values the generator takes.
use crate::flows::{self, Endpoints};
use crate::frame::{FrameSpec, Headers};
use crate::gen::{GenOptions, Mode};
use crate::sizes::SizeMix;
use crate::tcp::{Proto, TcpPhase, TcpRun};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Default flows, 20 sources x 100 destinations = 2000 (BSDRP's benches).
/// All are routed, none on-link: the lab's DUT reaches the destinations
/// through the receiver's address (an on-link destination would need
/// neighbour discovery from each, which an XDP receiver never answers:
/// the kernel then forwards nothing).
pub const SRC_V4: &str = "198.18.10.1:2000-198.18.10.20";
pub const DST_V4: &str = "198.19.10.1:2000-198.19.10.100";
pub const SRC_V6: &str = "2001:2:0:10::1-2001:2:0:10::14";
pub const DST_V6: &str = "2001:2:0:8010::1-2001:2:0:8010::64";

/// The spread profile's destinations: 1.0.0.1 to 126.255.255.254 (no
/// 0/8, no loopback, none of the lab's 198.18.0.0/15).
pub const SPREAD_V4: &str = "1.0.0.1:2000-126.255.255.254";

/// The port of a range that names none (pkt-gen's default).
const DEFAULT_PORT: u16 = 2000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Ipv4,
    Ipv6,
}

/// A traffic profile as written: family, frame sizes, flows.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub family: Family,
    /// `linerate gen -l`: a size, `imix`, `rfc2544` or a list.
    pub len: String,
    /// `-s` and `-d` ranges (default: 20 sources x 100 destinations).
    pub src: Option<String>,
    pub dst: Option<String>,
    /// Each frame's destination address and port drawn at random from
    /// `dst` (`gen -Z`).
    #[serde(default)]
    pub random_dst: bool,
    /// Each frame's source address and port drawn at random from `src`
    /// (`gen -z`).
    #[serde(default)]
    pub random_src: bool,
    /// `udp` (the default) or `tcp`: each flow a TCP connection, opened
    /// before the runs where the DUT tracks connections (`gen --tcp`).
    #[serde(default)]
    pub proto: Proto,
    /// With `proto = "tcp"`: short connections one after the other, each
    /// this many data segments (SYN, the data, FIN, the last ACK: every
    /// frame a step of one, `gen --tcp churn`); new connections a second
    /// are the frame rate over segments + 3.
    pub churn: Option<u32>,
    /// A traffic mix (crate::mix): other traffic sent with this one frame
    /// by frame, each part a profile of its own (`[[profile.NAME.mix]]`);
    /// each round of the mix, `weight` frames of this and of each part
    /// (default 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mix: Vec<Profile>,
    pub weight: Option<u32>,
    /// A mix's part: its own frames a second (`"14k"`), whatever the rest
    /// is offered (a churn part's new connections a second are this over
    /// churn + 3, as users make them whatever the router's speed). A
    /// profile's: a fixed-rate run, whatever the measurement offers (its
    /// mix's parts need rates of their own too).
    pub rate: Option<String>,
    /// Every frame's TTL or hop limit (default 64; `gen --ttl`): 1 and 0
    /// are what a router hands its kernel.
    pub ttl: Option<u8>,
    /// What the IP header carries beyond the plain one (UDP): `options`
    /// (IPv4 options, an IPv6 hop-by-hop header) or `fragment` (a first
    /// fragment); default `plain` (`gen --headers`).
    #[serde(default, skip_serializing_if = "is_plain")]
    pub headers: Headers,
    /// Every frame tagged with this 802.1Q VLAN id (1 to 4094): for a DUT
    /// whose port is a trunk (scenario `vlans`; `gen --vlan`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// The generator's port its frames leave by: 1 (default) or 2, a
    /// lab's second port into the DUT (`lab.gen_ports = 2`): a mix's part
    /// of its own ingress, such as a tenant chosen by `iif`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
}

fn is_plain(h: &Headers) -> bool {
    *h == Headers::Plain
}

/// Why a profile is not good: the field (`len`, `src` or `dst`) and the
/// reason.
pub type ProfileError = linerate_host::field::FieldError;

/// A profile checked: every field parsed, the families agreeing.
#[derive(Clone, Debug)]
pub struct Traffic {
    pub ipv6: bool,
    pub sizes: SizeMix,
    pub src: Endpoints,
    pub dst: Endpoints,
    pub random_dst: bool,
    pub random_src: bool,
    pub proto: Proto,
    /// Churn: each connection's data segments.
    pub churn: Option<u32>,
    /// A mix's other parts, and this traffic's weight in it (1 alone).
    pub mix: Vec<Traffic>,
    pub weight: u32,
    /// Its own frames a second (a mix's part's, or a fixed-rate profile's).
    pub rate_pps: Option<u64>,
    pub ttl: u8,
    pub headers: Headers,
    pub vlan: Option<u16>,
    /// The generator's port (1 or 2).
    pub port: u32,
}

impl Profile {
    /// UDP frames of `len` over `family`, every other key its default.
    pub fn new(family: Family, len: &str) -> Profile {
        Profile {
            family,
            len: len.into(),
            src: None,
            dst: None,
            random_dst: false,
            random_src: false,
            proto: Proto::Udp,
            churn: None,
            mix: Vec::new(),
            weight: None,
            rate: None,
            ttl: None,
            headers: Headers::Plain,
            vlan: None,
            port: None,
        }
    }

    /// Parses and checks every field, once; a mix's parts too (a part's
    /// error is said as `mix`, the part's number and its field).
    pub fn check(&self) -> Result<Traffic, ProfileError> {
        let mut t = self.check_alone()?;
        let fail = |reason: String| ProfileError {
            field: "mix",
            reason,
        };
        if let Some(r) = &self.rate {
            // Its own rate: a fixed-rate run, whatever the measurement
            // offers; a mix's parts then each need theirs.
            let pps = linerate_imix::parse_rate("rate", r).map_err(|e| ProfileError {
                field: "rate",
                reason: e.trim_start_matches("rate: ").to_string(),
            })?;
            t.rate_pps = Some(pps.round().max(1.0) as u64);
            if self.mix.iter().any(|p| p.rate.is_none()) {
                return Err(ProfileError {
                    field: "rate",
                    reason: "a profile's own rate paces the whole mix: give each part a rate of its own too".into(),
                });
            }
        }
        if self.mix.is_empty() {
            if self.weight.is_some() {
                return Err(ProfileError {
                    field: "weight",
                    reason: "a weight is a share of a mix: this profile has none".into(),
                });
            }
            return Ok(t);
        }
        if self.mix.len() >= crate::mix::GEN_PARTS {
            return Err(fail(format!(
                "{} parts with this one: a mix has {} at most",
                self.mix.len() + 1,
                crate::mix::GEN_PARTS
            )));
        }
        t.weight = self.weight.unwrap_or(1);
        let mut total = t.weight;
        for (i, part) in self.mix.iter().enumerate() {
            let n = i + 2;
            if !part.mix.is_empty() {
                return Err(fail(format!("part {n}: a part is not a mix itself")));
            }
            let mut p = part
                .check_alone()
                .map_err(|e| fail(format!("part {n}: {}: {}", e.field, e.reason)))?;
            p.weight = part.weight.unwrap_or(1);
            if let Some(r) = &part.rate {
                let pps = linerate_imix::parse_rate("rate", r)
                    .map_err(|e| fail(format!("part {n}: {e}")))?;
                p.rate_pps = Some(pps.round().max(1.0) as u64);
            }
            total += p.weight;
            t.mix.push(p);
        }
        if t.weight == 0 || t.mix.iter().any(|p| p.weight == 0) {
            return Err(fail("every part's weight is at least 1".into()));
        }
        if total as usize > crate::mix::GEN_MIX_SLOTS {
            return Err(fail(format!(
                "the weights add up to {total}: a round of the mix has {} slots",
                crate::mix::GEN_MIX_SLOTS
            )));
        }
        Ok(t)
    }

    /// This profile's own traffic, checked.
    fn check_alone(&self) -> Result<Traffic, ProfileError> {
        let ipv6 = self.family == Family::Ipv6;
        let sizes = SizeMix::parse(&self.len, ipv6).map_err(|e| ProfileError {
            field: "len",
            reason: e.to_string(),
        })?;
        let (src_default, dst_default) = if ipv6 {
            (SRC_V6, DST_V6)
        } else {
            (SRC_V4, DST_V4)
        };
        let range = |field: &'static str, given: &Option<String>, default: &str| {
            let text = given.as_deref().unwrap_or(default);
            let e = flows::parse(field, text, DEFAULT_PORT).map_err(|e| ProfileError {
                field,
                reason: e
                    .to_string()
                    .trim_start_matches(&format!("{field}: "))
                    .to_string(),
            })?;
            if e.is_ipv6() != ipv6 {
                return Err(ProfileError {
                    field,
                    reason: format!("{text} is not {}", if ipv6 { "IPv6" } else { "IPv4" }),
                });
            }
            Ok(e)
        };
        let t = Traffic {
            ipv6,
            sizes,
            src: range("src", &self.src, src_default)?,
            dst: range("dst", &self.dst, dst_default)?,
            random_dst: self.random_dst,
            random_src: self.random_src,
            proto: self.proto,
            churn: self.churn,
            mix: Vec::new(),
            weight: 1,
            rate_pps: None,
            ttl: self.ttl.unwrap_or(64),
            headers: self.headers,
            vlan: self.vlan,
            port: self.port.unwrap_or(1),
        };
        if !(1..=PORTS_MAX).contains(&t.port) {
            return Err(ProfileError {
                field: "port",
                reason: format!("{}: the generator's port is 1 or {PORTS_MAX}", t.port),
            });
        }
        if self.vlan.is_some_and(|v| !(1..=4094).contains(&v)) {
            return Err(ProfileError {
                field: "vlan",
                reason: format!("{}: a VLAN id is 1 to 4094", self.vlan.unwrap_or(0)),
            });
        }
        if self.headers != Headers::Plain && self.proto == Proto::Tcp {
            return Err(ProfileError {
                field: "headers",
                reason: "IP options, extension headers and fragments are sent over UDP: no proto = \"tcp\"".into(),
            });
        }
        if self.churn.is_some() && self.proto != Proto::Tcp {
            return Err(ProfileError {
                field: "churn",
                reason: "churn is of TCP connections: set proto = \"tcp\"".into(),
            });
        }
        if self.churn == Some(0) {
            return Err(ProfileError {
                field: "churn",
                reason: "a connection sends one data segment at least (the handshake's last ACK)"
                    .into(),
            });
        }
        if self.proto == Proto::Tcp && (self.random_dst || self.random_src) {
            return Err(ProfileError {
                field: "proto",
                reason: "TCP connections are a fixed set of flows: no random_dst or random_src"
                    .into(),
            });
        }
        // TCP's headers, and an extension of the IP header, must fit.
        if self.proto == Proto::Tcp || self.headers != Headers::Plain {
            t.frame_spec([0; 6], [0; 6])
                .validate()
                .map_err(|e| ProfileError {
                    field: "len",
                    reason: e.to_string().trim_start_matches("-l: ").to_string(),
                })?;
        }
        Ok(t)
    }
}

/// The ports a profile may name: a lab's generator has one or two.
pub const PORTS_MAX: u32 = 2;

/// Where a lab trial sends from and to, beyond the profile.
#[derive(Clone, Debug)]
pub struct Sender {
    pub ifname: String,
    pub src_mac: [u8; 6],
    /// The DUT's MAC on the generator's side.
    pub dst_mac: [u8; 6],
    pub cpu: usize,
    /// The generator's other ports into the DUT, port 2 first (in the
    /// same namespace as `ifname`).
    pub other_ports: Vec<Port>,
}

/// A generator port: its interface, its MAC and the DUT's at its far end.
#[derive(Clone, Debug)]
pub struct Port {
    pub ifname: String,
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
}

impl Sender {
    /// Port `n` (1: the sender's own), or why the lab has none.
    pub fn port(&self, n: u32) -> anyhow::Result<Port> {
        if n == 1 {
            return Ok(Port {
                ifname: self.ifname.clone(),
                src_mac: self.src_mac,
                dst_mac: self.dst_mac,
            });
        }
        self.other_ports
            .get(n as usize - 2)
            .cloned()
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "port {n}: this generator has {} port(s) into the DUT (a lab's gen_ports)",
                    self.other_ports.len() + 1
                )
            })
    }
}

impl Traffic {
    /// Distinct flows (5-tuples) the generator cycles through: sources by
    /// their ports, times destinations by theirs.
    pub fn flows(&self) -> u64 {
        self.src.addr_count()
            * self.src.port_count() as u64
            * self.dst.addr_count()
            * self.dst.port_count() as u64
    }

    /// The mean length of its frames; a mix's, each part by its weight
    /// (a TCP part's data segments: its SYN, FIN and ACK are smaller).
    pub fn mean_frame_len(&self) -> f64 {
        let weighted = std::iter::once(self)
            .chain(&self.mix)
            .map(|t| (t.sizes.mean_frame_len() * t.weight as f64, t.weight as f64));
        let (sum, weights) = weighted.fold((0.0, 0.0), |a, w| (a.0 + w.0, a.1 + w.1));
        sum / weights.max(1.0)
    }

    /// A TCP profile's first run: each connection's data from its start,
    /// or churn from the first connection.
    pub fn tcp_run(&self) -> Option<TcpRun> {
        (self.proto == Proto::Tcp).then(|| match self.churn {
            Some(segments) => TcpRun {
                phase: TcpPhase::Churn,
                from: 0,
                segments,
                lag: 0,
            },
            None => TcpRun::phase(TcpPhase::Data, 0),
        })
    }

    /// Every frame but for the flow.
    pub fn frame_spec(&self, src_mac: [u8; 6], dst_mac: [u8; 6]) -> FrameSpec {
        FrameSpec {
            src_mac,
            dst_mac,
            src: self.src.first,
            dst: self.dst.first,
            src_port: self.src.port_first,
            dst_port: self.dst.port_first,
            sizes: self.sizes.clone(),
            ttl: self.ttl,
            l4: self.proto,
            headers: self.headers,
            vlan: self.vlan,
        }
    }

    /// The generator's options for one trial: one pinned XDP sender,
    /// `rate_pps` (None: as fast as it goes) for `seconds`; TCP profiles
    /// send data segments from each connection's start.
    pub fn gen_options(
        &self,
        sender: &Sender,
        rate_pps: Option<u64>,
        seconds: f64,
    ) -> anyhow::Result<GenOptions> {
        // Each part leaves by its port: the first part's is where the
        // generator runs, another part's a redirect.
        let own = sender.port(self.port)?;
        let frame = self.frame_spec(own.src_mac, own.dst_mac);
        frame.validate()?;
        // A profile with its own rate is offered that (and its parts
        // theirs), whatever the measurement asks.
        let rate_pps = match self.rate_pps {
            Some(own) => Some(own + self.mix.iter().filter_map(|p| p.rate_pps).sum::<u64>()),
            None => rate_pps,
        };
        let mut mix = Vec::new();
        for p in &self.mix {
            let port = sender.port(p.port)?;
            mix.push(crate::mix::GenPart {
                frame: p.frame_spec(port.src_mac, port.dst_mac),
                src: p.src.clone(),
                dst: p.dst.clone(),
                random_dst: p.random_dst,
                random_src: p.random_src,
                tcp: p.tcp_run(),
                weight: p.weight,
                rate_pps: p.rate_pps,
                out_ifname: (p.port != self.port).then_some(port.ifname),
            });
        }
        Ok(GenOptions {
            ifname: own.ifname,
            frame,
            src: self.src.clone(),
            dst: self.dst.clone(),
            duration: Some(Duration::from_secs_f64(seconds)),
            count: None,
            batch_size: 64,
            stream_base: 0,
            rate_pps: rate_pps.map(|r| r.max(1)),
            cpus: vec![sender.cpu],
            mode: Mode::Xdp,
            random_dst: self.random_dst,
            random_src: self.random_src,
            tcp: self.tcp_run(),
            mix,
            weight: self.weight,
        })
    }
}

pub fn builtin_profile(name: &str) -> Option<Profile> {
    let p = Profile::new;
    match name {
        "ipv4-60" => Some(p(Family::Ipv4, "60")),
        // Destinations at random over 1.0.0.0/8-126.0.0.0/8, for DUTs with
        // a full table (and a default route): every frame a new lookup.
        "ipv4-60-spread" => Some(Profile {
            dst: Some(SPREAD_V4.into()),
            random_dst: true,
            ..p(Family::Ipv4, "60")
        }),
        "ipv6-62" => Some(p(Family::Ipv6, "62")),
        "imix" => Some(p(Family::Ipv4, "imix")),
        "ipv6-imix" => Some(p(Family::Ipv6, "imix")),
        _ => None,
    }
}

pub const BUILTIN_PROFILES: &[&str] =
    &["ipv4-60", "ipv6-62", "imix", "ipv6-imix", "ipv4-60-spread"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_profiles_check() {
        for name in BUILTIN_PROFILES {
            let t = builtin_profile(name).unwrap().check().unwrap();
            assert_eq!(t.ipv6, name.starts_with("ipv6"), "{name}");
            assert_eq!(t.src.is_ipv6(), t.ipv6);
        }
        assert!(builtin_profile("ipv5").is_none());
    }

    #[test]
    fn errors_name_the_field() {
        let bad = |f: &dyn Fn(&mut Profile)| {
            let mut p = builtin_profile("ipv4-60").unwrap();
            f(&mut p);
            p.check().unwrap_err()
        };
        let e = bad(&|p| p.len = "59".into());
        assert_eq!(e.field, "len");
        assert!(e.reason.contains("out of range"), "{e}");
        let e = bad(&|p| p.dst = Some("2001:2::1".into()));
        assert_eq!(
            (e.field, e.reason.as_str()),
            ("dst", "2001:2::1 is not IPv4")
        );
        let e = bad(&|p| p.src = Some("x".into()));
        assert_eq!(e.field, "src");
        let e = bad(&|p| {
            p.headers = Headers::Options;
            p.proto = Proto::Tcp;
        });
        assert_eq!(e.field, "headers");
        // IPv6's 62 bytes cannot hold a hop-by-hop header too.
        let e = bad(&|p| {
            *p = builtin_profile("ipv6-62").unwrap();
            p.headers = Headers::Options;
        });
        assert_eq!(e.field, "len");
        assert!(e.reason.contains("cannot hold"), "{e}");
    }

    #[test]
    fn ttl_and_headers_reach_the_frame() {
        let p: Profile =
            toml::from_str("family = \"ipv4\"\nlen = \"60\"\nttl = 1\nheaders = \"fragment\"\n")
                .unwrap();
        let f = p.check().unwrap().frame_spec([0; 6], [0; 6]);
        assert_eq!((f.ttl, f.headers), (1, Headers::Fragment));
        let e = toml::from_str::<Profile>("family = \"ipv4\"\nlen = \"60\"\nheaders = \"jumbo\"\n")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("plain") && e.contains("fragment"), "{e}");
    }

    /// A mix's parts are checked as profiles of their own, an error said
    /// as `mix` with the part's number and field; weights and rates only
    /// where a mix has them.
    #[test]
    fn a_mix_is_checked_part_by_part() {
        let tcp = || Profile {
            proto: Proto::Tcp,
            ..builtin_profile("ipv4-60").unwrap()
        };
        let mut p = tcp();
        p.weight = Some(16);
        let mut udp = builtin_profile("ipv4-60").unwrap();
        udp.weight = Some(3);
        let mut churn = tcp();
        churn.churn = Some(4);
        churn.rate = Some("14k".into());
        p.mix = vec![udp.clone(), churn.clone()];
        let t = p.check().unwrap();
        assert_eq!((t.weight, t.mix.len()), (16, 2));
        assert_eq!((t.mix[0].weight, t.mix[0].rate_pps), (3, None));
        assert_eq!((t.mix[1].weight, t.mix[1].rate_pps), (1, Some(14_000)));
        assert_eq!(t.mix[1].churn, Some(4));
        // 60-byte frames whatever the part.
        assert_eq!(t.mean_frame_len(), 60.0);

        let refused = |p: &Profile| p.check().unwrap_err();
        let mut bad = p.clone();
        bad.mix[0].len = "59".into();
        let e = refused(&bad);
        assert_eq!(e.field, "mix");
        assert!(e.reason.starts_with("part 2: len:"), "{e}");
        let mut bad = p.clone();
        bad.mix[1].rate = Some("fast".into());
        assert!(refused(&bad).reason.starts_with("part 3: rate:"));
        let mut bad = p.clone();
        bad.mix[0].mix = vec![udp.clone()];
        assert!(refused(&bad).reason.contains("not a mix itself"));
        let mut bad = p.clone();
        bad.weight = Some(30);
        assert!(refused(&bad).reason.contains("add up to 34"));
        let mut bad = p.clone();
        bad.mix.push(udp.clone());
        bad.mix.push(udp.clone());
        assert!(refused(&bad).reason.contains("5 parts"));
        // Weights belong to mixes.
        assert_eq!(refused(&udp).field, "weight");
        // A profile's own rate: a fixed-rate run, the rate offered
        // whatever the measurement asks; with a mix, every part paced too.
        let mut alone = tcp();
        alone.rate = Some("1k".into());
        let t = alone.check().unwrap();
        assert_eq!(t.rate_pps, Some(1000));
        let s = Sender {
            ifname: "gen0".into(),
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            cpu: 0,
            other_ports: Vec::new(),
        };
        assert_eq!(t.gen_options(&s, None, 1.0).unwrap().rate_pps, Some(1000));
        let mut paced = p.clone();
        paced.rate = Some("1M".into());
        let e = refused(&paced);
        assert_eq!(e.field, "rate");
        assert!(e.reason.contains("each part a rate"), "{e}");
        paced.mix[0].rate = Some("10k".into());
        let t = paced.check().unwrap();
        assert_eq!(
            t.gen_options(&s, Some(5), 1.0).unwrap().rate_pps,
            Some(1_000_000 + 10_000 + 14_000)
        );
        alone.rate = Some("fast".into());
        assert_eq!(refused(&alone).field, "rate");
    }

    #[test]
    fn a_trial_is_one_pinned_xdp_sender() {
        let t = builtin_profile("imix").unwrap().check().unwrap();
        let s = Sender {
            ifname: "gen0".into(),
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            cpu: 0,
            other_ports: Vec::new(),
        };
        let g = t.gen_options(&s, Some(0), 2.5).unwrap();
        assert_eq!(g.cpus, [0]);
        assert_eq!(g.rate_pps, Some(1));
        assert_eq!(g.duration, Some(Duration::from_millis(2500)));
        assert_eq!(g.mode, Mode::Xdp);
        assert_eq!(g.frame.sizes, t.sizes);
    }

    /// A part of another port leaves by it, with its MACs; a profile of
    /// port 2 alone runs there; a port the sender lacks is refused.
    #[test]
    fn each_part_leaves_by_its_port() {
        let port2 = Port {
            ifname: "gen1".into(),
            src_mac: [2, 0, 0, 0, 0, 5],
            dst_mac: [2, 0, 0, 0, 0, 6],
        };
        let mut s = Sender {
            ifname: "gen0".into(),
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            cpu: 0,
            other_ports: vec![port2],
        };
        let mut p = Profile::new(Family::Ipv4, "60");
        let mut b = Profile::new(Family::Ipv4, "60");
        b.port = Some(2);
        p.mix.push(b.clone());
        let g = p.check().unwrap().gen_options(&s, None, 1.0).unwrap();
        assert_eq!(
            (g.ifname.as_str(), g.frame.src_mac),
            ("gen0", [2, 0, 0, 0, 0, 1])
        );
        assert_eq!(g.mix[0].out_ifname.as_deref(), Some("gen1"));
        assert_eq!(g.mix[0].frame.dst_mac, [2, 0, 0, 0, 0, 6]);
        assert_eq!(g.ports(), ["gen0", "gen1"]);
        // Port 2 alone: the generator runs there, nothing redirected.
        let g = b.check().unwrap().gen_options(&s, None, 1.0).unwrap();
        assert_eq!(
            (g.ifname.as_str(), g.frame.dst_mac),
            ("gen1", [2, 0, 0, 0, 0, 6])
        );
        // Port 2 first, a part on port 1: that part is the redirected one.
        let mut c = b.clone();
        c.mix.push(Profile::new(Family::Ipv4, "60"));
        let g = c.check().unwrap().gen_options(&s, None, 1.0).unwrap();
        assert_eq!(g.mix[0].out_ifname.as_deref(), Some("gen0"));
        s.other_ports.clear();
        let e = p.check().unwrap().gen_options(&s, None, 1.0).unwrap_err();
        assert!(
            e.to_string()
                .contains("port 2: this generator has 1 port(s)"),
            "{e}"
        );
        b.port = Some(3);
        let e = b.check().unwrap_err();
        assert_eq!(e.field, "port");
        assert!(e.reason.contains("1 or 2"), "{e}");
    }
}

#[cfg(test)]
mod names {
    use crate::gen::Mode;
    use crate::recv::ReceiverMode;

    /// The names commands take are the names reports and scenarios write.
    #[test]
    fn choices_are_the_serde_names() {
        for (name, m) in Mode::CHOICES {
            assert_eq!(serde_json::to_value(m).unwrap(), *name);
        }
        for (name, r) in ReceiverMode::CHOICES {
            assert_eq!(serde_json::to_value(r).unwrap(), *name);
            assert_eq!(r.label(), *name);
        }
        assert_eq!(ReceiverMode::CHOICES.len(), 4);
        assert_eq!(Mode::CHOICES.len(), 2);
        for (name, h) in crate::frame::Headers::CHOICES {
            assert_eq!(serde_json::to_value(h).unwrap(), *name);
        }
    }
}
