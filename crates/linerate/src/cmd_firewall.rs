//! `linerate firewall`: the ruleset read in the router's namespace, and
//! its view (linerate_firewall::view).
use anyhow::{Context, Result};

pub fn run(a: crate::cli::FirewallArgs) -> Result<()> {
    linerate_host::privilege::require_root("linerate firewall")?;
    let (ruleset, listing) = {
        let _in = match &a.netns {
            Some(ns) => Some(
                linerate_host::netns::NetnsGuard::enter(ns)
                    .with_context(|| format!("--netns {ns}"))?,
            ),
            None => None,
        };
        let listing = std::process::Command::new("nft")
            .args(["-a", "-t", "list", "ruleset"])
            .output()
            .context("running nft -a -t list ruleset")?;
        (
            // As linerate route reads it: sets' elements over netlink.
            linerate_firewall::read::read_current_with(&|t, s| {
                linerate_netlink::nft_elements::dump(t, s)
            })?,
            String::from_utf8_lossy(&listing.stdout).into_owned(),
        )
    };
    let record = a.netns.as_deref().unwrap_or("default");
    let router = linerate_dataplane::record::open(record).ok().and_then(|_| {
        linerate_dataplane::record::read_firewall(record)
            .ok()
            .flatten()
    });
    let rules = linerate_firewall::listing::rules(
        &listing,
        router.as_ref().map_or(&[][..], |r| &r.rules[..]),
    );
    print!(
        "{}",
        linerate_firewall::view::render(&ruleset, &rules, router.as_ref(), record, a.json)
    );
    Ok(())
}
