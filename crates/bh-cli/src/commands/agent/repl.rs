//! The interactive `bh agent`: a line-based REPL with streamed answers,
//! `/tree`, `/fork`, `/checkpoints`, `/restore`, `/rewind`, `/model`, `/worktree`,
//! `/quit`. Ctrl-C aborts the running turn (or a `/worktree` move being
//! prepared); a second Ctrl-C ends the command (during a move: once the move
//! is undone; a third at once). Ending returns from here, so destructors run.
//! The working directory is the live agent's, never the process's.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bh_runtime::Live;
use bh_session::{ForkOptions, ForkTarget, Session, SessionWriter, session_dir_for_cwd};
use tokio_util::sync::CancellationToken;

use super::args::AgentArgs;
use super::first_snapshot::FirstSnapshot;
use super::headless::interrupted;
use super::input::{Completions, Input, LineInput};
use super::render::{ToolOutput, outcome_error, print_tree, stream_event};
use super::switch;
use crate::command_error::{checkpoint_error, rewind_error, runtime_error, session_error};
use crate::context::Ctx;
use crate::error::CliError;
use crate::provider::build_provider_with;
use crate::ui::{errln, outln};

/// Ctrl-C in the REPL: the running turn's (or `/worktree` move's) token and the presses since the
/// last prompt (the second press exits).
#[derive(Default)]
struct CtrlC {
    turn: Option<CancellationToken>,
    presses: u32,
    /// A `/worktree` move is running: the second press waits for it to be
    /// undone (its prepared session deleted) before exiting; a third exits.
    moving: bool,
    /// Exit once the running turn or move has ended (a second press during
    /// a move, or SIGTERM/SIGHUP).
    exit_after_move: bool,
}

const HELP: &str = "\
/tree [ENTRY]            show the session tree; with ENTRY (an id or a unique prefix of
                         ≥ 4 hex digits), continue from that entry
/fork [ENTRY]            fork the session (root → ENTRY, default the leaf) and continue in the fork
/checkpoints             list the project's checkpoints
/restore ID [--exact] [PATH…]
                         restore files from a checkpoint (a pre-restore checkpoint is taken
                         first; --exact also deletes files created since)
/rewind [ENTRY] [--both|--conversation|--files]
                         go back to ENTRY: the conversation continues from there and/or the
                         files return to how they were (asks which; alone: lists prompts);
                         only paths the session's own calls changed are rewound
/redo                    undo the last /rewind: its files and the conversation's leaf
/model PROVIDER/MODEL    switch models
/worktree create NAME [--from REV] [--branch B | --detach]
                         create a managed worktree and move the session into it
/worktree enter NAME     move the session into a managed worktree
/worktree dispose [--force]
                         move the session back to the main checkout, then dispose
                         the worktree it was in (refuses dirty or unmerged work)
/worktree list           every worktree, as `bh worktree list`
/session                 show the session file
/quit                    exit (also Ctrl-D, or Ctrl-C twice)";

/// What Ctrl-C has done since the last prompt, and what it asks for.
impl CtrlC {
    fn begin(&mut self, token: &CancellationToken, moving: bool) {
        self.turn = Some(token.clone());
        self.presses = 0;
        self.moving = moving;
    }

    /// Back at the prompt; whether a press during a move, or SIGTERM/SIGHUP
    /// during a turn or move, asked to exit.
    fn end(&mut self) -> bool {
        self.turn = None;
        self.presses = 0;
        self.moving = false;
        std::mem::take(&mut self.exit_after_move)
    }
}

/// The slash commands the line editor completes.
const COMMANDS: &[&str] = &[
    "/help",
    "/tree",
    "/fork",
    "/checkpoints",
    "/restore",
    "/rewind",
    "/redo",
    "/model",
    "/worktree",
    "/session",
    "/quit",
];

