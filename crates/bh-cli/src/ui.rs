//! The one way `bh` writes to its streams (issue 26): every write returns
//! `io::Result`, so a reader that went away (`bh … | head`) is an error
//! value — `EPIPE`, SIGPIPE being ignored — never a panic. A closed stdout is
//! remembered ([`pipe_closed`]); `main` then ends quietly with exit 141, as a
//! shell reports a command killed by SIGPIPE, whatever the command returned.
//! Diagnostics on stderr are best effort: a stderr that cannot be written
//! has no one to tell.
//!
//! Use [`outln!`]/[`out!`] for stdout (`?` turns the error into a quiet
//! `CliError`, exit 141) and [`errln!`] for stderr. Clippy's `print_stdout` and
//! `print_stderr` are denied in the rest of the crate.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static PIPE_CLOSED: AtomicBool = AtomicBool::new(false);

/// Whether a write to stdout met a reader that went away.
pub(crate) fn pipe_closed() -> bool {
    PIPE_CLOSED.load(Ordering::SeqCst)
}

/// Notes a write error: a broken pipe on stdout is remembered.
fn noted(result: io::Result<()>) -> io::Result<()> {
    if let Err(e) = &result
        && e.kind() == io::ErrorKind::BrokenPipe
    {
        PIPE_CLOSED.store(true, Ordering::SeqCst);
    }
    result
}

/// Writes `args` (and a newline when `newline`) to stdout, flushed.
pub(crate) fn write_out(args: fmt::Arguments<'_>, newline: bool) -> io::Result<()> {
    let mut out = io::stdout().lock();
    noted(
        out.write_fmt(args)
            .and_then(|()| {
                if newline {
                    out.write_all(b"\n")
                } else {
                    Ok(())
                }
            })
            .and_then(|()| out.flush()),
    )
}

/// Writes raw bytes to stdout, flushed.
pub(crate) fn write_bytes(bytes: &[u8]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    noted(out.write_all(bytes).and_then(|()| out.flush()))
}

/// Writes `args` (and a newline when `newline`) to stderr; best effort.
pub(crate) fn write_err(args: fmt::Arguments<'_>, newline: bool) {
    let mut err = io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| {
        if newline {
            err.write_all(b"\n")
        } else {
            Ok(())
        }
    });
}

/// `println!` that returns `io::Result<()>`.
macro_rules! outln {
    () => { $crate::ui::write_out(format_args!(""), true) };
    ($($arg:tt)*) => { $crate::ui::write_out(format_args!($($arg)*), true) };
}

/// `print!` that returns `io::Result<()>`.
macro_rules! out {
    ($($arg:tt)*) => { $crate::ui::write_out(format_args!($($arg)*), false) };
}

/// `eprintln!` that never panics (best effort).
macro_rules! errln {
    () => { $crate::ui::write_err(format_args!(""), true) };
    ($($arg:tt)*) => { $crate::ui::write_err(format_args!($($arg)*), true) };
}

pub(crate) use {errln, out, outln};
