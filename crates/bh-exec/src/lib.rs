//! `bh-exec`: the session-checkpoint executor.
//!
//! A plan pins one exact conversation point (a Pi session file, an entry in
//! it) to one exact commit, with a prompt, a model, limits and the output ref,
//! all as full ids and SHA-256 digests, and a digest of the plan itself.
//! [`make_plan`] only reads: it creates no worktree, commit, ref or object;
//! the plan is sealed with an HMAC under the state directory's [`PlanKey`].
//! [`verify_plan`] re-checks the MAC, every field that steers the run and
//! every recorded half before anything runs; each mismatch is its own
//! [`ExecError`] variant. [`run_plan`] re-checks, then
//! continues the session over the base commit's tree with no checkout (the
//! virtual worktree of `bh-vfs`; a detached worktree with `checkout`, see
//! `work`) through `bh-runtime` (exactly `read, ls, edit, write`) and records the result as
//! one commit with provenance trailers ([`Trailers`]) under
//! `refs/better-harness/executions/`, in an execution folder
//! (`<state>/executions/<id>/`, see [`Execution`]).
//!
//! The caller supplies the (commit, entry) pair; the plan records and
//! re-checks both halves but cannot prove that the original session ever ran
//! on that commit.
//!
//! Library rules: never prints, never reads the environment; errors are typed
//! (exit codes are the CLI's).

// Libraries never print: what they have to say is a value (an error, an
// event, a report) that the CLI shows. A guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod batch_error;
mod commit;
pub mod emit;
mod error;
mod filters;
mod folder;
mod ids;
mod key;
mod list;
mod manifest;
mod outcome;
mod plan;
mod publish;
mod receipt;
mod run;
mod settle;
mod verify;
mod work;

pub use batch_error::BatchError;
pub use commit::{IDENTITY_EMAIL, IDENTITY_NAME, TRAILER_KEYS, Trailers, commit_message};
pub use error::ExecError;
pub use folder::{EXECUTIONS_DIR, Execution, gc};
pub use ids::{IdKind, MAX_ID_LEN, check_id};
pub use key::{PLAN_KEY_FILE, PlanKey};
pub use list::{
    ChangeFacts, ExecStatus, ExecutionRecord, FileStat, StoredResult, change_facts,
    list_executions, read_execution,
};
pub use manifest::{Manifest, RECEIPTS_DIR};
pub use outcome::{EXIT_TEMPFAIL, Verdict, is_transient_reason, verdict};
pub use plan::{
    BaseRecord, EXECUTOR_TOOLS, Limits, MAX_TIMEOUT_SECS, MAX_TOOL_CALLS, OUTPUT_REF_PREFIX,
    PLAN_VERSION, Plan, PlanMac, PlanRequest, PromptRecord, RepoRecord, SessionRecord, make_plan,
    read_session, write_plan,
};
pub use publish::{RefHolds, is_plan_result, local_ref, publish, remote_ref};
pub use receipt::{
    Receipt, ReceiptState, host_name, read_receipt, receipt_path, retry_indices, write_receipt,
};
pub use run::{
    RunProgress, RunResult, RunSetup, RunState, StopReason, run_plan, run_plan_with_progress,
};
pub use settle::{SettleError, Settled, settle};
pub use verify::{Trust, check_steering, read_plan, verify_plan};
pub use work::WorkMode;