/// Completion of command arguments: worktree subcommands and names, and
/// checkpoint ids, for the directory the live session is in now.
fn completions(ctx: &Ctx, cwd: Arc<Mutex<PathBuf>>) -> Completions {
    let runner = ctx.git();
    let state_dir = ctx.state_dir.clone();
    Arc::new(move |words: &[&str]| {
        let Ok(dir) = cwd.lock().map(|d| d.clone()) else {
            return Vec::new();
        };
        match words {
            ["/worktree"] => ["create", "enter", "dispose", "list"]
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            ["/worktree", "enter"] => bh_worktree::list(&runner, &dir)
                .map(|list| list.into_iter().filter_map(|w| w.name).collect())
                .unwrap_or_default(),
            // Only a store that exists: completing never creates one.
            ["/restore"] => {
                let opts = bh_checkpoint::StoreOptions::new(&state_dir);
                bh_checkpoint::Store::open_existing_in(&runner, &dir, &opts)
                    .ok()
                    .flatten()
                    .and_then(|store| store.list().ok())
                    .map(|list| list.into_iter().map(|c| c.id).collect())
                    .unwrap_or_default()
            }
            ["/restore", _, ..] => vec!["--exact".to_owned()],
            ["/rewind", ..] => ["--both", "--conversation", "--files"]
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            _ => Vec::new(),
        }
    })
}

pub(super) async fn run(live: &mut Live, ctx: &Ctx, args: &AgentArgs) -> Result<(), CliError> {
    let cwd = Arc::new(Mutex::new(live.cwd().to_path_buf()));
    let mut input = if std::io::stdin().is_terminal() {
        LineInput::editor(
            Some(ctx.state_dir.join("agent-history")),
            COMMANDS,
            completions(ctx, cwd.clone()),
        )
        .unwrap_or_else(|e| {
            errln!("bh: no line editor ({e}); reading plain lines");
            LineInput::lines()
        })
    } else {
        LineInput::lines()
    };
    let state = Arc::new(Mutex::new(CtrlC::default()));
    let quit = CancellationToken::new();
    let signals = {
        let state = state.clone();
        let quit = quit.clone();
        let mut signals = crate::signals::StopSignals::catch();
        tokio::spawn(async move {
            loop {
                let stop = signals.recv().await;
                let Ok(mut st) = state.lock() else { return };
                // SIGTERM and SIGHUP (killed, the terminal gone): a running
                // turn or move is aborted and the REPL exits once it has
                // ended (the aborted turn recorded, the move undone); at
                // the prompt it exits at once.
                if stop != crate::signals::Stop::Interrupt {
                    match &st.turn {
                        Some(t) => {
                            t.cancel();
                            st.exit_after_move = true;
                            errln!("\n(stopping: aborting, then exiting)");
                        }
                        None => {
                            errln!();
                            quit.cancel();
                        }
                    }
                    continue;
                }
                st.presses += 1;
                match &st.turn {
                    _ if st.presses == 2 && st.moving => {
                        st.exit_after_move = true;
                        errln!("\n(exiting once the move is undone; Ctrl-C again to exit now)");
                    }
                    _ if st.presses >= 2 => {
                        errln!();
                        quit.cancel();
                    }
                    Some(t) => {
                        t.cancel();
                        errln!("\n(aborting; Ctrl-C again to exit)");
                    }
                    None => errln!("\n(Ctrl-C again to exit)"),
                }
            }
        })
    };
    let result = repl(live, ctx, args, &mut input, &cwd, &state, &quit).await;
    signals.abort();
    if result.is_err() {
        // Ctrl-C twice (or a failed turn) ends the REPL as /quit does: the
        // session's path is the line a user needs to go on with it.
        errln!("session: {}", live.agent().session_path().display());
    }
    result
}

