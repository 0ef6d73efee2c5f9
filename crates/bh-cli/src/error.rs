//! The one error type of the CLI and the exit-code table.

use crate::ui::{errln, outln};
use bh_protocol::prefix::PrefixFault;
use std::fmt;

/// Outcome classes, each with its own exit code (see ARCHITECTURE.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Unexpected failure: I/O, git failing where it should not.
    Internal,
    /// Bad command line or unreadable input format given by the user.
    Usage,
    /// A precondition refused the operation (unsafe store, overlap, conflict, path outside).
    Refused,
    /// A named thing does not exist (checkpoint id, session entry, file).
    NotFound,
    /// Input changed since it was recorded (tampered plan, moved ref, digest mismatch).
    Tampered,
    /// Input was read but rejected by validation (e.g. a malformed session file).
    Invalid,
    /// A hard limit stopped the work.
    Limit,
    /// Interrupted by a signal or cancellation.
    Interrupted,
    /// The worker (agent or command) failed.
    WorkerFailed,
    /// An id prefix names more than one thing (the message lists them).
    Ambiguous,
}

/// The executor's own exit codes, one per re-check of a plan (all `tampered`).
pub mod exec_code {
    pub const PLAN_TAMPERED: u8 = 20;
    pub const BASE_MOVED: u8 = 21;
    pub const SESSION_CHANGED: u8 = 22;
    pub const SESSION_ID_CHANGED: u8 = 23;
    pub const ENTRY_CHANGED: u8 = 24;
    pub const REF_EXISTS: u8 = 25;
    pub const PLAN_NOT_OURS: u8 = 26;
    pub const PLAN_INCONSISTENT: u8 = 27;

    /// Each code with what it means, for `--help` and the docs.
    pub const ALL: [(u8, &str); 8] = [
        (
            PLAN_TAMPERED,
            "the plan file was modified after it was written",
        ),
        (
            BASE_MOVED,
            "the base commit or its tree no longer resolve as recorded",
        ),
        (SESSION_CHANGED, "the session file's digest changed"),
        (
            SESSION_ID_CHANGED,
            "the session file holds another session id",
        ),
        (ENTRY_CHANGED, "the entry or its path to the root changed"),
        (REF_EXISTS, "the output ref already exists"),
        (
            PLAN_NOT_OURS,
            "the plan's MAC fails: not made by this state directory, or edited",
        ),
        (
            PLAN_INCONSISTENT,
            "a field that steers the run fails its re-check (output ref, tools, limits, prompt digest, ids, repository identity)",
        ),
    ];

    /// `exec run --plans … --index I` and `exec batch`: an index out of range,
    /// a ref taken, a bad manifest; 75 is the one code worth retrying.
    pub const INDEX_OUT_OF_RANGE: u8 = 28;
    pub const REF_TAKEN: u8 = 29;
    pub const MANIFEST_INVALID: u8 = 30;
    pub const TEMPFAIL: u8 = bh_exec::EXIT_TEMPFAIL;

    /// The batch codes with what they mean, for `--help` and the docs.
    pub const BATCH: [(u8, &str); 4] = [
        (
            INDEX_OUT_OF_RANGE,
            "permanent: --index names no plan of the manifest",
        ),
        (
            REF_TAKEN,
            "permanent: the output ref (here or on the --publish remote) holds a commit that is not this plan's result",
        ),
        (
            MANIFEST_INVALID,
            "permanent: the manifest (directory or file) cannot be read",
        ),
        (
            TEMPFAIL,
            "transient (EX_TEMPFAIL), retry later: provider 5xx/408/409/429, network, SIGTERM (preemption), a failed push",
        ),
    ];
}

/// The exit code of a command whose stdout reader went away (`bh … | head`).
pub const EXIT_PIPE_CLOSED: u8 = 141;

impl ErrorKind {
    /// Every kind, in exit-code order.
    pub const ALL: [ErrorKind; 10] = [
        ErrorKind::Internal,
        ErrorKind::Usage,
        ErrorKind::Refused,
        ErrorKind::NotFound,
        ErrorKind::Tampered,
        ErrorKind::Invalid,
        ErrorKind::Limit,
        ErrorKind::Interrupted,
        ErrorKind::WorkerFailed,
        ErrorKind::Ambiguous,
    ];

