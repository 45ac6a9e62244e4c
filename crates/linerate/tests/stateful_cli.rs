//! The stateful firewall with real connections: UDP
//! conversations between sockets in a lab's generator and receiver
//! namespaces, through linerate's router in the DUT under a stateful
//! ruleset (established and related accepted, new only from the
//! generator's side). The echoes come back byte for byte; the kernel sees
//! each connection's beginning and the fast path carries the rest; the
//! kernel's entries live on while the fast path carries their packets
//! (their timeout, shortened here to 6 s, would run out otherwise) and
//! expire once the traffic stops; a connection deleted from the kernel's
//! table is not carried any more; the same behind masquerade, carried
//! from the NAT stage's ways. Then a TCP transfer both ways, TCP
//! windows unchecked (what the fast path needs to carry TCP): the bytes
//! arrive, the fast path carries the established part, the kernel sees
//! the handshake and the close. Needs root.
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::lab;

const LAB: &str = "lrt-ct";
/// Addresses beyond the lab's connected /24s, reached through gateway
/// routes: what the fast path forwards.
const CLIENT: &str = "198.18.1.1";
const SERVER: &str = "198.19.1.1";
const PORT: u16 = 7000;
/// nf_conntrack_udp_timeout_stream in the DUT for the test.
const STREAM_TIMEOUT: u64 = 6;

const RULESET: &str = "table inet stateful {
  chain forward {
    type filter hook forward priority 0; policy drop;
    ct state established,related accept
    ct state new iifname \"dut0\" accept
  }
}
";

/// What the NAT'd runs add: the clients masqueraded behind the DUT's
/// address towards the receiver.
const MASQUERADE: &str = "table inet edge {
  chain postrouting {
    type nat hook postrouting priority 100;
    oifname \"dut1\" masquerade
  }
}
";

fn ns(role: &str) -> String {
    format!("{LAB}-{role}")
}

fn run(ns: &str, args: &[&str]) -> String {
    lab::run_in(ns, args)
}

/// The DUT's conntrack entries of the test's connections (`conntrack -L`
/// lines, one per connection).
fn entries() -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns("dut"), "conntrack", "-L", "-p", "udp"])
        .args(["--dport", &PORT.to_string()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// A conntrack line's seconds left.
fn timeout_of(line: &str) -> u64 {
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

fn counted(reason: &str) -> u64 {
    lab::router_counted(LAB, reason)
}

/// The echo server in the receiver's namespace: every datagram back to
/// its sender, and what `push` hands it to the client socket it names
/// (unasked: to where that socket's datagrams last came from, behind
/// NAT the DUT's mapping), until `stop`.
fn echo_server(
    stop: Arc<AtomicBool>,
    push: std::sync::mpsc::Receiver<(usize, Vec<u8>)>,
) -> std::thread::JoinHandle<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let _in = linerate_host::netns::NetnsGuard::enter(&ns("recv")).unwrap();
        let s = UdpSocket::bind((SERVER, PORT)).unwrap();
        // (Short: what `push` hands it goes out within a millisecond.)
        s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
        tx.send(()).unwrap();
        let mut buf = [0u8; 2048];
        let mut peers: HashMap<usize, SocketAddr> = HashMap::new();
        while !stop.load(Ordering::Relaxed) {
            if let Ok((n, from)) = s.recv_from(&mut buf) {
                if n >= 4 {
                    let sock = u32::from_be_bytes(buf[..4].try_into().unwrap());
                    peers.insert(sock as usize, from);
                }
                s.send_to(&buf[..n], from).unwrap();
            }
            while let Ok((sock, what)) = push.try_recv() {
                s.send_to(&what, peers[&sock]).unwrap();
            }
        }
    });
    rx.recv().unwrap();
    t
}

/// A datagram's bytes: who sends it, its number, and a pattern of its
/// own, 64 to 1400 bytes.
fn payload(sock: usize, seq: u32) -> Vec<u8> {
    let len = 64 + (seq as usize * 97 + sock * 31) % 1337;
    let mut p: Vec<u8> = (0..len)
        .map(|i| (i as u32 * 7 + seq * 13 + sock as u32) as u8)
        .collect();
    p[..4].copy_from_slice(&(sock as u32).to_be_bytes());
    p[4..8].copy_from_slice(&seq.to_be_bytes());
    p
}

