//! The scenario reference (docs/reference/scenario.md) is the parser's:
//! each section's table names exactly the keys the parser takes there, as
//! its refusal of an unknown key lists them.
use linerate_labrun::scenario::Scenario;

/// Each section of the page (its heading) and the keys its table names.
fn sections(page: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for l in page.lines() {
        if let Some(h) = l.strip_prefix("## ") {
            out.push((h.to_string(), Vec::new()));
        } else if let Some(row) = l.strip_prefix("| `") {
            let key = row.split('`').next().unwrap().to_string();
            out.last_mut().expect("a table under a heading").1.push(key);
        }
    }
    out
}

/// The keys the parser takes where `text` puts an unknown key.
fn accepted(text: &str) -> Vec<String> {
    let Err(e) = Scenario::parse("s", text) else {
        panic!("taken: {text}");
    };
    let e = e.to_string();
    let listed = e
        .split("expected one of")
        .nth(1)
        .unwrap_or_else(|| panic!("{e}"));
    listed
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn every_key_has_its_row_section_by_section() {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/reference/scenario.md"
    ))
    .unwrap();
    let sections = sections(&page);
    // Each section's heading, and a scenario with an unknown key in it.
    let probes = [
        ("Top level", "duts = [\"linux\"]\nzzz = 1\n"),
        ("`[measure]`", "duts = [\"linux\"]\n[measure]\nzzz = 1\n"),
        ("`[lab]`", "duts = [\"linux\"]\n[lab]\nzzz = 1\n"),
        ("`[dut.NAME]`", "duts = [\"x\"]\n[dut.x]\nzzz = 1\n"),
        (
            "`[profile.NAME]`",
            "duts = [\"linux\"]\nprofiles = [\"p\"]\n[profile.p]\nzzz = 1\n",
        ),
        ("`[hosts]`", "duts = [\"linux\"]\n[hosts]\nzzz = 1\n"),
        (
            "`[hosts.gen]` and `[hosts.recv]`",
            "duts = [\"linux\"]\n[hosts.gen]\nzzz = 1\n",
        ),
        (
            "`[hosts.dut]`",
            "duts = [\"linux\"]\n[hosts.dut]\nzzz = 1\n",
        ),
        ("`[ssh]`", "duts = [\"linux\"]\n[ssh]\nzzz = 1\n"),
    ];
    assert_eq!(
        sections.iter().map(|(h, _)| h.as_str()).collect::<Vec<_>>(),
        probes.iter().map(|(h, _)| *h).collect::<Vec<_>>(),
        "the page's sections"
    );
    for ((heading, rows), (_, text)) in sections.iter().zip(probes) {
        let mut keys = accepted(text);
        keys.sort();
        let mut rows = rows.clone();
        rows.sort();
        assert_eq!(
            rows, keys,
            "section {heading}: the rows, and the keys the parser takes"
        );
    }
    // [hosts.recv] takes what [hosts.gen] takes.
    let mut recv = accepted(
        "duts = [\"linux\"]\n[hosts.gen]\nssh = \"local\"\ninterfaces = [\"a\"]\n[hosts.recv]\nzzz = 1\n",
    );
    recv.sort();
    let mut gen = sections[6].1.clone();
    gen.sort();
    assert_eq!(recv, gen, "[hosts.recv]");
}
