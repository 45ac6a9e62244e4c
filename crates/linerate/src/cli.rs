//! The command-line grammar.
use clap::{Args, Parser, Subcommand};
use linerate_lab::topology::DEFAULT_NAME;

#[derive(Parser, Debug)]
#[command(
    name = "linerate",
    version,
    about = "An XDP software router and the lab that measures routers"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Build, inspect, remove and run the gen -> dut -> recv namespace lab.
    #[command(subcommand)]
    Lab(LabCmd),
    /// Send frames with the XDP live-frames generator (pkt-gen style options).
    Gen(GenArgs),
    /// Count and drop frames with an XDP receiver.
    Recv(RecvArgs),
    /// FreeBSD's ministat: statistics and Student's t test of data sets.
    /// Usage: ministat [-Anqs] [-C column] [-c confidence] [-d delimiters]
    /// [-w width] [--json] [file ...]
    #[command(disable_help_flag = true)]
    Ministat(MinistatArgs),
    /// Simple IMIX pps <-> bps conversion and Ethernet line rates.
    Imix(ImixArgs),
    /// The host's and interfaces' settings for forwarding: each one's
    /// value, the one recommended, and why (docs/tuning.md).
    Tune(TuneArgs),
    /// Benchmarks, each against a peer measured in the same run.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// The FIB: statistics of a table (generated or loaded from a dump).
    #[command(subcommand)]
    Fib(FibCmd),
    /// Route with the XDP fast path between these interfaces, mirroring the
    /// kernel's routes and neighbours (Ctrl-C or SIGTERM detaches).
    Route(RouteArgs),
    /// Check a configuration file for `linerate route` (every value, and
    /// that its interfaces exist in its namespace) without changing
    /// anything.
    CheckConfig(CheckConfigArgs),
    /// Throughput search against a DUT: BSDRP equilibrium, RFC 2544 binary
    /// search, or MLRsearch NDR/PDR.
    Search(SearchArgs),
    /// One trial at a fixed rate through a lab or named interfaces: offered,
    /// forwarded, loss ratio and whether the generator offered the rate
    /// (the measurement every search makes at each load).
    Trial(TrialArgs),
    /// Counters of a running `linerate route`, per interface, a line a
    /// second, then the totals by reason.
    Stats(StatsArgs),
    /// Frames per receive queue of interfaces, a line a second (in the
    /// spirit of nic-queue-usage), then the totals: from linerate's fast
    /// path where it is attached, from the kernel's statistics elsewhere.
    Queues(QueuesArgs),
    /// The kernel's nftables ruleset as linerate reads it: per IP family
    /// the filter chains a forwarded packet crosses, in the kernel's order,
    /// or the table, chain and rule that keep the family in the kernel.
    Firewall(FirewallArgs),
}

