//! The rules of `nft -a list ruleset`, each with what linerate's fast path
//! counted for it beside what the kernel's `counter` holds: once linerate
//! judges a flow, its packets no longer reach the kernel's chains, so the
//! kernel's counter holds only what the kernel itself judged (a flow's
//! first packets, what the fast path hands over). `linerate firewall`
//! shows both and their sum, which is what the kernel alone would have
//! counted.
use linerate_dataplane::record::RuleCount;

/// One rule of the listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// "inet filter".
    pub table: String,
    pub table_handle: u64,
    pub chain: String,
    pub handle: u64,
    /// As nft prints it, without the handle comment.
    pub text: String,
    /// The kernel's `counter` (packets, bytes), summed over the rule's
    /// counters; None: the rule has none.
    pub kernel: Option<(u64, u64)>,
    /// What the fast path counted (both IP families of an inet table).
    pub fast_path: (u64, u64),
}

/// The rules of `listing` (`nft -a list ruleset`), with `counts` (the
/// running router's record) added to each.
pub fn rules(listing: &str, counts: &[RuleCount]) -> Vec<Rule> {
    let mut out = Vec::new();
    let (mut table, mut table_handle, mut chain) = (String::new(), 0, String::new());
    for line in listing.lines() {
        let l = line.trim();
        let (body, handle) = match l.rsplit_once(" # handle ") {
            Some((b, h)) => (b.trim(), h.trim().parse::<u64>().ok()),
            None => (l, None),
        };
        if let Some(t) = body.strip_prefix("table ") {
            table = t.trim_end_matches('{').trim().to_string();
            table_handle = handle.unwrap_or(0);
        } else if let Some(c) = body.strip_prefix("chain ") {
            chain = c.trim_end_matches('{').trim().to_string();
        } else if let Some(handle) = handle {
            // Sets, maps and flowtables carry handles too, one level up.
            if line.starts_with("\t\t") && !chain.is_empty() {
                let fast = counts
                    .iter()
                    .filter(|c| {
                        c.table == table
                            && c.table_handle == table_handle
                            && c.chain == chain
                            && c.handle == handle
                    })
                    .fold((0, 0), |(p, b), c| (p + c.packets, b + c.bytes));
                out.push(Rule {
                    table: table.clone(),
                    table_handle,
                    chain: chain.clone(),
                    handle,
                    text: body.to_string(),
                    kernel: kernel_counter(body),
                    fast_path: fast,
                });
            }
        }
        if body == "}" && line.starts_with("\t}") {
            chain.clear();
        }
    }
    out
}

/// The sum of the `counter packets P bytes B` statements of a rule.
fn kernel_counter(text: &str) -> Option<(u64, u64)> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut sum = None;
    for w in words.windows(5) {
        if w[0] == "counter" && w[1] == "packets" && w[3] == "bytes" {
            if let (Ok(p), Ok(b)) = (w[2].parse::<u64>(), w[4].parse::<u64>()) {
                let (sp, sb) = sum.unwrap_or((0, 0));
                sum = Some((sp + p, sb + b));
            }
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    // `nft -a list ruleset` of nft 1.0.6, tabs as it prints them.
    const LISTING: &str = "table inet f { # handle 7\n\tset allowed { # handle 2\n\t\ttype ipv4_addr\n\t\telements = { 10.0.0.1 }\n\t}\n\n\tchain forward { # handle 1\n\t\ttype filter hook forward priority filter; policy accept;\n\t\tudp dport 9 counter packets 64 bytes 2944 drop # handle 3\n\t\tip saddr @allowed accept # handle 4\n\t}\n}\ntable ip g { # handle 8\n\tchain post { # handle 1\n\t\ttype filter hook postrouting priority filter; policy accept;\n\t\tcounter packets 1 bytes 60 counter packets 2 bytes 120 # handle 2\n\t}\n}\n";

    fn count(
        ipv6: bool,
        table: &str,
        table_handle: u64,
        chain: &str,
        handle: u64,
        packets: u64,
    ) -> RuleCount {
        RuleCount {
            ipv6,
            table: table.into(),
            table_handle,
            chain: chain.into(),
            handle,
            packets,
            bytes: packets * 46,
        }
    }

    #[test]
    fn rules_carry_the_kernels_and_the_fast_paths_counts() {
        let counts = [
            count(false, "inet f", 7, "forward", 3, 1000),
            count(true, "inet f", 7, "forward", 3, 10),
            // An older table of the same name: another table's rule.
            count(false, "inet f", 6, "forward", 4, 5),
        ];
        let r = rules(LISTING, &counts);
        assert_eq!(r.len(), 3, "{r:#?}");
        assert_eq!(
            r[0],
            Rule {
                table: "inet f".into(),
                table_handle: 7,
                chain: "forward".into(),
                handle: 3,
                text: "udp dport 9 counter packets 64 bytes 2944 drop".into(),
                kernel: Some((64, 2944)),
                fast_path: (1010, 1010 * 46),
            }
        );
        assert_eq!(
            (r[1].handle, r[1].kernel, r[1].fast_path),
            (4, None, (0, 0))
        );
        assert_eq!(
            (r[2].table.as_str(), r[2].chain.as_str(), r[2].kernel),
            ("ip g", "post", Some((3, 180)))
        );
    }
}