/// Datagram `seq` of client socket `s` (the `i`th), and its echo, which
/// must come back byte for byte.
fn exchange(s: &UdpSocket, i: usize, seq: u32) {
    let p = payload(i, seq);
    s.send(&p).unwrap();
    let mut buf = [0u8; 2048];
    let n = s
        .recv(&mut buf)
        .unwrap_or_else(|e| panic!("socket {i}, datagram {seq}: no echo ({e})"));
    assert_eq!(
        &buf[..n],
        &p[..],
        "socket {i}, datagram {seq}: echoed wrong"
    );
}

/// Rounds of datagrams from every socket of `socks`, echoed, for `time`
/// (`pause` between rounds): how many rounds, and once all are assured and
/// carried (four seconds in: the first two seconds' packets go to the
/// kernel) what went to the kernel for a missing entry, for a young one,
/// and what the fast path carried.
fn exchanges(socks: &[UdpSocket], time: Duration, pause: Duration) -> (u32, (u64, u64, u64)) {
    let counts = || {
        (
            counted("pass_ct_none"),
            counted("pass_ct_young"),
            counted("forwarded"),
        )
    };
    let start = Instant::now();
    let mut settled = None;
    let mut seq = 0u32;
    while start.elapsed() < time {
        for (i, s) in socks.iter().enumerate() {
            exchange(s, i, seq);
        }
        seq += 1;
        if settled.is_none() && start.elapsed() > Duration::from_secs(4) {
            settled = Some(counts());
        }
        std::thread::sleep(pause);
    }
    let ((none0, young0, fwd0), (none, young, fwd)) = (settled.unwrap(), counts());
    (seq, (none - none0, young - young0, fwd - fwd0))
}

/// One lab at a time: the tests share its name.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The lab, `clients` on the generator's loopback and SERVER on the
/// receiver's, the stateful ruleset (with `masquerade`, the clients
/// masqueraded too) and the short stream timeout in the DUT, and the
/// router on it with its firewall published.
fn stateful_lab(clients: &[&str], masquerade: bool) -> (lab::Down, lab::Router) {
    stateful_lab_with(clients, masquerade, &[])
}

