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

/// The rows of each table of docs/reference/results-json.md, by heading.
fn results_rows() -> Vec<(String, Vec<String>)> {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/reference/results-json.md"
    ))
    .unwrap();
    sections(&page)
}

/// The keys of the objects `v` holds (an object, or an array of them):
/// their union.
fn keys_of(v: &serde_json::Value) -> Vec<String> {
    let objects: Vec<&serde_json::Map<String, serde_json::Value>> = match v {
        serde_json::Value::Object(o) => vec![o],
        serde_json::Value::Array(a) => a.iter().filter_map(|x| x.as_object()).collect(),
        _ => panic!("not an object: {v}"),
    };
    assert!(!objects.is_empty(), "no object to read keys from: {v}");
    let mut keys: Vec<String> = objects.iter().flat_map(|o| o.keys().cloned()).collect();
    keys.sort();
    keys.dedup();
    keys
}

/// results.json is the page's: a run of every kind of record the file
/// holds (a churn profile beside a plain one, a linerate DUT's counters,
/// the machine's limit), and each table names exactly the keys there.
#[test]
fn results_json_has_its_rows() {
    use linerate_labrun::report::{Results, RunRecord};
    let sc = Scenario::parse(
        "s",
        "duts = [\"linux\", \"linerate\", \"xdp-redirect\"]\nprofiles = [\"ipv4-60\", \"c\"]\n\
         [profile.c]\nfamily = \"ipv4\"\nlen = \"60\"\nproto = \"tcp\"\nchurn = 4\n",
    )
    .unwrap();
    let mut r = Results::new(&sc, 1);
    for dut in ["linux", "linerate", "xdp-redirect"] {
        for profile in ["ipv4-60", "c"] {
            for repeat in 1..=3 {
                r.add(RunRecord {
                    dut: dut.into(),
                    profile: profile.into(),
                    repeat,
                    value_pps: 1e6 * repeat as f64,
                    fast_path: (dut == "linerate")
                        .then(|| [("forwarded".to_string(), 10)].into_iter().collect()),
                    ..Default::default()
                });
            }
        }
    }
    r.finish();
    let v = serde_json::to_value(&r).unwrap();
    let rows = results_rows();
    let table = |h: &str| -> Vec<String> {
        let mut keys = rows
            .iter()
            .find(|(heading, _)| heading == h)
            .unwrap_or_else(|| panic!("no section {h}"))
            .1
            .clone();
        keys.sort();
        keys
    };
    assert_eq!(
        rows.iter().map(|(h, _)| h.as_str()).collect::<Vec<_>>(),
        [
            "Top level",
            "`machine`",
            "`runs[]`",
            "`results[]`",
            "`comparisons[]`",
            "`against_limit[]`"
        ],
        "the page's sections"
    );
    assert_eq!(table("Top level"), keys_of(&v), "the top level");
    for (h, key) in [
        ("`machine`", "machine"),
        ("`runs[]`", "runs"),
        ("`results[]`", "results"),
        ("`comparisons[]`", "comparisons"),
        ("`against_limit[]`", "against_limit"),
    ] {
        assert_eq!(table(h), keys_of(&v[key]), "{key}");
    }
}
