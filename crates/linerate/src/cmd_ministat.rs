//! `linerate ministat`: FreeBSD's ministat (crate linerate-ministat).
use crate::cli::MinistatArgs;
use linerate_ministat::cli::{run as ministat, Io};
use std::io::IsTerminal;

/// The plot width FreeBSD's ministat picks on a terminal: $COLUMNS, else
/// the window width minus 2; None when stdout is not a terminal.
fn tty_width() -> Option<i64> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    if let Some(c) = std::env::var("COLUMNS").ok().filter(|c| !c.is_empty()) {
        // atoi(): leading digits, 0 if none.
        let digits: String = c
            .trim_start()
            .chars()
            .take_while(|ch| ch.is_ascii_digit() || *ch == '-')
            .collect();
        return Some(digits.parse().unwrap_or(0));
    }
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ fills a winsize we own.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } != -1;
    (ok && ws.ws_col > 0)
        .then(|| ws.ws_col as i64 - 2)
        .or(Some(74))
}

pub fn run(a: MinistatArgs) -> i32 {
    let stdin = std::io::stdin();
    let mut stdin = stdin.lock();
    let mut stdout = std::io::stdout();
    let mut stderr = std::io::stderr();
    ministat(
        &a.args,
        &mut Io {
            stdin: &mut stdin,
            stdout: &mut stdout,
            stderr: &mut stderr,
            tty_width: tty_width(),
        },
    )
}
