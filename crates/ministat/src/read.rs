//! Reading a data set as ministat does: one value per line from a column
//! (strtok over the delimiter characters), `#` starting a comment field,
//! trailing white space ignored, lines without that column skipped.
use std::io::BufRead;

#[derive(Debug, PartialEq, Eq)]
pub enum ReadError {
    /// A field that is not a number: ministat's "Invalid data on line N in NAME".
    InvalidData {
        line: usize,
    },
    Io(String),
}

/// C's isspace() in the C locale.
fn c_isspace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r')
}

/// C's strtod() over a whole field: Some(value) if the field is a number
/// and nothing else (leading white space allowed).
pub fn c_strtod_all(field: &str) -> Option<f64> {
    let t = field.trim_start_matches(c_isspace);
    if t.is_empty() {
        return None;
    }
    if let Ok(v) = t.parse::<f64>() {
        return Some(v);
    }
    // Hexadecimal integers ("0x1f"), which strtod also reads.
    let (neg, u) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let hex = u.strip_prefix("0x").or_else(|| u.strip_prefix("0X"))?;
    let v = u64::from_str_radix(hex, 16).ok()? as f64;
    Some(if neg { -v } else { v })
}

/// The values of `column` (1-based) of every line of `input`.
pub fn read_values(
    input: impl BufRead,
    column: usize,
    delims: &str,
) -> Result<Vec<f64>, ReadError> {
    let mut values = Vec::new();
    for (idx, line) in input.split(b'\n').enumerate() {
        let raw = line.map_err(|e| ReadError::Io(e.to_string()))?;
        let text = String::from_utf8_lossy(&raw);
        let text = text.trim_end_matches(c_isspace);
        let mut field = None;
        for (i, t) in text
            .split(|c| delims.contains(c))
            .filter(|t| !t.is_empty())
            .enumerate()
        {
            if t.starts_with('#') {
                break;
            }
            if i + 1 == column {
                field = Some(t);
                break;
            }
        }
        let Some(t) = field else { continue };
        match c_strtod_all(t) {
            Some(v) => values.push(v),
            None => return Err(ReadError::InvalidData { line: idx + 1 }),
        }
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(s: &str, col: usize, d: &str) -> Result<Vec<f64>, ReadError> {
        read_values(s.as_bytes(), col, d)
    }

    #[test]
    fn columns_comments_and_blank_lines() {
        assert_eq!(
            read("1\n2\n\n# note\n3  \n", 1, " \t").unwrap(),
            vec![1.0, 2.0, 3.0]
        );
        assert_eq!(
            read("a 1 x\nb 2 # c\nc 3\n", 2, " \t").unwrap(),
            vec![1.0, 2.0, 3.0]
        );
        // A comment before the column, or too few fields: the line is skipped.
        assert_eq!(read("a #1\nb\nc 3\n", 2, " \t").unwrap(), vec![3.0]);
        assert_eq!(read("1,2\n3,,4\n", 2, ",").unwrap(), vec![2.0, 4.0]);
    }

    #[test]
    fn invalid_data_names_the_line() {
        assert_eq!(
            read("1\n2\nthree\n", 1, " \t"),
            Err(ReadError::InvalidData { line: 3 })
        );
        assert_eq!(
            read("1\n2x\n", 1, " \t"),
            Err(ReadError::InvalidData { line: 2 })
        );
    }

    #[test]
    fn strtod_forms() {
        assert_eq!(c_strtod_all(" 1.5e3"), Some(1500.0));
        assert_eq!(c_strtod_all("0x10"), Some(16.0));
        assert_eq!(c_strtod_all("-.5"), Some(-0.5));
        assert!(c_strtod_all("inf").unwrap().is_infinite());
        assert_eq!(c_strtod_all("1,5"), None);
        assert_eq!(c_strtod_all(" "), None);
    }
}
