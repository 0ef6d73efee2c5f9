//! `bh checkpoint …`: snapshot, list, diff, restore and prune a project's
//! working tree in a private shadow repository.

use std::path::{Path, PathBuf};

use bh_checkpoint::{
    CheckpointError, CheckpointKind, ErrorClass, PrunePolicy, RestoreMode, SnapshotRequest, Store,
    StoreOptions,
};
use clap::{Args, Subcommand};
use serde_json::json;

mod hook;
pub(crate) mod rewind;
mod serve;
mod view;

use crate::context::Ctx;
use crate::error::{CliError, ErrorKind, print_json};
use crate::progress::SnapshotDisplay;
use crate::units::{human_age, human_size, parse_duration, parse_size};

use hook::DEFAULT_HOOK_TOOLS;

#[derive(Args, Debug, Clone)]
pub struct ProjectArg {
    /// The project (default: the enclosing Git repository's top level, else the
    /// current directory). Relative PATH arguments resolve against the current
    /// directory when it is inside the project, else against the project's top
    /// (as git does with --work-tree).
    #[arg(long, visible_alias = "repo", value_name = "DIR")]
    pub(crate) project: Option<PathBuf>,
    /// Files larger than this are not captured.
    #[arg(long, value_name = "SIZE", default_value = "50MiB", value_parser = parse_size)]
    pub(crate) max_file_size: u64,
}

#[derive(Subcommand, Debug)]
pub enum CheckpointCmd {
    /// Snapshot the project's working tree now.
    Snapshot {
        #[command(flatten)]
        project: ProjectArg,
        /// The tool about to run.
        #[arg(long, value_name = "NAME", default_value = "manual")]
        tool: String,
        /// Agent session id to record.
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Agent session entry id to record.
        #[arg(long, value_name = "ID")]
        entry: Option<String>,
    },
    /// List checkpoints, newest first.
    #[command(visible_alias = "ls")]
    List {
        #[command(flatten)]
        project: ProjectArg,
    },
    /// Restore files from a checkpoint (all files when no path is given), or
    /// with --session FILE --entry ID to how they were at a session entry.
    Restore {
        #[command(flatten)]
        project: ProjectArg,
        /// Checkpoint id (a prefix of at least 4 hex digits) or `latest`.
        #[arg(required_unless_present = "session", conflicts_with = "session")]
        id: Option<String>,
        /// Paths to restore (relative to the current directory; see --project).
        #[arg(conflicts_with = "session")]
        paths: Vec<PathBuf>,
        /// Also delete files created since the checkpoint that it would have
        /// captured (never ignored files).
        #[arg(long)]
        exact: bool,
        /// A Pi session (a path, or an id prefix as Pi takes it): restore the
        /// files (exactly) to the checkpoint taken before the first mutating
        /// tool call at or after --entry.
        #[arg(long, value_name = "FILE|ID", requires = "entry")]
        session: Option<PathBuf>,
        /// With --session: the entry (its id or a unique prefix of at least 4
        /// hex digits).
        #[arg(long, value_name = "ID", requires = "session")]
        entry: Option<String>,
        /// With --session: also move the session's leaf back to the entry (a
        /// user message goes too, as Pi's /tree), so the conversation
        /// continues from there.
        #[arg(long, requires = "session")]
        rewind_session: bool,
    },
    /// Show one checkpoint: what it records and what changed since the
    /// checkpoint before it (a diffstat, or the patch).
    Show {
        #[command(flatten)]
        project: ProjectArg,
        /// Checkpoint id (a prefix of at least 4 hex digits) or `latest`.
        id: String,
        /// The patch instead of the diffstat.
        #[arg(long)]
        patch: bool,
    },
    /// Show what changed between a checkpoint and the working tree, or
    /// between two checkpoints (`diff A B`); paths limit it (after `--` when
    /// one could be read as a checkpoint id).
    Diff {
        #[command(flatten)]
        project: ProjectArg,
        /// Checkpoint id (a prefix of at least 4 hex digits) or `latest`.
        id: String,
        /// A second checkpoint (the diff then goes from ID to it), then paths
        /// (relative to the current directory; see --project).
        #[arg(value_name = "ID2|PATH")]
        rest: Vec<PathBuf>,
        /// Paths to limit the diff to (everything after `--`).
        #[arg(last = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// A diffstat instead of the patch.
        #[arg(long)]
        stat: bool,
    },
    /// Drop old checkpoints, then repack the store.
    Prune {
        #[command(flatten)]
        project: ProjectArg,
        /// Keep the newest N checkpoints.
        #[arg(long, value_name = "N")]
        keep: Option<usize>,
        /// Drop checkpoints older than this (e.g. 7d, 12h).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        older_than: Option<std::time::Duration>,
    },
    /// Serve the project's live checkpoint store (JSON lines, see
    /// crates/bh-serve/PROTOCOL.md): on stdin/stdout for a parent that spawns
    /// it, or with --socket on the project's private Unix socket.
    Serve {
        #[command(flatten)]
        project: ProjectArg,
        /// Listen on the project's socket in the state directory instead of stdio.
        #[arg(long)]
        socket: bool,
        /// With --socket: exit after this long without a connection.
        #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
        idle: std::time::Duration,
    },
    /// Integrations that snapshot before an agent's mutating tool calls.
    Hook {
        #[command(subcommand)]
        agent: HookAgent,
    },
}

