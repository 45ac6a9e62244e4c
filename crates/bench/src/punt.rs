//! What the policer of passed frames costs the fast path per frame
//! (`linerate bench punt`, BPF_PROG_RUN): a frame of each kind the fast
//! path hands the kernel (TTL 1, for the router's address, to an
//! unresolved neighbour), passed with policing off and dropped by its
//! class's spent limit, beside a forwarded frame measured in the same
//! round. docs/policing.md has the figures.
use anyhow::{bail, Result};
use etherparse::PacketBuilder;
use linerate_bpf::loader::{self, XdpMode};
use linerate_bpf::test_run::{self, XdpAction};
use linerate_dataplane::fastpath::FastPath;
use linerate_dataplane::layout::{
    Nexthop, IFACE_FORWARD4, IFACE_FORWARD6, NH_KERNEL, NH_RESOLVED, NH_VALID,
};
use linerate_dataplane::police::Police;
use linerate_fib::{Fib, Shape};
use serde::Serialize;
use std::os::fd::AsFd;

#[derive(Clone, Debug)]
pub struct Options {
    /// BPF_PROG_RUN repetitions per frame and round (at most 254: a
    /// forwarded frame takes a TTL each).
    pub repeat: u32,
    pub rounds: usize,
}

impl Options {
    pub fn check(&self) -> Result<()> {
        if self.repeat == 0 || self.repeat > 254 || self.rounds == 0 {
            bail!("--repeat: 1 to 254; --rounds: at least 1");
        }
        Ok(())
    }
}

/// One kind of frame: ns a frame passed, policed, and the forwarded
/// frame's beside them, medians of the rounds.
#[derive(Clone, Debug, Serialize)]
pub struct PuntResult {
    pub frame: &'static str,
    pub class: &'static str,
    pub passed_ns: f64,
    pub policed_ns: f64,
    pub forwarded_ns: f64,
    pub rounds_passed_ns: Vec<f64>,
    pub rounds_policed_ns: Vec<f64>,
    pub rounds_forwarded_ns: Vec<f64>,
}

fn udp(dst_mac: [u8; 6], dst: [u8; 4], ttl: u8) -> Vec<u8> {
    let mut f = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], dst_mac)
        .ipv4([198, 18, 0, 1], dst, ttl)
        .udp(2000, 3000)
        .write(&mut f, &[0; 18])
        .expect("a frame");
    f
}

/// Each kind of frame's costs, measured in a scratch namespace of its own.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub results: Vec<PuntResult>,
}

/// The bench, on a scratch veth pair (removed after, whatever happens).
pub fn run(o: &Options, mut progress: impl FnMut(&String) + Send) -> Result<Report> {
    o.check()?;
    let pair = linerate_lab::scratch::ScratchPair::new(0)?;
    let results = std::thread::scope(|s| {
        s.spawn(|| {
            linerate_host::netns::enter_for_good(&pair.netns)?;
            measure(o, &pair, &mut progress)
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the bench thread panicked"))?
    })?;
    Ok(Report { results })
}

/// The measurement, in the pair's namespace.
fn measure(
    b: &Options,
    pair: &linerate_lab::scratch::ScratchPair,
    progress: &mut dyn FnMut(&String),
) -> Result<Vec<PuntResult>> {
    let (ingress, egress) = (&pair.tx, &pair.rx);
    let (in_idx, out_idx) = (loader::ifindex(ingress)?, loader::ifindex(egress)?);
    let in_mac = crate::fastpath::mac_of(&pair.netns, ingress)?;
    let out_mac = crate::fastpath::mac_of(&pair.netns, egress)?;
    let fp = FastPath::load()?;
    let _links = [ingress, egress]
        .iter()
        .map(|d| fp.attach(d, XdpMode::Native))
        .collect::<Result<Vec<_>>>()?;
    fp.add_interface(in_idx, in_mac, IFACE_FORWARD4 | IFACE_FORWARD6)?;
    fp.add_interface(out_idx, out_mac, IFACE_FORWARD4 | IFACE_FORWARD6)?;
    let nh = |flags, ifindex| Nexthop {
        ifindex,
        mtu: 1500,
        flags,
        used: 0,
        // Forwarded frames go back in: every repetition arrives again.
        dmac: in_mac,
        smac: out_mac,
        l3: 0,
        tag: [0; 4],
    };
    fp.set_nexthop(1, &nh(NH_VALID | NH_RESOLVED, out_idx))?;
    fp.set_nexthop(2, &nh(NH_VALID, out_idx))?;
    fp.set_nexthop(3, &nh(NH_VALID | NH_KERNEL, 0))?;
    let mut fib: Fib<u32> = Fib::new(Shape::IPV4);
    fib.insert(0xc613_0000, 16, 1)?; // 198.19/16 resolved
    fib.insert(0xc614_0000, 16, 2)?; // 198.20/16 unresolved
    fib.insert(0xc615_0000, 16, 3)?; // 198.21/16 the router's
    fp.load_fib(&fib)?;
    let forwarded = udp(in_mac, [198, 19, 1, 2], 255);
    let kinds: [(&str, &str, Vec<u8>); 3] = [
        ("TTL 1", "errors", udp(in_mac, [198, 19, 1, 2], 1)),
        ("for the router", "local", udp(in_mac, [198, 21, 0, 1], 64)),
        (
            "to an unresolved neighbour",
            "unresolved",
            udp(in_mac, [198, 20, 0, 1], 64),
        ),
    ];
    let prog = fp.program()?;
    let mut out = vec![0u8; 256];
    let mut run = |f: &[u8], want: XdpAction| -> Result<f64> {
        let r = test_run::run_xdp_on(prog.as_fd(), f, &mut out, b.repeat, Some(in_idx))?;
        if r.verdict != want {
            bail!("the frame's verdict is {:?}, not {want:?}", r.verdict);
        }
        Ok(r.duration_ns as f64)
    };
    // Every class at a frame a second, a burst of one: spent by the first
    // repetition, the others are policed.
    let mut spent = Police::off();
    spent
        .apply_list(
            &linerate_dataplane::layout::PUNT_CLASSES
                .iter()
                .map(|c| format!("{c}=1/1"))
                .collect::<Vec<_>>()
                .join(","),
        )
        .map_err(anyhow::Error::msg)?;
    let mut results = Vec::new();
    for (what, class, frame) in kinds {
        let (mut passed, mut policed, mut fwd) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..b.rounds {
            progress(&format!("{what}: round {}/{}", round + 1, b.rounds));
            // (TTL 255: each repetition takes one.)
            fwd.push(run(&forwarded, XdpAction::Redirect)?);
            fp.set_police(&Police::off())?;
            passed.push(run(&frame, XdpAction::Pass)?);
            fp.set_police(&spent)?;
            policed.push(run(&frame, XdpAction::Drop)?);
        }
        let m = crate::median;
        results.push(PuntResult {
            frame: what,
            class,
            passed_ns: m(&passed),
            policed_ns: m(&policed),
            forwarded_ns: m(&fwd),
            rounds_passed_ns: passed,
            rounds_policed_ns: policed,
            rounds_forwarded_ns: fwd,
        });
    }
    Ok(results)
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "frame                        class       forwarded  passed  policed (ns a frame, medians)"
        )?;
        for r in &self.results {
            writeln!(
                f,
                "{:<28} {:<11} {:>9.1} {:>7.1} {:>8.1}",
                r.frame, r.class, r.forwarded_ns, r.passed_ns, r.policed_ns
            )?;
        }
        Ok(())
    }
}
