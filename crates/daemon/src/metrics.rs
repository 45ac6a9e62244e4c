//! Prometheus metrics of a running router: `linerate route
//! --metrics ADDR` (or `metrics = "ADDR"` in its file) serves them at
//! http://ADDR/metrics. The fast path's counters are read from its map at
//! each scrape; what only the route-following loop knows (routes, next
//! hops, FIB memory, the last change's delay, the firewall's state) it
//! publishes in a [`Status`] the scrape reads. Encoded by the
//! prometheus-client crate: the Prometheus text format (0.0.4), or
//! OpenMetrics when the scraper asks for it.
use anyhow::{anyhow, Result};
use linerate_dataplane::ct_cache::CacheSpan;
use linerate_dataplane::layout::{RouterCounters, REASONS, R_BRIDGED, R_FORWARDED, R_PASSES};
use linerate_firewall::tcp_carry::CarryCounts;
use linerate_fwfollow::thread::FwNews;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the route-following loop publishes; every field is what it last
/// knew.
#[derive(Clone, Debug, Default)]
pub struct Published {
    /// Attached, mirrored, and the firewall's first reading in.
    pub ready: bool,
    /// The fast path's counters map (its id) and the interfaces counted,
    /// and its frames-by-receive-queue map.
    pub stats_map_id: u32,
    pub rxq_map_id: u32,
    pub interfaces: Vec<(String, u32)>,
    /// Each FIB (main's, and those of the tables policy rules look up):
    /// its prefixes and the bytes of it the fast path reads.
    pub fibs: Vec<FibStatus>,
    pub nexthops: u64,
    /// What each of the fast path's tables could not hold (the kernel's),
    /// by table (linerate_router::mirror::limits).
    pub overflows: Vec<(&'static str, u64)>,
    /// The kernel's notifications applied, and how long the last batch
    /// took from its reading to the fast path's maps.
    pub changes: u64,
    pub last_change: Option<Duration>,
    /// Full re-reads after lost notifications.
    pub resyncs: u64,
    /// The firewall thread's last word (None: none yet).
    pub firewall: Option<Result<FwNews, String>>,
    /// The marking of TCP connections to carry (None: no stateful stage).
    pub tcp_carry: Option<Arc<CarryCounts>>,
    /// The connection cache's spans of sets (None: no stateful stage).
    pub ct_span: Option<Arc<CacheSpan>>,
}

/// One FIB: family, routing table (`main`, or its number), prefixes,
/// bytes the fast path reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FibStatus {
    pub ipv6: bool,
    pub table: String,
    pub routes: u64,
    pub bytes: u64,
}

/// Shared between the loop, which writes, and the scrapes, which read.
pub type Status = Arc<Mutex<Published>>;

/// The marking of established TCP connections to carry (`carry_tcp`):
/// nothing without the stateful stage.
fn encode_tcp_carry(
    enc: &mut DescriptorEncoder,
    c: Option<&CarryCounts>,
) -> Result<(), std::fmt::Error> {
    use std::sync::atomic::Ordering::Relaxed;
    let Some(c) = c else { return Ok(()) };
    family(
        enc,
        "linerate_tcp_carry",
        "1 when established TCP connections the ruleset accepts are marked liberal in conntrack and carried (carry_tcp).",
        [(vec![], gauge(c.on.load(Relaxed) as i64))],
    )?;
    family(
        enc,
        "linerate_tcp_carry_marked",
        "TCP connections marked liberal in conntrack (both directions' windows unchecked) for the fast path to carry.",
        [(vec![], counter(c.marked.load(Relaxed)))],
    )?;
    family(
        enc,
        "linerate_tcp_carry_gone",
        "Connections offered to be carried whose conntrack entry was gone by the time it was marked.",
        [(vec![], counter(c.gone.load(Relaxed)))],
    )?;
    family(
        enc,
        "linerate_tcp_carry_refused",
        "Marks conntrack refused for another reason (logged once).",
        [(vec![], counter(c.refused.load(Relaxed)))],
    )
}

