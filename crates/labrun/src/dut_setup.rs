//! DUT configurations brought up in the lab's DUT namespace for a run and
//! taken down after it: the kernel as is, the kernel with an nftables
//! ruleset or sysctls, or linerate's fast path.
use super::scenario::{DutDef, Forwarder};
use anyhow::{anyhow, bail, Context, Result};
use linerate_host::cmd;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Checks that a configuration can be set up, before any lab exists:
/// the tools are there, the ruleset parses, the sysctls exist.
pub fn preflight(def: &DutDef) -> std::result::Result<(), String> {
    if let Some(rules) = &def.nft {
        cmd::require_tool("nft").map_err(|e| e.to_string())?;
        let f = ruleset_file(rules).map_err(|e| e.to_string())?;
        let path = f.path().display().to_string();
        // -c: parse and check against the kernel, commit nothing.
        cmd::run("nft", &["-c", "-f", &path]).map_err(|e| {
            // nft's own message, with the ruleset's line and column.
            let msg = e.to_string();
            let msg = msg
                .rsplit_once(&format!("{path}:"))
                .map_or(msg.as_str(), |m| m.1);
            format!("nft ruleset: line {}", msg.trim())
        })?;
    }
    for k in def.sysctl.keys() {
        let path = format!("/proc/sys/{}", k.replace('.', "/"));
        if !std::path::Path::new(&path).exists() {
            return Err(format!("sysctl {k}: no such setting ({path})"));
        }
    }
    if def.establish {
        cmd::require_tool("conntrack").map_err(|e| format!("establish: {e}"))?;
    }
    if def.vlans.is_some() {
        crate::dut_vlans::preflight()?;
    }
    for (what, path, v) in [
        ("conntrack_max", CT_MAX, def.conntrack_max),
        ("conntrack_buckets", CT_BUCKETS, def.conntrack_buckets),
    ] {
        if v.is_some() && !std::path::Path::new(path).exists() {
            return Err(format!("{what}: the kernel has no conntrack ({path})"));
        }
    }
    Ok(())
}

/// How many connections the conntrack table of namespace `netns` holds
/// (`conntrack -C`).
pub fn conntrack_count(netns: &str) -> Result<u64> {
    let out = cmd::in_netns(netns, "conntrack", &["-C"])?;
    out.trim()
        .parse()
        .with_context(|| format!("conntrack -C said {out:?}"))
}

