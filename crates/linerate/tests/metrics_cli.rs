//! `linerate route --metrics`: scraped by a real HTTP client
//! from the router's namespace, checked by Prometheus's own `promtool
//! check metrics`, and held to what happened: the frames the generator
//! sent and the receiver got, a route added, an nftables ruleset compiled
//! and one refused. A taken address is refused before anything is
//! attached. Needs root.
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");
const LAB: &str = "lrt-metrics";
const ADDR: &str = "127.0.0.1:9417";

fn ns() -> String {
    format!("{LAB}-dut")
}

/// GET http://ADDR/PATH from inside the DUT's namespace (the router's
/// loopback), with `accept` as the Accept header: status, content type,
/// body.
fn get(path: &str, accept: &str) -> Result<(u16, String, String), String> {
    let (path, accept) = (path.to_string(), accept.to_string());
    std::thread::spawn(move || {
        let _in = linerate_host::netns::NetnsGuard::enter(&ns()).unwrap();
        let agent = ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(5))
            .build();
        match agent
            .get(&format!("http://{ADDR}{path}"))
            .set("Accept", &accept)
            .call()
        {
            Ok(r) | Err(ureq::Error::Status(_, r)) => {
                let (status, kind) = (r.status(), r.content_type().to_string());
                Ok((status, kind, r.into_string().map_err(|e| e.to_string())?))
            }
            Err(e) => Err(e.to_string()),
        }
    })
    .join()
    .unwrap()
}

/// The Prometheus text exposition, parsed: "name{labels}" -> value.
fn scrape() -> (String, BTreeMap<String, f64>) {
    let (status, kind, body) = get("/metrics", "text/plain").expect("scrape");
    assert_eq!(status, 200);
    assert_eq!(kind, "text/plain", "{kind}");
    let samples = body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap();
            (series.to_string(), value.parse().unwrap())
        })
        .collect();
    (body, samples)
}

fn value(samples: &BTreeMap<String, f64>, series: &str) -> f64 {
    *samples
        .get(series)
        .unwrap_or_else(|| panic!("no {series} in {samples:#?}"))
}

/// `promtool check metrics` (Debian's prometheus package) on `body`:
/// what it says, if anything.
fn promtool(body: &str) -> (bool, String) {
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package; scripts/setup.sh)");
    p.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let o = p.wait_with_output().unwrap();
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

struct Router(Child);

impl Drop for Router {
    fn drop(&mut self) {
        // SAFETY: signals our child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

fn ip_dut(args: &[&str]) {
    let o = Command::new("ip")
        .args(["-n", &ns()])
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "ip {args:?}: {o:?}");
}

/// Every family in `body` (its `# TYPE` line) has its row in
/// docs/reference/metrics.md, of its type: how many families.
fn typed_as_the_reference(body: &str) -> usize {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/reference/metrics.md"
    ))
    .unwrap();
    let rows: Vec<(String, String)> = page
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (
                cells[0].trim_end_matches('`').to_string(),
                cells[1].to_string(),
            )
        })
        .collect();
    let mut n = 0;
    for t in body.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let (name, kind) = t.split_once(' ').unwrap();
        let row = rows
            .iter()
            .find(|(m, _)| m == name || format!("{m}_total") == name)
            .unwrap_or_else(|| panic!("{name}: no row in docs/reference/metrics.md"));
        assert_eq!(row.1, kind, "{name}'s type in docs/reference/metrics.md");
        n += 1;
    }
    n
}