#[derive(Subcommand, Debug)]
pub enum HookAgent {
    /// A Claude Code `PreToolUse`/`PostToolUse` hook: reads the event on
    /// stdin, snapshots before mutating tools and records what they changed
    /// after them, always lets the tool proceed.
    ClaudeCode {
        #[command(flatten)]
        project: ProjectArg,
        /// Comma-separated tool names that trigger a snapshot.
        #[arg(long, value_name = "LIST", env = "BH_CHECKPOINT_TOOLS", default_value = DEFAULT_HOOK_TOOLS)]
        tools: String,
        /// Never use (or start) the project's checkpoint server; always take
        /// an ordinary snapshot.
        #[arg(
            long,
            env = "BH_CHECKPOINT_NO_SERVER",
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        no_server: bool,
        /// How long a server started by the hook waits for the next call.
        #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
        server_idle: std::time::Duration,
    },
}

pub(crate) fn checkpoint_error(err: CheckpointError) -> CliError {
    if let CheckpointError::AmbiguousCheckpoint { .. } = err {
        return CliError::new(ErrorKind::Ambiguous, err.to_string());
    }
    let kind = match err.class() {
        ErrorClass::Refused => ErrorKind::Refused,
        ErrorClass::NotFound => ErrorKind::NotFound,
        ErrorClass::Usage => ErrorKind::Usage,
        ErrorClass::Internal => ErrorKind::Internal,
    };
    let hint = match &err {
        // Typically bh run in $HOME or above the state folder: say what to do.
        CheckpointError::Overlap { project, .. } => format!(
            "; run bh inside the project (a Git repository or a folder of its own), or pass --state-dir DIR (or set BH_STATE_DIR) to a folder outside {}",
            project.display()
        ),
        _ => String::new(),
    };
    CliError::new(kind, format!("{err}{hint}"))
}

/// `checkpoint list` where no store exists yet: nothing to list, nothing made.
fn no_store(ctx: &Ctx) -> Result<(), CliError> {
    // The project a snapshot here would protect (the repository's top, not the cwd).
    let dir = Store::project_of(&ctx.git(), &ctx.cwd).map_err(checkpoint_error)?;
    if ctx.json {
        return print_json(&json!({
            "project": dir.to_string_lossy(),
            "store": null,
            "store_size": 0,
            "checkpoints": [],
        }));
    }
    println!(
        "0 checkpoints of {} (no checkpoint store yet: the first snapshot makes one)",
        dir.display()
    );
    Ok(())
}

/// `--project DIR` names the project exactly; without it the project is the
/// repository enclosing `dir` (the current directory, or the hook's `cwd`),
/// else that directory.
pub(crate) fn open(ctx: &Ctx, arg: &ProjectArg, dir: Option<&Path>) -> Result<Store, CliError> {
    let runner = ctx.git();
    let options = StoreOptions {
        state_dir: ctx.state_dir.clone(),
        max_file_size: arg.max_file_size,
    };
    match &arg.project {
        Some(p) => Store::open(&runner, &ctx.dir_arg(Some(p), "--project")?, &options),
        None => Store::open_in(&runner, dir.unwrap_or(&ctx.cwd), &options),
    }
    .map_err(checkpoint_error)
}

