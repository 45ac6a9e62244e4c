//! The house's layout, checked: each crate depends only on the crates
//! below it (a fixed order, so no cycle can form), the binary holds only
//! its command line, no library grows past the size of one job, and no
//! BPF struct is defined twice.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every crate, with the linerate crates it may depend on (its
/// `[dependencies]`; tests may also use linerate-testkit). The order is
/// the layers', bottom first: a crate may name only crates listed before
/// it, which the test checks too.
const LAYERS: &[(&str, &[&str])] = &[
    // Leaves: each usable alone.
    ("host", &[]),
    ("imix", &[]),
    ("ministat", &[]),
    ("search", &[]),
    ("bpf", &[]),
    ("fib", &[]),
    ("netlink", &[]),
    ("tune", &["host", "netlink"]),
    // The lab's tools.
    ("lab", &["host"]),
    ("traffic", &["bpf", "host", "imix"]),
    ("labhosts", &["host", "traffic"]),
    // The router, from the maps up.
    ("dataplane", &["bpf", "fib", "netlink"]),
    ("router", &["fib", "netlink", "dataplane"]),
    ("firewall", &["bpf", "netlink", "dataplane"]),
    ("fwfollow", &["bpf", "netlink", "dataplane", "firewall"]),
    (
        "daemon",
        &[
            "bpf",
            "fib",
            "host",
            "netlink",
            "dataplane",
            "router",
            "firewall",
            "fwfollow",
        ],
    ),
    // The lab's runs, the benches, what tests share, and the binary.
    (
        "labrun",
        &[
            "bpf",
            "fib",
            "host",
            "imix",
            "lab",
            "labhosts",
            "ministat",
            "search",
            "traffic",
            "netlink",
            "dataplane",
            "router",
            "firewall",
            "fwfollow",
            "daemon",
        ],
    ),
    (
        "bench",
        &[
            "bpf",
            "fib",
            "host",
            "lab",
            "ministat",
            "traffic",
            "netlink",
            "dataplane",
            "router",
            "firewall",
            "fwfollow",
            "daemon",
            "labrun",
        ],
    ),
    (
        "labbench",
        &[
            "bench",
            "bpf",
            "host",
            "lab",
            "ministat",
            "traffic",
            "netlink",
            "dataplane",
            "firewall",
            "daemon",
            "labrun",
        ],
    ),
    ("testkit", &["bpf", "fib", "host", "dataplane", "router"]),
    // The fuzz targets' bodies, over every parser of outside input.
    (
        "fuzz",
        &[
            "fib",
            "host",
            "netlink",
            "dataplane",
            "router",
            "firewall",
            "daemon",
            "labrun",
        ],
    ),
    (
        "linerate",
        &[
            "bpf",
            "fib",
            "host",
            "imix",
            "tune",
            "lab",
            "ministat",
            "search",
            "traffic",
            "netlink",
            "dataplane",
            "router",
            "firewall",
            "fwfollow",
            "daemon",
            "labrun",
            "bench",
            "labbench",
        ],
    ),
];