async fn repl(
    live: &mut Live,
    ctx: &Ctx,
    args: &AgentArgs,
    input: &mut LineInput,
    shown_cwd: &Mutex<PathBuf>,
    state: &Mutex<CtrlC>,
    quit: &CancellationToken,
) -> Result<(), CliError> {
    errln!(
        "bh agent: {} in {} — /help for commands",
        live.agent().session_path().display(),
        live.cwd().display()
    );
    let mut first_snapshot = FirstSnapshot::watch(live.agent());
    // The prompt names the worktree the session is in (after every move).
    let mut prompt = prompt_for(live);
    loop {
        if let Ok(mut c) = shown_cwd.lock() {
            live.cwd().clone_into(&mut c);
        }
        let read = tokio::select! {
            () = quit.cancelled() => return Err(interrupted()),
            read = input.read(&prompt) => read,
        };
        let line = match read {
            Input::Line(line) => line,
            Input::Eof => {
                outln!()?;
                break;
            }
            // Ctrl-C at the editor's prompt: the same two-press rule.
            Input::Interrupted => {
                let presses = state
                    .lock()
                    .map(|mut st| {
                        st.presses += 1;
                        st.presses
                    })
                    .unwrap_or(2);
                if presses >= 2 {
                    return Err(interrupted());
                }
                errln!("(Ctrl-C again to exit)");
                continue;
            }
        };
        if let Ok(mut st) = state.lock() {
            st.presses = 0;
        }
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let cancel = CancellationToken::new();
        if let Some(cmd) = line.strip_prefix('/') {
            let mut words = cmd.split_whitespace();
            let name = words.next().unwrap_or("");
            let rest: Vec<&str> = words.collect();
            if name == "worktree" {
                // Moves the live session; Ctrl-C cancels the preparation.
                if let Ok(mut st) = state.lock() {
                    st.begin(&cancel, true);
                }
                let result = tokio::select! {
                    () = quit.cancelled() => return Err(interrupted()),
                    r = switch::command(live, ctx, &rest, &cancel) => r,
                };
                let exit = state.lock().map(|mut st| st.end()).unwrap_or(false);
                if let Err(e) = result {
                    errln!("bh: {}", e.message);
                }
                prompt = prompt_for(live);
                if exit {
                    return Err(interrupted());
                }
                continue;
            }
            if name == "redo" {
                if let Err(e) = super::rewind::redo(live) {
                    errln!("bh: {}", e.message);
                }
                continue;
            }
            if name == "rewind" {
                if let Err(e) = super::rewind::command(live, &rest, input).await {
                    errln!("bh: {}", e.message);
                }
                continue;
            }
            match command(live, ctx, args, name, &rest) {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => errln!("bh: {}", e.message),
            }
            continue;
        }
        if let Ok(mut st) = state.lock() {
            st.begin(&cancel, false);
        }
        let agent = live.agent_mut();
        agent.reset_limits();
        let mut tool_output = ToolOutput::default();
        let mut sink = |e: bh_runtime::Event| {
            FirstSnapshot::on_event(&mut first_snapshot, &e);
            // The agent's sink cannot fail: a closed stdout is noted
            // (`ui::pipe_closed`) and the turn goes on to its end.
            drop(stream_event(e, &mut tool_output));
        };
        let result = tokio::select! {
            () = quit.cancelled() => return Err(interrupted()),
            r = agent.run(line, &cancel, &mut sink) => r,
        };
        let exit = state.lock().map(|mut st| st.end()).unwrap_or(false);
        outln!()?;
        match result {
            Ok(out) => {
                if let Some(err) = outcome_error(&out) {
                    errln!("[{}]", err.message);
                }
            }
            Err(e) => return Err(CliError::internal(e)),
        }
        if exit {
            return Err(interrupted());
        }
    }
    errln!("session: {}", live.agent().session_path().display());
    Ok(())
}

/// `> `, or `[NAME] > ` inside the managed worktree NAME.
fn prompt_for(live: &Live) -> String {
    match switch::current_worktree(live) {
        Some(name) => format!("[{name}] > "),
        None => "> ".to_owned(),
    }
}