/// How many of the DUT's conntrack entries are assured (`conntrack -L -u
/// ASSURED`, which says the count on stderr; the entries themselves, a
/// line each, are not kept).
pub fn conntrack_assured(netns: &str) -> Result<u64> {
    cmd::require_tool("conntrack")?;
    // `conntrack -L` lists one family, IPv4 unless told.
    let mut assured = 0;
    for family in ["ipv4", "ipv6"] {
        let out = std::process::Command::new("ip")
            .args([
                "netns",
                "exec",
                netns,
                "conntrack",
                "-L",
                "-f",
                family,
                "-u",
                "ASSURED",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .output()
            .context("conntrack -L")?;
        let err = String::from_utf8_lossy(&out.stderr);
        // "conntrack v1.4.7 (conntrack-tools): 970063 flow entries have been shown."
        assured += err
            .split("):")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| anyhow!("conntrack -L -f {family} -u ASSURED said {:?}", err.trim()))?;
    }
    Ok(assured)
}

/// The kernel's conntrack limits: global, set from the host's namespace.
const CT_MAX: &str = "/proc/sys/net/netfilter/nf_conntrack_max";
const CT_BUCKETS: &str = "/sys/module/nf_conntrack/parameters/hashsize";

/// `rules` in a temporary file, for `nft -f`.
pub fn ruleset_file(rules: &str) -> Result<tempfile::NamedTempFile> {
    let mut f = tempfile::Builder::new().prefix("linerate-nft").tempfile()?;
    f.write_all(rules.as_bytes())?;
    f.flush()?;
    Ok(f)
}

/// A DUT configuration in place. `stop` (or drop) undoes it.
pub struct RunningDut {
    netns: String,
    nft: bool,
    /// sysctls to put back: (key, old value).
    restore: Vec<(String, String)>,
    /// The host's conntrack limits to put back: (file, old value).
    host_restore: Vec<(&'static str, String)>,
    /// Flush the DUT's conntrack table after the run.
    flush_conntrack: bool,
    router: Option<Forwarding>,
    /// The ports made trunks (crate::dut_vlans), to put back.
    trunks: Option<([String; 2], [u16; 2])>,
}

/// How long a forwarder may take to start before the run is abandoned
/// (linerate loading a full table with a default route: seconds).
const ROUTER_START: Duration = Duration::from_secs(60);

impl RunningDut {
    /// Starts the DUT on `ports`: its ingress, its egress, then any other
    /// ingress (a lab's second generator port).
    pub fn start(def: &DutDef, netns: &str, ports: &[String]) -> Result<Self> {
        let interfaces = [ports[0].as_str(), ports[1].as_str()];
        let mut dut = RunningDut {
            netns: netns.to_string(),
            nft: false,
            restore: Vec::new(),
            host_restore: Vec::new(),
            flush_conntrack: def.establish,
            router: None,
            trunks: None,
        };
        if let Some(ids) = def.vlans {
            dut.trunks = Some((interfaces.map(String::from), ids));
            crate::dut_vlans::trunk(netns, interfaces, ids)?;
        }
        for (path, v) in [
            (CT_MAX, def.conntrack_max),
            (CT_BUCKETS, def.conntrack_buckets),
        ] {
            let Some(v) = v else { continue };
            let old = std::fs::read_to_string(path)
                .with_context(|| format!("{path}: is the kernel's conntrack there?"))?;
            std::fs::write(path, v.to_string())
                .with_context(|| format!("cannot set {path} to {v}"))?;
            dut.host_restore.push((path, old.trim().to_string()));
        }
        for (k, v) in &def.sysctl {
            let old = cmd::in_netns(netns, "sysctl", &["-n", k])?
                .trim()
                .to_string();
            cmd::in_netns(netns, "sysctl", &["-qw", &format!("{k}={v}")])?;
            dut.restore.push((k.clone(), old));
        }
        if let Some(rules) = &def.nft {
            let f = ruleset_file(rules)?;
            dut.nft = true;
            cmd::in_netns(netns, "nft", &["-f", &f.path().display().to_string()])
                .context("loading the DUT's nftables ruleset")?;
        }
        match def.forwarder {
            Forwarder::Linux | Forwarder::Commands => {}
            Forwarder::Linerate => {
                let mut police = linerate_dataplane::police::Police::default();
                if let Some(list) = &def.police {
                    police
                        .apply_list(list)
                        .map_err(|why| anyhow!("police: {why}"))?;
                }
                let mode = match def.xdp_mode.as_deref() {
                    Some("generic") => linerate_bpf::loader::XdpMode::Generic,
                    _ => linerate_bpf::loader::XdpMode::Native,
                };
                dut.router = Some(start_linerate(netns, ports, (mode, def.carry_tcp), police)?)
            }
            Forwarder::XdpFibLookup => {
                let prog = (linerate_bpf::objects::REF_FWD, "ref_fwd");
                dut.router = Some(start_xdp_everywhere(netns, ports, "xdp-fib-lookup", prog)?)
            }
            Forwarder::XdpPass => {
                let prog = (linerate_bpf::objects::REF_PASS, "ref_pass");
                dut.router = Some(start_xdp_everywhere(netns, ports, "xdp-pass", prog)?)
            }
            Forwarder::XdpRedirect => dut.router = Some(start_xdp_redirect(netns, ports)?),
        }
        Ok(dut)
    }

    pub fn stop(mut self) -> Result<()> {
        self.undo()
    }

    fn undo(&mut self) -> Result<()> {
        let mut first_error = None;
        if let Some((h, stop)) = self.router.take() {
            stop.store(true, Ordering::SeqCst);
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => first_error = Some(e),
                Err(_) => first_error = Some(anyhow!("the DUT's forwarding thread panicked")),
            }
        }
        if std::mem::take(&mut self.nft) {
            // The DUT namespace is the lab's own: its whole ruleset is ours.
            if let Err(e) = cmd::in_netns(&self.netns, "nft", &["flush", "ruleset"]) {
                first_error.get_or_insert(e);
            }
        }
        for (k, v) in std::mem::take(&mut self.restore) {
            if let Err(e) = cmd::in_netns(&self.netns, "sysctl", &["-qw", &format!("{k}={v}")]) {
                first_error.get_or_insert(e);
            }
        }
        // The next run's flows start from no connection. (conntrack -F
        // says how many it deleted on stderr and exits 0.)
        if std::mem::take(&mut self.flush_conntrack) {
            if let Err(e) = cmd::in_netns(&self.netns, "conntrack", &["-F"]) {
                first_error.get_or_insert(e);
            }
        }
        if let Some((ports, ids)) = self.trunks.take() {
            let ports = [ports[0].as_str(), ports[1].as_str()];
            if let Err(e) = crate::dut_vlans::untrunk(&self.netns, ports, ids) {
                first_error.get_or_insert(e);
            }
        }
        for (path, v) in std::mem::take(&mut self.host_restore) {
            if let Err(e) = std::fs::write(path, &v) {
                first_error.get_or_insert(anyhow!("putting {path} back to {v}: {e}"));
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for RunningDut {
    fn drop(&mut self) {
        let _ = self.undo();
    }
}

type Forwarding = (JoinHandle<Result<()>>, Arc<AtomicBool>);

/// linerate's fast path on both DUT interfaces, until told to stop.
fn start_linerate(
    netns: &str,
    ports: &[String],
    (mode, carry_tcp): (linerate_bpf::loader::XdpMode, bool),
    police: linerate_dataplane::police::Police,
) -> Result<Forwarding> {
    let ifs = ports.to_vec();
    let ns = netns.to_string();
    in_dut_namespace(netns, "linerate", move |stop, ready| {
        linerate_daemon::run::run(
            &linerate_daemon::run::RouteOptions {
                ipv6: Default::default(),
                record: ns,
                interfaces: ifs,
                mode,
                nice: linerate_daemon::run::DEFAULT_NICE,
                status: Default::default(),
                service_manager: false,
                carry_tcp,
                police,
            },
            stop,
            ready,
            |_| {},
        )
        .map(|_| ())
    })
}

/// A reference DUT's one program (`program` of `object`) attached to
/// every DUT port, until told to stop: `xdp-fib-lookup`, the XDP samples'
/// forwarder (bpf_fib_lookup, then bpf_redirect); `xdp-pass`, every frame
/// passed to the kernel.
fn start_xdp_everywhere(
    netns: &str,
    ports: &[String],
    name: &'static str,
    (object, program): (&'static [u8], &'static str),
) -> Result<Forwarding> {
    use linerate_bpf::loader;
    let ifs = ports.to_vec();
    in_dut_namespace(netns, name, move |stop, ready| {
        let obj = loader::load(object, &format!("the {name} reference"))?;
        let prog = loader::prog(&obj, program)?;
        let _links = ifs
            .iter()
            .map(|i| loader::XdpAttachment::attach(&prog, i, loader::XdpMode::Native))
            .collect::<Result<Vec<_>>>()?;
        ready.store(true, Ordering::SeqCst);
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    })
}

/// The machine's XDP limit (bpf/ref/ref_redirect.bpf.c) on the DUT's
/// ingress ports (every port but the egress, `ports[1]`): what comes in
/// gets the receiver's MACs and goes out of the egress.
fn start_xdp_redirect(netns: &str, ports: &[String]) -> Result<Forwarding> {
    use linerate_bpf::{loader, maps, objects};
    use linerate_lab::topology::mac;
    let egress = ports[1].clone();
    let ingress: Vec<String> = ports
        .iter()
        .enumerate()
        .filter(|p| p.0 != 1)
        .map(|p| p.1.clone())
        .collect();
    in_dut_namespace(netns, "xdp-redirect", move |stop, ready| {
        let obj = loader::load(objects::REF_REDIRECT, "the xdp-redirect reference")?;
        let out = loader::ifindex(&egress)?;
        let parse = |m: &str| linerate_traffic::frame::parse_mac("a lab MAC", m);
        let next = RefNextHop {
            dst: parse(mac::RECV)?,
            src: parse(mac::DUT_OUT)?,
            ifindex: out,
        };
        maps::write(&loader::data_section(&obj, ".data.next")?, 0, &next)?;
        maps::write(&loader::map(&obj, "ref_out")?, 0, &out)?;
        let prog = loader::prog(&obj, "ref_redirect")?;
        let _links = ingress
            .iter()
            .map(|i| loader::XdpAttachment::attach(&prog, i, loader::XdpMode::Native))
            .collect::<Result<Vec<_>>>()?;
        ready.store(true, Ordering::SeqCst);
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    })
}

/// `struct next_hop` of bpf/ref/ref_redirect.bpf.c.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RefNextHop {
    dst: [u8; 6],
    src: [u8; 6],
    ifindex: u32,
}

// SAFETY: plain bytes, no padding (6 + 6 + 4).
unsafe impl linerate_bpf::layout::Pod for RefNextHop {}

/// Runs `body` on a thread inside the DUT's namespace; returns once it
/// says it is ready (or fails to start).
fn in_dut_namespace(
    netns: &str,
    what: &'static str,
    body: impl FnOnce(&AtomicBool, &AtomicBool) -> Result<()> + Send + 'static,
) -> Result<Forwarding> {
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(false));
    let ns = netns.to_string();
    let h = {
        let (stop, ready) = (stop.clone(), ready.clone());
        std::thread::Builder::new()
            .name(format!("dut-{what}"))
            .spawn(move || -> Result<()> {
                linerate_host::netns::enter_for_good(&ns)?;
                body(&stop, &ready)
            })?
    };
    let t = Instant::now();
    while !ready.load(Ordering::SeqCst) {
        let late = t.elapsed() > ROUTER_START;
        if h.is_finished() || late {
            stop.store(true, Ordering::SeqCst);
            let why = match h.join() {
                Ok(Err(e)) => format!("{e:#}"),
                Ok(Ok(())) if late => format!("not ready after {} s", ROUTER_START.as_secs()),
                Ok(Ok(())) => "it exited".into(),
                Err(_) => "it panicked".into(),
            };
            bail!("the {what} DUT did not start: {why}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((h, stop))
}

/// Generated route tables in the DUT's kernel. Installing a million routes
/// takes seconds, so the table stays between runs that want the same one
/// and changes only when the next configuration wants another.
#[derive(Default)]
pub struct RouteTables {
    v4: u32,
    v6: u32,
}

/// Routes added by the runner carry this protocol number, so that they go
/// with one `ip route flush proto` (RFC-less, from the private range).
const PROTO: &str = "250";

impl RouteTables {
    /// Brings the DUT's kernel to the table `def` wants; says what changed.
    pub fn ensure(&mut self, netns: &str, def: &DutDef) -> Result<Option<String>> {
        use linerate_lab::topology::addr;
        let want = (def.routes.unwrap_or(0), def.routes6.unwrap_or(0));
        if want == (self.v4, self.v6) {
            return Ok(None);
        }
        let t = Instant::now();
        if want.0 != self.v4 {
            replace(
                netns,
                "-4",
                self.v4 > 0,
                &ipv4_routes(want.0),
                addr::RECV_V4,
            )?;
            self.v4 = want.0;
        }
        if want.1 != self.v6 {
            replace(
                netns,
                "-6",
                self.v6 > 0,
                &ipv6_routes(want.1),
                addr::RECV_V6,
            )?;
            self.v6 = want.1;
        }
        let count = |family: &str| -> Result<usize> {
            Ok(
                cmd::ip(Some(netns), &[family, "route", "show", "proto", PROTO])?
                    .lines()
                    .count(),
            )
        };
        Ok(Some(format!(
            "DUT kernel: {} generated IPv4 and {} IPv6 routes ({:.1} s to change)",
            count("-4")?,
            count("-6")?,
            t.elapsed().as_secs_f64()
        )))
    }
}

fn replace(
    netns: &str,
    family: &str,
    flush: bool,
    prefixes: &[String],
    gateway: &str,
) -> Result<()> {
    if flush {
        cmd::ip(Some(netns), &[family, "route", "flush", "proto", PROTO])?;
    }
    if prefixes.is_empty() {
        return Ok(());
    }
    let mut f = tempfile::Builder::new()
        .prefix("linerate-routes")
        .tempfile()?;
    {
        let mut w = std::io::BufWriter::new(&mut f);
        // A full table comes with a default route, as on an Internet
        // router: every destination is forwarded (the spread profile's too).
        for p in prefixes.iter().map(String::as_str).chain(["default"]) {
            writeln!(
                w,
                "route add {p} via {gateway} dev dut1 onlink proto {PROTO}"
            )?;
        }
        w.flush()?;
    }
    cmd::ip(
        Some(netns),
        &[family, "-batch", &f.path().display().to_string()],
    )
    .with_context(|| format!("adding {} generated routes to the DUT", prefixes.len()))?;
    Ok(())
}

/// `n` generated IPv4 prefixes, none touching the lab's benchmark range
/// (198.18.0.0/15), loopback, or multicast and above.
fn ipv4_routes(n: u32) -> Vec<String> {
    // None over the lab's 198.18.0.0/15.
    linerate_fib::synthetic::ipv4_routable(n as usize, 2544, &[(0xC612_0000, 15)])
}

/// `n` generated IPv6 prefixes, none touching the lab's 2001:2::/48.
fn ipv6_routes(n: u32) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    let lab: u128 = 0x2001_0002_0000 << 80;
    linerate_fib::synthetic::ipv6(n as usize + n as usize / 20 + 16, 1, 2544)
        .into_iter()
        .filter(|&(a, l, _)| {
            let k = l.min(48) as u32;
            let mask = if k == 0 { 0 } else { u128::MAX << (128 - k) };
            a >> 125 == 1 && a & mask != lab & mask
        })
        .take(n as usize)
        .map(|(a, l, _)| linerate_fib::dump::show(a, l))
        .collect()
}
