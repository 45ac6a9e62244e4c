//! The docs' shape: pages a reader can take in, organised by topic, not
//! by when the work was done. No page of docs/ over 400 lines, a README
//! under 150, and no heading that places its section in the work's
//! history ("again", "before ...", "now"): a heading says what its
//! section is about; how a figure moved lives in git.
use std::path::{Path, PathBuf};

const PAGE_MOST: usize = 400;
const README_MOST: usize = 149;

/// Words that date a heading by the work rather than name its topic.
const DATING: &[&str] = &["again", "before", "earlier", "now", "then", "latest"];

fn pages(at: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(at).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            pages(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

/// The headings of a Markdown page, outside its code blocks.
fn headings(text: &str) -> Vec<&str> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(line.trim_start_matches('#').trim());
        }
    }
    out
}

/// Whether heading `h` dates its section: one of [`DATING`] as a word. A
/// heading that quotes a message (it starts with a quote) is the
/// message's words, not the page's.
fn dated(h: &str) -> bool {
    if h.starts_with('"') {
        return false;
    }
    let lower = h.to_ascii_lowercase();
    lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| DATING.contains(&w))
}

#[test]
fn pages_are_short_and_headed_by_their_topic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut all = Vec::new();
    pages(&root.join("docs"), &mut all);
    assert!(all.len() > 15, "docs pages: {}", all.len());
    let mut wrong = Vec::new();
    for p in &all {
        let text = std::fs::read_to_string(p).unwrap();
        let n = text.lines().count();
        if n > PAGE_MOST {
            wrong.push(format!(
                "{}: {n} lines (at most {PAGE_MOST}: split it by topic)",
                p.display()
            ));
        }
        for h in headings(&text).into_iter().filter(|h| dated(h)) {
            wrong.push(format!("{}: heading {h:?} dates its section", p.display()));
        }
    }
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let n = readme.lines().count();
    if n > README_MOST {
        wrong.push(format!("README.md: {n} lines (at most {README_MOST})"));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn dated_headings_are_told_from_topics() {
    for yes in [
        "Two lab fixes, then a connection stage",
        "1M states now: one line a frame",
        "Measured again",
        "Before the cache: the two designs considered",
    ] {
        assert!(dated(yes), "{yes}");
    }
    for no in [
        "The cache: the two designs considered",
        "\"nf_conntrack_max is now N\"",
        "Nowhere to go",
        "Thence",
        "Connections at 1M states",
    ] {
        assert!(!dated(no), "{no}");
    }
    let text = "# Page\n```\n# not a heading, now\n```\n## Real\n";
    assert_eq!(headings(text), ["Page", "Real"]);
}
