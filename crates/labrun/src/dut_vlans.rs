//! The DUT's ports as 802.1Q trunks for a run (a DUT configuration's
//! `vlans`; the seeds' "Config 2: VLAN tagging"): a VLAN device on each
//! port takes the lab's addresses, routes and neighbours of that side, so
//! that the DUT routes between the two VLANs what it routed between the
//! ports; after the run the ports get them back. The generator tags its
//! frames with the first VLAN; the receiver reads any tag.
use anyhow::{bail, Context, Result};
use linerate_host::cmd::ip;
use linerate_lab::topology::{addr, mac};

/// Whether this kernel makes VLAN devices (loads 8021q if it can): a
/// configuration with `vlans` cannot run where it does not.
pub fn preflight() -> std::result::Result<(), String> {
    let _ = std::process::Command::new("modprobe")
        .args(["-q", "8021q"])
        .status();
    if std::path::Path::new("/proc/net/vlan").exists() {
        Ok(())
    } else {
        Err("vlans: this kernel has no 802.1Q VLAN devices (module 8021q)".into())
    }
}

/// One side of the DUT: its port, the lab's addresses on it, the host
/// behind it and its networks.
struct Side<'a> {
    port: &'a str,
    v4: &'static str,
    v6: &'static str,
    host4: &'static str,
    host6: &'static str,
    host_mac: &'static str,
    net4: &'static str,
    net6: &'static str,
}

fn sides(ports: [&str; 2]) -> [Side<'_>; 2] {
    [
        Side {
            port: ports[0],
            v4: addr::DUT_IN_V4,
            v6: addr::DUT_IN_V6,
            host4: addr::GEN_V4,
            host6: addr::GEN_V6,
            host_mac: mac::GEN,
            net4: addr::GEN_NET_V4,
            net6: addr::GEN_NET_V6,
        },
        Side {
            port: ports[1],
            v4: addr::DUT_OUT_V4,
            v6: addr::DUT_OUT_V6,
            host4: addr::RECV_V4,
            host6: addr::RECV_V6,
            host_mac: mac::RECV,
            net4: addr::RECV_NET_V4,
            net6: addr::RECV_NET_V6,
        },
    ]
}

/// The device of `side` that has the lab's addresses: the port, or its
/// VLAN `id`.
fn device(side: &Side<'_>, id: Option<u16>) -> String {
    match id {
        Some(id) => format!("{}.{id}", side.port),
        None => side.port.to_string(),
    }
}

/// The side's addresses, route and neighbours on `dev` (`add`) or off it.
fn layer3(netns: &str, side: &Side<'_>, dev: &str, add: bool) -> Result<()> {
    let n = Some(netns);
    let verb = if add { "add" } else { "del" };
    ip(n, &["addr", verb, &format!("{}/24", side.v4), "dev", dev])?;
    let v6 = format!("{}/64", side.v6);
    let mut six = vec!["-6", "addr", verb, v6.as_str(), "dev", dev];
    if add {
        six.push("nodad");
    }
    ip(n, &six)?;
    if !add {
        // The routes through the side went with its addresses.
        return Ok(());
    }
    for (net, via) in [(side.net4, side.host4), (side.net6, side.host6)] {
        ip(n, &["route", "replace", net, "via", via, "dev", dev])?;
    }
    for a in [side.host4, side.host6] {
        linerate_lab::setup::static_neighbour(netns, a, side.host_mac, dev)?;
    }
    Ok(())
}

/// Makes ports `ports` of the DUT in `netns` trunks carrying VLANs `ids`,
/// the lab's layer 3 moved onto them. Tag offloads off on the ports:
/// a veth would hand a tag beside the frame, where XDP does not see it.
pub fn trunk(netns: &str, ports: [&str; 2], ids: [u16; 2]) -> Result<()> {
    for (side, id) in sides(ports).iter().zip(ids) {
        let dev = device(side, Some(id));
        let n = Some(netns);
        ip(
            n,
            &[
                "link",
                "add",
                "link",
                side.port,
                "name",
                &dev,
                "type",
                "vlan",
                "id",
                &id.to_string(),
            ],
        )
        .with_context(|| format!("vlans: making {dev}"))?;
        linerate_host::cmd::in_netns(
            netns,
            "ethtool",
            &["-K", side.port, "rxvlan", "off", "txvlan", "off"],
        )?;
        layer3(netns, side, side.port, false)?;
        ip(n, &["link", "set", &dev, "up"])?;
        layer3(netns, side, &dev, true)?;
    }
    Ok(())
}

/// Undoes [`trunk`]: the VLAN devices gone, the ports' layer 3 back.
pub fn untrunk(netns: &str, ports: [&str; 2], ids: [u16; 2]) -> Result<()> {
    let mut failed = Vec::new();
    for (side, id) in sides(ports).iter().zip(ids) {
        let dev = device(side, Some(id));
        if let Err(e) = ip(Some(netns), &["link", "del", &dev]) {
            failed.push(format!("{dev}: {e:#}"));
        }
        if let Err(e) = layer3(netns, side, &device(side, None), true) {
            failed.push(format!("{}: {e:#}", side.port));
        }
    }
    if !failed.is_empty() {
        bail!("vlans: putting the ports back: {}", failed.join("; "));
    }
    Ok(())
}
