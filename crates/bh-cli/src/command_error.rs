//! One table from every library error to the CLI's kinds and exit codes
//! (issue 26): each library error has exactly one mapping, here, used by
//! every command (the `From` impls make `?` pick it). Errors keep their
//! sources: [`CliError::caused`] records the chain, and `bh: error:` prints
//! each cause the message does not already say on a `caused by:` line.

use bh_checkpoint::{CheckpointError, ErrorClass};
use bh_exec::{BatchError, ExecError, RunResult, RunState, SettleError, StopReason, Verdict};
use bh_handoff::HandoffError;
use bh_runtime::{RewindError, RuntimeError};
use bh_serve::ServeError;
use bh_session::SessionError;
use bh_task::TaskError;
use bh_task::run::PreflightError;
use bh_worktree::WorktreeError;

use crate::error::{CliError, ErrorKind, exec_code};

/// A Pi session file that cannot be read, parsed or written.
pub(crate) fn session_error(err: SessionError) -> CliError {
    let kind = match &err {
        SessionError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            ErrorKind::NotFound
        }
        SessionError::Io { .. } | SessionError::Encode { .. } | SessionError::Serialize { .. } => {
            ErrorKind::Internal
        }
        SessionError::Exists { .. } => ErrorKind::Refused,
        SessionError::EntryNotFound { .. } => ErrorKind::NotFound,
        SessionError::NotASession { .. } | SessionError::Invalid { .. } => ErrorKind::Invalid,
        SessionError::Argument(_) => ErrorKind::Usage,
    };
    CliError::caused(kind, &err)
}

/// The exit-code kind of each runtime failure.
pub(crate) fn runtime_error(err: RuntimeError) -> CliError {
    let kind = match err {
        RuntimeError::Session(s) => return session_error(*s),
        RuntimeError::Worktree(w) => return worktree_error(*w),
        RuntimeError::Handoff(h) => return handoff_error(*h),
        RuntimeError::NoAgentDir { .. } => {
            return CliError::usage("cannot find Pi's agent dir: set PI_CODING_AGENT_DIR or HOME");
        }
        RuntimeError::Dir { .. } | RuntimeError::NoSuchSession { .. } => ErrorKind::NotFound,
        RuntimeError::NotADirectory { .. } | RuntimeError::NotUtf8 { .. } => ErrorKind::Usage,
        RuntimeError::AmbiguousSession { .. } => ErrorKind::Ambiguous,
        RuntimeError::CwdMismatch { .. } | RuntimeError::Tools { .. } => ErrorKind::Refused,
        RuntimeError::Agent { .. } | RuntimeError::Task(_) => ErrorKind::Internal,
    };
    CliError::caused(kind, &err)
}

/// A checkpoint store's failure, by its class (plus what to do about an
/// overlapping state folder).
pub(crate) fn checkpoint_error(err: CheckpointError) -> CliError {
    let kind = match err.class() {
        ErrorClass::Refused => ErrorKind::Refused,
        ErrorClass::NotFound => ErrorKind::NotFound,
        ErrorClass::Ambiguous => ErrorKind::Ambiguous,
        ErrorClass::Usage => ErrorKind::Usage,
        ErrorClass::Internal => ErrorKind::Internal,
    };
    let mut e = CliError::caused(kind, &err);
    // Typically bh run in $HOME or above the state folder: say what to do.
    if let CheckpointError::Overlap { project, .. } = &err {
        e.message.push_str(&format!(
            "; run bh inside the project (a Git repository or a folder of its own), or pass --state-dir DIR (or set BH_STATE_DIR) to a folder outside {}",
            project.display()
        ));
    }
    e
}

/// The exit-code kind of each rewind failure.
pub(crate) fn rewind_error(e: RewindError) -> CliError {
    let kind = match e {
        RewindError::Store { source, project } => {
            let inner = checkpoint_error(*source);
            return CliError::new(
                inner.kind,
                format!("checkpoints of {}: {}", project.display(), inner.message),
            );
        }
        RewindError::Session(s) => return session_error(s),
        RewindError::Entry { ref source, .. } => ErrorKind::of_prefix(source.fault()),
        RewindError::CheckpointGone { .. } => ErrorKind::NotFound,
        RewindError::OtherProject { .. } => ErrorKind::Refused,
    };
    CliError::caused(kind, &e)
}

/// The exit code of each executor failure (the table in ARCHITECTURE.md):
/// the re-checks of a plan each have their own.
pub(crate) fn exec_error(err: ExecError) -> CliError {
    if let ExecError::Runtime(r) = err {
        return runtime_error(*r);
    }
    let (kind, code) = exec_kind(&err);
    let e = CliError::caused(kind, &err);
    match code {
        Some(c) => e.with_exit_code(c),
        None => e,
    }
}

