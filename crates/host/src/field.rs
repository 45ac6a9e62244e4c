//! Why a library refuses an option: the field, as the library's options
//! name it, and the reason. Callers say the field in their own words (the
//! command line's `--dut-cpu`, a scenario's `lab.dut_cpu`).

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub field: &'static str,
    pub reason: String,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

impl std::error::Error for FieldError {}

/// A refusal in a text file: "SOURCE:LINE: FIELD: WHY", the line of byte
/// `span.start` of `text` (no line for an empty span at 0: a field the file
/// does not have).
pub fn at(
    source: &str,
    text: &str,
    span: std::ops::Range<usize>,
    field: &str,
    why: impl std::fmt::Display,
) -> anyhow::Error {
    if span.start == 0 && span.end == 0 {
        return anyhow::anyhow!("{source}: {field}: {why}");
    }
    anyhow::anyhow!("{source}:{}: {field}: {why}", line_of(text, span.start))
}

/// The line (from 1) byte `offset` of `text` is on.
pub fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_line() {
        let text = "a = 1\nb = 2\n";
        assert_eq!(
            at("f.toml", text, 6..11, "b", "bad").to_string(),
            "f.toml:2: b: bad"
        );
        assert_eq!(
            at("f.toml", text, 0..0, "c", "missing").to_string(),
            "f.toml: c: missing"
        );
        assert_eq!(line_of(text, 0), 1);
    }
}