/// One REPL command; `Ok(true)` quits.
fn command(
    live: &mut Live,
    ctx: &Ctx,
    args: &AgentArgs,
    name: &str,
    rest: &[&str],
) -> Result<bool, CliError> {
    let cwd = live.cwd().to_path_buf();
    let agent = live.agent_mut();
    let core = |e: bh_core::CoreError| CliError::internal(e);
    match name {
        "quit" | "exit" | "q" => return Ok(true),
        "help" | "?" => outln!("{HELP}")?,
        "session" => outln!("{}", agent.session_path().display())?,
        "tree" => {
            if let Some(entry) = rest.first() {
                let session = Session::load(agent.session_path()).map_err(session_error)?;
                let entry = bh_runtime::resolve_entry(&session, entry)
                    .map_err(rewind_error)?
                    .id
                    .clone();
                agent.branch(Some(&entry)).map_err(core)?;
                outln!("continuing from {entry}")?;
            } else {
                print_tree(agent.session_path(), agent.leaf())?;
            }
        }
        "fork" => {
            let session = Session::load(agent.session_path()).map_err(session_error)?;
            let cwd_s = bh_runtime::dir_str(&cwd).map_err(runtime_error)?;
            let target = ForkTarget::Dir(session_dir_for_cwd(&ctx.pi_agent_dir()?, &cwd_s));
            let entry = match rest.first() {
                Some(e) => Some(
                    bh_runtime::resolve_entry(&session, e)
                        .map_err(rewind_error)?
                        .id
                        .clone(),
                ),
                None => agent.leaf().map(str::to_owned),
            };
            let opts = ForkOptions {
                path_only: true,
                entry,
                cwd: Some(cwd_s),
                ..ForkOptions::default()
            };
            let forked = bh_session::fork(&session, &target, &opts).map_err(session_error)?;
            let writer = SessionWriter::open(&forked.path).map_err(session_error)?;
            agent.switch_session(writer).map_err(core)?;
            outln!("forked into {}", forked.path.display())?;
        }
        "checkpoints" => {
            let Some(store) = agent.checkpoint_store() else {
                return Err(CliError::usage("checkpoints are off"));
            };
            let list = store.list().map_err(CliError::internal)?;
            if list.is_empty() {
                outln!("(no checkpoints)")?;
            }
            for c in list {
                outln!(
                    "{}  #{:<4} {:<8} {} file(s) changed{}",
                    c.id,
                    c.seq,
                    c.tool,
                    c.files_changed,
                    c.entry.map(|e| format!("  entry {e}")).unwrap_or_default()
                )?;
            }
        }
        "restore" => {
            let Some(store) = agent.checkpoint_store() else {
                return Err(CliError::usage("checkpoints are off"));
            };
            let (id, paths, mode) = restore_args(rest)?;
            let out = store.restore(id, &paths, mode).map_err(checkpoint_error)?;
            outln!(
                "restored {} file(s){} from {} (undo: /restore {} --exact)",
                out.restored.len(),
                if out.deleted.is_empty() {
                    String::new()
                } else {
                    format!(", deleted {}", out.deleted.len())
                },
                out.checkpoint.id,
                out.safety.id
            )?;
        }
        "model" => {
            let Some(model) = rest.first() else {
                let m = agent.provider().model();
                outln!("{}/{}", m.provider, m.id)?;
                return Ok(false);
            };
            // The new model keeps the command line's --base-url and --max-retries.
            let p = build_provider_with(
                Some(model),
                None,
                args.base_url.as_deref(),
                args.max_retries,
                ctx,
            )?;
            agent.set_provider(p).map_err(core)?;
            outln!("model: {model}")?;
        }
        other => {
            return Err(CliError::usage(format!(
                "unknown command /{other} (/help lists them)"
            )));
        }
    }
    Ok(false)
}

/// The words after `/restore`: `ID [--exact] [PATH…]`, options anywhere
/// before a `--` (after it every word is a path).
fn restore_args<'a>(
    words: &[&'a str],
) -> Result<(&'a str, Vec<Vec<u8>>, bh_checkpoint::RestoreMode), CliError> {
    const USAGE: &str = "usage: /restore ID [--exact] [PATH…]";
    let mut mode = bh_checkpoint::RestoreMode::Additive;
    let mut id = None;
    let mut paths = Vec::new();
    let mut options = true;
    for w in words {
        match *w {
            "--" if options => options = false,
            "--exact" if options => mode = bh_checkpoint::RestoreMode::Exact,
            flag if options && flag.starts_with("--") => {
                return Err(CliError::usage(format!("unknown option {flag}; {USAGE}")));
            }
            word if id.is_none() => id = Some(word),
            path => paths.push(path.as_bytes().to_vec()),
        }
    }
    let id = id.ok_or_else(|| CliError::usage(USAGE))?;
    Ok((id, paths, mode))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use bh_checkpoint::RestoreMode;

    #[test]
    fn restore_reads_exact_as_the_flag_not_a_path() {
        let (id, paths, mode) = restore_args(&["ab12", "--exact"]).unwrap();
        assert_eq!((id, paths.len(), mode), ("ab12", 0, RestoreMode::Exact));
        let (id, paths, mode) = restore_args(&["--exact", "ab12", "src/a.rs"]).unwrap();
        assert_eq!((id, mode), ("ab12", RestoreMode::Exact));
        assert_eq!(paths, vec![b"src/a.rs".to_vec()]);
        let (_, paths, mode) = restore_args(&["ab12", "--", "--exact"]).unwrap();
        assert_eq!(
            (paths, mode),
            (vec![b"--exact".to_vec()], RestoreMode::Additive)
        );
        assert!(restore_args(&["ab12", "--exakt"]).is_err());
        assert!(restore_args(&[]).is_err());
    }
}
