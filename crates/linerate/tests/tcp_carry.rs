//! Real TCP through linerate's router with the kernel's window checking
//! on (nf_conntrack_tcp_be_liberal=0, the default) and `--carry-tcp`:
//! the kernel's sockets at both ends of a lab (a transfer echoed back
//! byte for byte, then iperf3 with four streams each way), full checksums
//! on the wire, the stateful ruleset of a real edge (established and
//! related accepted, invalid dropped, new connections only to the
//! server's ports from the generator's side), and the same with what
//! leaves through dut1 masqueraded. Held to the kernel alone
//! with the same ruleset and traffic: the fast path carries nearly every
//! segment of the established connections, every connection closes as
//! it does through the kernel (no ESTABLISHED entry left), and conntrack
//! finds no more packets invalid. Needs root and iperf3.
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::lab;

const LAB: &str = "lrt-tcp";
/// Beyond the lab's connected /24s, reached through gateway routes: what
/// the fast path forwards.
const CLIENT: &str = "198.18.1.1";
const SERVER: &str = "198.19.1.1";
const ECHO_PORT: u16 = 7002;
const IPERF_PORT: u16 = 5201;

/// The edge's stateful ruleset; with `masquerade`, what leaves through
/// dut1 masqueraded (the server then sees the DUT's address).
fn ruleset(masquerade: bool) -> String {
    let nat = if masquerade {
        "  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    oifname \"dut1\" masquerade
  }
"
    } else {
        ""
    };
    format!(
        "table inet edge {{
  chain forward {{
    type filter hook forward priority 0; policy drop;
    ct state established,related accept
    ct state invalid drop
    iifname \"dut0\" tcp dport {{ {ECHO_PORT}, {IPERF_PORT} }} ct state new accept
  }}
{nat}}}
"
    )
}

fn ns(role: &str) -> String {
    format!("{LAB}-{role}")
}

fn run(ns: &str, args: &[&str]) -> String {
    lab::run_in(ns, args)
}

/// conntrack's `invalid` count in the DUT, over its CPUs.
fn invalid() -> u64 {
    run(&ns("dut"), &["conntrack", "-S"])
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("invalid="))
        .map(|n| n.parse::<u64>().unwrap())
        .sum()
}

/// The DUT's TCP entries still ESTABLISHED.
fn established() -> Vec<String> {
    run(&ns("dut"), &["conntrack", "-L", "-p", "tcp"])
        .lines()
        .filter(|l| l.contains("ESTABLISHED"))
        .map(str::to_string)
        .collect()
}

/// A TCP connection from CLIENT to the server's `port` (bound to CLIENT:
/// the default source, on the connected network, would be answered
/// through the kernel).
fn client_stream(port: u16) -> std::net::TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let at =
        |a: &str, p: u16| socket2::SockAddr::from(std::net::SocketAddr::new(a.parse().unwrap(), p));
    s.bind(&at(CLIENT, 0)).unwrap();
    s.connect(&at(SERVER, port)).unwrap();
    let s: std::net::TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// `bytes` to the echo server and back (a connection established both
/// ways all along), then closed from the client's side; what came back
/// must be what went.
fn echo_transfer(bytes: usize) {
    let data: Vec<u8> = (0..bytes).map(|i| (i * 131 + i / 7) as u8).collect();
    let listener = {
        let _in = linerate_host::netns::NetnsGuard::enter(&ns("recv")).unwrap();
        std::net::TcpListener::bind((SERVER, ECHO_PORT)).unwrap()
    };
    let server = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        std::io::copy(&mut c.try_clone().unwrap(), &mut c).unwrap()
    });
    let mut c = {
        let _in = linerate_host::netns::NetnsGuard::enter(&ns("gen")).unwrap();
        client_stream(ECHO_PORT)
    };
    let mut reader = c.try_clone().unwrap();
    let echoed = std::thread::spawn(move || {
        let mut back = Vec::new();
        std::io::Read::read_to_end(&mut reader, &mut back).unwrap();
        back
    });
    for chunk in data.chunks(64 << 10) {
        std::io::Write::write_all(&mut c, chunk).unwrap();
    }
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let back = echoed.join().unwrap();
    assert_eq!(server.join().unwrap() as usize, bytes);
    assert!(
        back == data,
        "the bytes came back changed ({} of {bytes})",
        back.len()
    );
}

