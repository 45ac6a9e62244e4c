//! What a lab is made of: names, addresses and MACs (BSDRP's RFC 2544
//! benchmark ranges: 198.18/16 and 2001:2::/49 on the generator's side,
//! 198.19/16 and 2001:2:0:8000::/49 on the receiver's, the DUT owning
//! .254 and ::254; docs/lab.md).
use serde::{Deserialize, Serialize};

/// Why a [`LabSpec`] is refused: its field (`name`, `queues`, `mtu`,
/// `gen_ports`, `dut_cpu`) and the reason.
pub type SpecError = linerate_host::field::FieldError;

/// The user's choices for one lab.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabSpec {
    /// Prefix of the lab's namespaces: `<name>-gen`, `<name>-dut`, `<name>-recv`.
    pub name: String,
    /// RX/TX queues per veth (multi-queue veth lets XDP run on several CPUs).
    pub queues: u32,
    /// CPU the DUT's receive NAPI thread (dut0) is pinned to.
    pub dut_cpu: usize,
    /// MTU of all four veth ends (9000 for a jumbo-frame lab).
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// The generator's ports into the DUT: 1 (gen0 to dut0), or 2, with a
    /// second pair (gen1 to dut2) for traffic that must come in by another
    /// interface (tenants chosen by `iif`, a routing session apart from a
    /// flood).
    #[serde(default = "one_port")]
    pub gen_ports: u32,
}

/// The ports a lab's generator may have into the DUT.
pub const GEN_PORTS_MAX: u32 = 2;

fn one_port() -> u32 {
    1
}

/// Ethernet's MTU; what labs recorded before `mtu` existed were built with.
pub const DEFAULT_MTU: u32 = 1500;
/// IPv6 needs 1280 (below it the kernel takes IPv6 off the interface);
/// veth takes up to 64k, real jumbo networks stop near 9216.
pub const MTU_RANGE: std::ops::RangeInclusive<u32> = 1280..=9216;

fn default_mtu() -> u32 {
    DEFAULT_MTU
}

pub const DEFAULT_NAME: &str = "linerate";

impl LabSpec {
    pub fn new(name: &str) -> Self {
        // On a 2-core machine: generator on CPU 0, DUT on CPU 1.
        let dut_cpu = if linerate_host::cpu::online() > 1 {
            1
        } else {
            0
        };
        LabSpec {
            name: name.to_string(),
            queues: 1,
            dut_cpu,
            mtu: DEFAULT_MTU,
            gen_ports: 1,
        }
    }