/// The kind and executor exit code of `err` (a failure that kept the
/// agent's work has the kind of what failed).
fn exec_kind(err: &ExecError) -> (ErrorKind, Option<u8>) {
    use ExecError as E;
    match err {
        E::PlanTampered { .. } => (ErrorKind::Tampered, Some(exec_code::PLAN_TAMPERED)),
        E::BaseMoved { .. } => (ErrorKind::Tampered, Some(exec_code::BASE_MOVED)),
        E::SessionChanged { .. } => (ErrorKind::Tampered, Some(exec_code::SESSION_CHANGED)),
        E::SessionIdChanged { .. } => (ErrorKind::Tampered, Some(exec_code::SESSION_ID_CHANGED)),
        E::EntryChanged { .. } => (ErrorKind::Tampered, Some(exec_code::ENTRY_CHANGED)),
        E::RefExists { .. } => (ErrorKind::Tampered, Some(exec_code::REF_EXISTS)),
        E::PlanNotOurs { .. } => (ErrorKind::Tampered, Some(exec_code::PLAN_NOT_OURS)),
        E::PlanInconsistent { .. } => (ErrorKind::Tampered, Some(exec_code::PLAN_INCONSISTENT)),
        E::PlanKey { .. } | E::FilterName { .. } => (ErrorKind::Refused, None),
        E::InvalidId { .. } | E::SessionInvalid { .. } => (ErrorKind::Invalid, None),
        E::LimitsOutOfBounds { .. } | E::NonUtf8Path { .. } => (ErrorKind::Usage, None),
        E::PlanExists { .. } => (ErrorKind::Refused, None),
        E::PlanRead { source, .. } | E::SessionRead { source, .. }
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            (ErrorKind::NotFound, None)
        }
        E::NotARepository { .. } | E::UnknownBase { .. } | E::UnknownEntry { .. } => {
            (ErrorKind::NotFound, None)
        }
        E::BrokenChain { .. } | E::Session { .. } | E::SessionRead { .. } | E::NoHeader { .. } => {
            (ErrorKind::Invalid, None)
        }
        E::PlanRead { .. } | E::PlanFormat { .. } | E::PlanVersion { .. } => {
            (ErrorKind::Usage, None)
        }
        E::TrailerValue { .. } => (ErrorKind::Invalid, None),
        E::WorkKept { source, .. } | E::TreeKept { source, .. } => exec_kind(source),
        E::Io { .. }
        | E::Git(_)
        | E::Agent { .. }
        | E::RefCreate { .. }
        | E::Runtime(_)
        | E::Tree(_) => (ErrorKind::Internal, None),
    }
}

/// The exit code of each batch failure (`exec_code::BATCH`).
pub(crate) fn batch_error(err: BatchError) -> CliError {
    use BatchError as B;
    let (kind, code) = match &err {
        B::ManifestRead { .. } | B::ManifestLine { .. } => {
            (ErrorKind::Invalid, Some(exec_code::MANIFEST_INVALID))
        }
        B::IndexOutOfRange { .. } => (ErrorKind::NotFound, Some(exec_code::INDEX_OUT_OF_RANGE)),
        B::RefTaken { .. } => (ErrorKind::Tampered, Some(exec_code::REF_TAKEN)),
        B::RemoteName { .. } => (ErrorKind::Usage, None),
        B::Publish { .. } => (ErrorKind::WorkerFailed, Some(exec_code::TEMPFAIL)),
        B::Receipt { .. } | B::Git(_) => (ErrorKind::Internal, None),
    };
    let e = CliError::caused(kind, &err);
    match code {
        Some(c) => e.with_exit_code(c),
        None => e,
    }
}

/// The exit-code kind of an execution that ran but did not commit.
pub(crate) fn failure_kind(result: &RunResult) -> Option<ErrorKind> {
    match (result.state, result.stop_reason) {
        (RunState::Committed | RunState::NoChanges, _) => None,
        (RunState::Failed, _) => Some(ErrorKind::WorkerFailed),
        (RunState::Aborted, StopReason::Cancelled) => Some(ErrorKind::Interrupted),
        (RunState::Aborted, _) => Some(ErrorKind::Limit),
    }
}

/// Why plan I of a batch did not settle: a transient failure exits 75 (the
/// engine retries), a permanent one by what stopped the run.
pub(crate) fn settle_error(err: SettleError) -> CliError {
    match err {
        SettleError::Batch(b) => batch_error(b),
        SettleError::Exec(e) => exec_error(e),
        SettleError::Failed {
            verdict: Verdict::Transient,
            ..
        } => CliError::new(ErrorKind::WorkerFailed, err.to_string())
            .with_exit_code(exec_code::TEMPFAIL),
        SettleError::Failed { ref result, .. } => CliError::new(
            failure_kind(result).unwrap_or(ErrorKind::WorkerFailed),
            err.to_string(),
        ),
        SettleError::RefVanished { .. } => CliError::new(ErrorKind::Internal, err.to_string()),
    }
}

impl From<SettleError> for CliError {
    fn from(err: SettleError) -> CliError {
        settle_error(err)
    }
}