    /// What the exit code means, for `--help` (the table in ARCHITECTURE.md).
    pub fn meaning(self) -> &'static str {
        match self {
            ErrorKind::Internal => "unexpected failure (I/O, git failing where it should not)",
            ErrorKind::Usage => "bad command line or unusable input format",
            ErrorKind::Refused => {
                "a precondition refused the operation (unsafe store, path outside the project, conflict)"
            }
            ErrorKind::NotFound => {
                "a named thing does not exist (checkpoint, entry, execution, task, session, file)"
            }
            ErrorKind::Tampered => {
                "input changed since it was recorded (digest mismatch, moved ref)"
            }
            ErrorKind::Invalid => "input read but rejected by validation (e.g. a broken session)",
            ErrorKind::Limit => "a hard limit stopped the work",
            ErrorKind::Interrupted => "interrupted by a signal or cancellation",
            ErrorKind::WorkerFailed => "the worker (model, agent or command) failed",
            ErrorKind::Ambiguous => "an id prefix names several things (the message lists them)",
        }
    }

    /// The kind of an id that names no single thing — one for each fault,
    /// whatever the thing (checkpoint, entry, execution, task).
    pub fn of_prefix(fault: PrefixFault) -> ErrorKind {
        match fault {
            PrefixFault::NotHex | PrefixFault::TooShort => ErrorKind::Usage,
            PrefixFault::NotFound => ErrorKind::NotFound,
            PrefixFault::Ambiguous => ErrorKind::Ambiguous,
        }
    }

    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::Internal => 1,
            ErrorKind::Usage => 2,
            ErrorKind::Refused => 3,
            ErrorKind::NotFound => 4,
            ErrorKind::Tampered => 5,
            ErrorKind::Invalid => 6,
            ErrorKind::Limit => 7,
            ErrorKind::Interrupted => 8,
            ErrorKind::WorkerFailed => 9,
            ErrorKind::Ambiguous => 10,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Internal => "internal",
            ErrorKind::Usage => "usage",
            ErrorKind::Refused => "refused",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Tampered => "tampered",
            ErrorKind::Invalid => "invalid",
            ErrorKind::Limit => "limit",
            ErrorKind::Interrupted => "interrupted",
            ErrorKind::WorkerFailed => "worker_failed",
            ErrorKind::Ambiguous => "ambiguous",
        }
    }
}

/// The `Exit codes:` section every command's `--help` ends with, generated
/// from [`ErrorKind::ALL`] (plus the executor's codes when `executor`).
pub fn exit_codes_help(executor: bool) -> String {
    let mut t = String::from("Exit codes:");
    for (code, meaning) in exit_code_rows(executor) {
        t.push_str(&format!("\n  {code:>3}  {meaning}"));
    }
    t
}

/// Every exit code with its meaning, in order: `--help`'s table and the
/// manual page's EXIT STATUS section.
pub fn exit_code_rows(executor: bool) -> Vec<(u8, String)> {
    let mut rows = vec![(0, "success".to_owned())];
    for kind in ErrorKind::ALL {
        rows.push((
            kind.exit_code(),
            format!("{}: {}", kind.as_str(), kind.meaning()),
        ));
    }
    if executor {
        for (code, meaning) in exec_code::ALL {
            rows.push((code, format!("tampered: {meaning}")));
        }
        for (code, meaning) in exec_code::BATCH {
            rows.push((code, meaning.to_owned()));
        }
    }
    rows.push((
        EXIT_PIPE_CLOSED,
        "stdout's reader went away (`bh … | head`), quietly".to_owned(),
    ));
    rows
}