/// The connection cache's spans: nothing without the stateful stage.
fn encode_ct_span(
    enc: &mut DescriptorEncoder,
    c: Option<&CacheSpan>,
) -> Result<(), std::fmt::Error> {
    use std::sync::atomic::Ordering::Relaxed;
    let Some(c) = c else { return Ok(()) };
    let by_family = |v: &[std::sync::atomic::AtomicU32; 2]| {
        ["ipv4", "ipv6"]
            .into_iter()
            .zip(v)
            .map(|(f, n)| {
                (
                    vec![("family", f.to_string())],
                    gauge(n.load(Relaxed) as i64),
                )
            })
            .collect::<Vec<_>>()
    };
    family(
        enc,
        "linerate_ct_cache_sets",
        "Sets of two ways the connection cache (and the NAT stage's ways) use now, fitted to the connections they hold.",
        by_family(&c.sets),
    )?;
    family(
        enc,
        "linerate_ct_cache_sets_max",
        "Sets the tables have room for (sized at start from nf_conntrack_max).",
        by_family(&c.most),
    )?;
    family(
        enc,
        "linerate_ct_cache_refits",
        "Times a family's span of sets was widened or narrowed.",
        [(vec![], counter(c.refits.load(Relaxed)))],
    )
}

/// Router `record`'s metrics (the record names its firewall file).
#[derive(Debug)]
struct RouterCollector {
    record: String,
    status: Status,
}

/// One metric family, its series given as (labels, value).
fn family<M: EncodeMetric>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Vec<(&'static str, String)>, M)>,
) -> Result<(), std::fmt::Error> {
    let mut series = series.into_iter().peekable();
    let Some(kind) = series.peek().map(|(_, m)| m.metric_type()) else {
        return Ok(());
    };
    let mut m = enc.encode_descriptor(name, help, None, kind)?;
    for (labels, value) in series {
        value.encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

fn counter(v: u64) -> ConstCounter<u64> {
    ConstCounter::new(v)
}

fn gauge(v: i64) -> ConstGauge<i64> {
    ConstGauge::new(v)
}

fn labels<const N: usize>(pairs: [(&'static str, String); N]) -> Vec<(&'static str, String)> {
    pairs.into()
}

const FAMILIES: [&str; 2] = ["ipv4", "ipv6"];

impl Collector for RouterCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let p = self.status.lock().map(|p| p.clone()).unwrap_or_default();
        family(
            &mut enc,
            "linerate_build_info",
            "The running linerate's version.",
            [(
                labels([("version", env!("CARGO_PKG_VERSION").to_string())]),
                gauge(1),
            )],
        )?;
        family(
            &mut enc,
            "linerate_ready",
            "1 once the fast path is attached, the kernel's tables mirrored and the ruleset read.",
            [(vec![], gauge(p.ready as i64))],
        )?;
        // Per interface and CPU, as the fast path counts them: a scrape
        // that cannot read them says so by leaving them out (and a log).
        let per_cpu: Vec<(&str, Vec<RouterCounters>)> = match read_counters(&p) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("metrics: {e:#}");
                Vec::new()
            }
        };
        let total = |cpus: &[RouterCounters]| RouterCounters::sum(cpus);
        for (name, what, bytes) in [
            (
                "linerate_packets",
                "Packets the fast path saw, by interface they came in on and by what it did (forwarded, pass_*: handed to the kernel and why, drop_*).",
                false,
            ),
            ("linerate_bytes", "Bytes of those packets.", true),
        ] {
            family(
                &mut enc,
                name,
                what,
                per_cpu.iter().flat_map(|(ifname, cpus)| {
                    let t = total(cpus);
                    REASONS.iter().enumerate().map(move |(k, r)| {
                        let v = if bytes { t.bytes[k] } else { t.packets[k] };
                        (
                            labels([("interface", ifname.to_string()), ("reason", r.to_string())]),
                            counter(v),
                        )
                    })
                }),
            )?;
        }
        family(
            &mut enc,
            "linerate_policed_packets",
            "Packets the fast path would have passed to the kernel (reason pass_*) and dropped instead, over their class's limit on their CPU (docs/policing.md), by interface and reason.",
            per_cpu.iter().flat_map(|(ifname, cpus)| {
                let t = total(cpus);
                R_PASSES.map(move |k| {
                    (
                        labels([
                            ("interface", ifname.to_string()),
                            ("reason", REASONS[k].to_string()),
                        ]),
                        counter(t.policed[k]),
                    )
                })
            }),
        )?;
        family(
            &mut enc,
            "linerate_cpu_packets",
            "Packets by interface, CPU and verdict (forwarded, bridged, passed, dropped): XDP runs on the CPU that polls the receive queue, so with one queue per CPU (RSS, interrupts pinned) this is per queue.",
            per_cpu.iter().flat_map(|(ifname, cpus)| {
                cpus.iter().enumerate().flat_map(move |(cpu, c)| {
                    [
                        ("forwarded", c.packets[R_FORWARDED]),
                        ("bridged", c.packets[R_BRIDGED]),
                        ("passed", c.passed()),
                        ("dropped", c.dropped()),
                    ]
                    .map(|(verdict, v)| {
                        (
                            labels([
                                ("interface", ifname.to_string()),
                                ("cpu", cpu.to_string()),
                                ("verdict", verdict.to_string()),
                            ]),
                            counter(v),
                        )
                    })
                })
            }),
        )?;
        // By receive queue: the queues that took a frame (a queue appears
        // with its first).
        let queues = match read_queues(&p) {
            Ok(q) => q,
            Err(e) => {
                tracing::warn!("metrics: {e:#}");
                Vec::new()
            }
        };
        family(
            &mut enc,
            "linerate_queue_packets",
            "Frames the fast path saw, by interface and receive queue (queues beyond 63 counted in 63).",
            queues.iter().flat_map(|(ifname, counts)| {
                counts
                    .iter()
                    .enumerate()
                    .filter(|(_, &n)| n > 0)
                    .map(move |(q, &n)| {
                        (
                            labels([("interface", ifname.to_string()), ("queue", q.to_string())]),
                            counter(n),
                        )
                    })
            }),
        )?;
        let per_fib = |v: fn(&FibStatus) -> u64| {
            p.fibs.iter().map(move |f| {
                let family = FAMILIES[f.ipv6 as usize].to_string();
                let l = labels([("family", family), ("table", f.table.clone())]);
                (l, gauge(v(f) as i64))
            })
        };
        family(
            &mut enc,
            "linerate_routes",
            "Prefixes mirrored into the fast path's FIB of a routing table.",
            per_fib(|f| f.routes),
        )?;
        family(
            &mut enc,
            "linerate_fib_bytes",
            "Bytes of a routing table's FIB the fast path reads (root, shortcut, groups in use).",
            per_fib(|f| f.bytes),
        )?;
        family(
            &mut enc,
            "linerate_nexthops",
            "Next hops the fast path holds.",
            [(vec![], gauge(p.nexthops as i64))],
        )?;
        family(
            &mut enc,
            "linerate_table_overflows",
            "Entries a full table of the fast path could not hold, left to the kernel (routes, next hops, ECMP groups and members, bridge MACs).",
            p.overflows
                .iter()
                .map(|&(t, n)| (labels([("table", t.to_string())]), counter(n))),
        )?;
        family(
            &mut enc,
            "linerate_changes",
            "The kernel's notifications (routes, neighbours, links, addresses, rules) applied.",
            [(vec![], counter(p.changes))],
        )?;
        family(
            &mut enc,
            "linerate_last_change_seconds",
            "How long the last batch of notifications took from its reading to the fast path's maps.",
            p.last_change
                .map(|d| (vec![], ConstGauge::new(d.as_secs_f64()))),
        )?;
        family(
            &mut enc,
            "linerate_resyncs",
            "Full re-reads of the kernel's tables after notifications were lost.",
            [(vec![], counter(p.resyncs))],
        )?;
        self.encode_firewall(&mut enc, &p)
    }
}