/// What relative PATH arguments resolve against: the current directory when
/// it is inside the project, else (`--project DIR` given from outside) the
/// project's top — git's rule for a work tree the cwd is not in.
pub(crate) fn path_base(ctx: &Ctx, store: &Store) -> PathBuf {
    let cwd = fs_err::canonicalize(&ctx.cwd).unwrap_or_else(|_| ctx.cwd.clone());
    if cwd.starts_with(store.project()) {
        ctx.cwd.clone()
    } else {
        store.project().to_path_buf()
    }
}

pub(crate) fn rel_paths(
    ctx: &Ctx,
    store: &Store,
    paths: &[PathBuf],
) -> Result<Vec<Vec<u8>>, CliError> {
    let base = path_base(ctx, store);
    let mut out = Vec::new();
    for p in paths {
        let rel =
            bh_checkpoint::project_relative(store.project(), &base, p).map_err(checkpoint_error)?;
        if rel.is_empty() {
            // The project itself: the whole tree, same as no path.
            return Ok(Vec::new());
        }
        out.push(rel);
    }
    Ok(out)
}

#[allow(
    clippy::too_many_lines,
    reason = "a phase orchestrator not yet split into named steps (issue 26)"
)]
pub fn run(cmd: CheckpointCmd, ctx: &Ctx) -> Result<(), CliError> {
    match cmd {
        CheckpointCmd::Snapshot {
            project,
            tool,
            session,
            entry,
        } => {
            let store = open(ctx, &project, None)?;
            let request = SnapshotRequest {
                tool,
                session,
                entry,
            };
            // The first snapshot hashes every file: show it on a terminal.
            let first = store.list().is_ok_and(|l| l.is_empty());
            let outcome = if first {
                let display = SnapshotDisplay::new(ctx.json);
                let result = store.snapshot_with_progress(&request, &|p| display.show(p));
                display.end(result.is_ok());
                result
            } else {
                store.snapshot(&request)
            }
            .map_err(checkpoint_error)?;
            if ctx.json {
                return print_json(
                    &json!({ "project": store.project().to_string_lossy(), "snapshot": outcome }),
                );
            }
            for s in &outcome.skipped {
                eprintln!("bh: warning: not captured: {} ({})", s.path, s.reason);
            }
            if outcome.created && first {
                // Nothing to compare with: it holds the project, not changes.
                println!(
                    "created checkpoint {} (the first: {} file{})",
                    outcome.checkpoint.id,
                    outcome.changed.len(),
                    if outcome.changed.len() == 1 { "" } else { "s" }
                );
            } else if outcome.created {
                println!(
                    "created checkpoint {} ({} file{} changed)",
                    outcome.checkpoint.id,
                    outcome.changed.len(),
                    if outcome.changed.len() == 1 { "" } else { "s" }
                );
            } else {
                println!(
                    "no changes since checkpoint {}; reusing it",
                    outcome.checkpoint.id
                );
            }
            Ok(())
        }
        CheckpointCmd::List { project } => {
            // Listing never creates a store: a folder without one has none.
            let store = if project.project.is_some() {
                open(ctx, &project, None)?
            } else {
                let options = StoreOptions {
                    state_dir: ctx.state_dir.clone(),
                    max_file_size: project.max_file_size,
                };
                match Store::open_existing_in(&ctx.git(), &ctx.cwd, &options)
                    .map_err(checkpoint_error)?
                {
                    Some(store) => store,
                    None => return no_store(ctx),
                }
            };
            let list = store.list().map_err(checkpoint_error)?;
            let size = store.size();
            let (skips, last_skip) = store.skipped_snapshots();
            if ctx.json {
                return print_json(&json!({
                    "project": store.project().to_string_lossy(),
                    "store": store.dir(),
                    "store_size": size,
                    "checkpoints": list,
                    "skipped_snapshots": { "count": skips, "last": last_skip },
                }));
            }
            let now = now_ms();
            println!(
                "{} checkpoint{} of {} (store {}, {})",
                list.len(),
                if list.len() == 1 { "" } else { "s" },
                store.project().display(),
                store.dir().display(),
                human_size(size)
            );
            if skips > 0 {
                println!(
                    "{skips} checkpoint{} could not be taken (last: {})",
                    if skips == 1 { "" } else { "s" },
                    last_skip.as_deref().unwrap_or("?")
                );
            }
            if !list.is_empty() {
                println!(
                    "{:<12}  {:>8}  {:<14}  {:>5}  NOTE",
                    "ID", "AGE", "TOOL", "FILES"
                );
            }
            for cp in &list {
                let mut note = Vec::new();
                if cp.kind != CheckpointKind::Snapshot {
                    note.push(cp.kind.to_string());
                }
                if let Some(s) = &cp.session {
                    note.push(format!("session {s}"));
                }
                if let Some(e) = &cp.entry {
                    note.push(format!("entry {e}"));
                }
                if cp.skipped > 0 {
                    note.push(format!("{} skipped", cp.skipped));
                }
                println!(
                    "{:<12}  {:>8}  {:<14}  {:>5}  {}",
                    cp.id,
                    human_age(now - cp.time_ms),
                    cp.tool,
                    cp.files_changed,
                    note.join(", ")
                );
            }
            Ok(())
        }
        CheckpointCmd::Restore {
            project,
            id,
            paths,
            exact,
            session,
            entry,
            rewind_session,
        } => {
            let store = open(ctx, &project, None)?;
            let (Some(id), None) = (id, &session) else {
                let (Some(file), Some(entry)) = (session, entry) else {
                    return Err(CliError::usage(
                        "restore needs ID, or --session FILE --entry ID",
                    ));
                };
                let opts = rewind::RewindOpts {
                    rewind_session,
                    ..Default::default()
                };
                return rewind::run(ctx, &store, &file, &entry, &opts);
            };
            view::note_latest(&store, &id, ctx.json);
            let rel = rel_paths(ctx, &store, &paths)?;
            let mode = if exact {
                RestoreMode::Exact
            } else {
                RestoreMode::Additive
            };
            let outcome = store.restore(&id, &rel, mode).map_err(checkpoint_error)?;
            if ctx.json {
                return print_json(
                    &json!({ "project": store.project().to_string_lossy(), "restore": outcome }),
                );
            }
            for p in &outcome.restored {
                println!("restored {p}");
            }
            for p in &outcome.deleted {
                println!("deleted  {p}");
            }
            if !outcome.kept.is_empty() {
                eprintln!(
                    "bh: note: kept {} file{} created since the checkpoint (use --exact to remove them)",
                    outcome.kept.len(),
                    if outcome.kept.len() == 1 { "" } else { "s" }
                );
            }
            println!(
                "restored checkpoint {}: {} written, {} deleted; undo with: bh checkpoint restore {} --exact",
                outcome.checkpoint.id,
                outcome.restored.len(),
                outcome.deleted.len(),
                outcome.safety.id
            );
            Ok(())
        }
        CheckpointCmd::Show { project, id, patch } => {
            view::show(ctx, &open(ctx, &project, None)?, &id, patch)
        }
        CheckpointCmd::Diff {
            project,
            id,
            rest,
            paths,
            stat,
        } => {
            let store = open(ctx, &project, None)?;
            let args = view::DiffArgs {
                id: &id,
                rest: &rest,
                paths: &paths,
                stat,
            };
            view::diff(ctx, &store, &args)
        }
        CheckpointCmd::Prune {
            project,
            keep,
            older_than,
        } => {
            if keep.is_none() && older_than.is_none() {
                return Err(CliError::usage(
                    "prune needs --keep N and/or --older-than DURATION",
                ));
            }
            let store = open(ctx, &project, None)?;
            let outcome = store
                .prune(&PrunePolicy { keep, older_than })
                .map_err(checkpoint_error)?;
            if ctx.json {
                return print_json(
                    &json!({ "project": store.project().to_string_lossy(), "prune": outcome }),
                );
            }
            println!(
                "removed {} checkpoint{}, kept {}; store {} -> {}",
                outcome.removed.len(),
                if outcome.removed.len() == 1 { "" } else { "s" },
                outcome.kept,
                human_size(outcome.size_before),
                human_size(outcome.size_after)
            );
            Ok(())
        }
        CheckpointCmd::Serve {
            project,
            socket,
            idle,
        } => serve::serve(ctx, open(ctx, &project, None)?, &project, socket, idle),
        CheckpointCmd::Hook {
            agent:
                HookAgent::ClaudeCode {
                    project,
                    tools,
                    no_server,
                    server_idle,
                },
        } => {
            let server = (!no_server).then_some(server_idle);
            // Best effort: whatever happens, the agent's tool proceeds (exit 0).
            hook::run(ctx, &project, &tools, server);
            Ok(())
        }
    }
}

use bh_protocol::now_ms;