/// The scripted-model file format (`--script FILE`, `--model scripted/FILE`),
/// shown by `bh agent --help` and `bh exec plan --help`; README.md says the same.
pub const SCRIPT_FORMAT_HELP: &str = "\
Scripted model file (--script FILE, --model scripted/FILE):
  JSONL, one assistant TURN per line (blank lines and lines starting with # or //
  are skipped), or a JSON array [TURN, ...], or {\"turns\": [TURN, ...]}. Each model
  call plays the next turn, whatever was asked; past the last one the call fails.
  A TURN is an object (unknown keys are refused):
    text          a text block
    thinking      a thinking block (before the text)
    toolCalls     [{\"name\": TOOL, \"arguments\": {...}, \"id\"?: ID}] (after the text)
    content       Pi content blocks, used verbatim instead of the three above
    usage         {\"input\", \"output\", \"cacheRead\", \"cacheWrite\"} token counts
    stopReason    stop | length | toolUse | error | aborted (default: toolUse with
                  tool calls, else stop); errorMessage with error
    delayMs, chunkChars, timestamp   pacing and byte-stable output for tests
  Example:
    {\"text\": \"I'll create it.\", \"toolCalls\": [{\"name\": \"write\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"hi\\n\"}}]}
    {\"text\": \"Created a.txt.\", \"usage\": {\"input\": 120, \"output\": 8}}";

/// An error the CLI reports to a person (stderr) or a machine (`--json`).
#[derive(Debug)]
pub struct CliError {
    pub kind: ErrorKind,
    pub message: String,
    /// Under `--json`, a document to print with the `error` object added to
    /// it (e.g. a validation report), instead of the bare error.
    pub details: Option<serde_json::Value>,
    /// A more specific exit code than the kind's (the executor's re-checks).
    pub exit_code: Option<u8>,
    /// Stdout already carried a JSON stream (`bh agent --json`): the error
    /// goes to stderr only, so the stream stays valid.
    pub after_stream: bool,
    /// What caused it, outermost first: the library error's sources that
    /// the message does not already say (printed as `caused by:` lines;
    /// `causes` under `--json`).
    pub causes: Vec<String>,
    /// Nothing to say: stdout's reader went away (`CliError::pipe_closed`).
    pub quiet: bool,
}

impl CliError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        CliError {
            kind,
            message: message.into(),
            details: None,
            exit_code: None,
            after_stream: false,
            causes: Vec::new(),
            quiet: false,
        }
    }

    /// `err` as a `kind` failure: its text, and each error in its source
    /// chain whose text the message (or an outer cause) does not already
    /// hold.
    pub fn caused(kind: ErrorKind, err: &dyn std::error::Error) -> Self {
        let mut e = CliError::new(kind, err.to_string());
        let mut source = err.source();
        while let Some(cause) = source {
            let text = cause.to_string();
            let said = e.message.contains(&text) || e.causes.iter().any(|c| c.contains(&text));
            if !said && !text.is_empty() {
                e.causes.push(text);
            }
            source = cause.source();
        }
        e
    }

    /// A quiet failure: stdout's reader went away (exit 141, nothing said).
    pub fn pipe_closed() -> Self {
        let mut e = CliError::new(ErrorKind::Internal, "stdout's reader went away");
        e.exit_code = Some(EXIT_PIPE_CLOSED);
        e.quiet = true;
        e
    }

    /// Overrides the exit code of the kind.
    pub fn with_exit_code(mut self, code: u8) -> Self {
        self.exit_code = Some(code);
        self
    }

    /// The process exit code for this error.
    pub fn code(&self) -> u8 {
        self.exit_code.unwrap_or(self.kind.exit_code())
    }

    /// Attaches the JSON document `--json` prints for this failure.
    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn internal(message: impl fmt::Display) -> Self {
        CliError::new(ErrorKind::Internal, message.to_string())
    }

    pub fn usage(message: impl fmt::Display) -> Self {
        CliError::new(ErrorKind::Usage, message.to_string())
    }

    /// Marks an error that ends a JSON stream (see [`CliError::after_stream`]).
    pub fn after_stream(mut self) -> Self {
        self.after_stream = true;
        self
    }

    pub fn report(&self, json: bool) {
        if self.quiet {
            return;
        }
        if json && !self.after_stream {
            let mut error =
                serde_json::json!({ "kind": self.kind.as_str(), "message": self.message });
            if !self.causes.is_empty() {
                error["causes"] = serde_json::json!(self.causes);
            }
            let doc = match &self.details {
                Some(serde_json::Value::Object(map)) => {
                    let mut map = map.clone();
                    map.insert("error".into(), error);
                    serde_json::Value::Object(map)
                }
                _ => serde_json::json!({ "error": error }),
            };
            match serde_json::to_string_pretty(&doc) {
                // Nothing to do if stdout is gone too (noted for the exit code).
                Ok(text) => drop(outln!("{text}")),
                Err(_) => drop(outln!("{doc}")),
            }
        } else {
            let prefix = crate::display::paint(
                crate::display::color_stderr(),
                crate::display::style::BOLD_RED,
                "bh: error:",
            );
            errln!("{prefix} {}", self.message);
            for cause in &self.causes {
                errln!("  caused by: {cause}");
            }
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<std::io::Error> for CliError {
    /// A write that met a closed stdout is the quiet exit 141; any other
    /// I/O error is internal.
    fn from(err: std::io::Error) -> Self {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            return CliError::pipe_closed();
        }
        CliError::internal(err)
    }
}

/// Whether stdout is a pipe whose reader has gone (`bh … | head` after
/// `head` exited): such a failure ends the command quietly.
pub fn stdout_reader_gone() -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let stdout = std::io::stdout();
    let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::POLLOUT)];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
        && fds[0]
            .revents()
            .is_some_and(|r| r.contains(PollFlags::POLLERR))
}

/// Print a JSON document on stdout (the only thing `--json` mode prints there).
pub fn print_json(value: &serde_json::Value) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value).map_err(CliError::internal)?;
    crate::ui::outln!("{text}")?;
    Ok(())
}
