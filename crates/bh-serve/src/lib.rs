//! `bh-serve`: the checkpoint server.
//!
//! One long-lived process per project holds a [`bh_checkpoint::LiveStore`]
//! (inotify-armed, so a snapshot after a few changed files starts no git
//! process) and answers a small JSON-lines protocol — one request per line,
//! one response line per request — described in `PROTOCOL.md` next to this
//! crate's `Cargo.toml`:
//!
//! - over **stdio**, for a parent that spawns it (the Pi extension), until
//!   stdin closes ([`serve_stdio`]);
//! - over a **per-project Unix socket** in the state directory, for
//!   short-lived callers such as the Claude Code hook ([`Listener`]): the
//!   socket's folder is `0700` and owner-checked, the socket `0600`; only
//!   `ping` and `snapshot` are served there, and only to a peer of the same
//!   uid in the server's own PID and mount namespaces without `no_new_privs`
//!   or seccomp the server lacks (no bh sandbox qualifies); each peer has a
//!   thread and a whole-request deadline; one `flock` per project makes a
//!   second server bow out and lets a stale socket be replaced safely, and
//!   the server exits after an idle period.
//!
//! [`Client`] is the caller's side of the socket; it checks the socket's owner
//! and the server's uid before sending anything.
//!
//! The service ([`Service`]) uses only `bh-checkpoint`'s public API; the one
//! thing it writes besides the store is the project's call journal
//! ([`bh_checkpoint::Journal`]: which checkpoint stood before each tagged
//! call, reused ones included), so that `restore_to_entry` — and every other
//! rewind, through [`bh_checkpoint::Store::checkpoint_at_entry`] — finds the
//! right checkpoint even when a snapshot was debounced into an older one.

// Libraries never print: what they have to say is a value (an error, an
// event, a report) that the CLI shows. A guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod error;
mod framing;
mod peer;
mod service;
mod socket;

pub use error::{Result, ServeError};
pub use service::{Access, Control, PROTOCOL_VERSION, Service};
pub use socket::{Client, Listener, Paths, REQUEST_DEADLINE, guess_project, serve_stdio};