/// The binary: its command line and the wiring of each command, no more.
const BINARY_LINES_MAX: usize = 2500;
/// A library crate's code, its tests apart: about one job's worth.
const CRATE_LINES_MAX: usize = 6000;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The linerate crates a manifest's `section` names (without the prefix).
fn linerate_deps(manifest: &toml::Table, section: &str) -> BTreeSet<String> {
    manifest
        .get(section)
        .and_then(|d| d.as_table())
        .map(|t| {
            t.keys()
                .filter_map(|k| k.strip_prefix("linerate-").map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn manifest(name: &str) -> toml::Table {
    let path = root().join("crates").join(name).join("Cargo.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.parse().unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

fn crates_on_disk() -> BTreeSet<String> {
    std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().join("Cargo.toml").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// A crate's linerate `[dependencies]` and `[dev-dependencies]`.
type Deps = (BTreeSet<String>, BTreeSet<String>);

/// The violations of `layers` by the manifests `deps` gives (a crate's
/// name to its dependencies).
fn violations(layers: &[(&str, &[&str])], deps: &dyn Fn(&str) -> Deps) -> Vec<String> {
    let mut out = Vec::new();
    let mut below: BTreeSet<&str> = BTreeSet::new();
    for (name, allowed) in layers {
        for a in *allowed {
            if !below.contains(a) {
                out.push(format!(
                    "the layers let {name} use {a}, which is not below it"
                ));
            }
        }
        let (normal, dev) = deps(name);
        for d in &normal {
            if !allowed.contains(&d.as_str()) {
                out.push(format!(
                    "{name} depends on {d}, which its layer does not allow"
                ));
            }
        }
        // A crate's tests may use any crate below it, and the kit.
        for d in &dev {
            if d != "testkit" && !below.contains(d.as_str()) {
                out.push(format!("{name}'s tests depend on {d}, above it"));
            }
        }
        below.insert(name);
    }
    out
}

#[test]
fn each_crate_depends_only_on_crates_below_it() {
    let on_disk = crates_on_disk();
    let listed: BTreeSet<String> = LAYERS.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(on_disk, listed, "every crate in LAYERS, and no other");
    let deps = |name: &str| {
        let m = manifest(name);
        (
            linerate_deps(&m, "dependencies"),
            linerate_deps(&m, "dev-dependencies"),
        )
    };
    let v = violations(LAYERS, &deps);
    assert!(v.is_empty(), "{}", v.join("\n"));
}

/// The check itself catches a dependency upwards and a layer naming one
/// above it.
#[test]
fn the_layer_check_refuses_a_dependency_upwards() {
    let layers: &[(&str, &[&str])] = &[("a", &[]), ("b", &["a"]), ("c", &["b", "d"]), ("d", &[])];
    let graph: BTreeMap<&str, Vec<&str>> = BTreeMap::from([
        ("a", vec!["b"]),
        ("b", vec!["a"]),
        ("c", vec!["b"]),
        ("d", vec![]),
    ]);
    let deps = |n: &str| {
        (
            graph[n].iter().map(|s| s.to_string()).collect(),
            BTreeSet::new(),
        )
    };
    let v = violations(layers, &deps);
    assert_eq!(
        v,
        [
            "a depends on b, which its layer does not allow",
            "the layers let c use d, which is not below it",
        ]
    );
}

/// Lines of a Rust file that are not its unit tests: up to a
/// `#[cfg(test)]` that opens a module.
fn code_lines(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .iter()
        .enumerate()
        .position(|(i, l)| {
            l.trim() == "#[cfg(test)]"
                && lines.get(i + 1).is_some_and(|n| {
                    // A test module, whatever its visibility (one
                    // whose fixtures another module's tests share).
                    let n = n.trim_start();
                    let n = n.strip_prefix("pub(crate) ").unwrap_or(n);
                    n.starts_with("mod ")
                })
        })
        .unwrap_or(lines.len())
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

#[test]
fn the_binary_holds_its_command_line_only() {
    let src = root().join("crates/linerate/src");
    let mut total = 0;
    for p in rust_files(&src) {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name == "main.rs" || name == "cli.rs" || name.starts_with("cmd_"),
            "crates/linerate/src/{name}: the binary holds main.rs, cli.rs and cmd_*.rs; logic belongs in a library crate"
        );
        total += code_lines(&std::fs::read_to_string(&p).unwrap());
    }
    assert!(
        total < BINARY_LINES_MAX,
        "the binary has {total} lines of code, at most {BINARY_LINES_MAX}: move logic into the library crates"
    );
}

#[test]
fn no_library_crate_outgrows_one_job() {
    for name in crates_on_disk().iter().filter(|n| *n != "linerate") {
        let src = root().join("crates").join(name).join("src");
        let lines: usize = rust_files(&src)
            .iter()
            .map(|p| code_lines(&std::fs::read_to_string(p).unwrap()))
            .sum();
        assert!(
            lines <= CRATE_LINES_MAX,
            "crates/{name} has {lines} lines of code, more than {CRATE_LINES_MAX}: split it by job"
        );
    }
}

#[test]
fn code_lines_stop_at_the_unit_tests() {
    assert_eq!(code_lines("a\nb\n#[cfg(test)]\nmod tests {\n}\n"), 2);
    assert_eq!(code_lines("a\n#[cfg(test)]\nfn f() {}\nb\n"), 4);
    assert_eq!(
        code_lines("a\n#[cfg(test)]\npub(crate) mod tests {\n}\n"),
        1
    );
}

/// `struct NAME {` or `union NAME {` definitions in C text, by name.
fn c_definitions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim_start();
        for kind in ["struct ", "union "] {
            if let Some(rest) = l.strip_prefix(kind) {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let after = rest[name.len()..].trim_start();
                if !name.is_empty() && after.starts_with('{') {
                    out.push(name);
                }
            }
        }
    }
    out
}

fn c_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(c_files(&p));
        } else if p.extension().is_some_and(|x| x == "c" || x == "h") {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn no_bpf_struct_is_defined_twice() {
    let mut seen: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    let bpf = root().join("bpf");
    for p in c_files(&bpf) {
        for name in c_definitions(&std::fs::read_to_string(&p).unwrap()) {
            seen.entry(name)
                .or_default()
                .push(p.strip_prefix(&bpf).unwrap().to_path_buf());
        }
    }
    let twice: Vec<String> = seen
        .iter()
        .filter(|(_, files)| files.len() > 1)
        .map(|(name, files)| format!("struct {name}: {files:?}"))
        .collect();
    assert!(
        twice.is_empty(),
        "defined more than once (include the header that defines it, or give the probe's its own name):\n{}",
        twice.join("\n")
    );
}

#[test]
fn c_definitions_are_found_and_uses_are_not() {
    let text = "struct a {\n\tint x;\n};\nstatic struct a *p;\n  union b{ int y; };\nstruct c;\n";
    assert_eq!(c_definitions(text), ["a", "b"]);
}
