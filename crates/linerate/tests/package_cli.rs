//! The Debian package: `cargo deb -p linerate` (cargo-deb, which
//! scripts/setup.sh installs) builds it; it installs with `dpkg -i` into a
//! fresh root (its own dpkg database), holds the binary, the systemd unit,
//! the default configuration as a conffile and the docs, and the binary
//! installed runs: `--version`, and `check-config` on a configuration in
//! that root.
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).to_string()
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn the_debian_package_installs_into_a_fresh_root_and_runs() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    // A target directory of its own: the one `cargo test` builds in is
    // locked while it runs.
    let target = workspace.join("target/package-test");
    run(Command::new("cargo")
        .args(["deb", "-p", "linerate", "--output"])
        .arg(dir.path())
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(&workspace));
    let deb = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "deb"))
        .expect("cargo deb made a .deb");

    let root = dir.path().join("root");
    for d in ["var/lib/dpkg/info", "var/lib/dpkg/updates"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(root.join("var/lib/dpkg/status"), "").unwrap();
    // An empty root has none of its dependencies (libc6, iproute2, ...).
    run(Command::new("dpkg")
        .arg(format!("--root={}", root.display()))
        .args(["--force-depends", "-i"])
        .arg(&deb));
    let admin = format!("--admindir={}", root.join("var/lib/dpkg").display());
    let status = run(Command::new("dpkg-query").args([&admin, "-s", "linerate"]));
    assert!(status.contains("Status: install ok installed"), "{status}");
    assert!(
        status.contains("Conffiles:\n /etc/linerate/linerate.toml "),
        "{status}"
    );
    for f in [
        "usr/bin/linerate",
        "lib/systemd/system/linerate.service",
        "etc/linerate/linerate.toml",
        "usr/share/doc/linerate/README.md",
        "usr/share/doc/linerate/router.md",
        "usr/share/doc/linerate/reference/counters.md",
        "usr/share/man/man1/linerate.1",
        "usr/share/man/man1/linerate-route.1",
        "usr/share/man/man1/linerate-check-config.1",
    ] {
        // (cargo-deb gzips man pages, as Debian's policy asks.)
        let gz = root.join(format!("{f}.gz"));
        assert!(root.join(f).is_file() || gz.is_file(), "{f} not installed");
    }
    // The unit and the configuration are the project's own.
    let shipped = |p: &str| std::fs::read_to_string(workspace.join(p)).unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("lib/systemd/system/linerate.service")).unwrap(),
        shipped("packaging/linerate.service")
    );

    let installed = root.join("usr/bin/linerate");
    let version = run(Command::new(&installed).arg("--version"));
    assert_eq!(
        version.trim(),
        format!("linerate {}", env!("CARGO_PKG_VERSION"))
    );
    // The shipped configuration parses as far as its interfaces (eth0 and
    // eth1, which the operator names): refused there, or ok where they
    // exist.
    let o = Command::new(&installed)
        .arg("check-config")
        .arg(root.join("etc/linerate/linerate.toml"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() || err.contains("linerate.toml:6: interfaces: eth"),
        "{err}"
    );
    // A configuration naming this machine's loopback: ok, by the installed
    // binary as by the tested one.
    let lo = root.join("etc/linerate/lo.toml");
    std::fs::write(&lo, "interfaces = [\"lo\"]\nquiet = true\n").unwrap();
    for bin in [installed.as_path(), Path::new(BIN)] {
        let said = run(Command::new(bin).arg("check-config").arg(&lo));
        assert!(said.contains("ok: route between lo"), "{said}");
    }
}