/// [`stateful_lab`], the router started with `flags` too.
fn stateful_lab_with(
    clients: &[&str],
    masquerade: bool,
    flags: &[&str],
) -> (lab::Down, lab::Router) {
    let down = lab::up(LAB);
    for c in clients {
        run(
            &ns("gen"),
            &["ip", "addr", "add", &format!("{c}/32"), "dev", "lo"],
        );
    }
    run(
        &ns("recv"),
        &["ip", "addr", "add", &format!("{SERVER}/32"), "dev", "lo"],
    );
    let path = std::env::temp_dir().join("linerate-stateful-cli.nft");
    let ruleset = if masquerade {
        format!("{RULESET}{MASQUERADE}")
    } else {
        RULESET.to_string()
    };
    std::fs::write(&path, ruleset).unwrap();
    run(&ns("dut"), &["nft", "-f", path.to_str().unwrap()]);
    // (The ruleset's ct expressions load conntrack in the namespace.)
    run(
        &ns("dut"),
        &[
            "sysctl",
            "-qw",
            &format!("net.netfilter.nf_conntrack_udp_timeout_stream={STREAM_TIMEOUT}"),
        ],
    );
    let router = lab::start_router_with(LAB, flags);
    lab::wait_for_firewall(LAB, 1 + masquerade as usize);
    (down, router)
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn udp_connections_are_carried_once_established_and_the_kernels_entries_kept() {
    udp_connections_carried(false, tcp_transfer);
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn masqueraded_udp_connections_are_carried_and_the_kernels_entries_kept() {
    udp_connections_carried(true, || {});
}

/// UDP connections through the stateful lab (`masquerade`: NAT'd too):
/// carried once established, their kernel entries kept alive while
/// carried and expiring once the traffic stops, a deleted one carried no
/// more; `then` in the same lab.
fn udp_connections_carried(masquerade: bool, then: fn()) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_down, _router) = stateful_lab(&[CLIENT], masquerade);

    let stop = Arc::new(AtomicBool::new(false));
    let (push, pushed) = std::sync::mpsc::channel();
    let server = echo_server(stop.clone(), pushed);
    // Client sockets in the generator's namespace; the last one stays
    // quiet after its first exchanges (for the deletion below).
    let socks: Vec<UdpSocket> = {
        let _in = linerate_host::netns::NetnsGuard::enter(&ns("gen")).unwrap();
        (0..8)
            .map(|_| {
                let s = UdpSocket::bind((CLIENT, 0)).unwrap();
                s.connect((SERVER, PORT)).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(500)))
                    .unwrap();
                s
            })
            .collect()
    };
    let quiet = socks.len() - 1;
    let (none0, young0, fwd0) = (
        counted("pass_ct_none"),
        counted("pass_ct_young"),
        counted("forwarded"),
    );
    // Twice the stream timeout: without the fast path's refreshes, the
    // kernel's entries would expire half way.
    let start = Instant::now();
    let mut seq = 0u32;
    let mut checked_alive = false;
    while start.elapsed() < Duration::from_secs(2 * STREAM_TIMEOUT) {
        for (i, s) in socks.iter().enumerate() {
            if i != quiet || start.elapsed() < Duration::from_secs(3) {
                exchange(s, i, seq);
            }
        }
        seq += 1;
        // Past the stream timeout from the start, and 1.5 s past the
        // quiet connection's: the active ones' entries are there, the
        // quiet one's is gone.
        if !checked_alive && start.elapsed() > Duration::from_secs_f64(STREAM_TIMEOUT as f64 + 4.5)
        {
            let e = entries();
            assert_eq!(e.len(), socks.len() - 1, "{e:#?}");
            let quiet_port = format!("sport={} ", socks[quiet].local_addr().unwrap().port());
            for line in &e {
                assert!(line.contains("[ASSURED]"), "{line}");
                assert!(!line.contains(&quiet_port), "{line}");
            }
            checked_alive = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(checked_alive);
    let carried = counted("forwarded") - fwd0;
    let (none, young) = (
        counted("pass_ct_none") - none0,
        counted("pass_ct_young") - young0,
    );
    let total = 2 * seq as u64 * (socks.len() as u64 - 1);
    eprintln!(
        "{total} datagrams both ways: carried {carried}, to the kernel for no entry {none}, for a young one {young}"
    );
    // Each connection's first datagram finds no entry; the first two
    // seconds' go to the kernel (not assured yet); the rest is carried.
    assert!(none >= socks.len() as u64, "{none}");
    assert!(young > 0, "{young}");
    assert!(carried * 10 >= total * 7, "carried {carried} of {total}");

    // A datagram the server sends unasked to an established connection's
    // client (its reply direction) arrives; once the connection's entry
    // is deleted from the kernel's table, it is a new connection from the
    // receiver's side, which the ruleset drops: the fast path, which
    // carried the connection, must not carry it any more.
    let unasked = |i: usize| -> bool {
        let what = payload(99, i as u32);
        push.send((i, what.clone())).unwrap();
        let mut buf = [0u8; 2048];
        match socks[i].recv(&mut buf) {
            Ok(n) => {
                assert_eq!(&buf[..n], &what[..]);
                true
            }
            Err(_) => false,
        }
    };
    assert!(
        unasked(1),
        "an established connection's reply did not arrive"
    );
    let port0 = socks[0].local_addr().unwrap().port().to_string();
    run(
        &ns("dut"),
        &["conntrack", "-D", "-p", "udp", "--orig-port-src", &port0],
    );
    // How long the fast path went on carrying it: unasked datagrams a
    // millisecond apart from the moment `conntrack -D` returned, the last
    // to arrive.
    let deleted = Instant::now();
    let mut sent = Vec::new();
    while deleted.elapsed() < Duration::from_millis(50) {
        let tag = sent.len() as u32;
        push.send((0, payload(77, tag))).unwrap();
        sent.push(deleted.elapsed());
        std::thread::sleep(Duration::from_millis(1));
    }
    socks[0]
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut last = None;
    let mut buf = [0u8; 2048];
    while let Ok(n) = socks[0].recv(&mut buf) {
        let tag = u32::from_be_bytes(buf[4..8].try_into().unwrap()) as usize;
        assert!(n > 8 && tag < sent.len());
        last = last.max(Some(tag));
    }
    match last {
        Some(t) => eprintln!(
            "the deleted connection was carried until {:?} after conntrack -D returned ({} of {} probes a millisecond apart arrived)",
            sent[t],
            t + 1,
            sent.len()
        ),
        None => eprintln!(
            "the deleted connection was not carried {:?} after conntrack -D returned (the first probe's)",
            sent[0]
        ),
    }
    socks[0]
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    // It goes to the kernel for no entry or, behind NAT, for the young
    // one the probes to the DUT's own address opened.
    let looked_up = || counted("pass_ct_none") + counted("pass_ct_young");
    let dropped0 = looked_up();
    assert!(
        !unasked(0),
        "a deleted connection's reply was forwarded 100 ms after its deletion"
    );
    assert!(
        looked_up() > dropped0,
        "the fast path did not look the deleted connection up again"
    );
    assert!(unasked(1), "the other connections go on");

    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    // Once the traffic stops the entries run out on the kernel's
    // schedule: the stream timeout from the last packet, give or take a
    // sweep.
    let stopped = Instant::now();
    loop {
        let e = entries();
        if e.is_empty() {
            break;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(STREAM_TIMEOUT + 5),
            "entries left {:?} after the traffic stopped: {e:#?}",
            stopped.elapsed()
        );
        for line in &e {
            assert!(timeout_of(line) <= STREAM_TIMEOUT, "{line}");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let gone = stopped.elapsed();
    eprintln!("the kernel's entries expired {gone:?} after the traffic stopped");
    assert!(
        gone >= Duration::from_secs(STREAM_TIMEOUT - 2),
        "expired after {gone:?}, before their timeout"
    );
    then();
}

/// Client addresses for the connections that share a set: where the
/// cache is large, one address's ports rarely put three in one set.
const SHARING_CLIENTS: [&str; 4] = ["198.18.1.1", "198.18.1.2", "198.18.1.3", "198.18.1.4"];

/// Three (client address, port) pairs whose connections to SERVER:PORT
/// fall in one set of the fast path's connection cache as it spans its
/// fewest sets, holding a few connections (ct_cache.rs computes the set
/// as bpf/include/router/ct_cache.h does; a router unit test holds the two
/// equal).
fn sharing_one_set() -> Vec<(std::net::Ipv4Addr, u16)> {
    use linerate_dataplane::ct_cache::{key_of, set_of, End, LEAST_SETS};
    let bits = LEAST_SETS.map(|s| s.trailing_zeros());
    let end = |a: std::net::Ipv4Addr, port: u16| {
        let mut addr = [0u8; 16];
        addr[..4].copy_from_slice(&a.octets());
        End {
            addr,
            port: port.to_be_bytes(),
        }
    };
    let server = end(SERVER.parse().unwrap(), PORT);
    let mut by_set: std::collections::HashMap<u32, Vec<(std::net::Ipv4Addr, u16)>> =
        Default::default();
    for c in SHARING_CLIENTS {
        let c: std::net::Ipv4Addr = c.parse().unwrap();
        for port in 20000..60000u16 {
            let (k, _) = key_of(&end(c, port), &server, 17, false);
            let set = by_set.entry(set_of(&k, bits)).or_default();
            set.push((c, port));
            if set.len() == 3 {
                return set.clone();
            }
        }
    }
    panic!("no three of 160,000 connections share a set of {bits:?} bits");
}

/// Three connections in a set of two ways: the third is carried after a
/// lookup in the kernel's table on each packet, never from the cache the
/// sweep keeps the kernel's timeouts from. Its kernel entry must live on
/// while it carries traffic, as the kernel's own refresh on each packet
/// would keep it: it is not recreated (no packet of it finds no entry or
/// a young one once all are established), and all three are there,
/// assured, after more than twice the stream timeout.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_connection_its_set_has_no_way_for_keeps_its_kernel_entry() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_down, _router) = stateful_lab(&SHARING_CLIENTS, false);
    let chosen = sharing_one_set();

    let stop = Arc::new(AtomicBool::new(false));
    let (_push, pushed) = std::sync::mpsc::channel();
    let server = echo_server(stop.clone(), pushed);
    let socks: Vec<UdpSocket> = {
        let _in = linerate_host::netns::NetnsGuard::enter(&ns("gen")).unwrap();
        chosen
            .iter()
            .map(|&(c, port)| {
                let s = UdpSocket::bind((c, port)).unwrap();
                s.connect((SERVER, PORT)).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(500)))
                    .unwrap();
                s
            })
            .collect()
    };
    let (_, (none, young, carried)) = exchanges(
        &socks,
        Duration::from_secs(STREAM_TIMEOUT * 5 / 2),
        Duration::from_millis(20),
    );
    let e = entries();
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    eprintln!(
        "connections {chosen:?} share a set; after they settled: carried {carried}, to the kernel for no entry {none}, for a young one {young}"
    );
    assert_eq!(e.len(), 3, "{e:#?}");
    assert!(e.iter().all(|l| l.contains("[ASSURED]")), "{e:#?}");
    assert_eq!(
        (none, young),
        (0, 0),
        "a connection's kernel entry ran out under traffic and was made again"
    );
    assert!(carried > 0);
}

