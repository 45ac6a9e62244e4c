//! `linerate imix`: Simple IMIX conversions and line-rate references.
use crate::cli::ImixArgs;
use anyhow::{anyhow, Result};
use linerate_imix::{convert_pps, imix_pps, line_rate_of, parse_rate, Layer};
use linerate_traffic::units::norm as human;

pub fn run(a: ImixArgs) -> Result<()> {
    let layer = if a.layer == "ip" {
        Layer::Ip
    } else {
        Layer::Ethernet
    };
    if let Some(speed) = &a.line_rate {
        let speed = parse_rate("--line-rate", speed).map_err(|e| anyhow!(e))?;
        let l = line_rate_of(speed, a.size).map_err(|e| anyhow!(e))?;
        let c = convert_pps(l.imix_pps);
        if a.json {
            let mut v = serde_json::to_value(&c)?;
            v.as_object_mut()
                .unwrap()
                .extend(serde_json::to_value(&l)?.as_object().unwrap().clone());
            println!("{}", serde_json::to_string_pretty(&v)?);
        } else {
            println!("{}bps link, {}-byte frames:", human(speed), a.size);
            println!(
                "  line rate:                 {}pps ({}pps full duplex)",
                human(l.line_rate_pps),
                human(l.line_rate_pps_full_duplex)
            );
            println!(
                "  Simple IMIX at link speed: {}pps ({}pps full duplex)",
                human(l.imix_pps),
                human(l.imix_pps_full_duplex)
            );
        }
        return Ok(());
    }
    let pps = match (&a.pps, &a.bps) {
        (Some(p), _) => parse_rate("--pps", p).map_err(|e| anyhow!(e))?,
        (None, Some(b)) => imix_pps(parse_rate("--bps", b).map_err(|e| anyhow!(e))?, layer),
        (None, None) => unreachable!("clap requires one"),
    };
    let c = convert_pps(pps);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        println!(
            "{}pps of Simple IMIX = {}bps at the IP layer, {}bps at the Ethernet layer",
            human(c.pps),
            human(c.ip_bps),
            human(c.ethernet_bps)
        );
    }
    Ok(())
}
