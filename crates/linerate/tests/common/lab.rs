//! A lab the test built and linerate's router in its DUT, both removed
//! when dropped.
#![allow(dead_code)] // not every test binary uses all
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

/// `linerate lab down` of lab `name` when dropped.
pub struct Down(pub &'static str);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = Command::new(BIN)
            .args(["lab", "down", "--name", self.0])
            .output();
    }
}

/// Builds lab `name` (taken down when the value drops).
pub fn up(name: &'static str) -> Down {
    let down = Down(name);
    let up = Command::new(BIN)
        .args(["lab", "up", "--name", name])
        .output()
        .unwrap();
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    down
}

/// `linerate route` in lab `lab`'s DUT, stopped (SIGTERM) when dropped.
pub struct Router(Child);

impl Drop for Router {
    fn drop(&mut self) {
        // SAFETY: signals the router's pid.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

/// Starts `linerate route` on dut0 and dut1 of lab `lab` and waits for
/// its record (the name `linerate stats` finds it by: `LAB-dut`).
pub fn start_router(lab: &str) -> Router {
    start_router_with(lab, &[])
}

/// [`start_router`] with more flags.
pub fn start_router_with(lab: &str, flags: &[&str]) -> Router {
    let child = Command::new(BIN)
        .args([
            "route",
            "--netns",
            &format!("{lab}-dut"),
            "-i",
            "dut0,dut1",
            "-q",
        ])
        .args(flags)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let router = Router(child);
    let t = Instant::now();
    while linerate_dataplane::record::open(&format!("{lab}-dut")).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "linerate route did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    router
}

/// `ARGS` in namespace `ns`: its output; a failure fails the test.
pub fn run_in(ns: &str, args: &[&str]) -> String {
    let o = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?} in {ns}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `nft ARGS` in lab `lab`'s DUT.
pub fn dut_nft(lab: &str, args: &[&str]) -> Output {
    Command::new("ip")
        .args(["netns", "exec", &format!("{lab}-dut"), "nft"])
        .args(args)
        .output()
        .unwrap()
}

/// What linerate's router in lab `lab`'s DUT counted under `reason`
/// (crate::layout::REASONS), over its interfaces.
pub fn router_counted(lab: &str, reason: &str) -> u64 {
    let (rec, map) = linerate_dataplane::record::open(&format!("{lab}-dut")).unwrap();
    rec.interfaces
        .iter()
        .map(|(_, i)| {
            linerate_dataplane::record::read(&map, *i)
                .unwrap()
                .packets_of(reason)
        })
        .sum()
}

/// Waits until the router in lab `lab`'s DUT judges both families by
/// `chains` base chains each (a refusal fails at once, with its reason).
pub fn wait_for_firewall(lab: &str, chains: usize) {
    let t = Instant::now();
    loop {
        if let Ok(Some(r)) = linerate_dataplane::record::read_firewall(&format!("{lab}-dut")) {
            if r.judged.iter().all(|j| j.len() == chains) {
                return;
            }
            assert!(
                r.refused.iter().all(Option::is_none),
                "the router refused the ruleset: {:?}",
                r.refused
            );
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the router's firewall did not take the ruleset"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Series `series` (`name{labels}` as the text format writes it) of the
/// metrics the router in lab `lab`'s DUT serves at `addr` (its
/// `--metrics`, in the DUT's namespace); None if not served (yet).
pub fn metric(lab: &str, addr: &str, series: &str) -> Option<f64> {
    let (ns, url) = (format!("{lab}-dut"), format!("http://{addr}/metrics"));
    let body = std::thread::spawn(move || {
        let _in = linerate_host::netns::NetnsGuard::enter(&ns).ok()?;
        let agent = ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(5))
            .build();
        agent.get(&url).call().ok()?.into_string().ok()
    })
    .join()
    .unwrap()?;
    body.lines()
        .filter_map(|l| l.rsplit_once(' '))
        .find(|(s, _)| *s == series)
        .and_then(|(_, v)| v.parse().ok())
}
