//! Logs of the long-running commands (`linerate route`, and the router
//! the lab runs in-process), through `tracing`: on a terminal as they always
//! read (`linerate route: attached to eth0, eth1; ...`, warnings marked);
//! under systemd, whose journal takes a line's priority from a `<N>` prefix
//! (sd-daemon(3)), with that prefix and nothing else (the journal stamps
//! the time and the unit). The level is `log_level` in the configuration
//! file, or `--log-level`: error, warn, info (the default) or debug.
use std::fmt;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::reload;
use tracing_subscriber::util::SubscriberInitExt;

/// The levels `log_level` / `--log-level` take.
pub const LEVELS: [&str; 4] = ["error", "warn", "info", "debug"];

pub fn level_of(name: &str) -> Option<LevelFilter> {
    Some(match name {
        "error" => LevelFilter::ERROR,
        "warn" => LevelFilter::WARN,
        "info" => LevelFilter::INFO,
        "debug" => LevelFilter::DEBUG,
        _ => return None,
    })
}

/// The line format: journald's priority prefix, or the command's name.
struct Lines {
    /// "linerate route", "linerate lab".
    command: String,
    journal: bool,
}

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let level = *event.metadata().level();
        if self.journal {
            // sd-daemon(3): <3> err, <4> warning, <6> info, <7> debug.
            let p = match level {
                Level::ERROR => 3,
                Level::WARN => 4,
                Level::INFO => 6,
                _ => 7,
            };
            write!(w, "<{p}>")?;
        } else {
            write!(w, "{}: ", self.command)?;
            match level {
                Level::ERROR => write!(w, "error: ")?,
                Level::WARN => write!(w, "warning: ")?,
                Level::INFO => {}
                _ => write!(w, "debug: ")?,
            }
        }
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

type Handle = reload::Handle<LevelFilter, tracing_subscriber::Registry>;

static HANDLE: std::sync::OnceLock<Handle> = std::sync::OnceLock::new();

/// Whether stderr goes to the journal (systemd sets JOURNAL_STREAM to its
/// device and inode).
pub fn to_journal() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(v) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = v.to_str().and_then(|s| s.split_once(':')) else {
        return false;
    };
    std::fs::metadata("/proc/self/fd/2")
        .is_ok_and(|m| m.dev().to_string() == dev && m.ino().to_string() == ino)
}

/// Installs the logger for `command`, at info until [`set_level`].
pub fn init(command: &str) {
    let (filter, handle) = reload::Layer::new(LevelFilter::INFO);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .event_format(Lines {
            command: command.to_string(),
            journal: to_journal(),
        });
    if tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .try_init()
        .is_ok()
    {
        let _ = HANDLE.set(handle);
    }
}

/// The level from here on.
pub fn set_level(level: LevelFilter) {
    if let Some(h) = HANDLE.get() {
        let _ = h.modify(|l| *l = level);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_as_before_on_a_terminal_and_carry_priorities_to_the_journal() {
        use std::sync::{Arc, Mutex};
        use tracing_subscriber::Layer;
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        for (journal, want) in [
            (
                false,
                "linerate route: attached to eth0\nlinerate route: warning: no tc\n",
            ),
            (true, "<6>attached to eth0\n<4>no tc\n<7>detail\n"),
        ] {
            let buf = Buf::default();
            let out = buf.clone();
            let sub = tracing_subscriber::registry().with(
                tracing_subscriber::fmt::layer()
                    .with_writer(move || out.clone())
                    .event_format(Lines {
                        command: "linerate route".into(),
                        journal,
                    })
                    .with_filter(if journal {
                        LevelFilter::DEBUG
                    } else {
                        LevelFilter::INFO
                    }),
            );
            tracing::subscriber::with_default(sub, || {
                tracing::info!("attached to {}", "eth0");
                tracing::warn!("no tc");
                tracing::debug!("detail");
            });
            assert_eq!(
                String::from_utf8(buf.0.lock().unwrap().clone()).unwrap(),
                want
            );
        }
    }
}
