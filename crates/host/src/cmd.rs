//! Running system tools (ip, ethtool, sysctl) with one-line errors.
use anyhow::{bail, Result};
use std::process::{Command, Stdio};

/// Runs `program args...` and returns its standard output. On failure the
/// error names the command and carries the tool's own first error line.
pub fn run(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => missing_tool(program),
            _ => anyhow::anyhow!("cannot run {program}: {e}"),
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let first = stderr
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        bail!(
            "`{} {}` failed: {}",
            program,
            args.join(" "),
            if first.is_empty() {
                "no message"
            } else {
                first
            }
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The MAC of `ifname` in namespace `netns` (None: the current one), as
/// `ip` prints it; the error says the interface is missing from there.
pub fn interface_mac(netns: Option<&str>, ifname: &str) -> Result<String> {
    let out = ip(netns, &["-j", "link", "show", "dev", ifname]).map_err(|_| {
        anyhow::anyhow!(
            "-i: interface {ifname} does not exist (in this network namespace; use --netns)"
        )
    })?;
    let v: serde_json::Value = serde_json::from_str(&out)?;
    v.pointer("/0/address")
        .and_then(|m| m.as_str())
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("interface {ifname} has no MAC address"))
}

/// Runs `ip` with `args`, inside namespace `netns` when given.
pub fn ip(netns: Option<&str>, args: &[&str]) -> Result<String> {
    let mut all: Vec<&str> = Vec::with_capacity(args.len() + 2);
    if let Some(ns) = netns {
        all.extend(["-n", ns]);
    }
    all.extend_from_slice(args);
    run("ip", &all)
}

/// Runs `program args...` inside namespace `netns` (`ip netns exec`).
pub fn in_netns(netns: &str, program: &str, args: &[&str]) -> Result<String> {
    require_tool(program)?;
    let mut all = vec!["netns", "exec", netns, program];
    all.extend_from_slice(args);
    run("ip", &all)
}

/// The Debian package that provides each tool linerate calls.
fn package_of(tool: &str) -> &str {
    match tool {
        "ip" | "tc" => "iproute2",
        "ethtool" => "ethtool",
        "sysctl" => "procps",
        "clang" => "clang",
        "nft" => "nftables",
        "tshark" => "tshark",
        other => other,
    }
}

fn missing_tool(tool: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "missing tool `{tool}`: install it with `apt-get install {}`",
        package_of(tool)
    )
}

/// Fails with an install hint unless `tool` is on PATH.
pub fn require_tool(tool: &str) -> Result<()> {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false);
    if found {
        Ok(())
    } else {
        Err(missing_tool(tool))
    }
}

/// A MAC address as `ip` prints and takes it: `02:00:00:00:00:01`.
pub fn mac_text(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_command_names_itself_and_its_message() {
        let err = run("sh", &["-c", "echo 'bad thing happened' >&2; exit 3"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("`sh -c"), "{err}");
        assert!(err.contains("bad thing happened"), "{err}");
    }

    #[test]
    fn missing_program_says_what_to_install() {
        let err = run("ethtool-that-does-not-exist", &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("missing tool `ethtool-that-does-not-exist`"),
            "{err}"
        );
        assert!(require_tool("surely-not-a-tool-xyz")
            .unwrap_err()
            .to_string()
            .contains("apt-get install"));
        assert!(require_tool("sh").is_ok());
    }

    #[test]
    fn success_returns_stdout() {
        assert_eq!(run("sh", &["-c", "printf hi"]).unwrap(), "hi");
    }
}