#[derive(Args, Debug)]
pub struct FirewallArgs {
    /// The network namespace whose ruleset to read (default: this one).
    #[arg(long)]
    pub netns: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct QueuesArgs {
    /// The interfaces to show. Those a running `linerate route` is attached
    /// to are read from its fast path (out: what it forwarded); any other
    /// from the kernel's per-queue counters, `ethtool -S` (out: what the
    /// interface sent).
    #[arg(short = 'i', long, value_delimiter = ',', required = true)]
    pub interfaces: Vec<String>,
    /// The interfaces' network namespace (a router's, as given to
    /// `linerate route --netns`).
    #[arg(long)]
    pub netns: Option<String>,
    /// Seconds to watch (default: until Ctrl-C).
    #[arg(short = 't', long)]
    pub seconds: Option<f64>,
    /// Print the totals as JSON at the end, no per-second lines.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// The router's network namespace (as given to `linerate route --netns`).
    #[arg(long)]
    pub netns: Option<String>,
    /// Also each interface's frames by receive queue (as `linerate queues`).
    #[arg(long)]
    pub queues: bool,
    /// Seconds to watch (default: until Ctrl-C).
    #[arg(short = 't', long)]
    pub seconds: Option<f64>,
    /// Print the totals as JSON at the end, no per-second lines.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RouteArgs {
    /// The configuration file (default: /etc/linerate/linerate.toml when
    /// -i is not given); the flags below override its values.
    #[arg(long)]
    pub config: Option<std::path::PathBuf>,
    /// Interfaces to route between, comma-separated (-i eth0,eth1).
    #[arg(short = 'i', long, value_delimiter = ',')]
    pub interfaces: Vec<String>,
    /// native (driver) or generic (skb) XDP [default: native].
    #[arg(long, value_parser = ["native", "generic"])]
    pub mode: Option<String>,
    /// IPv6 table layout: wide (24 + 8 bits, a /48 in 4 reads, ~310 MiB
    /// for a full table) or compact (16 + 4, 9 reads, ~55 MiB) [default:
    /// wide].
    #[arg(long = "fib6", value_parser = choice(linerate_fib::Ipv6Layout::CHOICES))]
    pub fib6: Option<linerate_fib::Ipv6Layout>,
    /// Run inside this network namespace.
    #[arg(long)]
    pub netns: Option<String>,
    /// No per-second lines.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// The route-following loop's nice value, -20 to 19: ahead of
    /// ordinary processes by default, so a BGP daemon's burst does not
    /// keep it waiting for the CPU (the fast path would use withdrawn
    /// routes meanwhile) [default: -10].
    #[arg(long, allow_negative_numbers = true)]
    pub nice: Option<i32>,
    /// Serve Prometheus metrics at http://ADDR/metrics (ADDR: an IP
    /// address and port, 127.0.0.1:9417).
    #[arg(long, value_name = "ADDR", value_parser = linerate_daemon::config::metrics_address)]
    pub metrics: Option<std::net::SocketAddr>,
    /// What it logs: error, warn, info or debug [default: info].
    #[arg(long, value_parser = linerate_daemon::log::LEVELS)]
    pub log_level: Option<String>,
    /// Carry established TCP connections the ruleset accepts where the
    /// kernel checks their windows (nf_conntrack_tcp_be_liberal=0): each
    /// is marked liberal in conntrack, its windows no longer checked, as
    /// the kernel's own flowtable marks those it offloads. Without it
    /// they go to the kernel.
    #[arg(long)]
    pub carry_tcp: bool,
    /// Limits of what the fast path passes to the kernel, per class and
    /// CPU, on top of the defaults and the file's: CLASS=RATE/BURST or
    /// CLASS=off, comma-separated (--police icmp=1k/100,transit=off), or
    /// off for none. Classes: neighbour, control, icmp, local, errors,
    /// slow, unresolved, connections, transit (docs/policing.md).
    #[arg(long, value_name = "LIMITS")]
    pub police: Option<String>,
}

#[derive(Args, Debug)]
pub struct CheckConfigArgs {
    /// The file to check [default: /etc/linerate/linerate.toml].
    pub file: Option<std::path::PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum FibCmd {
    /// Depth, fill and memory of a table, like /proc/net/fib_triestat.
    Stats(FibStatsArgs),
}

#[derive(Args, Debug)]
pub struct FibStatsArgs {
    /// ipv4 or ipv6.
    #[arg(long, value_parser = choice(linerate_fib::Family::CHOICES), default_value = "ipv4")]
    pub family: linerate_fib::Family,
    /// Generate a realistic table of this many routes [default: 1000000
    /// for IPv4, 200000 for IPv6, about a full table of each]...
    #[arg(long)]
    pub routes: Option<usize>,
    /// ...or load this dump (`PREFIX NEXTHOP` lines or `ip route` output)...
    #[arg(long, conflicts_with = "table")]
    pub file: Option<std::path::PathBuf>,
    /// ...or the kernel's routing table of this id or name (`main`, a
    /// tenant's `100`), as `ip route show table` lists it.
    #[arg(long, conflicts_with = "routes")]
    pub table: Option<String>,
    /// Seed of the generated table.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub fib6: Fib6Arg,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchFibArgs {
    /// ipv4 or ipv6.
    #[arg(long, value_parser = choice(linerate_fib::Family::CHOICES), default_value = "ipv4")]
    pub family: linerate_fib::Family,
    /// Routes in the generated table [default: 1000000 for IPv4, 200000 for IPv6].
    #[arg(long)]
    pub routes: Option<usize>,
    /// Random lookup keys (half inside the table's prefixes).
    #[arg(long, default_value_t = 1_000_000)]
    pub keys: usize,
    /// Changes for the update rate (withdraw one, announce one).
    #[arg(long, default_value_t = 200_000)]
    pub updates: usize,
    /// Runs; medians are reported.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub fib6: Fib6Arg,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// The generator: XDP live frames against AF_PACKET on one CPU, into a
    /// scratch veth whose far end is the XDP receiver, then -R accuracy.
    Gen(BenchGenArgs),
    /// The FIB: build, memory, lookups (single and batch), updates, against
    /// the prefix-trie and poptrie crates on the same table and keys.
    Fib(BenchFibArgs),
    /// The router program per packet (BPF_PROG_RUN), with 1 route and a
    /// full table, against bpf_fib_lookup with the same routes in the kernel.
    Fastpath(BenchFastpathArgs),
    /// What policing the frames passed to the kernel costs the fast path
    /// per frame (BPF_PROG_RUN): TTL 1, for the router, to an unresolved
    /// neighbour, each passed and policed, beside a forwarded frame.
    Punt(BenchPuntArgs),
    /// The searches' cost on simulated DUTs: MLRsearch (NDR and PDR in one
    /// search) against two plain binary searches, same goals, same width.
    Search(BenchSearchArgs),
    /// How fast linerate follows `ip route` / `ip neigh` changes under
    /// traffic, and that it never uses a removed next hop after that.
    RouteChange(BenchRouteChangeArgs),
    /// What a ruleset change costs traffic already flowing: rules inserted
    /// and set elements added to an access list under overload, the
    /// forwarding rate over 100 ms windows against the steady rate.
    FirewallChange(BenchFirewallChangeArgs),
    /// The forwarding rate while the control plane works: a full table of
    /// routes added and withdrawn, the ruleset reloaded, a million set
    /// elements added and flushed, each against the rate just before it;
    /// with the control plane on the forwarding CPU and on another.
    ControlBurst(BenchControlBurstArgs),
    /// How far the fast path lags the kernel during a burst of route
    /// changes (a BGP table arriving, then withdrawn): the lag from each
    /// kernel change to the fast path, and the notification overflows.
    RouteChurn(BenchRouteChurnArgs),
    /// How long a policy rule added or deleted takes to reach the fast
    /// path (a tenant's table chosen by `iif`, or by a source through the
    /// rule program), and what tenants' full tables cost in memory.
    RuleChurn(BenchRuleChurnArgs),
    /// Real TCP through the router (iperf3 each way, the kernel's sockets
    /// at both ends, a stateful ruleset with the kernel's window checking
    /// on): the kernel alone, linerate, and linerate --carry-tcp taking
    /// turns; throughput, segments carried, conntrack's invalid count,
    /// connections left established.
    Tcp(BenchTcpArgs),
    /// What a verdict cache lookup costs the fast path, by the cache's
    /// shape (BPF LRU hash, direct-mapped table), with BPF_PROG_TEST_RUN
    /// (how the cache's shape was chosen: docs/firewall-measurements.md).
    FirewallCache(BenchFirewallCacheArgs),
    /// What finding a packet's connection costs the fast path, by the
    /// number of states: the kernel's conntrack table through the XDP
    /// kfuncs (lookup; lookup and timeout refresh) against a BPF hash of
    /// our own, side by side (BPF_PROG_TEST_RUN, a namespace per count).
    Conntrack(BenchConntrackArgs),
    /// What the firewall costs the fast path per packet with N rules
    /// (traffic matching the last) and sets of M addresses, against the
    /// fast path without it, side by side (BPF_PROG_TEST_RUN); and how
    /// long each ruleset takes to load, read and compile.
    Firewall(BenchFirewallArgs),
    /// linerate fed by real BGP daemons: a BIRD peer announces, withdraws
    /// and re-announces a table to the DUT's BIRD or FRR, under traffic;
    /// the lag from each kernel change to the fast path, per family.
    Bgp(BenchBgpArgs),
    /// What restarting the router costs the traffic, in a lab of its own
    /// under stamped traffic: a takeover by a new `linerate route`, an
    /// upgrade to another binary, kill -9 then a start, a cold stop and
    /// start: frames lost, frames the kernel forwarded, the fast path's gap.
    Restart(BenchRestartArgs),
}

#[derive(Args, Debug)]
pub struct BenchRestartArgs {
    /// The ways to restart, one trial each, in this order.
    #[arg(
        long,
        value_parser = restart_way(),
        value_delimiter = ',',
        default_value = "takeover,upgrade,kill9,cold"
    )]
    pub ways: Vec<linerate_labbench::restart::Way>,
    /// Frames a second through the DUT (one flow of 60-byte frames).
    #[arg(short = 'R', long, default_value_t = 100_000)]
    pub rate: u64,
    /// Seconds of traffic per trial.
    #[arg(short = 't', long, default_value_t = 4.0)]
    pub seconds: f64,
    /// When the restart begins, in seconds into the traffic.
    #[arg(long, default_value_t = 1.5)]
    pub at: f64,
    /// The binary `upgrade` starts (a rebuilt linerate) [default: a copy
    /// of this one].
    #[arg(long)]
    pub upgrade_binary: Option<std::path::PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum BgpSpeaker {
    /// BIRD 2: plain routes.
    Bird,
    /// FRR's zebra and bgpd: routes with next-hop objects.
    Frr,
}

#[derive(Args, Debug)]
pub struct BenchBgpArgs {
    /// The DUT's BGP daemon.
    #[arg(long, value_enum, default_value = "bird")]
    pub speaker: BgpSpeaker,
    /// IPv4 /24s in the table (from 32.0.0.0).
    #[arg(long, default_value_t = 100_000)]
    pub routes: usize,
    /// IPv6 /48s in the table (from 2a00::).
    #[arg(long, default_value_t = 20_000)]
    pub routes6: usize,
    /// Prefixes sampled per family (the fast path is probed for these).
    #[arg(long, default_value_t = 500)]
    pub samples: usize,
    /// The generator's rate during the bursts, pps (IPv4, to random
    /// destinations over the table).
    #[arg(short = 'R', long, default_value_t = 50_000)]
    pub rate: u64,
    /// Pin the router to this CPU and the prober and listener to another.
    #[arg(long)]
    pub router_cpu: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchRouteChurnArgs {
    /// A full table in the kernel before the router starts (generated
    /// with an Internet table's mix of lengths): the router's start-up and
    /// memory on it, and the churn on top of it.
    #[arg(long, default_value_t = 0)]
    pub table: usize,
    /// Routes announced, then withdrawn (/24s from 32.0.0.0).
    #[arg(long, default_value_t = 100_000)]
    pub routes: usize,
    /// Changes sampled per phase (the fast path is probed for these).
    #[arg(long, default_value_t = 2000)]
    pub samples: usize,
    /// Route requests in flight at once.
    #[arg(long, default_value_t = 256)]
    pub window: usize,
    /// Route changes offered a second, as a BGP daemon paces its installs
    /// (BIRD fed the kernel 30k/s in the report); default: as fast
    /// as the kernel takes them.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Pin the router to this CPU and the injector and prober to another
    /// (default: unpinned, all three sharing the machine).
    #[arg(long)]
    pub router_cpu: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchRuleChurnArgs {
    /// Times the rule is added and deleted.
    #[arg(long, default_value_t = 200)]
    pub changes: usize,
    /// The rule: `iif` (iif dut0 lookup 100) or `from` (from
    /// 198.18.0.0/16 lookup 100).
    #[arg(long, value_parser = choice(&linerate_bench::rule_churn::Shape::CHOICES), default_value = "iif")]
    pub shape: linerate_bench::rule_churn::Shape,
    /// Routes in main and in each tenant's table (generated with an
    /// Internet table's mix of lengths).
    #[arg(long, default_value_t = 0)]
    pub table: usize,
    /// Tenants' tables of `--table` routes, each looked up by a rule (0:
    /// table 100 holds the receiver's route alone, placed and dropped with
    /// the rule).
    #[arg(long, default_value_t = 0)]
    pub tenants: usize,
    /// Without tenants: table 100 holds `--table` routes too and no other
    /// rule looks it up, so that the first rule added brings a table the
    /// fast path must fill (the slowest change).
    #[arg(long)]
    pub cold: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchFirewallArgs {
    /// Rule counts, comma-separated (0: none).
    #[arg(long, value_delimiter = ',', default_value = "1,100,1000,10000")]
    pub rules: Vec<u32>,
    /// Set sizes, comma-separated (0: none).
    #[arg(
        long = "set-size",
        value_delimiter = ',',
        default_value = "1,1000,100000,1000000"
    )]
    pub set_size: Vec<u32>,
    /// Rule counts of an access list (`ip daddr 10.A.B.0/24 udp dport P
    /// drop` with distinct prefixes and ports, then the traffic's /16
    /// accepted), comma-separated (0: none).
    #[arg(long = "access-lists", value_delimiter = ',', default_value = "0")]
    pub access_lists: Vec<u32>,
    /// State counts for the stateful ruleset (`ct state
    /// established,related accept; ct state new accept`), comma-separated
    /// (0: none): established UDP connections in the kernel's conntrack
    /// and the fast path's table, --flows of them measured.
    #[arg(long, value_delimiter = ',', default_value = "2000,100000,1000000")]
    pub states: Vec<u32>,
    /// Each state count also masqueraded: the stateful ruleset with what
    /// leaves masqueraded, as many connections again with their sources
    /// mapped in the kernel's entries (the NAT stage's cost).
    #[arg(long)]
    pub masquerade: bool,
    /// Flows (distinct UDP source and destination), each a cache entry.
    #[arg(long, default_value_t = 1000)]
    pub flows: u32,
    /// BPF_PROG_TEST_RUN repetitions per frame (at most 254).
    #[arg(long, default_value_t = 200)]
    pub repeat: u32,
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Then how fast the firewall follows set element changes: this many
    /// addresses added to a set and removed again (0: not measured).
    #[arg(long, default_value_t = 100_000)]
    pub elements: u32,
    /// Elements per transaction (`nft -f` batch) for --elements.
    #[arg(long = "per-transaction", default_value_t = 1000)]
    pub per_transaction: u32,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchFirewallCacheArgs {
    /// Flows in the caches.
    #[arg(long, default_value_t = 100_000)]
    pub flows: u32,
    /// Flows whose frames are run, spread over all.
    #[arg(long, default_value_t = 2000)]
    pub samples: u32,
    /// BPF_PROG_TEST_RUN repetitions per frame and program.
    #[arg(long, default_value_t = 100)]
    pub repeat: u32,
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchConntrackArgs {
    /// State counts, comma-separated (the issue's: 2000, 100000, 1000000).
    #[arg(long, value_delimiter = ',', default_value = "2000,100000,1000000")]
    pub states: Vec<u32>,
    /// Flows whose frames are run, spread over all.
    #[arg(long, default_value_t = 1000)]
    pub samples: u32,
    /// BPF_PROG_TEST_RUN repetitions per frame and program.
    #[arg(long, default_value_t = 100)]
    pub repeat: u32,
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchRouteChangeArgs {
    /// Changes to make (route and neighbour changes alternate).
    #[arg(long, default_value_t = 20)]
    pub changes: usize,
    /// Seconds between changes.
    #[arg(long, default_value_t = 0.5)]
    pub interval: f64,
    /// Offered rate, pps.
    #[arg(short = 'R', long, default_value_t = 200_000)]
    pub rate: u64,
    #[arg(long, default_value_t = 0)]
    pub gen_cpu: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchTcpArgs {
    /// Seconds of each iperf3 run.
    #[arg(long, default_value_t = 5)]
    pub seconds: u32,
    /// Turns of the three ways.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// iperf3's parallel streams.
    #[arg(long, default_value_t = 4)]
    pub streams: u32,
    /// The ruleset also masquerades what leaves through dut1 (a nat
    /// chain: the connections' mappings are the kernel's conntrack's).
    #[arg(long)]
    pub masquerade: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchFirewallChangeArgs {
    /// Rules of the access list (each an address prefix and a port).
    #[arg(long, default_value_t = 10_000)]
    pub rules: u32,
    /// Changes to make, in turn: a rule inserted, an element added, a rule
    /// inserted in another table (what nft and the kernel's transaction
    /// cost), nft run changing nothing (what running nft costs).
    #[arg(long, default_value_t = 16)]
    pub changes: usize,
    /// Seconds between changes.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Every frame a new flow (addresses and ports at random), instead of
    /// the lab's 2,000 flows.
    #[arg(long)]
    pub new_flows: bool,
    #[arg(long, default_value_t = 0)]
    pub gen_cpu: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchControlBurstArgs {
    /// Routes added, then withdrawn (/24s through rtnetlink).
    #[arg(long, default_value_t = 1_000_000)]
    pub routes: usize,
    /// Rules of the access list reloaded (twice over with the other table).
    #[arg(long, default_value_t = 10_000)]
    pub rules: u32,
    /// Set elements added in one transaction, then flushed.
    #[arg(long, default_value_t = 1_000_000)]
    pub elements: usize,
    /// Where the control plane runs: shared (the forwarding CPU), apart,
    /// or both in turn.
    #[arg(long, default_value = "both")]
    pub placement: String,
    #[arg(long, default_value_t = 0)]
    pub gen_cpu: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchSearchArgs {
    /// Final relative width of both searches.
    #[arg(long, default_value_t = 0.005)]
    pub width: f64,
    /// Final (full-length) trial seconds; every binary-search trial is one.
    #[arg(long, default_value_t = 30.0)]
    pub final_seconds: f64,
    /// MLRsearch's first-phase trial seconds.
    #[arg(long, default_value_t = 1.0)]
    pub initial_seconds: f64,
    /// PDR's loss ratio.
    #[arg(long, default_value_t = 0.005)]
    pub loss_ratio: f64,
    /// Simulated DUTs per noise level.
    #[arg(long, default_value_t = 20)]
    pub duts: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchPuntArgs {
    /// BPF_PROG_RUN repetitions per frame and round (at most 254: a
    /// forwarded frame takes a TTL each).
    #[arg(long, default_value_t = 200)]
    pub repeat: u32,
    /// Rounds, each kind of frame and the forwarded one side by side.
    #[arg(long, default_value_t = 20)]
    pub rounds: usize,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchFastpathArgs {
    /// ipv4 or ipv6.
    #[arg(long, value_parser = choice(linerate_fib::Family::CHOICES), default_value = "ipv4")]
    pub family: linerate_fib::Family,
    /// Routes of the full table [default: 1000000 for IPv4, 200000 for IPv6].
    #[arg(long)]
    pub routes: Option<usize>,
    /// Random destinations (inside the table's prefixes).
    #[arg(long, default_value_t = 2000)]
    pub keys: usize,
    /// BPF_PROG_RUN repetitions per destination.
    #[arg(long, default_value_t = 200)]
    pub repeat: u32,
    /// Passes over the destinations (each program's figure is the median
    /// of its rounds' means; ratios are taken within a round).
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// IPv6 table layouts to measure, each against the same reference
    #[arg(
        long,
        value_parser = choice(linerate_fib::Ipv6Layout::CHOICES),
        value_delimiter = ',',
        default_value = "wide,compact"
    )]
    pub fib6: Vec<linerate_fib::Ipv6Layout>,
    /// Only destinations whose longest match in the full table is a /LO to
    /// /HI (e.g. 41-48): what one class of destinations costs
    #[arg(long, value_name = "LO-HI", value_parser = parse_length_range)]
    pub match_lengths: Option<(u8, u8)>,
    /// Measure the multi-buffer program (router_mb, attached at MTUs above
    /// 1500) instead of the single-buffer one
    #[arg(long)]
    pub multibuf: bool,
    /// Put the tables in another table than main, looked up by a walk of N
    /// tables (policy rules, 1 to 4), the N - 1 before it empty: what a
    /// tenant's table and the rules before it cost a packet (0: main)
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=4))]
    pub walk_tables: u8,
    /// Reach the tables (main's) through the rule program (policy rules
    /// with selectors) after N - 1 rules that match no packet, a source
    /// prefix each (1 to 63): what such rules cost a packet (0: none)
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=63), conflicts_with = "walk_tables")]
    pub rule_steps: u8,
    /// IPv4 reverse path filtering on the ingress, strict or loose (the
    /// frames' source routed back out of it): what the check costs a packet
    #[arg(long, value_name = "MODE", value_parser = choice(&linerate_bench::fastpath::RpFilter::CHOICES))]
    pub rp_filter: Option<linerate_bench::fastpath::RpFilter>,
    /// The ingress a bridge's port: what checking a frame's source in the FDB costs a packet
    #[arg(long)]
    pub bridge_port: bool,
    /// The frames tagged (802.1Q), routed as a VLAN device and sent out of one, beside the same table without VLAN devices on untagged frames: what the tag costs a packet, and what an untagged frame costs on a port with VLAN devices
    #[arg(long)]
    pub vlan: bool,
    /// With --vlan and --walk-tables 1: the tag popped and pushed in turn instead of rewritten (the VLAN device routes by a table of its own, to the egress port untagged; the port by its table, out of the egress's VLAN device): what a pop or a push costs a packet
    #[arg(long, requires = "vlan")]
    pub vlan_pop_push: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `LO-HI`, two prefix lengths, LO <= HI <= 128 (the family's own bound is
/// checked once the family is known).
fn parse_length_range(s: &str) -> Result<(u8, u8), String> {
    let (lo, hi) = s
        .split_once('-')
        .ok_or_else(|| format!("{s:?}: expected LO-HI, e.g. 41-48"))?;
    let len = |v: &str| {
        v.parse::<u8>()
            .ok()
            .filter(|&l| l <= 128)
            .ok_or_else(|| format!("{v:?}: not a prefix length (0..=128)"))
    };
    let (lo, hi) = (len(lo)?, len(hi)?);
    if lo > hi {
        return Err(format!("{s:?}: {lo} is above {hi}"));
    }
    Ok((lo, hi))
}

#[derive(Args, Debug)]
pub struct BenchGenArgs {
    /// Seconds per run.
    #[arg(short = 't', long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Pairs of runs (XDP, AF_PACKET).
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// Frame sizes, as gen's -l.
    #[arg(short = 'l', long, default_value = "60")]
    pub len: String,
    /// CPU of the generator (the receiver's NAPI thread gets the next one).
    #[arg(long, default_value_t = 0)]
    pub cpu: usize,
    /// Fractions of the XDP maximum to check -R at.
    #[arg(long, value_delimiter = ',', default_value = "0.25,0.5,0.8")]
    pub rate_fractions: Vec<f64>,
    /// Also TCP data segments against UDP over this many connections.
    #[arg(long)]
    pub tcp_connections: Option<u32>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct TuneArgs {
    /// Interfaces to check too, comma-separated.
    #[arg(short, long, value_delimiter = ',')]
    pub interfaces: Vec<String>,
    /// Make the safe fixes (forwarding, the governor), recording every
    /// value they may change in this file first.
    #[arg(long, value_name = "FILE", conflicts_with = "revert")]
    pub fix: Option<std::path::PathBuf>,
    /// Put back the values a `--fix` recorded in this file.
    #[arg(long, value_name = "FILE")]
    pub revert: Option<std::path::PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["pps", "bps", "line_rate"])))]
pub struct ImixArgs {
    /// Packets per second to convert to bandwidth (e.g. 7000000, 7M).
    #[arg(long)]
    pub pps: Option<String>,
    /// Bandwidth to convert to packets per second (e.g. 10G).
    #[arg(long)]
    pub bps: Option<String>,
    /// Layer of --bps: ip or ethernet.
    #[arg(long, default_value = "ethernet", value_parser = ["ip", "ethernet"])]
    pub layer: String,
    /// Link speed for line-rate references (1G, 10G, 25G, 40G, 100G, ...).
    #[arg(long)]
    pub line_rate: Option<String>,
    /// Frame size in bytes, FCS included, for --line-rate.
    #[arg(long, default_value_t = 64)]
    pub size: u32,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct MinistatArgs {
    /// ministat's own options and files, parsed as FreeBSD's getopt does.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

#[derive(Subcommand, Debug)]
pub enum LabCmd {
    /// Build the lab (three namespaces, two veth pairs, addresses, routes).
    Up(UpArgs),
    /// Remove the lab and everything it made.
    Down(NameArg),
    /// Show namespaces, links, addresses, XDP programs and counters.
    Status(StatusArgs),
    /// Build a lab, send traffic through the kernel DUT, report, remove it.
    Run(RunArgs),
}

#[derive(Args, Debug)]
pub struct NameArg {
    /// Lab name: its namespaces are NAME-gen, NAME-dut, NAME-recv.
    #[arg(long, default_value = DEFAULT_NAME)]
    pub name: String,
}

#[derive(Args, Debug)]
pub struct UpArgs {
    #[command(flatten)]
    pub name: NameArg,
    /// RX/TX queues per veth.
    #[arg(long, default_value_t = 1)]
    pub queues: u32,
    /// CPU for the DUT's receive NAPI thread (default: 1, or 0 on one CPU).
    #[arg(long)]
    pub dut_cpu: Option<usize>,
    /// MTU of the lab's four veth ends (1280..9216; 9000 for jumbo frames).
    #[arg(long, default_value_t = linerate_lab::topology::DEFAULT_MTU)]
    pub mtu: u32,
    /// The generator's ports into the DUT: 2 adds gen1 -> dut2
    /// (198.18.128.0/17, 2001:2:0:4000::/50), for traffic that must come
    /// in by its own interface.
    #[arg(long, default_value_t = 1)]
    pub gen_ports: u32,
    /// Remove and rebuild the lab if it is already up.
    #[arg(long)]
    pub force: bool,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    pub name: NameArg,
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Scenario file (TOML, see docs/lab-run.md). Default: the built-in
    /// scenario, linux vs linerate and both against the machine's XDP
    /// limit (xdp-redirect), IPv4 60-byte frames, 5 runs of 5 s.
    pub scenario: Option<std::path::PathBuf>,
    /// Runs per configuration (overrides the scenario's `repeat`).
    #[arg(long)]
    pub repeat: Option<u32>,
    /// Seconds per run or search trial (overrides `measure.seconds`).
    #[arg(short = 't', long)]
    pub seconds: Option<f64>,
    /// DUT configurations, comma-separated (overrides `duts`).
    #[arg(long, value_delimiter = ',')]
    pub duts: Option<Vec<String>>,
    /// Traffic profiles, comma-separated (overrides `profiles`).
    #[arg(long, value_delimiter = ',')]
    pub profiles: Option<Vec<String>>,
    /// Output directory (default: lab-results/YYYYMMDD-HHMMSS).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Lab name used for the run (built and removed by the run).
    #[arg(long)]
    pub name: Option<String>,
    /// Also print results.json to stdout (progress goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Print the built-in scenario (a starting point for your own) and exit.
    #[arg(long)]
    pub show_default: bool,
    /// Check the scenario and, with [hosts], connect to every host and
    /// check it (linerate's version, interfaces, the DUT's MAC and
    /// commands), then exit: no lab, no traffic, no output.
    #[arg(long)]
    pub check: bool,
    /// Record the DUT's core during every run (perf, cpu-clock): a flame
    /// graph per configuration (flame-DUT.svg) and its hottest functions in
    /// report.md.
    #[arg(long)]
    pub profile: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SearchMethod {
    Equilibrium,
    Rfc2544,
    NdrPdr,
}

/// Where trials go: a lab that is up, or named interfaces.
#[derive(Args, Debug, Clone)]
pub struct PathArgs {
    /// Search through this lab (from `linerate lab up`), whatever its DUT
    /// runs. Default when no interfaces are given.
    #[arg(long)]
    pub lab: Option<String>,
    /// Generator interface (instead of a lab); needs --recv-iface and -D.
    #[arg(short = 'i', long)]
    pub gen_iface: Option<String>,
    #[arg(long)]
    pub gen_netns: Option<String>,
    /// Receiver interface.
    #[arg(short = 'r', long)]
    pub recv_iface: Option<String>,
    #[arg(long)]
    pub recv_netns: Option<String>,
    /// The DUT's MAC on the generator's side.
    #[arg(short = 'D', long)]
    pub dst_mac: Option<String>,
    /// Source MAC (default: the generator interface's).
    #[arg(short = 'S', long)]
    pub src_mac: Option<String>,
    /// CPU of the generator.
    #[arg(long, default_value_t = 0)]
    pub gen_cpu: usize,
}

/// The frames of a trial.
#[derive(Args, Debug, Clone)]
pub struct TrafficArgs {
    /// Frame length, imix, rfc2544 or a list.
    #[arg(short = 'l', long, default_value = "60")]
    pub len: String,
    #[arg(short = '6', long)]
    pub ipv6: bool,
    #[arg(short = 's', long)]
    pub src: Option<String>,
    #[arg(short = 'd', long)]
    pub dst: Option<String>,
}

/// One trial at a fixed rate: what the searches run at each load.
#[derive(Args, Debug)]
pub struct TrialArgs {
    #[command(flatten)]
    pub path: PathArgs,
    #[command(flatten)]
    pub traffic: TrafficArgs,
    /// The rate offered, frames per second (e.g. 250k, 1.5M).
    #[arg(short = 'R', long)]
    pub rate: String,
    /// Seconds the rate is offered.
    #[arg(short = 't', long, default_value_t = 5.0)]
    pub seconds: f64,
    /// The receiver: count, full or frames (as for search).
    #[arg(long, value_parser = choice(linerate_traffic::recv::ReceiverMode::CHOICES), default_value = "count")]
    pub receiver: linerate_traffic::measure::ReceiverMode,
    /// Print the trial as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub sim: SimArgs,
}

/// The simulated DUT, in place of a lab.
#[derive(Args, Debug)]
pub struct SimArgs {
    /// Instead of a lab: the simulated DUT of the search tests with this
    /// seed (no loss to 90% of its capacity, 2% loss at it, everything
    /// above lost), each trial a function of the seed, the rate and the
    /// duration alone. For comparing search tools (scripts/csit-mlrsearch.py).
    #[arg(long = "sim", id = "seed", conflicts_with_all = ["lab", "gen_iface"])]
    pub seed: Option<u64>,
    /// The simulated DUT's capacity, frames per second.
    #[arg(long, default_value = "1M", requires = "seed")]
    pub sim_capacity: String,
    /// The simulated DUT's noise: knee and capacity move by up to this
    /// fraction in each trial.
    #[arg(long, default_value_t = 0.002, requires = "seed")]
    pub sim_noise: f64,
    /// The probability that a simulated trial loses a few frames whatever
    /// its rate.
    #[arg(long, default_value_t = 0.0, requires = "seed")]
    pub sim_spurious: f64,
}

#[derive(Args, Debug)]
pub struct SearchArgs {
    /// equilibrium (BSDRP), rfc2544 (binary search, zero loss), ndr-pdr
    /// (MLRsearch).
    #[arg(long, value_enum)]
    pub method: SearchMethod,
    #[command(flatten)]
    pub path: PathArgs,
    #[command(flatten)]
    pub traffic: TrafficArgs,
    #[command(flatten)]
    pub sim: SimArgs,
    /// Highest load (pps, e.g. 3M), or auto: the generator's unpaced rate.
    #[arg(long, default_value = "auto")]
    pub max_rate: String,
    /// Seconds per trial (MLRsearch: the first phase's).
    #[arg(short = 't', long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Final trial seconds (RFC 2544 confirmation, MLRsearch final phase;
    /// default: --seconds).
    #[arg(long)]
    pub final_seconds: Option<f64>,
    /// Equilibrium: pass if received >= offered * (1 - tolerance).
    #[arg(long, default_value_t = 0.01)]
    pub tolerance: f64,
    /// RFC 2544 and MLRsearch: stop when (upper - lower) <= width * upper.
    #[arg(long, default_value_t = 0.005)]
    pub width: f64,
    /// MLRsearch: PDR's loss ratio.
    #[arg(long, default_value_t = 0.005)]
    pub loss_ratio: f64,
    /// MLRsearch: the share of a load's trial seconds that may miss a
    /// goal's loss ratio (RFC 9971's exceed ratio; 0: none, so a result is
    /// a load where no trial missed).
    #[arg(long, default_value_t = 0.0)]
    pub exceed_ratio: f64,
    /// MLRsearch: seconds of final-length trials a load needs to be
    /// reported (default: one final trial's).
    #[arg(long)]
    pub duration_sum: Option<f64>,
    /// The receiver: count (frames and stamped frames), full (also loss,
    /// reordering and latency per trial) or frames (frames unread, the
    /// cheapest; counts whatever arrives).
    #[arg(long, value_parser = choice(linerate_traffic::recv::ReceiverMode::CHOICES), default_value = "count")]
    pub receiver: linerate_traffic::measure::ReceiverMode,
    /// Print the result and every trial as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct GenArgs {
    /// Interface to send from.
    #[arg(short = 'i', long)]
    pub iface: String,
    /// Run inside this network namespace.
    #[arg(long)]
    pub netns: Option<String>,
    /// Frame length without FCS (60..1514; up to 9230 at a jumbo MTU, with
    /// --mode afpacket above 3072), a list cycled through
    /// (60,124,1514), imix (7:4:1 of 40/576/1500-byte IP packets) or
    /// rfc2544 (its seven sizes, cycled).
    #[arg(short = 'l', long, default_value = "60")]
    pub len: String,
    /// IPv6 (default ranges: the lab's IPv6 networks).
    #[arg(short = '6', long)]
    pub ipv6: bool,
    /// Source range, pkt-gen style: ADDR[:PORT][-ADDR[:PORT]]
    /// [default: 198.18.10.1:2000-198.18.10.20, with -6 2001:2:0:10::1-2001:2:0:10::14].
    #[arg(short = 's', long)]
    pub src: Option<String>,
    /// Destination range, pkt-gen style
    /// [default: 198.19.10.1:2000-198.19.10.100, with -6 2001:2:0:8010::1-2001:2:0:8010::64].
    #[arg(short = 'd', long)]
    pub dst: Option<String>,
    /// Source MAC (default: the interface's).
    #[arg(short = 'S', long)]
    pub src_mac: Option<String>,
    /// Destination MAC (the next hop's; default: the lab DUT's dut0).
    #[arg(short = 'D', long, default_value = linerate_lab::topology::mac::DUT_IN)]
    pub dst_mac: String,
    /// Rate in frames per second over all threads (1500000, 1.5M);
    /// default: as fast as possible.
    #[arg(short = 'R', long)]
    pub rate: Option<String>,
    /// Seconds to send.
    #[arg(short = 't', long)]
    pub seconds: Option<f64>,
    /// Frames to send.
    #[arg(short = 'n', long)]
    pub count: Option<u64>,
    /// Sending threads, one per CPU from --cpu on.
    #[arg(short = 'p', long, default_value_t = 1)]
    pub threads: usize,
    /// Pin the (first) sending thread to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// xdp (live frames) or afpacket (sendmmsg, for interfaces without XDP).
    #[arg(long, value_parser = choice(linerate_traffic::gen::Mode::CHOICES), default_value = "xdp")]
    pub mode: linerate_traffic::gen::Mode,
    /// Draw each frame's destination address and port at random from the
    /// -d ranges (pkt-gen's -Z), to spread lookups over a large table or
    /// make every frame a new flow. xdp mode.
    #[arg(short = 'Z', long)]
    pub random_dst: bool,
    /// Draw each frame's source address and port at random from the -s
    /// ranges (pkt-gen's -z). xdp mode.
    #[arg(short = 'z', long)]
    pub random_src: bool,
    /// TCP segments, each flow a connection: this run's segment of each
    /// (syn, data: the next in sequence, fin, last-ack), or churn: short
    /// connections, each frame a step of one. A receiver in answer mode
    /// is their peer. xdp mode; -p's CPUs share them by source port.
    #[arg(long, value_name = "PHASE", value_parser = choice(linerate_traffic::tcp::TcpPhase::CHOICES))]
    pub tcp: Option<linerate_traffic::tcp::TcpPhase>,
    /// With --tcp: the data bytes each connection sent in earlier runs, or
    /// with churn the first connection's number (a run's JSON report gives
    /// the next run's as tcp_next).
    #[arg(long, value_name = "N", default_value_t = 0, requires = "tcp")]
    pub tcp_from: u32,
    /// With --tcp churn: the data segments of each connection (it sends
    /// SYN, these, FIN and the last ACK, one a round).
    #[arg(long, value_name = "N", default_value_t = 4, requires = "tcp")]
    pub tcp_segments: u32,
    /// With --tcp churn: rounds between two frames of a connection (a
    /// round opens one connection); default: 2 ms at -R.
    #[arg(long, value_name = "ROUNDS", default_value_t = 0, requires = "tcp")]
    pub tcp_lag: u32,
    /// Every frame's TTL (IPv6: hop limit). 1 and 0 make frames a router
    /// hands its kernel (which answers with ICMP time exceeded).
    #[arg(long, default_value_t = 64)]
    pub ttl: u8,
    /// What the IP header carries beyond the plain one (UDP): options
    /// (IPv4 options; IPv6 a hop-by-hop header) or fragment (a first
    /// fragment, more to follow) [default: plain].
    #[arg(long, value_parser = choice(linerate_traffic::frame::Headers::CHOICES))]
    pub headers: Option<linerate_traffic::frame::Headers>,
    /// Every frame tagged with this 802.1Q VLAN id, for a router's trunk.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=4094))]
    pub vlan: Option<u16>,
    /// Frames per kernel batch in xdp mode (1..256).
    #[arg(long, default_value_t = 64)]
    pub batch: u32,
    /// Stream id of the frames' stamps: a sending thread's is this plus its
    /// CPU. Generators that feed one receiver need bases of their own.
    #[arg(long, default_value_t = 0)]
    pub stream_base: u16,
    /// Print a final JSON object instead of the summary.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RecvArgs {
    /// Interface to count on.
    #[arg(short = 'i', long)]
    pub iface: String,
    /// Run inside this network namespace.
    #[arg(long)]
    pub netns: Option<String>,
    /// Seconds to count (default: until Ctrl-C).
    #[arg(short = 't', long)]
    pub seconds: Option<f64>,
    /// Attach in generic (skb) mode instead of native.
    #[arg(long)]
    pub generic: bool,
    /// Print a final JSON object instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// What to count: full (frames, and from the stamps loss, duplicates,
    /// reordering and latency), count (frames and stamped frames) or frames
    /// (frames and bytes, never reading a frame: pkt-gen's receiver, the
    /// fastest).
    #[arg(long, value_parser = choice(linerate_traffic::recv::ReceiverMode::CHOICES), default_value = "full")]
    pub receiver: linerate_traffic::recv::ReceiverMode,
}

/// `--fib6`, shared by the commands that build an IPv6 table.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct Fib6Arg {
    /// IPv6 table layout: wide (24 + 8 bits, a /48 in 4 reads, ~310 MiB
    /// for a full table) or compact (16 + 4, 9 reads, ~55 MiB)
    #[arg(long = "fib6", value_parser = choice(linerate_fib::Ipv6Layout::CHOICES), default_value = "wide")]
    pub layout: linerate_fib::Ipv6Layout,
}

/// A library's named values as a clap value parser: the names are listed
/// in --help, and clap refuses any other before the command runs. (The
/// libraries know their names, not clap.)
fn choice<T: Copy + Send + Sync + 'static>(
    choices: &'static [(&'static str, T)],
) -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(choices.iter().map(|(name, _)| *name)).map(
        move |name: String| {
            choices
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| *v)
                .expect("clap accepts only the listed names")
        },
    )
}

