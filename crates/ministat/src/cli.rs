//! `ministat [-Anqs] [-C column] [-c confidence] [-d delimiters] [-w width]
//! [file ...]` with FreeBSD's getopt behaviour, messages and exit codes,
//! plus `--json` (ours) before the files.
use crate::read::{c_strtod_all, read_values, ReadError};
use crate::report::{report, text, Options};
use crate::stats::{confidence_index, Dataset};
use crate::student::CONFIDENCE;
use std::io::{BufRead, BufReader, Write};

use crate::MAX_SETS;

/// Where the output goes and what the terminal is.
pub struct Io<'a> {
    pub stdin: &'a mut dyn BufRead,
    pub stdout: &'a mut dyn Write,
    pub stderr: &'a mut dyn Write,
    /// Plot width when stdout is a terminal (COLUMNS, or its width - 2);
    /// None when it is not (then 74).
    pub tty_width: Option<i64>,
}

/// Runs ministat on `args` (without the program name); returns the exit
/// status: 0, or 2 for every error, as FreeBSD's does.
pub fn run(args: &[String], io: &mut Io<'_>) -> i32 {
    match run_inner(args, io) {
        Ok(()) => 0,
        Err(msg) => {
            let _ = io.stderr.write_all(msg.as_bytes());
            2
        }
    }
}

fn usage(whine: &str) -> String {
    let levels: Vec<String> = CONFIDENCE
        .iter()
        .map(|c| format!("{}%", crate::cfmt::g(*c, 6)))
        .collect();
    format!(
        "{whine}\nUsage: ministat [-C column] [-c confidence] [-d delimiter(s)] [-Anqs] [-w width] [file [file ...]]\n\
         \tconfidence = {{{}}}\n\
         \t-A : print statistics only. suppress the graph.\n\
         \t-C : column number to extract (starts and defaults to 1)\n\
         \t-d : delimiter(s) string, default to \" \\t\"\n\
         \t-n : print summary statistics only, no graph/test\n\
         \t-q : suppress printing summary-statistics headers and data-set names\n\
         \t-s : print avg/median/stddev bars on separate lines\n\
         \t-w : width of graph/test output (default 74 or terminal width)\n",
        levels.join(", ")
    )
}