/// A managed worktree's failure.
pub(crate) fn worktree_error(err: WorktreeError) -> CliError {
    let kind = match err {
        WorktreeError::Checkpoint(e) => return checkpoint_error(e),
        WorktreeError::Busy { .. } | WorktreeError::Refused(_) => ErrorKind::Refused,
        WorktreeError::NotFound { .. } | WorktreeError::Missing { .. } => ErrorKind::NotFound,
        WorktreeError::InvalidName { .. }
        | WorktreeError::Usage(_)
        | WorktreeError::NotARepository { .. } => ErrorKind::Usage,
        WorktreeError::PostCreateFailed { .. } => ErrorKind::WorkerFailed,
        WorktreeError::Format { .. } => ErrorKind::Invalid,
        WorktreeError::Git(_) | WorktreeError::Io { .. } => ErrorKind::Internal,
    };
    CliError::caused(kind, &err)
}

/// A session's move between checkouts (enter, leave, consume, discard): the
/// worktree's and the session's own failures by their mappings, the rest with
/// the codes they had when they were worktree errors.
pub(crate) fn handoff_error(err: HandoffError) -> CliError {
    let kind = match err {
        HandoffError::Worktree(w) => return worktree_error(w),
        HandoffError::Session(s) => return session_error(s),
        HandoffError::Refused(_) | HandoffError::Key(_) => ErrorKind::Refused,
        HandoffError::Missing { .. } => ErrorKind::NotFound,
        HandoffError::Verification { .. } | HandoffError::Format { .. } => ErrorKind::Invalid,
        HandoffError::Git(_) | HandoffError::Io { .. } => ErrorKind::Internal,
    };
    CliError::caused(kind, &err)
}

/// The checkpoint server's own failures (its store's go by their class).
pub(crate) fn serve_error(err: ServeError) -> CliError {
    let kind = match err {
        ServeError::Checkpoint(e) => return checkpoint_error(e),
        ServeError::NotOwned { .. }
        | ServeError::Insecure { .. }
        | ServeError::WrongType { .. }
        | ServeError::PeerNotOwner { .. }
        | ServeError::PathTooLong { .. } => ErrorKind::Refused,
        _ => ErrorKind::Internal,
    };
    CliError::caused(kind, &err)
}

pub(crate) fn preflight_error(err: PreflightError) -> CliError {
    let kind = match &err {
        PreflightError::Scope(TaskError::BadPath { .. } | TaskError::NoModule) => ErrorKind::Usage,
        PreflightError::Scope(
            TaskError::ModuleNotTracked { .. }
            | TaskError::AllowPathNotTracked { .. }
            | TaskError::AllowNewPathExists { .. },
        ) => ErrorKind::NotFound,
        PreflightError::NotTopLevel { .. }
        | PreflightError::NotARepository { .. }
        | PreflightError::Dirty { .. }
        | PreflightError::Detached { .. }
        | PreflightError::Nested { .. }
        | PreflightError::Artifacts { .. }
        | PreflightError::Sandbox(_) => ErrorKind::Refused,
        _ => ErrorKind::Internal,
    };
    let mut e = CliError::caused(kind, &err);
    // A worker's bytes may be in it: shown escaped (issue 21).
    e.message = crate::display::escape(&e.message).into_owned();
    e
}

macro_rules! from_library {
    ($($error:ty => $map:ident),* $(,)?) => {
        $(impl From<$error> for CliError {
            fn from(err: $error) -> CliError {
                $map(err)
            }
        })*
    };
}

from_library! {
    SessionError => session_error,
    RuntimeError => runtime_error,
    CheckpointError => checkpoint_error,
    RewindError => rewind_error,
    ExecError => exec_error,
    BatchError => batch_error,
    WorktreeError => worktree_error,
    HandoffError => handoff_error,
    ServeError => serve_error,
    PreflightError => preflight_error,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(Middle);
    #[derive(Debug)]
    struct Middle(std::io::Error);

    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("cannot read the checkpoints of /p")
        }
    }
    impl std::fmt::Display for Middle {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "store /s: {}", self.0)
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    impl std::error::Error for Middle {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn causes_are_kept_once_each() {
        let err = Outer(Middle(std::io::Error::other("disk on fire")));
        let e = CliError::caused(ErrorKind::Internal, &err);
        assert_eq!(e.message, "cannot read the checkpoints of /p");
        // The middle says the innermost already: it is not repeated.
        assert_eq!(e.causes, vec!["store /s: disk on fire".to_owned()]);
    }

    #[test]
    fn a_session_error_has_one_kind_wherever_it_comes_from() {
        let direct = session_error(SessionError::Argument("bad".into()));
        let via_runtime = runtime_error(RuntimeError::Session(Box::new(SessionError::Argument(
            "bad".into(),
        ))));
        assert_eq!(direct.kind, ErrorKind::Usage);
        assert_eq!(via_runtime.kind, ErrorKind::Usage);
    }
}
