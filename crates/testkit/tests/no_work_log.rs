//! The project speaks of itself, not of its history: no file in the
//! house (code, BPF, docs, man pages, scenarios, scripts, packaging, CI)
//! cites a work session or an issue by its number, which no reader can
//! follow. A comment says what the cited work meant instead; the history
//! of a figure lives in git.
use std::path::{Path, PathBuf};

/// The house's roots, from the workspace's.
const ROOTS: &[&str] = &[
    "README.md",
    "quickstart.sh",
    ".ci",
    "bpf",
    "crates",
    "docs",
    "packaging",
    "scenarios",
    "scripts",
];

/// Whether `line` cites a session or an issue by number: the word
/// (singular or plural, any case), a space, an optional `#`, a digit.
fn cites(line: &str) -> bool {
    let l = line.to_ascii_lowercase();
    let b = l.as_bytes();
    for word in ["session", "issue"] {
        let mut from = 0;
        while let Some(i) = l[from..].find(word) {
            let at = from + i;
            from = at + word.len();
            if at > 0 && b[at - 1].is_ascii_alphanumeric() {
                continue;
            }
            let mut j = at + word.len();
            if b.get(j) == Some(&b's') {
                j += 1;
            }
            if b.get(j) != Some(&b' ') {
                continue;
            }
            j += 1;
            if b.get(j) == Some(&b'#') {
                j += 1;
            }
            if b.get(j).is_some_and(u8::is_ascii_digit) {
                return true;
            }
        }
    }
    false
}

/// A line's last word and the next line's first, as a reader reads them
/// across the break (a comment's or a list's marks left out of the
/// second): a citation wrapped in two.
fn across(line: &str, next: &str) -> String {
    let last = line.split_whitespace().last().unwrap_or("");
    let first = next
        .trim_start_matches(|c: char| c.is_whitespace() || "/*#->!".contains(c))
        .split_whitespace()
        .next()
        .unwrap_or("");
    format!("{last} {first}")
}

fn files(at: &Path, out: &mut Vec<PathBuf>) {
    if at.is_file() {
        out.push(at.to_path_buf());
        return;
    }
    let Ok(dir) = std::fs::read_dir(at) else {
        return;
    };
    for e in dir.flatten() {
        let p = e.path();
        let name = e.file_name();
        // Build output.
        if name == "target" || name == ".git" {
            continue;
        }
        files(&p, out);
    }
}

#[test]
fn nothing_cites_a_session_or_an_issue_by_number() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut all = Vec::new();
    for r in ROOTS {
        files(&root.join(r), &mut all);
    }
    assert!(all.len() > 200, "the house's files: {}", all.len());
    let mut found = Vec::new();
    for f in &all {
        // Text files only (plots, objects and the like are skipped).
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let next = lines.get(n + 1).copied().unwrap_or("");
            if cites(line) || cites(&across(line, next)) {
                found.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "say what the cited work meant instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn citations_are_told_from_other_words() {
    // Built from their parts, so that this file cites nothing itself.
    let n = 23;
    for yes in [
        format!("as issue {n} asked"),
        format!("(session {n}: the reader)"),
        format!("Sessions {n} and 8"),
        format!("see issue #{n}"),
        format!("ISSUE {n}'s goal"),
    ] {
        assert!(cites(&yes), "{yes}");
    }
    for no in [
        "a BGP session with 3 peers",
        "the issue's report",
        "tissue 5",
        "sessions",
        "issue: 5",
        "the session's 12 runs",
    ] {
        assert!(!cites(no), "{no}");
    }
    // Wrapped across two lines, in prose and in comments.
    let first = format!("{n} a policer");
    assert!(cites(&across("Until session", &first)));
    assert!(cites(&across(
        "/// as the issue",
        &format!("  /// #{n} asked")
    )));
    assert!(!cites(&across("a BGP session", "  // with 3 peers")));
}