impl RouterCollector {
    fn encode_firewall(
        &self,
        enc: &mut DescriptorEncoder,
        p: &Published,
    ) -> Result<(), std::fmt::Error> {
        let news = p.firewall.as_ref().and_then(|n| n.as_ref().ok());
        family(
            enc,
            "linerate_firewall_judged",
            "1 when the fast path judges this family's forwarded packets by the compiled nftables ruleset.",
            FAMILIES.iter().enumerate().map(|(i, f)| {
                let judged = news.is_some_and(|n| !n.covered[i].is_empty());
                (labels([("family", f.to_string())]), gauge(judged as i64))
            }),
        )?;
        // Why a family stays with the kernel: the compiler's reason, as a
        // label of a series that is 1 while it holds.
        let refused: Vec<_> = FAMILIES
            .iter()
            .enumerate()
            .filter_map(|(i, f)| {
                let why = match p.firewall.as_ref()? {
                    Ok(n) => n.refused[i].clone()?,
                    Err(e) => format!("the ruleset cannot be read: {e}"),
                };
                Some((
                    labels([("family", f.to_string()), ("reason", why)]),
                    gauge(1),
                ))
            })
            .collect();
        family(
            enc,
            "linerate_firewall_refused",
            "1 for a family whose ruleset the compiler refused (the kernel judges it), with the reason.",
            refused,
        )?;
        // A judged family without a classifier (past its limits): new
        // flows go to the kernel until their verdict is cached.
        let unclassified = FAMILIES.iter().enumerate().filter_map(|(i, f)| {
            let why = news?.unclassified[i].clone()?;
            Some((
                labels([("family", f.to_string()), ("reason", why)]),
                gauge(1),
            ))
        });
        family(
            enc,
            "linerate_firewall_unclassified",
            "1 for a family the fast path judges without a classifier (past its limits: new flows go to the kernel until their verdict is cached), with the reason.",
            unclassified,
        )?;
        family(
            enc,
            "linerate_firewall_generation",
            "The compiled ruleset's generation in force (0: none yet).",
            news.map(|n| (vec![], gauge(n.generation as i64))),
        )?;
        family(
            enc,
            "linerate_firewall_last_change_seconds",
            "How long the last ruleset change took from the kernel's word to the fast path.",
            news.map(|n| (vec![], ConstGauge::new(n.took.as_secs_f64()))),
        )?;
        encode_tcp_carry(enc, p.tcp_carry.as_deref())?;
        encode_ct_span(enc, p.ct_span.as_deref())?;
        let Ok(Some(rec)) = linerate_dataplane::record::read_firewall(&self.record) else {
            return Ok(());
        };
        family(
            enc,
            "linerate_firewall_reads",
            "Times the ruleset was read whole.",
            [(vec![], counter(rec.reads))],
        )?;
        family(
            enc,
            "linerate_firewall_element_changes",
            "Set elements changed in place, from nf_tables' notifications.",
            [(vec![], counter(rec.elements_changed))],
        )?;
        family(
            enc,
            "linerate_firewall_element_seconds",
            "The firewall thread's own time on those changes: receiving and decoding the notifications, applying, publishing.",
            [(vec![], ConstCounter::new(rec.elements_busy_us as f64 / 1e6))],
        )?;
        family(
            enc,
            "linerate_firewall_rule_changes",
            "Rules added or removed in place, from nf_tables' notifications.",
            [(vec![], counter(rec.rules_changed))],
        )?;
        family(
            enc,
            "linerate_firewall_verdicts_carried",
            "Cached verdicts judged again and carried into the next generation, where the cache alone judges a family.",
            [(vec![], counter(rec.verdicts_carried))],
        )?;
        family(
            enc,
            "linerate_firewall_verdicts_left",
            "Cached verdicts not carried for want of time, learned again from their misses.",
            [(vec![], counter(rec.verdicts_left))],
        )?;
        let rule = |r: &linerate_dataplane::record::RuleCount| {
            labels([
                ("family", FAMILIES[r.ipv6 as usize].to_string()),
                ("table", r.table.clone()),
                ("chain", r.chain.clone()),
                ("handle", r.handle.to_string()),
            ])
        };
        family(
            enc,
            "linerate_firewall_rule_packets",
            "Packets the fast path matched by rule (the kernel's own counter counts only what the kernel saw).",
            rec.rules.iter().map(|r| (rule(r), counter(r.packets))),
        )?;
        family(
            enc,
            "linerate_firewall_rule_bytes",
            "Bytes of those packets.",
            rec.rules.iter().map(|r| (rule(r), counter(r.bytes))),
        )
    }
}

