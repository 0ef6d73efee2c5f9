//! `bh checkpoint serve` and the hook's use of a running server.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use bh_checkpoint::{LiveStore, SnapshotRequest, Store};
use bh_serve::{Client, Listener, Paths, ServeError, Service, guess_project, serve_stdio};
use serde_json::{Value, json};

use super::ProjectArg;
use crate::command_error::serve_error;
use crate::context::Ctx;
use crate::error::CliError;
use crate::ui::errln;
use crate::units::parse_duration;

/// How long the hook waits for the server's answer before it falls back to
/// its ordinary snapshot (a server that hangs or is flooded costs this once).
const HOOK_TIMEOUT: Duration = Duration::from_secs(5);

// The variant's doc comment in `CheckpointCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    project: ProjectArg,
    /// Listen on the project's socket in the state directory instead of stdio.
    #[arg(long)]
    socket: bool,
    /// With --socket: exit after this long without a connection.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    idle: std::time::Duration,
}

/// `bh checkpoint serve`.
pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let store = super::open(ctx, &args.project, None)?;
    serve(ctx, store, &args.project, args.socket, args.idle)
}

/// Serves `store` until stdin ends (stdio) or the socket was idle for `idle`.
fn serve(
    ctx: &Ctx,
    store: Store,
    project: &ProjectArg,
    socket: bool,
    idle: Duration,
) -> Result<(), CliError> {
    let store = Arc::new(store);
    let paths = Paths::new(&ctx.state_dir, store.project()).map_err(serve_error)?;
    paths.ensure_dir().map_err(serve_error)?;
    let service = Service::new(
        LiveStore::new(store.clone()),
        project.max_file_size,
        paths.journal.clone(),
    );
    if !socket {
        // No warm-up: a spawning parent's first call is then an ordinary
        // snapshot recorded under that call's own tags.
        let stdin = std::io::stdin().lock();
        let stdout = std::io::stdout().lock();
        return serve_stdio(&service, stdin, stdout).map_err(serve_error);
    }
    let listener = match Listener::bind(&paths) {
        Ok(l) => l,
        Err(ServeError::AlreadyRunning { .. }) => {
            errln!(
                "bh: a checkpoint server already serves {}",
                store.project().display()
            );
            return Ok(());
        }
        Err(e) => return Err(serve_error(e)),
    };
    // No warm-up snapshot: one could record a checkpoint nobody asked for.
    // The first two requests are ordinary snapshots (the second arms the
    // watch), the rest take the fast path.
    if ctx.json {
        // The socket is live; tell a waiting parent where, on one
        // line (a parent may stop reading after it).
        let hello = json!({
            "project": store.project(),
            "socket": listener.socket(),
            "pid": std::process::id(),
        });
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{hello}").and_then(|()| out.flush());
    }
    listener.serve(&service, idle).map_err(serve_error)
}

/// Why the hook did not get its checkpoint from a server.
pub(super) enum Fallback {
    /// Nothing listens on the project's socket (none started, or it died).
    NoServer,
    /// A server is there but could not be used; the reason, for stderr.
    Failed(String),
}

/// The hook's snapshot through the project's running server.
pub(super) fn hook_snapshot(
    ctx: &Ctx,
    project: &ProjectArg,
    dir: &Path,
    request: &SnapshotRequest,
    after: bool,
) -> Result<Value, Fallback> {
    let failed = |e: &dyn std::fmt::Display| Fallback::Failed(e.to_string());
    let guess = match &project.project {
        Some(p) => fs_err::canonicalize(ctx.abs(p)),
        None => guess_project(dir),
    }
    .map_err(|e| failed(&e))?;
    let paths = Paths::new(&ctx.state_dir, &guess).map_err(|e| failed(&e))?;
    let mut client = match Client::connect(&paths, HOOK_TIMEOUT) {
        Ok(c) => c,
        Err(ServeError::NoServer { .. }) => return Err(Fallback::NoServer),
        Err(e) => return Err(failed(&e)),
    };
    let response = client
        .request(json!({
            "op": "snapshot",
            "tool": request.tool,
            "session": request.session,
            "entry": request.entry,
            "after": after,
            "project": guess,
            "max_file_size": project.max_file_size,
        }))
        .map_err(|e| failed(&e))?;
    if let Some(err) = response.get("error") {
        let message = err.get("message").and_then(Value::as_str).unwrap_or("");
        return Err(Fallback::Failed(format!("the server refused: {message}")));
    }
    let Some(snapshot) = response.get("ok").and_then(|ok| ok.get("snapshot")) else {
        return Err(Fallback::Failed(
            "the server's answer has no snapshot".into(),
        ));
    };
    for s in snapshot
        .get("skipped")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        errln!(
            "bh: warning: not captured: {} ({})",
            s.get("path").and_then(Value::as_str).unwrap_or("?"),
            s.get("reason").and_then(Value::as_str).unwrap_or("?")
        );
    }
    Ok(json!({ "project": guess, "snapshot": snapshot, "server": true }))
}

/// Starts `bh checkpoint serve --socket` for the project of `dir`, detached
/// (own process group, no inherited stdio, so the agent waiting on the
/// hook's pipes is never held up) and not waited for: it outlives the hook
/// and exits after `idle` without a call. A second concurrent start finds
/// the server lock taken and exits at once.
#[allow(clippy::zombie_processes)] // deliberately not waited: it outlives us
pub(super) fn spawn_server(ctx: &Ctx, project: &ProjectArg, dir: &Path, idle: Duration) {
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut cmd = Command::new(exe);
    cmd.arg("--state-dir")
        .arg(&ctx.state_dir)
        .args(["checkpoint", "serve", "--socket", "--idle"])
        .arg(format!("{}s", idle.as_secs().max(1)))
        .arg("--max-file-size")
        .arg(project.max_file_size.to_string());
    if let Some(p) = &project.project {
        cmd.arg("--project").arg(ctx.abs(p));
    }
    cmd.current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    if let Err(e) = cmd.spawn() {
        errln!("bh: note: cannot start a checkpoint server: {e}");
    }
}
