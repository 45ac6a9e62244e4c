//! Golden outputs: every case in cases.txt was run through FreeBSD's
//! current ministat.c (usr.bin/ministat, built on Linux with capsicum taken
//! out) and its stdout, stderr and exit status stored in golden/. Ours must
//! match byte for byte.
use linerate_ministat::cli::{run, Io};
use std::path::Path;

#[test]
fn matches_freebsd_ministat_byte_for_byte() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let cases = std::fs::read_to_string(here.join("cases.txt")).unwrap();
    // Data set names are the file names as given, so run from data/ (this
    // test binary has this one test: changing directory is safe here).
    std::env::set_current_dir(here.join("data")).unwrap();
    let mut checked = 0;
    let mut failures = Vec::new();
    for line in cases
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let parts: Vec<&str> = line.split('|').collect();
        let (name, args, stdin_file) = (parts[0], parts[1], parts[2]);
        let args: Vec<String> = args.split_whitespace().map(String::from).collect();
        let stdin_bytes = if stdin_file.is_empty() {
            Vec::new()
        } else {
            std::fs::read(stdin_file).unwrap()
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut stdin = stdin_bytes.as_slice();
        let rc = run(
            &args,
            &mut Io {
                stdin: &mut stdin,
                stdout: &mut out,
                stderr: &mut err,
                tty_width: None,
            },
        );
        let golden =
            |ext: &str| std::fs::read(here.join("golden").join(format!("{name}.{ext}"))).unwrap();
        let want_rc: i32 = String::from_utf8(golden("rc"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        if out != golden("out") || err != golden("err") || rc != want_rc {
            failures.push(format!(
                "case {name}: rc {rc} (want {want_rc})\n--- ours stdout\n{}--- FreeBSD stdout\n{}--- ours stderr\n{}--- FreeBSD stderr\n{}",
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&golden("out")),
                String::from_utf8_lossy(&err),
                String::from_utf8_lossy(&golden("err")),
            ));
        }
        checked += 1;
    }
    assert!(checked >= 39, "only {checked} cases read");
    assert!(
        failures.is_empty(),
        "{} of {checked} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