/// Each interface's counters, per CPU, from the map the status names.
fn read_counters(p: &Published) -> Result<Vec<(&str, Vec<RouterCounters>)>> {
    if p.stats_map_id == 0 {
        return Ok(Vec::new());
    }
    let map = libbpf_rs::MapHandle::from_map_id(p.stats_map_id)
        .map_err(|e| anyhow!("cannot open the counters map {}: {e}", p.stats_map_id))?;
    p.interfaces
        .iter()
        .map(|(name, i)| Ok((name.as_str(), linerate_bpf::maps::read_percpu(&map, *i)?)))
        .collect()
}

/// Each interface's frames by receive queue, from the map the status
/// names.
fn read_queues(p: &Published) -> Result<Vec<(&str, Vec<u64>)>> {
    if p.rxq_map_id == 0 {
        return Ok(Vec::new());
    }
    let map = libbpf_rs::MapHandle::from_map_id(p.rxq_map_id).map_err(|e| {
        anyhow!(
            "cannot open the per-queue counters map {}: {e}",
            p.rxq_map_id
        )
    })?;
    p.interfaces
        .iter()
        .map(|(name, i)| {
            Ok((
                name.as_str(),
                linerate_dataplane::record::read_queues(
                    &map,
                    *i,
                    linerate_dataplane::layout::ROUTER_RXQ,
                )?,
            ))
        })
        .collect()
}

