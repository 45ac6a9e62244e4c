//! The counter reasons' reference (docs/reference/counters.md) is the
//! program's: one row for each reason of `enum reason` in
//! bpf/include/abi/router.h, in its order, and none that the enum lacks;
//! the control plane's names (`REASONS`) are the same.
use linerate_dataplane::layout::REASONS;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The reasons of the C enum, `R_PASS_TTL` as `pass_ttl`, up to `R_MAX`.
fn enum_reasons(header: &str) -> Vec<String> {
    let body = header
        .split("enum reason {")
        .nth(1)
        .expect("router.h has enum reason")
        .split("R_MAX")
        .next()
        .expect("enum reason ends with R_MAX");
    body.lines()
        .map(|l| l.trim())
        .filter_map(|l| l.strip_prefix("R_"))
        .map(|l| {
            let name: String = l
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            name.to_ascii_lowercase()
        })
        .collect()
}

/// The reasons the table's rows name (the first cell, in backquotes).
fn table_reasons(page: &str) -> Vec<String> {
    page.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|l| l.split('`').next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn every_reason_has_its_row_and_every_row_its_reason() {
    let from_c = enum_reasons(&read("bpf/include/abi/router.h"));
    assert_eq!(from_c.len(), REASONS.len(), "{from_c:?}");
    assert_eq!(from_c, REASONS.to_vec(), "the enum and REASONS differ");
    let rows = table_reasons(&read("docs/reference/counters.md"));
    let missing: Vec<_> = from_c.iter().filter(|r| !rows.contains(r)).collect();
    let unknown: Vec<_> = rows.iter().filter(|r| !from_c.contains(r)).collect();
    assert!(missing.is_empty(), "reasons without a row: {missing:?}");
    assert!(unknown.is_empty(), "rows naming no reason: {unknown:?}");
    assert_eq!(rows, from_c, "the rows are not in the enum's order");
}

#[test]
fn the_parsers_read_what_they_should() {
    let header =
        "enum reason {\n\tR_FORWARDED = 0,\n\tR_PASS_TTL,  /* x */\n\t/* R_NOT */\n\tR_MAX\n};";
    assert_eq!(enum_reasons(header), ["forwarded", "pass_ttl"]);
    let page = "| reason | x |\n|---|---|\n| `forwarded` | y |\nprose `pass_ttl`\n";
    assert_eq!(table_reasons(page), ["forwarded"]);
}
