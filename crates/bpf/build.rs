//! Compiles every `bpf/<role>/*.bpf.c` of the workspace (router, lab,
//! ref, probe) with `clang -target bpf` into OUT_DIR, so the objects are
//! embedded with `include_bytes!`. Headers are `bpf/include`'s.
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let bpf_dir = manifest
        .join("../../bpf")
        .canonicalize()
        .expect("bpf/ directory");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    // The FIB's arena pointers (address_space(1)) need clang 18 or later;
    // Debian 12 has clang-19 beside its default clang-14.
    let clang = std::env::var("BPF_CLANG").unwrap_or_else(|_| "clang-19".into());
    // <asm/types.h> lives in the multiarch include directory on Debian.
    let arch = std::env::consts::ARCH;
    let multiarch = format!("/usr/include/{arch}-linux-gnu");

    println!("cargo:rerun-if-env-changed=BPF_CLANG");
    println!("cargo:rerun-if-changed={}", bpf_dir.display());
    for header in files_under(&bpf_dir.join("include")) {
        println!("cargo:rerun-if-changed={}", header.display());
    }
    let sources: Vec<PathBuf> = ROLES
        .iter()
        .flat_map(|role| files_under(&bpf_dir.join(role)))
        .collect();
    for src in sources {
        let name = src.file_name().unwrap().to_string_lossy().to_string();
        let Some(stem) = name.strip_suffix(".bpf.c") else {
            continue;
        };
        println!("cargo:rerun-if-changed={}", src.display());
        compile(
            &clang,
            &src,
            &bpf_dir.join("include"),
            &multiarch,
            &[],
            &out.join(format!("{stem}.bpf.o")),
        );
        // Programs that read the FIB also come with the compact IPv6
        // layout (fib.h, FIB6_COMPACT).
        if std::fs::read_to_string(&src).unwrap().contains("\"fib.h\"") {
            compile(
                &clang,
                &src,
                &bpf_dir.join("include"),
                &multiarch,
                &["-DFIB6_COMPACT"],
                &out.join(format!("{stem}_fib6_compact.bpf.o")),
            );
        }
    }
}

/// The folders of bpf/ by role: the product, the lab's programs, the
/// references the lab measures against, and the probes the benches run.
const ROLES: [&str; 4] = ["router", "lab", "ref", "probe"];

/// Every file under `dir`, in its subfolders too, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn compile(clang: &str, src: &Path, include: &Path, multiarch: &str, defines: &[&str], obj: &Path) {
    let status = Command::new(clang)
        .args([
            "-O2",
            "-g",
            "-Wall",
            "-Werror",
            "-target",
            "bpf",
            // v3: 32-bit ALU and jumps (the FIB walk's entries are 32-bit).
            "-mcpu=v3",
            "-D__TARGET_ARCH_x86",
        ])
        .arg("-I")
        .arg(include)
        .arg("-I")
        .arg(multiarch)
        .args(defines)
        .arg("-c")
        .arg(src)
        .arg("-o")
        .arg(obj)
        .status()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `{clang}` to build {}: {e} (install clang-19: apt-get install clang-19, or set BPF_CLANG)",
                src.display()
            )
        });
    assert!(status.success(), "clang failed on {}", src.display());
}