#[cfg(test)]
mod tests {
    use super::parse_length_range;

    #[test]
    fn length_ranges_are_checked() {
        assert_eq!(parse_length_range("41-48"), Ok((41, 48)));
        assert_eq!(parse_length_range("0-128"), Ok((0, 128)));
        for (bad, says) in [
            ("48", "expected LO-HI"),
            ("48-41", "48 is above 41"),
            ("0-129", "not a prefix length"),
            ("a-4", "not a prefix length"),
        ] {
            let e = parse_length_range(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}

/// The man pages the Debian package ships (packaging/man/, one page per
/// command, rendered from the definitions above by clap_mangen), kept
/// equal to what this build's `--help` says. After a change of the
/// command line: `LINERATE_WRITE_MANPAGES=1 cargo test -p linerate --bin
/// linerate man_pages`.
/// `--ways`: the names of linerate_labbench::restart::Way, with their help.
fn restart_way() -> impl clap::builder::TypedValueParser<Value = linerate_labbench::restart::Way> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    use linerate_labbench::restart::Way;
    let values = Way::CHOICES.iter().map(|(name, way)| {
        let v = PossibleValue::new(*name);
        match way.help() {
            Some(h) => v.help(h),
            None => v,
        }
    });
    PossibleValuesParser::new(values).map(|name: String| {
        Way::CHOICES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, w)| *w)
            .expect("clap accepts only the listed names")
    })
}