/// The exposition of router `record`'s metrics: OpenMetrics if `open`,
/// else the Prometheus text format.
pub fn render(record: &str, status: &Status, open: bool) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(RouterCollector {
        record: record.to_string(),
        status: status.clone(),
    }));
    let mut out = String::new();
    let done = if open {
        prometheus_client::encoding::text::encode(&mut out, &registry)
    } else {
        prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)
    };
    if let Err(e) = done {
        tracing::warn!("metrics: cannot encode: {e}");
    }
    out
}

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The HTTP server of the metrics: a thread answering GET /metrics until
/// dropped.
pub struct MetricsServer {
    server: Arc<tiny_http::Server>,
    thread: Option<std::thread::JoinHandle<()>>,
    pub addr: SocketAddr,
}

impl MetricsServer {
    /// Binds `addr` now (in the calling thread's network namespace), so
    /// that a taken or bad address is refused before anything is
    /// attached; serves router `record`'s metrics from `status`.
    pub fn bind(addr: SocketAddr, record: &str, status: Status) -> Result<MetricsServer> {
        let server = tiny_http::Server::from_listener(listener(addr)?, None)
            .map_err(|e| anyhow!("metrics: cannot listen on {addr}: {e}"))?;
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| anyhow!("metrics: {addr} is not an IP address"))?;
        let server = Arc::new(server);
        let (serving, record) = (server.clone(), record.to_string());
        let thread = std::thread::Builder::new()
            .name("linerate-metrics".into())
            .spawn(move || {
                for req in serving.incoming_requests() {
                    let _ = answer(req, &record, &status);
                }
            })?;
        Ok(MetricsServer {
            server,
            thread: Some(thread),
            addr,
        })
    }
}

/// A listener on `addr` that a router taking this one over can bind too
/// (SO_REUSEPORT, both running for a moment; a socket bound without it,
/// another program's, still refuses).
fn listener(addr: SocketAddr) -> Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.bind(&addr.into())
        .and_then(|()| s.listen(128))
        .map_err(|e| anyhow!("metrics: cannot listen on {addr}: {e}"))?;
    Ok(s.into())
}