    /// Rejects a spec before anything is built: the field (as this
    /// struct names it) and why. Callers say it in their own words (the
    /// command line's `--dut-cpu`, a scenario's `lab.dut_cpu`).
    pub fn validate(&self) -> std::result::Result<(), SpecError> {
        let fail = |field, reason| Err(SpecError { field, reason });
        let n = &self.name;
        if n.is_empty() || n.len() > 32 {
            return fail(
                "name",
                format!("lab name must be 1 to 32 characters, got {n:?}"),
            );
        }
        if !n
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return fail(
                "name",
                format!("{n:?} may hold only letters, digits, '-' and '_'"),
            );
        }
        if !(1..=64).contains(&self.queues) {
            return fail(
                "queues",
                format!("must be between 1 and 64, got {}", self.queues),
            );
        }
        if !MTU_RANGE.contains(&self.mtu) {
            return fail(
                "mtu",
                format!(
                    "must be between {} and {} (IPv6 needs 1280), got {}",
                    MTU_RANGE.start(),
                    MTU_RANGE.end(),
                    self.mtu
                ),
            );
        }
        if !(1..=GEN_PORTS_MAX).contains(&self.gen_ports) {
            return fail(
                "gen_ports",
                format!(
                    "must be 1 or {GEN_PORTS_MAX} (a second port into the DUT), got {}",
                    self.gen_ports
                ),
            );
        }
        let cpus = linerate_host::cpu::online();
        if self.dut_cpu >= cpus {
            return fail(
                "dut_cpu",
                format!(
                    "CPU {} does not exist (this machine has {cpus} online)",
                    self.dut_cpu
                ),
            );
        }
        Ok(())
    }

    pub fn namespaces(&self) -> Namespaces {
        Namespaces {
            gen: format!("{}-gen", self.name),
            dut: format!("{}-dut", self.name),
            recv: format!("{}-recv", self.name),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Namespaces {
    pub gen: String,
    pub dut: String,
    pub recv: String,
}

impl Namespaces {
    pub fn all(&self) -> [&str; 3] {
        [&self.gen, &self.dut, &self.recv]
    }
}

/// Interface names: the same in every lab, since each lives in its lab's
/// own namespaces.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interfaces {
    pub gen: String,
    pub dut_in: String,
    pub dut_out: String,
    pub recv: String,
    /// The second generator port and its DUT end (a lab of two ports).
    pub gen_port2: String,
    pub dut_port2: String,
}

impl Default for Interfaces {
    fn default() -> Self {
        Interfaces {
            gen: "gen0".into(),
            dut_in: "dut0".into(),
            dut_out: "dut1".into(),
            recv: "recv0".into(),
            gen_port2: "gen1".into(),
            dut_port2: "dut2".into(),
        }
    }
}

impl Interfaces {
    /// The DUT's ports in a lab of `gen_ports`: its ingress, its egress,
    /// then the second port's end.
    pub fn dut_ports(&self, gen_ports: u32) -> Vec<String> {
        let mut v = vec![self.dut_in.clone(), self.dut_out.clone()];
        if gen_ports > 1 {
            v.push(self.dut_port2.clone());
        }
        v
    }
}

/// Locally administered MACs, fixed so captures and neighbour entries are
/// predictable.
pub mod mac {
    pub const GEN: &str = "02:00:00:00:00:01";
    pub const DUT_IN: &str = "02:00:00:00:00:02";
    pub const DUT_OUT: &str = "02:00:00:00:00:03";
    pub const RECV: &str = "02:00:00:00:00:04";
    pub const GEN_PORT2: &str = "02:00:00:00:00:05";
    pub const DUT_PORT2: &str = "02:00:00:00:00:06";
}

/// Addresses (RFC 2544 / RFC 5180 benchmark ranges).
pub mod addr {
    pub const GEN_V4: &str = "198.18.0.1";
    pub const DUT_IN_V4: &str = "198.18.0.254";
    pub const DUT_OUT_V4: &str = "198.19.0.254";
    pub const RECV_V4: &str = "198.19.0.1";
    pub const GEN_NET_V4: &str = "198.18.0.0/16";
    pub const RECV_NET_V4: &str = "198.19.0.0/16";
    pub const GEN_V6: &str = "2001:2::1";
    pub const DUT_IN_V6: &str = "2001:2::254";
    pub const DUT_OUT_V6: &str = "2001:2:0:8000::254";
    pub const RECV_V6: &str = "2001:2:0:8000::1";
    pub const GEN_NET_V6: &str = "2001:2::/49";
    pub const RECV_NET_V6: &str = "2001:2:0:8000::/49";
    /// The second generator port's network: the upper half of the
    /// generator's /16 (the DUT routes it by the longer prefix), a /50 of
    /// its /49.
    pub const GEN_PORT2_V4: &str = "198.18.128.1";
    pub const DUT_PORT2_V4: &str = "198.18.128.254";
    pub const GEN_PORT2_NET_V4: &str = "198.18.128.0/17";
    pub const GEN_PORT2_V6: &str = "2001:2:0:4000::1";
    pub const DUT_PORT2_V6: &str = "2001:2:0:4000::254";
    pub const GEN_PORT2_NET_V6: &str = "2001:2:0:4000::/50";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_derive_from_the_lab_name() {
        let s = LabSpec::new("t1");
        assert_eq!(s.namespaces().all(), ["t1-gen", "t1-dut", "t1-recv"]);
    }

    #[test]
    fn bad_specs_are_rejected_with_the_field() {
        let mut s = LabSpec::new("bad name");
        assert_eq!(s.validate().unwrap_err().field, "name");
        s.name = "x".repeat(33);
        assert_eq!(s.validate().unwrap_err().field, "name");
        s.name = "ok".into();
        s.queues = 0;
        assert_eq!(s.validate().unwrap_err().field, "queues");
        s.queues = 2;
        s.dut_cpu = 4096;
        let e = s.validate().unwrap_err();
        assert_eq!(e.field, "dut_cpu");
        assert!(e.reason.starts_with("CPU 4096 does not exist"), "{e}");
        s.dut_cpu = 0;
        assert!(s.validate().is_ok());
        s.gen_ports = 3;
        let e = s.validate().unwrap_err();
        assert_eq!(e.field, "gen_ports");
        assert!(e.reason.contains("got 3"), "{e}");
        s.gen_ports = 2;
        assert!(s.validate().is_ok());
    }
}
