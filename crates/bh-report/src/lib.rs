//! Self-contained HTML reports: one file, inline CSS and a few lines of
//! inline script, no network (a Content-Security-Policy forbids every fetch
//! but inline images and admits only the report's own style and script, by
//! SHA-256), so a report can be attached to a pull request and opened
//! anywhere. [`reveal`] is the one escaping of what a person is asked to
//! trust (reports, and the CLI's plan and prompt views): invisible and
//! control characters shown as `\u{…}`.
//!
//! * [`session_html`]: a Pi session — its tree, every message, tool calls with
//!   their diffs, checkpoint markers.
//! * [`exec_html`]: one executor run — plan digests, model, prompt, the
//!   conversation the run appended, diffstat and patch, trailers.
//!
//! Every string that came from a session, a tool or a file is HTML-escaped;
//! nothing in the input can add markup or script.

// Libraries never print: what they have to say is a value (an error, an
// event, a report) that the CLI shows. A guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod entry;
mod exec;
mod html;
mod session;
mod text;
mod visible;

pub use entry::CallCheckpoint;
pub use exec::{DiffStatRow, ExecReport, exec_html};
pub use html::escape;
pub use session::{SessionReportOptions, session_html};
pub use visible::{hidden, hidden_count, reveal};