/// C's strtol(s, &p, 10) and whether p reached the end of s.
fn c_strtol(s: &str) -> (i64, bool) {
    let t = s.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (neg, digits_start) = match t.as_bytes().first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let digits: String = t[digits_start..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    if digits.is_empty() {
        return (0, s.is_empty());
    }
    let rest = &t[digits_start + digits.len()..];
    let v = digits.parse::<i64>().unwrap_or(i64::MAX);
    (if neg { -v } else { v }, rest.is_empty())
}

fn run_inner(args: &[String], io: &mut Io<'_>) -> Result<(), String> {
    let mut o = Options {
        width: io.tty_width.map_or(74, |w| w.max(0) as usize),
        ..Options::default()
    };
    let mut width: i64 = io.tty_width.unwrap_or(74);
    let mut column: i64 = 1;
    let mut delims = String::from(" \t");
    let mut ci: Option<usize> = None;
    let mut json = false;

    // getopt("AC:c:d:snqw:"): options until the first operand or "--".
    let mut k = 0;
    while k < args.len() {
        let a = &args[k];
        if a == "--json" {
            json = true;
            k += 1;
            continue;
        }
        if a == "--" {
            k += 1;
            break;
        }
        if !a.starts_with('-') || a == "-" {
            break;
        }
        let chars: Vec<char> = a[1..].chars().collect();
        let mut ci_idx = 0;
        while ci_idx < chars.len() {
            let c = chars[ci_idx];
            let takes_arg = matches!(c, 'C' | 'c' | 'd' | 'w');
            let optarg = if takes_arg {
                let rest: String = chars[ci_idx + 1..].iter().collect();
                ci_idx = chars.len();
                if !rest.is_empty() {
                    Some(rest)
                } else if k + 1 < args.len() {
                    k += 1;
                    Some(args[k].clone())
                } else {
                    return Err(format!(
                        "ministat: option requires an argument -- {c}\n{}",
                        usage("Unknown option")
                    ));
                }
            } else {
                ci_idx += 1;
                None
            };
            match (c, optarg) {
                ('A', _) => o.no_plot = true,
                ('n', _) => o.stats_only = true,
                ('q', _) => o.quiet = true,
                ('s', _) => o.separate_bars = true,
                ('C', Some(v)) => {
                    let (n, whole) = c_strtol(&v);
                    if !whole {
                        return Err(usage("Invalid column number."));
                    }
                    if n <= 0 {
                        return Err(usage("Column number should be positive."));
                    }
                    column = n;
                }
                ('c', Some(v)) => {
                    let Some(pct) =
                        c_strtod_all(&v).or(if v.is_empty() { Some(0.0) } else { None })
                    else {
                        return Err(usage("Not a floating point number"));
                    };
                    if let Some(i) = confidence_index(pct) {
                        ci = Some(i);
                    }
                    if ci.is_none() {
                        return Err(usage("No support for confidence level"));
                    }
                }
                ('d', Some(v)) => {
                    if v.is_empty() {
                        return Err(usage("Can't use empty delimiter string"));
                    }
                    delims = v;
                }
                ('w', Some(v)) => {
                    let (n, whole) = c_strtol(&v);
                    if !whole {
                        return Err(usage("Invalid width, not a number."));
                    }
                    if n < 0 {
                        return Err(usage("Unable to move beyond left margin."));
                    }
                    width = n;
                }
                (c, _) => {
                    return Err(format!(
                        "ministat: illegal option -- {c}\n{}",
                        usage("Unknown option")
                    ))
                }
            }
        }
        k += 1;
    }
    o.confidence = ci.unwrap_or(2);
    o.width = width.max(0) as usize;
    let files = &args[k..];
    if files.len() > MAX_SETS {
        return Err(usage("Too many datasets."));
    }

    // Open every file before reading any, as FreeBSD does.
    enum Source {
        Stdin,
        File(std::fs::File),
    }
    let mut sources: Vec<(String, Source)> = Vec::new();
    if files.is_empty() {
        sources.push(("<stdin>".into(), Source::Stdin));
    }
    for f in files {
        if f == "-" {
            sources.push((f.clone(), Source::Stdin));
            continue;
        }
        match std::fs::File::open(f) {
            Ok(h) => sources.push((f.clone(), Source::File(h))),
            Err(e) => return Err(format!("ministat: Cannot open {f}: {}\n", strerror(&e))),
        }
    }
    let mut sets = Vec::new();
    for (name, src) in sources {
        let values = match src {
            Source::Stdin => read_values(&mut *io.stdin, column as usize, &delims),
            Source::File(h) => read_values(BufReader::new(h), column as usize, &delims),
        };
        let values = match values {
            Ok(v) => v,
            Err(ReadError::InvalidData { line }) => {
                return Err(format!("ministat: Invalid data on line {line} in {name}\n"))
            }
            Err(ReadError::Io(e)) => return Err(format!("ministat: {name}: {e}\n")),
        };
        if values.len() < 3 {
            return Err(format!(
                "Dataset {name} must contain at least 3 data points\n"
            ));
        }
        sets.push(Dataset::new(&name, &values));
    }
    let out = if json {
        serde_json::to_string_pretty(&report(&sets, o.confidence)).expect("serialise") + "\n"
    } else {
        text(&sets, &o)
    };
    io.stdout
        .write_all(out.as_bytes())
        .map_err(|e| format!("ministat: {e}\n"))
}

/// The C library's message for an I/O error, without Rust's "(os error N)".
fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_args(args: &[&str], stdin: &str) -> (i32, String, String) {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut input = stdin.as_bytes();
        let rc = run(
            &args,
            &mut Io {
                stdin: &mut input,
                stdout: &mut out,
                stderr: &mut err,
                tty_width: None,
            },
        );
        (
            rc,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    // Messages as FreeBSD's usage() and getopt(3) print them.
    #[test]
    fn usage_errors_exit_2_with_freebsd_messages() {
        for (args, first) in [
            (vec!["-c", "97"], "No support for confidence level"),
            (vec!["-c", "9x"], "Not a floating point number"),
            (vec!["-C", "0"], "Column number should be positive."),
            (vec!["-C", "2x"], "Invalid column number."),
            (vec!["-w", "-1"], "Unable to move beyond left margin."),
            (vec!["-w", "x"], "Invalid width, not a number."),
            (vec!["-d", ""], "Can't use empty delimiter string"),
            (vec!["-z"], "ministat: illegal option -- z"),
            (vec!["-w"], "ministat: option requires an argument -- w"),
            (
                vec!["a", "b", "c", "d", "e", "f", "g", "h"],
                "Too many datasets.",
            ),
        ] {
            let (rc, out, err) = run_args(&args, "1\n2\n3\n");
            assert_eq!(rc, 2, "{args:?}");
            assert!(out.is_empty());
            assert_eq!(err.lines().next().unwrap(), first, "{args:?}");
            assert!(err.contains("Usage: ministat [-C column] [-c confidence] [-d delimiter(s)] [-Anqs] [-w width] [file [file ...]]\n"));
            assert!(err.contains("\tconfidence = {80%, 90%, 95%, 98%, 99%, 99.5%}\n"));
        }
    }

    #[test]
    fn stdin_is_read_when_no_file_is_given() {
        let (rc, out, _) = run_args(&["-n"], "1\n2\n3\n");
        assert_eq!(rc, 0);
        assert!(out.starts_with("x <stdin>\n"));
    }

    #[test]
    fn json_has_the_same_numbers() {
        let (rc, out, _) = run_args(&["--json"], "1\n2\n3\n4\n");
        assert_eq!(rc, 0);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["datasets"][0]["median"], 2.5);
        assert_eq!(v["datasets"][0]["n"], 4);
        assert_eq!(v["confidence"], 95.0);
    }

    #[test]
    fn a_later_bad_confidence_keeps_an_earlier_good_one() {
        // FreeBSD never resets its index: -c 99 -c 97 runs at 99%.
        let (rc, _, _) = run_args(&["-c", "99", "-c", "97", "-n"], "1\n2\n3\n");
        assert_eq!(rc, 0);
    }
}
