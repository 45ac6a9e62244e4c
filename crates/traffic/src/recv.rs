//! The XDP count-and-drop receiver.
use anyhow::Result;
use linerate_bpf::layout::RecvCounters;
use linerate_bpf::loader::{self, XdpAttachment, XdpMode};
use linerate_bpf::{maps, objects};
use linerate_host::netns::NetnsGuard;

/// `lab_recv` attached to one interface; detached when dropped.
pub struct Receiver {
    _attachment: XdpAttachment,
    obj: libbpf_rs::Object,
}

impl Receiver {
    /// Attaches to `ifname`, in namespace `netns` if given.
    pub fn attach(ifname: &str, netns: Option<&str>, mode: XdpMode) -> Result<Self> {
        let obj = loader::load(objects::RECV, "receiver")?;
        let attachment = {
            let _in = netns.map(NetnsGuard::enter).transpose()?;
            XdpAttachment::attach(&loader::prog(&obj, "lab_recv")?, ifname, mode)?
        };
        Ok(Receiver {
            _attachment: attachment,
            obj,
        })
    }

    /// Counters per CPU.
    pub fn per_cpu(&self) -> Result<Vec<RecvCounters>> {
        maps::read_percpu(&loader::map(&self.obj, "recv_counters")?, 0)
    }

    /// Counters summed over CPUs.
    pub fn total(&self) -> Result<RecvCounters> {
        Ok(self
            .per_cpu()?
            .iter()
            .fold(RecvCounters::default(), |a, c| RecvCounters {
                packets: a.packets + c.packets,
                bytes: a.bytes + c.bytes,
                stamped: a.stamped + c.stamped,
            }))
    }
}

/// What a receiver counted over one interval.
#[derive(Clone, Copy, Debug)]
pub struct Tick {
    pub delta: RecvCounters,
    pub usec: u64,
}

/// Turns a receiver's running counters into per-second deltas.
pub struct Ticker {
    last: RecvCounters,
    since: std::time::Instant,
}

impl Ticker {
    pub fn new(r: &Receiver) -> Result<Self> {
        Ok(Ticker {
            last: r.total()?,
            since: std::time::Instant::now(),
        })
    }

    /// Once a second has passed since the last tick: the counts since then.
    pub fn poll(&mut self, r: &Receiver) -> Result<Option<Tick>> {
        if self.since.elapsed() < std::time::Duration::from_secs(1) {
            return Ok(None);
        }
        let now = r.total()?;
        let usec = self.since.elapsed().as_micros() as u64;
        self.since = std::time::Instant::now();
        let delta = RecvCounters {
            packets: now.packets - self.last.packets,
            bytes: now.bytes - self.last.bytes,
            stamped: now.stamped - self.last.stamped,
        };
        self.last = now;
        Ok(Some(Tick { delta, usec }))
    }
}