#[cfg(test)]
mod man_pages {
    use clap::CommandFactory;
    use std::collections::BTreeMap;
    use std::path::Path;

    /// Every page by file name: linerate.1, linerate-route.1,
    /// linerate-bench-restart.1, ...
    fn render() -> BTreeMap<String, Vec<u8>> {
        fn walk(cmd: &clap::Command, name: String, out: &mut BTreeMap<String, Vec<u8>>) {
            // clap names are 'static; a test's few leaked strings.
            let cmd = cmd
                .clone()
                .name(&*Box::leak(name.clone().into_boxed_str()))
                .bin_name(name.replace('-', " "));
            let mut page = Vec::new();
            clap_mangen::Man::new(cmd.clone())
                .date("2026-11-25")
                .render(&mut page)
                .unwrap();
            out.insert(format!("{name}.1"), page);
            for sub in cmd
                .get_subcommands()
                .filter(|s| !s.is_hide_set() && s.get_name() != "help")
            {
                walk(sub, format!("{name}-{}", sub.get_name()), out);
            }
        }
        let mut out = BTreeMap::new();
        let mut cmd = super::Cli::command();
        cmd.build();
        walk(&cmd, "linerate".into(), &mut out);
        out
    }

    #[test]
    fn man_pages_are_those_the_command_line_renders() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/man");
        let pages = render();
        if std::env::var_os("LINERATE_WRITE_MANPAGES").is_some() {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            for (name, page) in &pages {
                std::fs::write(dir.join(name), page).unwrap();
            }
        }
        let mut shipped: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        shipped.sort();
        assert_eq!(
            shipped,
            pages.keys().cloned().collect::<Vec<_>>(),
            "packaging/man: LINERATE_WRITE_MANPAGES=1 cargo test -p linerate --bin linerate man_pages"
        );
        for (name, page) in &pages {
            assert!(
                std::fs::read(dir.join(name)).unwrap() == *page,
                "packaging/man/{name} differs from the command line: LINERATE_WRITE_MANPAGES=1 cargo test -p linerate --bin linerate man_pages"
            );
        }
        assert!(
            pages.contains_key("linerate-route.1")
                && pages.contains_key("linerate-bench-restart.1")
        );
    }
}
