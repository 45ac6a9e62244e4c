//! Where an interface's receive interrupts land: its queue interrupts,
//! found in /proc/interrupts by the interface's name or its device's
//! (`virtio2-input.0`, `eth0-TxRx-3`, `mlx5_comp0@pci:0000:03:00.0`), and
//! the CPU each is delivered to (effective_affinity_list).
use crate::host::online_cpus;
use crate::{Finding, Root, Setting, Verdict};
use std::collections::BTreeMap;

/// Words in an interrupt's name that make it a queue's that receives.
const RECEIVING: [&str; 4] = ["rx", "input", "comp", "txrx"];

/// The check of interface `name`'s queue interrupts, as `s` says.
pub(crate) fn check(root: &Root, name: &str, s: &Setting) -> Finding {
    let read = "proc/interrupts, proc/irq/*/effective_affinity_list".to_string();
    let device = std::fs::read_link(root.path(&format!("sys/class/net/{name}/device")))
        .ok()
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()));
    let Some(device) = device else {
        return s.found(
            name,
            read,
            Some("none: a virtual device".into()),
            Verdict::Report,
        );
    };
    let (table, cpus) = match (root.read("proc/interrupts"), online_cpus(root)) {
        (Ok(t), Ok(c)) => (t, c),
        (Err(e), _) | (_, Err(e)) => return s.found(name, read, None, Verdict::Unread(e)),
    };
    let mut landed = Vec::new();
    for irq in queue_irqs(&table, &[name, &device]) {
        let list = root
            .read(&format!("proc/irq/{irq}/effective_affinity_list"))
            .or_else(|_| root.read(&format!("proc/irq/{irq}/smp_affinity_list")));
        match list {
            Ok(l) => landed.push((irq, l)),
            Err(e) => return s.found(name, read, None, Verdict::Unread(format!("irq {irq}: {e}"))),
        }
    }
    if landed.is_empty() {
        return s.found(
            name,
            read,
            Some(format!("none named after {name} or {device}")),
            Verdict::Report,
        );
    }
    // Interrupts a CPU, over the online CPUs; one delivered to several
    // (no effective affinity shown) counts for none.
    let mut per_cpu: BTreeMap<u32, usize> = cpus.iter().map(|&c| (c, 0)).collect();
    for (_, l) in &landed {
        if let Ok(c) = l.parse::<u32>() {
            *per_cpu.entry(c).or_default() += 1;
        }
    }
    let (most, least) = (
        per_cpu.values().max().copied().unwrap_or(0),
        per_cpu.values().min().copied().unwrap_or(0),
    );
    let single = landed.iter().all(|(_, l)| l.parse::<u32>().is_ok());
    let current = landed
        .iter()
        .map(|(irq, l)| format!("{irq}:cpu {l}"))
        .collect::<Vec<_>>()
        .join(", ");
    s.found(
        name,
        read,
        Some(current),
        match single && most - least <= 1 {
            true => Verdict::Good,
            false => Verdict::Change,
        },
    )
}

/// The numbers of the interrupts in /proc/interrupts whose name holds one
/// of `names` and says it receives.
fn queue_irqs(table: &str, names: &[&str]) -> Vec<u32> {
    table
        .lines()
        .filter_map(|line| {
            let (num, rest) = line.trim_start().split_once(':')?;
            let irq = num.parse::<u32>().ok()?;
            let action = rest.split_whitespace().last()?;
            let lower = action.to_lowercase();
            let ours = names.iter().any(|n| action.contains(n));
            let receives = RECEIVING.iter().any(|w| lower.contains(w));
            (ours && receives).then_some(irq)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_interrupts_by_the_interfaces_or_the_devices_name() {
        let table = "           CPU0       CPU1\n\
 36:          0    1072107 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n\
 37:          0          0 PCI-MSIX-0000:00:03.0   0-edge      virtio2-config\n\
 38:          0       6938 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n\
 39:       4794          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0\n\
 90:          1          0 IR-PCI-MSI 524288-edge      eth1-TxRx-0\n\
 91:          1          0 IR-PCI-MSI 524289-edge      mlx5_comp0@pci:0000:03:00.0\n\
NMI:          0          0   Non-maskable interrupts\n";
        assert_eq!(queue_irqs(table, &["eth0", "virtio2"]), [38]);
        assert_eq!(queue_irqs(table, &["eth1", "0000:01:00.0"]), [90]);
        assert_eq!(queue_irqs(table, &["p0", "0000:03:00.0"]), [91]);
    }
}