fn answer(req: tiny_http::Request, record: &str, status: &Status) -> std::io::Result<()> {
    use tiny_http::{Header, Method, Response};
    let header = |k: &str, v: &str| Header::from_bytes(k, v).expect("a valid header");
    match (req.method(), req.url().split('?').next().unwrap_or("")) {
        (Method::Get | Method::Head, "/metrics") => {
            let open = req.headers().iter().any(|h| {
                h.field.equiv("Accept") && h.value.as_str().contains("application/openmetrics-text")
            });
            let body = render(record, status, open);
            let kind = if open {
                OPENMETRICS
            } else {
                prometheus_client::encoding::prometheus_text::CONTENT_TYPE
            };
            req.respond(Response::from_string(body).with_header(header("Content-Type", kind)))
        }
        (Method::Get | Method::Head, "/") => req.respond(
            Response::from_string("linerate route: metrics at /metrics\n")
                .with_header(header("Content-Type", "text/plain; charset=utf-8")),
        ),
        (Method::Get | Method::Head, _) => req.respond(
            Response::from_string("not found: metrics are at /metrics\n").with_status_code(404),
        ),
        _ => req.respond(
            Response::from_string("only GET\n")
                .with_status_code(405)
                .with_header(header("Allow", "GET, HEAD")),
        ),
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loops_status_is_exposed_in_both_formats() {
        let status = Status::default();
        {
            let mut p = status.lock().unwrap();
            p.ready = true;
            let fib = |ipv6, table: &str, routes, bytes| FibStatus {
                ipv6,
                table: table.into(),
                routes,
                bytes,
            };
            p.fibs = vec![
                fib(false, "main", 12, 4096),
                fib(true, "main", 3, 8192),
                fib(false, "100", 2, 1024),
            ];
            p.nexthops = 5;
            p.changes = 40;
            p.last_change = Some(Duration::from_micros(1500));
            p.firewall = Some(Ok(FwNews {
                refused: [None, Some("rule 7: ct state".into())],
                generation: 2,
                ..Default::default()
            }));
        }
        let text = render("no-such-router", &status, false);
        for line in [
            "# TYPE linerate_routes gauge",
            "linerate_routes{family=\"ipv4\",table=\"main\"} 12",
            "linerate_routes{family=\"ipv6\",table=\"main\"} 3",
            "linerate_routes{family=\"ipv4\",table=\"100\"} 2",
            "linerate_fib_bytes{family=\"ipv6\",table=\"main\"} 8192",
            "linerate_fib_bytes{family=\"ipv4\",table=\"100\"} 1024",
            "linerate_nexthops 5",
            "linerate_ready 1",
            "# TYPE linerate_changes_total counter",
            "linerate_changes_total 40",
            "linerate_last_change_seconds 0.0015",
            "linerate_firewall_generation 2",
            "linerate_firewall_refused{family=\"ipv6\",reason=\"rule 7: ct state\"} 1",
            "linerate_firewall_judged{family=\"ipv4\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} not in\n{text}");
        }
        // No counters map yet: no packet series, and no refusal for IPv4.
        assert!(!text.contains("linerate_packets_total{"), "{text}");
        assert!(!text.contains("family=\"ipv4\",reason"), "{text}");
        let open = render("no-such-router", &status, true);
        assert!(open.ends_with("# EOF\n"), "{open}");
        assert!(
            open.contains("# TYPE linerate_changes counter\nlinerate_changes_total 40\n"),
            "{open}"
        );
    }

    /// The families the exporter's code names (`"linerate_..."` literals
    /// outside the tests), each once.
    fn exported_families() -> Vec<String> {
        let code = include_str!("metrics.rs")
            .split("#[cfg(test)]")
            .next()
            .unwrap();
        let mut names: Vec<String> = code
            .split('"')
            .skip(1)
            .step_by(2)
            .filter(|s| {
                s.starts_with("linerate_") && s.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            })
            .map(str::to_string)
            .collect();
        names.sort();
        names
    }

    /// docs/reference/metrics.md's rows: (metric, type).
    fn reference_rows() -> Vec<(String, String)> {
        let page = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/reference/metrics.md"
        ))
        .expect("docs/reference/metrics.md");
        page.lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                (
                    cells[0].trim_end_matches('`').to_string(),
                    cells[1].to_string(),
                )
            })
            .collect()
    }

    /// Every family the exporter has, a row in the reference, and no row
    /// the exporter lacks; where a render shows a family, its type is the
    /// row's (the rest are held to it by metrics_cli's scrape of a router).
    #[test]
    fn every_family_has_its_row() {
        let families = exported_families();
        let mut dup = families.clone();
        dup.dedup();
        assert_eq!(dup, families, "a family named twice in the code");
        let rows = reference_rows();
        let mut documented: Vec<String> = rows.iter().map(|(m, _)| m.clone()).collect();
        documented.sort();
        let missing: Vec<_> = families
            .iter()
            .filter(|f| !documented.contains(f))
            .collect();
        let unknown: Vec<_> = documented
            .iter()
            .filter(|d| !families.contains(d))
            .collect();
        assert!(missing.is_empty(), "families without a row: {missing:?}");
        assert!(unknown.is_empty(), "rows naming no family: {unknown:?}");
        let status = Status::default();
        {
            let mut p = status.lock().unwrap();
            p.last_change = Some(Duration::from_micros(1));
            p.fibs = vec![FibStatus::default()];
            p.overflows = vec![("nexthops", 0)];
            p.ct_span = Some(Default::default());
            p.firewall = Some(Ok(FwNews {
                refused: [Some("x".into()), None],
                unclassified: [None, Some("y".into())],
                ..Default::default()
            }));
        }
        let text = render("no-such-router", &status, false);
        let mut typed = 0;
        for l in text.lines() {
            if let Some(t) = l.strip_prefix("# TYPE ") {
                let (name, kind) = t.split_once(' ').unwrap();
                let row = rows
                    .iter()
                    .find(|(m, _)| m == name || format!("{m}_total") == name);
                let row = row.unwrap_or_else(|| panic!("{name}: no row"));
                assert_eq!(row.1, kind, "{name}'s type");
                typed += 1;
            }
        }
        assert!(typed >= 13, "{typed} families rendered:\n{text}");
    }

    #[test]
    fn the_reference_parser_reads_the_table() {
        let rows = reference_rows();
        assert!(
            rows.contains(&("linerate_ready".to_string(), "gauge".to_string())),
            "{rows:?}"
        );
        assert!(exported_families().contains(&"linerate_packets".to_string()));
    }
}