/// The connection cache spans as many sets as its connections want: a
/// few connections, its fewest; 1,500 masqueraded ones (3,000 NAT ways:
/// more than a quarter of the fewest sets' 8,192) widen it to twice that
/// within seconds, the connections carried throughout, byte for byte,
/// none found missing or young in the kernel's table once established
/// (the ways that moved are found there again, established, and kept);
/// and once conntrack's table is flushed (its destroy events empty the
/// ways), it narrows to its fewest again, not before ten seconds after it
/// widened.
#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_connection_cache_spans_as_many_sets_as_its_connections_want() {
    use linerate_dataplane::ct_cache::LEAST_SETS;
    const METRICS: &str = "127.0.0.1:9419";
    const SETS: &str = "linerate_ct_cache_sets{family=\"ipv4\"}";
    const CONNECTIONS: usize = 1500;
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_down, _router) = stateful_lab_with(&SHARING_CLIENTS, true, &["--metrics", METRICS]);
    let sets = || lab::metric(LAB, METRICS, SETS);
    let wait_for = |what: &str, want: f64, within: u64| {
        let t = Instant::now();
        while sets() != Some(want) {
            assert!(
                t.elapsed() < Duration::from_secs(within),
                "{what}: the span is {:?} sets, not {want}",
                sets()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_for("a few connections", LEAST_SETS[0] as f64, 10);

    // (One socket a connection: more files than a default soft limit.)
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit with a valid struct.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = lim.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
    }
    assert!(lim.rlim_cur as usize > CONNECTIONS + 100, "{lim:?}");
    let stop = Arc::new(AtomicBool::new(false));
    let (_push, pushed) = std::sync::mpsc::channel();
    let server = echo_server(stop.clone(), pushed);
    let socks: Vec<UdpSocket> = {
        let _in = linerate_host::netns::NetnsGuard::enter(&ns("gen")).unwrap();
        (0..CONNECTIONS)
            .map(|i| {
                let c: std::net::Ipv4Addr = SHARING_CLIENTS[i % 4].parse().unwrap();
                let s = UdpSocket::bind((c, 0)).unwrap();
                s.connect((SERVER, PORT)).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(500)))
                    .unwrap();
                s
            })
            .collect()
    };
    // Established and assured after two seconds of both ways; the span
    // fitted within a second of the ways filling; then three seconds more.
    let (rounds_after, (none, young, carried)) =
        exchanges(&socks, Duration::from_secs(9), Duration::ZERO);
    let widened = sets();
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    eprintln!(
        "{CONNECTIONS} connections, {rounds_after} rounds: the span {widened:?} sets; after they settled: carried {carried}, to the kernel for no entry {none}, for a young one {young}"
    );
    assert_eq!(widened, Some(2.0 * LEAST_SETS[0] as f64));
    assert_eq!((none, young), (0, 0));
    assert!(
        carried >= 2 * CONNECTIONS as u64,
        "carried {carried}: not every connection's datagrams and echoes"
    );

    drop(socks);
    run(&ns("dut"), &["conntrack", "-F"]);
    // (A span narrows ten seconds after its last change at the soonest.)
    wait_for("the connections gone", LEAST_SETS[0] as f64, 20);
}