/// Scrapes until `done` holds for the samples, for up to 10 s.
fn scrape_until(
    what: &str,
    done: impl Fn(&BTreeMap<String, f64>) -> bool,
) -> BTreeMap<String, f64> {
    let t = Instant::now();
    loop {
        if let Ok((200, _, _)) = get("/metrics", "text/plain") {
            let (_, s) = scrape();
            if done(&s) {
                return s;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{what}: not seen in 10 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn metrics_are_scraped_valid_and_count_what_happened() {
    let _down = common::lab::up(LAB);
    let route = || {
        Router(
            Command::new(BIN)
                .args(["route", "--netns", &ns(), "-i", "dut0,dut1", "-q"])
                .args(["--metrics", ADDR])
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    let mut first = route();
    let s = scrape_until("linerate_ready 1", |s| {
        s.get("linerate_ready") == Some(&1.0)
    });
    // The lab's DUT: its two connected /16s and /64s, and its own addresses.
    assert!(
        value(&s, "linerate_routes{family=\"ipv4\",table=\"main\"}") >= 2.0,
        "{s:#?}"
    );
    assert!(value(&s, "linerate_fib_bytes{family=\"ipv4\",table=\"main\"}") > 0.0);
    assert_eq!(value(&s, "linerate_firewall_judged{family=\"ipv4\"}"), 0.0);

    // Frames through the fast path: counted as forwarded on dut0, no fewer
    // than the receiver got, no more than the generator sent; per CPU as
    // in total. The receiver runs until the generator is done and the last
    // frame had time to arrive (a fixed window was missed once on a loaded
    // machine: the generator started late and 13,326 of 20,000 fell in it).
    let recv = Command::new(BIN)
        .args(["recv", "--netns", &format!("{LAB}-recv"), "-i", "recv0"])
        .args(["-t", "60", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let g = Command::new(BIN)
        .args(["gen", "--netns", &format!("{LAB}-gen"), "-i", "gen0"])
        .args(["-n", "20000", "-R", "50k", "--cpu", "0", "--json"])
        .output()
        .unwrap();
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    let g: serde_json::Value = serde_json::from_slice(&g.stdout).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signals our child.
    unsafe { libc::kill(recv.id() as i32, libc::SIGINT) };
    let r: serde_json::Value =
        serde_json::from_slice(&recv.wait_with_output().unwrap().stdout).unwrap();
    let (sent, got) = (
        g["sent_packets"].as_u64().unwrap() as f64,
        r["stamped_packets"].as_u64().unwrap() as f64,
    );
    assert!(got > 15000.0, "received {got} of {sent} sent: {r}\n{g}");
    let (body, s) = scrape();
    let fwd = value(
        &s,
        "linerate_packets_total{interface=\"dut0\",reason=\"forwarded\"}",
    );
    assert!(
        fwd >= got && fwd <= sent,
        "forwarded {fwd}, received {got}, sent {sent}"
    );
    let per_cpu: f64 = s
        .iter()
        .filter(|(k, _)| {
            k.starts_with("linerate_cpu_packets_total{")
                && k.contains("interface=\"dut0\"")
                && k.contains("verdict=\"forwarded\"")
        })
        .map(|(_, v)| v)
        .sum();
    assert_eq!(per_cpu, fwd, "per CPU");
    // The lab's veths have one queue: every frame on queue 0.
    let q0 = value(
        &s,
        "linerate_queue_packets_total{interface=\"dut0\",queue=\"0\"}",
    );
    assert!(q0 >= fwd, "queue 0 {q0}, forwarded {fwd}");
    let bytes = value(
        &s,
        "linerate_bytes_total{interface=\"dut0\",reason=\"forwarded\"}",
    );
    assert!(bytes >= 60.0 * fwd, "{bytes} bytes for {fwd} frames");
    let (ok, said) = promtool(&body);
    assert!(
        ok && said.trim().is_empty(),
        "promtool check metrics: {said}\n{body}"
    );
    // OpenMetrics when asked for.
    let (status, kind, open) =
        get("/metrics", "application/openmetrics-text;version=1.0.0").unwrap();
    assert_eq!(
        (status, kind.as_str()),
        (200, "application/openmetrics-text")
    );
    assert!(open.ends_with("# EOF\n"), "{open}");
    assert_eq!(get("/nothing", "*/*").unwrap().0, 404);

    // A route added: one more prefix, changes counted, a delay reported.
    let changes = value(&s, "linerate_changes_total");
    let routes = value(&s, "linerate_routes{family=\"ipv4\",table=\"main\"}");
    ip_dut(&["route", "add", "10.99.0.0/16", "via", "198.19.0.1"]);
    let s = scrape_until("the added route", |s| {
        s.get("linerate_routes{family=\"ipv4\",table=\"main\"}") == Some(&(routes + 1.0))
    });
    assert!(value(&s, "linerate_changes_total") > changes);
    assert!(value(&s, "linerate_last_change_seconds") < 1.0, "{s:#?}");

    // A ruleset the fast path judges, then one it refuses, with why.
    let nft = |rules: &str| {
        let mut p = Command::new("ip")
            .args(["netns", "exec", &ns(), "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        p.stdin.take().unwrap().write_all(rules.as_bytes()).unwrap();
        assert!(p.wait().unwrap().success(), "nft -f: {rules}");
    };
    nft("table ip f { chain through { type filter hook forward priority 0; policy accept; udp dport 2000 counter accept; }; }\n");
    let s = scrape_until("the compiled ruleset", |s| {
        s.get("linerate_firewall_judged{family=\"ipv4\"}") == Some(&1.0)
    });
    assert!(value(&s, "linerate_firewall_generation") >= 1.0);
    // The generator's frames (UDP to port 2000) match its rule: the fast
    // path's counts, named by table, chain and handle.
    let g = Command::new(BIN)
        .args(["gen", "--netns", &format!("{LAB}-gen"), "-i", "gen0"])
        .args(["-n", "1000", "-R", "10k", "--cpu", "0"])
        .output()
        .unwrap();
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    let matched = |s: &BTreeMap<String, f64>| -> f64 {
        s.iter()
            .filter(|(k, _)| k.starts_with("linerate_firewall_rule_packets_total{family=\"ipv4\",table=\"ip f\",chain=\"through\",handle="))
            .map(|(_, v)| v)
            .sum()
    };
    let s = scrape_until("the rule's counts", |s| matched(s) > 0.0);
    assert!(matched(&s) <= 1000.0, "{s:#?}");
    assert!(value(&s, "linerate_firewall_reads_total") >= 1.0);
    // (ct mark: ct state and ct direction are judged in the fast path.)
    nft("add rule ip f through ct mark 1 accept\n");
    let s = scrape_until("the refused ruleset", |s| {
        s.get("linerate_firewall_judged{family=\"ipv4\"}") == Some(&0.0)
    });
    let refused: Vec<&String> = s
        .keys()
        .filter(|k| k.starts_with("linerate_firewall_refused{family=\"ipv4\",reason="))
        .collect();
    assert_eq!(refused.len(), 1, "{s:#?}");
    assert!(refused[0].contains("ct"), "{refused:?}");
    let (body, _) = scrape();
    let (ok, said) = promtool(&body);
    assert!(
        ok && said.trim().is_empty(),
        "promtool check metrics: {said}\n{body}"
    );
    // Every family a router with a ruleset has, typed as its reference
    // says.
    let typed = typed_as_the_reference(&body);
    assert!(typed >= 20, "{typed} families:\n{body}");

    // A new router takes this one over: it binds the same address while
    // the old one still serves it, and the counts go on from the old
    // one's (the same counters map).
    let forwarded = "linerate_packets_total{interface=\"dut0\",reason=\"forwarded\"}";
    let before = value(&scrape().1, forwarded);
    let _second = route();
    let t = Instant::now();
    while first.0.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < Duration::from_secs(20), "not taken over");
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = scrape_until("the new router's metrics", |s| {
        s.get("linerate_ready") == Some(&1.0)
    });
    assert!(value(&s, forwarded) >= before, "{s:#?}");
}

/// The metrics' address taken: the router says so and exits before it
/// attaches anything.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_taken_metrics_address_is_refused_before_anything_is_attached() {
    let lab = "lrt-metrics2";
    let _down = common::lab::up(lab);
    let dut = format!("{lab}-dut");
    let _taken = std::thread::spawn({
        let dut = dut.clone();
        move || {
            let _in = linerate_host::netns::NetnsGuard::enter(&dut).unwrap();
            std::net::TcpListener::bind(ADDR).unwrap()
        }
    })
    .join()
    .unwrap();
    let route_with_metrics_at = |addr: &str| {
        Command::new(BIN)
            .args([
                "route",
                "--netns",
                &dut,
                "-i",
                "dut0,dut1",
                "--metrics",
                addr,
            ])
            .output()
            .unwrap()
    };
    let o = route_with_metrics_at(ADDR);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("metrics: cannot listen on {ADDR}")),
        "{err}"
    );
    let xdp = Command::new("ip")
        .args(["-n", &dut, "link", "show", "dut0"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&xdp.stdout).contains("xdp"),
        "attached"
    );
    let o = route_with_metrics_at("localhost");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is not an IP address and port"),
        "{o:?}"
    );
}