/// iperf3 from the generator to the receiver, four streams for
/// `seconds`, `reverse` the other way: the bits per second received.
fn iperf(seconds: u32, reverse: bool) -> f64 {
    let server: Child = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns("recv"),
            "iperf3",
            "-s",
            "-1",
            "-B",
            SERVER,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _server = Kill(server);
    let t = Instant::now();
    loop {
        let mut args = vec!["iperf3", "-c", SERVER, "-B", CLIENT, "-P", "4", "-J", "-t"];
        let secs = seconds.to_string();
        args.push(&secs);
        if reverse {
            args.push("-R");
        }
        let o = Command::new("ip")
            .args(["netns", "exec", &ns("gen")])
            .args(&args)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        if o.status.success() && v.get("error").is_none() {
            return v["end"]["sum_received"]["bits_per_second"]
                .as_f64()
                .unwrap_or_else(|| panic!("iperf3 said {v:#}"));
        }
        // The server not listening yet (iperf3 -J says so, and may exit 0).
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "iperf3: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The traffic: an echoed transfer, iperf3 each way; what it measured.
fn traffic() -> [f64; 2] {
    echo_transfer(16 << 20);
    [iperf(2, false), iperf(2, true)]
}

/// Waits for the connections' entries to leave ESTABLISHED (their closes
/// are the kernel's: a moment after the last segment).
fn none_established() -> Vec<String> {
    let t = Instant::now();
    loop {
        let e = established();
        if e.is_empty() || t.elapsed() > Duration::from_secs(2) {
            return e;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn counted(reason: &str) -> u64 {
    lab::router_counted(LAB, reason)
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn established_tcp_is_carried_with_the_kernels_window_checks_on() {
    carried_like_the_kernel(false);
}

/// The same, masqueraded: each segment rewritten as the kernel's entry
/// maps it.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn masqueraded_tcp_is_carried_with_the_kernels_window_checks_on() {
    carried_like_the_kernel(true);
}

/// One lab at a time: the tests share its name.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn carried_like_the_kernel(masquerade: bool) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _down = lab::up(LAB);
    run(
        &ns("gen"),
        &["ip", "addr", "add", &format!("{CLIENT}/32"), "dev", "lo"],
    );
    run(
        &ns("recv"),
        &["ip", "addr", "add", &format!("{SERVER}/32"), "dev", "lo"],
    );
    let path = std::env::temp_dir().join("linerate-tcp-carry.nft");
    std::fs::write(&path, ruleset(masquerade)).unwrap();
    run(&ns("dut"), &["nft", "-f", path.to_str().unwrap()]);
    let liberal = run(
        &ns("dut"),
        &["sysctl", "-n", "net.netfilter.nf_conntrack_tcp_be_liberal"],
    );
    assert_eq!(liberal.trim(), "0", "the kernel's default: windows checked");

    // The kernel alone.
    let invalid0 = invalid();
    let kernel = traffic();
    let kernel_invalid = invalid() - invalid0;
    let kernel_left = none_established();
    assert!(
        kernel_left.is_empty(),
        "through the kernel alone: {kernel_left:#?}"
    );

    // linerate, carrying.
    let router = lab::start_router_with(LAB, &["--carry-tcp"]);
    // (The forward chain, and the nat chain.)
    lab::wait_for_firewall(LAB, 1 + masquerade as usize);
    let reasons = [
        "forwarded",
        "pass_ct_window",
        "pass_fw_miss",
        "pass_ct_state",
        "pass_ct_young",
        "pass_ct_invalid",
        "pass_ct_none",
    ];
    let before: Vec<u64> = reasons.iter().map(|r| counted(r)).collect();
    let invalid1 = invalid();
    let carried_run = traffic();
    let linerate_invalid = invalid() - invalid1;
    let n: Vec<u64> = reasons
        .iter()
        .zip(&before)
        .map(|(r, b)| counted(r) - b)
        .collect();
    let left = none_established();
    drop(router);
    eprintln!(
        "masquerade {masquerade}: kernel alone: {:.2} / {:.2} Gbit/s (iperf3 there / back), {kernel_invalid} invalid; linerate --carry-tcp: {:.2} / {:.2} Gbit/s, {linerate_invalid} invalid; segments {:?}",
        kernel[0] / 1e9,
        kernel[1] / 1e9,
        carried_run[0] / 1e9,
        carried_run[1] / 1e9,
        reasons.iter().zip(&n).collect::<Vec<_>>()
    );
    assert!(left.is_empty(), "connections left ESTABLISHED: {left:#?}");
    assert!(
        linerate_invalid <= kernel_invalid,
        "conntrack found {linerate_invalid} packets invalid, {kernel_invalid} through the kernel alone"
    );
    // The established connections' segments: carried, or before their
    // connection was marked (window) or their key judged (miss).
    let (carried, window, miss) = (n[0], n[1], n[2]);
    let established = carried + window + miss;
    assert!(
        carried * 100 >= established * 99,
        "carried {carried} of {established} segments of established connections ({window} window-checked, {miss} misses)"
    );
    // Each connection's handshake and close went to the kernel.
    assert!(n[3] >= 4 * 10, "SYN, FIN and RST to the kernel: {}", n[3]);
}