/// A TCP connection from CLIENT (routed both ways, where the default
/// source, on the connected network, would come back through the kernel)
/// to the server's `port`.
fn client_stream(port: u16) -> std::net::TcpStream {
    use std::os::fd::FromRawFd;
    let addr = |a: &str, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(a.parse::<std::net::Ipv4Addr>().unwrap()).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: plain socket calls on a descriptor owned here, then by the
    // stream; the addresses outlive the calls.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let c = std::net::TcpStream::from_raw_fd(fd);
        let (from, to) = (addr(CLIENT, 0), addr(SERVER, port));
        assert_eq!(
            libc::bind(fd, &from as *const _ as *const libc::sockaddr, len),
            0
        );
        assert_eq!(
            libc::connect(fd, &to as *const _ as *const libc::sockaddr, len),
            0
        );
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c
    }
}

/// A TCP transfer both ways through the router, windows unchecked
/// (nf_conntrack_tcp_be_liberal, as the fast path needs to carry TCP):
/// the bytes arrive intact, the fast path carries the established part,
/// the kernel sees the handshake (its entry established and assured) and
/// the close (its entry left in TIME_WAIT).
fn tcp_transfer() {
    const TCP_PORT: u16 = 7001;
    const BYTES: usize = 4 << 20;
    run(
        &ns("dut"),
        &[
            "sysctl",
            "-qw",
            "net.netfilter.nf_conntrack_tcp_be_liberal=1",
        ],
    );
    // The conntrack thread reads the sysctls each second.
    std::thread::sleep(Duration::from_millis(1500));
    let data: Vec<u8> = (0..BYTES).map(|i| (i * 131 + i / 7) as u8).collect();
    let listener = {
        let _in = linerate_host::netns::NetnsGuard::enter(&ns("recv")).unwrap();
        std::net::TcpListener::bind((SERVER, TCP_PORT)).unwrap()
    };
    // The server echoes what it reads as it reads it (the connection
    // established both ways all along: once a side has closed, the
    // kernel's entry leaves ESTABLISHED and the rest is the kernel's),
    // then closes its side.
    let server = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 65536];
        let mut n = 0;
        loop {
            let k = std::io::Read::read(&mut c, &mut buf).unwrap();
            if k == 0 {
                break;
            }
            std::io::Write::write_all(&mut c, &buf[..k]).unwrap();
            n += k;
        }
        n
    });
    let (carried0, state0) = (counted("forwarded"), counted("pass_ct_state"));

    let mut c = {
        let _in = linerate_host::netns::NetnsGuard::enter(&ns("gen")).unwrap();
        client_stream(TCP_PORT)
    };
    let mut reader = c.try_clone().unwrap();
    let received = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let their_received = received.clone();
    let echoed = std::thread::spawn(move || {
        let (mut back, mut buf) = (Vec::new(), vec![0u8; 65536]);
        loop {
            let k = std::io::Read::read(&mut reader, &mut buf).unwrap();
            if k == 0 {
                return back;
            }
            back.extend_from_slice(&buf[..k]);
            their_received.store(back.len(), Ordering::Relaxed);
        }
    });
    // Half the bytes, then the kernel's entry: established and assured.
    std::io::Write::write_all(&mut c, &data[..BYTES / 2]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let tcp_entries = || {
        let out = Command::new("ip")
            .args(["netns", "exec", &ns("dut"), "conntrack", "-L", "-p", "tcp"])
            .args(["--dport", &TCP_PORT.to_string()])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let during = tcp_entries();
    assert!(
        during.contains("ESTABLISHED") && during.contains("[ASSURED]"),
        "{during}"
    );
    std::io::Write::write_all(&mut c, &data[BYTES / 2..]).unwrap();
    // All echoed before the client closes its side.
    let t = Instant::now();
    while received.load(Ordering::Relaxed) < BYTES && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let back = echoed.join().unwrap();
    assert_eq!(server.join().unwrap(), BYTES);
    assert!(
        back == data,
        "the bytes came back changed ({} of {BYTES})",
        back.len()
    );
    drop(c);
    std::thread::sleep(Duration::from_millis(300));
    let after = tcp_entries();
    assert!(after.contains("TIME_WAIT"), "{after}");
    let (carried, state) = (
        counted("forwarded") - carried0,
        counted("pass_ct_state") - state0,
    );
    eprintln!(
        "TCP: {BYTES} bytes each way; the fast path carried {carried} segments, passed {state} SYN, FIN and RST to the kernel; after the close: {}",
        after.trim()
    );
    // Each way at least a segment per 1448 bytes, most carried.
    assert!(carried as usize >= 2 * BYTES / 1448, "carried {carried}");
    assert!(state >= 4, "{state}");
}
