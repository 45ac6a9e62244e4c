//! Every committed input of the fuzz targets (`fuzz/corpus/NAME`, and the
//! crashes found, `fuzz/regressions/NAME`) run through its target's body
//! on stable: none panics. A crash the fuzzer finds is fixed with its input
//! kept in `fuzz/regressions/NAME`, where this test runs it from then on.
use linerate_fuzz::TARGETS;
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(d) => d.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

#[test]
fn every_committed_input_runs_through_its_target() {
    for (name, body) in TARGETS {
        let corpus = inputs(&fuzz_dir().join("corpus").join(name));
        assert!(
            corpus.len() >= 2,
            "fuzz/corpus/{name}: a corpus to start from ({} inputs)",
            corpus.len()
        );
        let regressions = inputs(&fuzz_dir().join("regressions").join(name));
        for p in corpus.iter().chain(&regressions) {
            let bytes = std::fs::read(p).unwrap();
            let r = std::panic::catch_unwind(|| body(&bytes));
            assert!(r.is_ok(), "{name}: {} panics", p.display());
        }
    }
}

/// Each target has its cargo-fuzz target, calling its body.
#[test]
fn each_target_has_its_cargo_fuzz_target() {
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
    for (name, _) in TARGETS {
        let src = std::fs::read_to_string(fuzz_dir().join(format!("fuzz_targets/{name}.rs")))
            .unwrap_or_else(|e| panic!("fuzz/fuzz_targets/{name}.rs: {e}"));
        assert!(src.contains(&format!("linerate_fuzz::{name}(")), "{name}");
        assert!(manifest.contains(&format!("name = \"{name}\"")), "{name}");
    }
}
