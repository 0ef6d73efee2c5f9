//! `bh agent`: run the agent loop (`bh-core`) on a Pi session.
//!
//! Sessions as in Pi: `--session FILE` opens FILE or creates a new session at
//! exactly that path; `--continue` takes the newest session of the working
//! directory; `--fork FILE` copies FILE into a new session and continues it;
//! otherwise a new session goes to `<agent dir>/sessions/--<cwd>--/`, the agent
//! dir being `PI_CODING_AGENT_DIR` or `~/.pi/agent`. A resumed session works in
//! its header's `cwd` unless `--cwd` is given.
//!
//! Models: `--model PROVIDER/MODEL` (`anthropic/…`, `openai/…`, a provider of
//! Pi's `<agent dir>/models.json`, or any name with `--base-url`, spoken as
//! OpenAI Chat Completions); keys from `ANTHROPIC_API_KEY` / `OPENAI_API_KEY`
//! (or what models.json names). `--script FILE` or `--model scripted/FILE`
//! replays a scripted-provider file (see `bh_llm`'s docs for its format).
//!
//! Headless with `-p PROMPT` (more prompts as positional arguments, one user
//! turn each; without either, piped stdin is the prompt). `--json` streams one
//! JSON object per line, like Pi's `--mode json`: the session header first,
//! then the loop's events, ending with `run_end`. Exit codes: 0 when the model
//! stopped on its own, 7 (`limit`) when a hard limit fired, 8 (`interrupted`)
//! on Ctrl-C (the first aborts the turn, a second exits at once), 9
//! (`worker_failed`) when the model call failed.
//!
//! Interactive on a terminal without a prompt, or with `-i` (then commands
//! and prompts are read line by line from stdin, which is how the tests drive
//! it). `/worktree create|enter|dispose|list` moves the live session between
//! the main checkout and managed worktrees in-process (module `switch`): tools,
//! checkpoint store, session file and system prompt follow the new cwd. The
//! process's own current directory is only used to resolve command-line paths.

use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bh_checkpoint::{Store, StoreOptions};
use bh_core::{Agent, AgentConfig, Event, Limits, RunOutcome, RunStop};
use bh_llm::{Api, Config, HttpProvider, ModelRef, ModelSpec, Provider, ResolveOptions};
use bh_protocol::SessionHeader;
use bh_protocol::message::{ContentBlock, KnownBlock};
use bh_session::{
    ForkOptions, ForkTarget, Session, SessionWriter, list_sessions, new_session_id, now_iso,
    session_dir_for_cwd,
};
use bh_tools::{Profile, Toolbox, ToolboxOptions};
use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::context::Ctx;
use crate::error::{CliError, ErrorKind};
use crate::units::parse_duration;

mod switch;

const DEFAULT_SYSTEM_PROMPT: &str = "You are an expert coding assistant. You help users with \
coding tasks by reading files, executing commands, editing code, and writing new files. \
Use the tools to inspect and change the project; paths are relative to the working directory.";

#[derive(Args, Debug)]
pub struct AgentArgs {
    /// Open this session file, or create a new session at exactly this path.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["continue_session", "fork"])]
    session: Option<PathBuf>,
    /// Continue the most recent session of the working directory.
    #[arg(short = 'c', long = "continue", conflicts_with = "fork")]
    continue_session: bool,
    /// Fork this session file into a new session and continue there.
    #[arg(long, value_name = "FILE")]
    fork: Option<PathBuf>,
    /// Run headless with this prompt (more prompts may follow as arguments).
    #[arg(short = 'p', long = "print", value_name = "PROMPT")]
    prompt: Option<String>,
    /// Interactive session even when stdin is not a terminal (commands read line by line).
    #[arg(short = 'i', long, conflicts_with = "prompt")]
    interactive: bool,
    /// Further prompts, one user turn each.
    #[arg(value_name = "PROMPT")]
    prompts: Vec<String>,
    /// Working directory the tools are confined to (default: the session's, else the current).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// PROVIDER/MODEL (e.g. anthropic/claude-sonnet-4-5, openai/gpt-4.1, scripted/FILE).
    #[arg(long, value_name = "PROVIDER/MODEL")]
    model: Option<String>,
    /// Base URL of the provider (any OpenAI-compatible server for unknown providers).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Replay a scripted-provider file instead of calling a model.
    #[arg(long, value_name = "FILE", conflicts_with = "model")]
    script: Option<PathBuf>,
    /// Comma-separated tools to offer (default: read,ls,edit,write,bash,grep,find).
    #[arg(long, value_name = "LIST")]
    tools: Option<String>,
    /// Stop after this many tool calls.
    #[arg(long, value_name = "N")]
    max_tool_calls: Option<u64>,
    /// Stop after this many model calls (turns).
    #[arg(long, value_name = "N")]
    max_turns: Option<u64>,
    /// Stop after this much wall-clock time (e.g. 90s, 15m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<std::time::Duration>,
    /// Do not checkpoint before mutating tool calls.
    #[arg(long)]
    no_checkpoints: bool,
    /// Replace the default system prompt.
    #[arg(long, value_name = "TEXT")]
    system_prompt: Option<String>,
}

/// `PI_CODING_AGENT_DIR`, else `~/.pi/agent`.
/// `BH_CONFIG`, else `$XDG_CONFIG_HOME/better-harness/config.toml`, else
/// `~/.config/better-harness/config.toml`.
fn config_file(ctx: &Ctx) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BH_CONFIG").filter(|p| !p.is_empty()) {
        return Some(ctx.abs(Path::new(&p)));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .or_else(|| ctx.home.as_ref().map(|h| h.join(".config")))?;
    Some(base.join("better-harness").join("config.toml"))
}

pub(crate) fn session_error(e: bh_session::SessionError) -> CliError {
    use bh_session::SessionError as E;
    let kind = match &e {
        E::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            ErrorKind::NotFound
        }
        E::EntryNotFound { .. } => ErrorKind::NotFound,
        E::NotASession { .. } | E::Invalid { .. } => ErrorKind::Invalid,
        E::Exists { .. } => ErrorKind::Refused,
        _ => ErrorKind::Internal,
    };
    CliError::new(kind, e.to_string())
}

pub(crate) fn canonical_dir(p: &Path) -> Result<PathBuf, CliError> {
    let dir = std::fs::canonicalize(p).map_err(|e| {
        CliError::new(
            ErrorKind::NotFound,
            format!("working directory {}: {e}", p.display()),
        )
    })?;
    if !dir.is_dir() {
        return Err(CliError::usage(format!(
            "working directory {} is not a directory",
            dir.display()
        )));
    }
    Ok(dir)
}

fn dir_str(p: &Path) -> Result<String, CliError> {
    p.to_str().map(str::to_owned).ok_or_else(|| {
        CliError::usage(format!(
            "working directory {} is not valid UTF-8",
            p.display()
        ))
    })
}

/// The session writer and the working directory.
fn open_session(args: &AgentArgs, ctx: &Ctx) -> Result<(SessionWriter, PathBuf), CliError> {
    let cwd_override = args
        .cwd
        .as_deref()
        .map(|c| canonical_dir(&ctx.abs(c)))
        .transpose()?;
    let header_cwd = |s: &Session| s.header().and_then(|h| h.cwd.clone());
    if let Some(file) = &args.session {
        let file = ctx.abs(file);
        if file.exists() {
            let session = Session::load(&file).map_err(session_error)?;
            let cwd = match &cwd_override {
                Some(c) => c.clone(),
                None => header_cwd(&session)
                    .map(PathBuf::from)
                    .map_or_else(|| Ok(ctx.cwd.clone()), |c| canonical_dir(&c))?,
            };
            let writer = SessionWriter::open(&file).map_err(session_error)?;
            return Ok((writer, cwd));
        }
        let cwd = match cwd_override {
            Some(c) => c,
            None => canonical_dir(&ctx.cwd)?,
        };
        let header = SessionHeader::new(new_session_id(), now_iso(), dir_str(&cwd)?, None);
        let writer = SessionWriter::create(&file, &header).map_err(session_error)?;
        return Ok((writer, cwd));
    }
    let agent_dir = ctx.pi_agent_dir()?;
    if let Some(src) = &args.fork {
        let src = ctx.abs(src);
        let session = Session::load(&src).map_err(session_error)?;
        let cwd = match &cwd_override {
            Some(c) => c.clone(),
            None => header_cwd(&session)
                .map(PathBuf::from)
                .map_or_else(|| Ok(ctx.cwd.clone()), |c| canonical_dir(&c))?,
        };
        let target = ForkTarget::Dir(session_dir_for_cwd(&agent_dir, &dir_str(&cwd)?));
        let opts = ForkOptions {
            cwd: Some(dir_str(&cwd)?),
            ..ForkOptions::default()
        };
        let forked = bh_session::fork(&session, &target, &opts).map_err(session_error)?;
        let writer = SessionWriter::open(&forked.path).map_err(session_error)?;
        return Ok((writer, cwd));
    }
    let cwd = match cwd_override {
        Some(c) => c,
        None => canonical_dir(&ctx.cwd)?,
    };
    let cwd_s = dir_str(&cwd)?;
    if args.continue_session {
        let dir = session_dir_for_cwd(&agent_dir, &cwd_s);
        if dir.is_dir() {
            let newest = list_sessions(&dir)
                .map_err(session_error)?
                .into_iter()
                .max_by_key(|s| s.modified_ms);
            if let Some(s) = newest {
                let writer = SessionWriter::open(&s.path).map_err(session_error)?;
                return Ok((writer, cwd));
            }
        }
    }
    let writer = SessionWriter::create_for_cwd(&agent_dir, &cwd_s).map_err(session_error)?;
    Ok((writer, cwd))
}

/// Run a `!command` of a Pi config value; its trimmed stdout is the key.
fn run_key_command(cmd: &str) -> Option<String> {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn provider(args: &AgentArgs, ctx: &Ctx) -> Result<Arc<dyn Provider>, CliError> {
    build_provider(
        args.model.as_deref(),
        args.script.as_deref(),
        args.base_url.as_deref(),
        ctx,
    )
}

/// A provider for `--model`/`--script`/`--base-url` (also `/model` in the REPL).
pub(crate) fn build_provider(
    model: Option<&str>,
    script: Option<&Path>,
    base_url: Option<&str>,
    ctx: &Ctx,
) -> Result<Arc<dyn Provider>, CliError> {
    let script = match (script, model) {
        (Some(s), _) => Some(ctx.abs(s)),
        (None, Some(m)) => m.strip_prefix("scripted/").map(|f| ctx.abs(Path::new(f))),
        (None, None) => None,
    };
    if let Some(file) = script {
        let src = std::fs::read_to_string(&file).map_err(|e| {
            CliError::new(
                ErrorKind::NotFound,
                format!("script {}: {e}", file.display()),
            )
        })?;
        let model = ModelSpec::new("scripted", "scripted", Api::Scripted);
        let p = bh_llm::ScriptedProvider::from_str(&src, model)
            .map_err(|e| CliError::usage(format!("script {}: {e}", file.display())))?;
        return Ok(Arc::new(p));
    }
    let Some(model) = model else {
        return Err(CliError::usage(
            "no model: pass --model PROVIDER/MODEL or --script FILE",
        ));
    };
    let r: ModelRef = model.parse().map_err(CliError::usage)?;
    // Our own TOML config first (its entries win), then Pi's models.json.
    let mut config = match config_file(ctx) {
        Some(path) => match std::fs::read_to_string(&path) {
            Ok(src) => Config::from_toml(&src).map_err(|e| {
                CliError::new(ErrorKind::Invalid, format!("{}: {e}", path.display()))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Config::default(),
            Err(e) => {
                return Err(CliError::new(
                    ErrorKind::Invalid,
                    format!("{}: {e}", path.display()),
                ));
            }
        },
        None => Config::default(),
    };
    if let Ok(dir) = ctx.pi_agent_dir() {
        let models = dir.join("models.json");
        if let Ok(src) = std::fs::read_to_string(&models) {
            config.add_pi_models_json(&src).map_err(|e| {
                CliError::new(ErrorKind::Invalid, format!("{}: {e}", models.display()))
            })?;
        }
    }
    let env = |name: &str| std::env::var(name).ok();
    let source = config.key_source(&r.provider);
    let key = source
        .as_ref()
        .and_then(|k| k.resolve(&env, &run_key_command));
    // The hosted APIs need a key; a server at another base URL may not.
    if key.is_none()
        && base_url.is_none()
        && let Some(bh_llm::KeySource::Env(var)) = &source
    {
        return Err(CliError::usage(format!(
            "no API key for {}: set {var}",
            r.provider
        )));
    }
    let opts = ResolveOptions {
        base_url: base_url.map(str::to_owned),
        api_key: key,
    };
    let spec = config.resolve(&r, &opts).map_err(CliError::usage)?;
    let p = HttpProvider::new(spec).map_err(CliError::internal)?;
    Ok(Arc::new(p))
}

pub(crate) fn tool_list(args: &AgentArgs) -> Result<Vec<&'static bh_tools::ToolSpec>, CliError> {
    let all = Profile::Interactive.specs();
    let Some(list) = &args.tools else {
        return Ok(all.to_vec());
    };
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let spec = all
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| CliError::usage(format!("unknown tool {name:?}")))?;
        if !out.contains(spec) {
            out.push(*spec);
        }
    }
    Ok(out)
}

/// Where output goes: JSON lines or a person.
struct Printer {
    json: bool,
}

impl Printer {
    fn line(&self, v: &impl serde::Serialize) {
        if let Ok(text) = serde_json::to_string(v) {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{text}");
            let _ = out.flush();
        }
    }

    fn event(&self, e: Event) {
        if self.json {
            self.line(&e);
            return;
        }
        match e {
            Event::ToolExecutionStart {
                tool_name, args, ..
            } => {
                let what = args
                    .get("path")
                    .or_else(|| args.get("command"))
                    .or_else(|| args.get("pattern"))
                    .and_then(|v| v.as_str())
                    .unwrap_or("");
                eprintln!("→ {tool_name} {what}");
            }
            Event::ToolExecutionEnd {
                tool_name,
                is_error: true,
                result,
                ..
            } => {
                let text = result
                    .content
                    .iter()
                    .find_map(|b| match b {
                        ContentBlock::Known(KnownBlock::Text { text, .. }) => Some(text.as_str()),
                        _ => None,
                    })
                    .unwrap_or("");
                eprintln!(
                    "  {tool_name} failed: {}",
                    text.lines().next().unwrap_or("")
                );
            }
            Event::Checkpoint { id, .. } => eprintln!("  checkpoint {id}"),
            Event::Warning { message } => eprintln!("bh: warning: {message}"),
            Event::AutoRetryStart {
                attempt,
                max_attempts,
                error_message,
                ..
            } => {
                eprintln!("bh: retrying ({attempt}/{max_attempts}): {error_message}");
            }
            Event::AutoRetryEnd {
                success: false,
                final_error: Some(e),
                ..
            } => eprintln!("bh: retry failed: {e}"),
            _ => {}
        }
    }
}

fn final_text(out: &RunOutcome) -> String {
    out.last_assistant
        .as_ref()
        .map(|m| {
            m.content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Known(KnownBlock::Text { text, .. }) => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn outcome_error(out: &RunOutcome) -> Option<CliError> {
    let reason = out.reason.clone().unwrap_or_default();
    match out.stop {
        RunStop::Completed => None,
        RunStop::Error => Some(CliError::new(
            ErrorKind::WorkerFailed,
            format!("the model call failed: {reason}"),
        )),
        RunStop::Cancelled => Some(CliError::new(ErrorKind::Interrupted, reason)),
        RunStop::Limit => Some(CliError::new(
            ErrorKind::Limit,
            format!("{} limit: {reason}", out.limit.map_or("a", |l| l.as_str())),
        )),
    }
}

/// The parts of the runtime that belong to one working directory: the tools
/// confined to `cwd` and the checkpoint store of `cwd` (in the state dir;
/// `None` with `--no-checkpoints`, or with a warning when it cannot be opened).
pub(crate) fn runtime_parts(
    args: &AgentArgs,
    ctx: &Ctx,
    cwd: &Path,
    warn: &mut dyn FnMut(String),
) -> Result<(Arc<Toolbox>, Option<Arc<Store>>), CliError> {
    let toolbox = Toolbox::new(ToolboxOptions::new(
        cwd,
        Profile::Interactive,
        ctx.state_dir.join("tool-output"),
    ))
    .map_err(|e| CliError::new(ErrorKind::Refused, e.to_string()))?;
    let checkpoints = if args.no_checkpoints {
        None
    } else {
        match Store::open_in(&ctx.git(), cwd, &StoreOptions::new(&ctx.state_dir)) {
            Ok(store) => Some(Arc::new(store)),
            Err(e) => {
                warn(format!(
                    "checkpoints are off in {}: cannot open the store: {e}",
                    cwd.display()
                ));
                None
            }
        }
    };
    Ok((Arc::new(toolbox), checkpoints))
}

/// The agent's configuration around `cwd` (the system prompt names it).
pub(crate) fn agent_config(
    args: &AgentArgs,
    provider: Arc<dyn Provider>,
    tools: Option<Vec<&'static bh_tools::ToolSpec>>,
    cwd: &Path,
    toolbox: Arc<Toolbox>,
    checkpoints: Option<Arc<Store>>,
    session: SessionWriter,
) -> AgentConfig {
    AgentConfig {
        provider,
        toolbox,
        tools,
        session,
        checkpoints,
        system_prompt: Some(args.system_prompt.clone().unwrap_or_else(|| {
            format!(
                "{DEFAULT_SYSTEM_PROMPT}\nCurrent working directory: {}",
                cwd.display()
            )
        })),
        thinking: bh_llm::ThinkingLevel::Off,
        max_tokens: None,
        limits: Limits {
            max_tool_calls: args.max_tool_calls,
            timeout: args.timeout,
            max_turns: args.max_turns,
        },
    }
}

pub fn run(args: AgentArgs, ctx: &Ctx) -> Result<(), CliError> {
    let mut prompts: Vec<String> = args.prompt.iter().cloned().collect();
    prompts.extend(args.prompts.iter().cloned());
    let interactive = args.interactive || (prompts.is_empty() && std::io::stdin().is_terminal());
    if prompts.is_empty() && !interactive {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| CliError::internal(format!("cannot read stdin: {e}")))?;
        if text.trim().is_empty() {
            return Err(CliError::usage(
                "no prompt: pass -p PROMPT or pipe one on stdin",
            ));
        }
        prompts.push(text);
    }
    if interactive && ctx.json {
        return Err(CliError::usage("--json needs a prompt (-p PROMPT)"));
    }

    let provider = provider(&args, ctx)?;
    let tools = tool_list(&args)?;
    let (writer, cwd) = open_session(&args, ctx)?;
    let printer = Printer { json: ctx.json };
    if ctx.json {
        // Pi's JSON mode starts with the session header.
        if let Ok(s) = Session::load(writer.path())
            && let Some(h) = s.header()
        {
            printer.line(h);
        }
    }
    let (toolbox, checkpoints) = runtime_parts(&args, ctx, &cwd, &mut |message| {
        printer.event(Event::Warning { message })
    })?;
    let config = agent_config(
        &args,
        provider,
        Some(tools),
        &cwd,
        toolbox,
        checkpoints,
        writer,
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::internal(format!("cannot start the runtime: {e}")))?;
    let result = runtime.block_on(async move {
        let mut agent = Agent::new(config).map_err(|e| CliError::internal(e.to_string()))?;
        if interactive {
            return interactive_loop(&mut agent, ctx, &args, cwd).await;
        }
        let cancel = CancellationToken::new();
        let _signals = watch_ctrl_c(cancel.clone());
        let mut failure = None;
        for prompt in &prompts {
            let out = agent
                .run(prompt, &cancel, &mut |e| printer.event(e))
                .await
                .map_err(|e| CliError::internal(e.to_string()))?;
            if !ctx.json {
                let text = final_text(&out);
                if !text.is_empty() {
                    println!("{text}");
                }
            }
            if let Some(err) = outcome_error(&out) {
                failure = Some(err);
                break;
            }
        }
        if !ctx.json {
            eprintln!("session: {}", agent.session_path().display());
        }
        match failure {
            Some(err) => Err(err),
            None => Ok(()),
        }
    });
    runtime.shutdown_background();
    match result {
        // The JSONL stream already ended with `run_end`; an error document
        // would break it, so only the exit code reports the failure.
        Err(err) if ctx.json && err.kind != ErrorKind::Internal => {
            let _ = std::io::stdout().flush();
            eprintln!("bh: error: {}", err.message);
            std::process::exit(i32::from(err.kind.exit_code()));
        }
        other => other,
    }
}

/// Ctrl-C cancels the current turn; a second one exits at once (code 8).
fn watch_ctrl_c(cancel: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        cancel.cancel();
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(i32::from(ErrorKind::Interrupted.exit_code()));
        }
    })
}

/// Ctrl-C in the REPL: the running turn's (or `/worktree` move's) token and the presses since the
/// last prompt (the second press exits).
#[derive(Default)]
struct CtrlC {
    turn: Option<CancellationToken>,
    presses: u32,
    /// A `/worktree` move is running: the second press waits for it to be
    /// undone (its prepared session deleted) before exiting; a third exits.
    moving: bool,
    exit_after_move: bool,
}

const HELP: &str = "\
/tree [ENTRY]            show the session tree; with ENTRY, continue from that entry
/fork [ENTRY]            fork the session (root → ENTRY, default the leaf) and continue in the fork
/checkpoints             list the project's checkpoints
/restore ID [PATH…]      restore files from a checkpoint (a pre-restore checkpoint is taken first)
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

/// A line-based interactive session: streamed answers, `/tree`, `/fork`,
/// `/checkpoints`, `/restore`, `/model`, `/worktree`, `/quit`; Ctrl-C aborts
/// the running turn (or a `/worktree` move being prepared), a second Ctrl-C
/// exits. The working directory is the session's, never the process's: a
/// `/worktree` move changes it (see [`switch`]).
async fn interactive_loop(
    agent: &mut Agent,
    ctx: &Ctx,
    args: &AgentArgs,
    mut cwd: PathBuf,
) -> Result<(), CliError> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let state = Arc::new(std::sync::Mutex::new(CtrlC::default()));
    let _signals = {
        let state = state.clone();
        tokio::spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                let Ok(mut st) = state.lock() else { return };
                st.presses += 1;
                match &st.turn {
                    _ if st.presses == 2 && st.moving => {
                        st.exit_after_move = true;
                        eprintln!("\n(exiting once the move is undone; Ctrl-C again to exit now)");
                    }
                    _ if st.presses >= 2 => {
                        eprintln!();
                        std::process::exit(i32::from(ErrorKind::Interrupted.exit_code()));
                    }
                    Some(t) => {
                        t.cancel();
                        eprintln!("\n(aborting; Ctrl-C again to exit)");
                    }
                    None => eprintln!("\n(Ctrl-C again to exit)"),
                }
            }
        })
    };
    eprintln!(
        "bh agent: {} in {} — /help for commands",
        agent.session_path().display(),
        cwd.display()
    );
    loop {
        {
            let mut out = std::io::stdout().lock();
            let _ = write!(out, "> ");
            let _ = out.flush();
        }
        let Some(line) = rx.recv().await else {
            println!();
            break;
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(cmd) = line.strip_prefix('/') {
            let mut words = cmd.split_whitespace();
            let name = words.next().unwrap_or("");
            let rest: Vec<&str> = words.collect();
            if name == "worktree" {
                // Moves the live session; Ctrl-C cancels the preparation.
                let cancel = CancellationToken::new();
                if let Ok(mut st) = state.lock() {
                    st.turn = Some(cancel.clone());
                    st.presses = 0;
                    st.moving = true;
                }
                let result = switch::command(agent, &mut cwd, ctx, args, &rest, &cancel).await;
                let exit = state.lock().map(|mut st| {
                    st.turn = None;
                    st.presses = 0;
                    st.moving = false;
                    std::mem::take(&mut st.exit_after_move)
                });
                if let Err(e) = result {
                    eprintln!("bh: {}", e.message);
                }
                if exit.unwrap_or(false) {
                    std::process::exit(i32::from(ErrorKind::Interrupted.exit_code()));
                }
                continue;
            }
            match command(agent, ctx, args, &cwd, name, &rest) {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => eprintln!("bh: {}", e.message),
            }
            continue;
        }
        let cancel = CancellationToken::new();
        if let Ok(mut st) = state.lock() {
            st.turn = Some(cancel.clone());
            st.presses = 0;
        }
        agent.reset_limits();
        let mut tool_output = ToolOutput::default();
        let result = agent
            .run(line, &cancel, &mut |e| stream_event(e, &mut tool_output))
            .await;
        if let Ok(mut st) = state.lock() {
            st.turn = None;
            st.presses = 0;
        }
        println!();
        match result {
            Ok(out) => {
                if let Some(err) = outcome_error(&out) {
                    eprintln!("[{}]", err.message);
                }
            }
            Err(e) => return Err(CliError::internal(e)),
        }
    }
    eprintln!("session: {}", agent.session_path().display());
    Ok(())
}

/// A running tool's output as printed so far (interactive mode).
#[derive(Default)]
struct ToolOutput {
    call: String,
    /// The text of the last update.
    last: String,
    /// Output bytes printed (the whole output's count, not the tail's).
    printed: usize,
    /// Whether the last byte printed ended a line.
    mid_line: bool,
}

impl ToolOutput {
    /// Print what an update adds to the previous one. Updates carry the tail
    /// of the output so far; once it is truncated, the new part is the last
    /// `totalBytes - printed` bytes of the tail.
    fn update(&mut self, call: &str, partial: &bh_core::ToolExecutionResult) {
        if self.call != call {
            *self = ToolOutput {
                call: call.to_owned(),
                ..ToolOutput::default()
            };
        }
        let text: String = partial
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Known(KnownBlock::Text { text, .. }) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let total = partial
            .details
            .as_ref()
            .and_then(|d| d.pointer("/truncation/totalBytes"))
            .and_then(|v| v.as_u64())
            .map_or(text.len(), |n| usize::try_from(n).unwrap_or(usize::MAX));
        let new = if total <= text.len() && text.starts_with(&self.last) {
            &text[self.last.len()..]
        } else {
            let n = total.saturating_sub(self.printed).min(text.len());
            let mut start = text.len() - n;
            while !text.is_char_boundary(start) {
                start += 1;
            }
            &text[start..]
        };
        if !new.is_empty() {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "{new}");
            let _ = err.flush();
            self.mid_line = !new.ends_with('\n');
        }
        self.printed = total;
        self.last = text;
    }

    /// The tool ended: finish the line its output left open.
    fn end(&mut self) {
        if self.mid_line {
            eprintln!();
        }
        *self = ToolOutput::default();
    }
}

/// Streams an event to the terminal: answer text on stdout, the rest on stderr
/// (a running tool's output too, as it arrives).
fn stream_event(e: Event, tool_output: &mut ToolOutput) {
    match e {
        Event::ToolExecutionUpdate {
            tool_call_id,
            partial_result,
            ..
        } => tool_output.update(&tool_call_id, &partial_result),
        Event::MessageUpdate {
            assistant_message_event:
                bh_core::AssistantMessageEvent {
                    delta: bh_core::AssistantDelta::TextDelta { delta, .. },
                    ..
                },
            ..
        } => {
            let mut out = std::io::stdout().lock();
            let _ = write!(out, "{delta}");
            let _ = out.flush();
        }
        Event::MessageUpdate {
            assistant_message_event:
                bh_core::AssistantMessageEvent {
                    delta: bh_core::AssistantDelta::ThinkingDelta { delta, .. },
                    ..
                },
            ..
        } => eprint!("{delta}"),
        Event::MessageUpdate {
            assistant_message_event:
                bh_core::AssistantMessageEvent {
                    delta: bh_core::AssistantDelta::ThinkingEnd { .. },
                    ..
                },
            ..
        } => eprintln!(),
        other => {
            if matches!(other, Event::ToolExecutionStart { .. }) {
                println!();
            }
            if matches!(other, Event::ToolExecutionEnd { .. }) {
                tool_output.end();
            }
            Printer { json: false }.event(other);
        }
    }
}

fn short(text: &str, n: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() > n {
        format!("{}…", line.chars().take(n).collect::<String>())
    } else {
        line.to_owned()
    }
}

/// One REPL command; `Ok(true)` quits.
fn command(
    agent: &mut Agent,
    ctx: &Ctx,
    args: &AgentArgs,
    cwd: &Path,
    name: &str,
    rest: &[&str],
) -> Result<bool, CliError> {
    let core = |e: bh_core::CoreError| CliError::internal(e);
    match name {
        "quit" | "exit" | "q" => return Ok(true),
        "help" | "?" => println!("{HELP}"),
        "session" => println!("{}", agent.session_path().display()),
        "tree" => {
            if let Some(entry) = rest.first() {
                agent.branch(Some(entry)).map_err(core)?;
                println!("continuing from {entry}");
            } else {
                print_tree(agent.session_path(), agent.leaf())?;
            }
        }
        "fork" => {
            let session = Session::load(agent.session_path()).map_err(session_error)?;
            let cwd_s = dir_str(cwd)?;
            let target = ForkTarget::Dir(session_dir_for_cwd(&ctx.pi_agent_dir()?, &cwd_s));
            let opts = ForkOptions {
                path_only: true,
                entry: rest
                    .first()
                    .map(|s| (*s).to_owned())
                    .or_else(|| agent.leaf().map(str::to_owned)),
                cwd: Some(cwd_s),
                ..ForkOptions::default()
            };
            let forked = bh_session::fork(&session, &target, &opts).map_err(session_error)?;
            let writer = SessionWriter::open(&forked.path).map_err(session_error)?;
            agent.switch_session(writer).map_err(core)?;
            println!("forked into {}", forked.path.display());
        }
        "checkpoints" => {
            let Some(store) = agent.checkpoint_store() else {
                return Err(CliError::usage("checkpoints are off"));
            };
            let list = store.list().map_err(CliError::internal)?;
            if list.is_empty() {
                println!("(no checkpoints)");
            }
            for c in list {
                println!(
                    "{}  #{:<4} {:<8} {} file(s) changed{}",
                    c.id,
                    c.seq,
                    c.tool,
                    c.files_changed,
                    c.entry.map(|e| format!("  entry {e}")).unwrap_or_default()
                );
            }
        }
        "restore" => {
            let Some(store) = agent.checkpoint_store() else {
                return Err(CliError::usage("checkpoints are off"));
            };
            let Some(id) = rest.first() else {
                return Err(CliError::usage("usage: /restore ID [PATH…]"));
            };
            let paths: Vec<Vec<u8>> = rest[1..].iter().map(|p| p.as_bytes().to_vec()).collect();
            let out = store
                .restore(id, &paths, bh_checkpoint::RestoreMode::Additive)
                .map_err(CliError::internal)?;
            println!(
                "restored {} file(s) from {} (undo: /restore {})",
                out.restored.len(),
                out.checkpoint.id,
                out.safety.id
            );
        }
        "model" => {
            let Some(model) = rest.first() else {
                let m = agent.provider().model();
                println!("{}/{}", m.provider, m.id);
                return Ok(false);
            };
            let p = build_provider(Some(model), None, args.base_url.as_deref(), ctx)?;
            agent.set_provider(p).map_err(core)?;
            println!("model: {model}");
        }
        other => {
            return Err(CliError::usage(format!(
                "unknown command /{other} (/help lists them)"
            )));
        }
    }
    Ok(false)
}

/// The session tree, one entry a line, the active leaf marked.
fn print_tree(path: &Path, leaf: Option<&str>) -> Result<(), CliError> {
    let s = Session::load(path).map_err(session_error)?;
    let (roots, children) = s.children_map();
    let entries = s.entries();
    let mut stack: Vec<(usize, usize)> = roots.iter().rev().map(|&r| (r, 0)).collect();
    while let Some((ix, depth)) = stack.pop() {
        let e = &entries[ix];
        let what = match &e.role {
            Some(role) => {
                let raw = s.message_raw(e).ok().flatten();
                let text = raw
                    .and_then(|r| serde_json::from_str::<serde_json::Value>(r.get()).ok())
                    .map(|v| message_summary(&v))
                    .unwrap_or_default();
                format!("{role}: {}", short(&text, 60))
            }
            None => e.kind.as_str().to_owned(),
        };
        let mark = if Some(e.id.as_str()) == leaf {
            " ◀ leaf"
        } else {
            ""
        };
        println!("{}{} {what}{mark}", "  ".repeat(depth), e.id);
        for &c in children[ix].iter().rev() {
            stack.push((c, depth + 1));
        }
    }
    Ok(())
}

fn message_summary(v: &serde_json::Value) -> String {
    let Some(content) = v.get("content") else {
        return String::new();
    };
    if let Some(s) = content.as_str() {
        return s.to_owned();
    }
    let mut parts = Vec::new();
    for b in content.as_array().into_iter().flatten() {
        match b.get("type").and_then(|t| t.as_str()) {
            Some("text") => parts.push(b["text"].as_str().unwrap_or("").to_owned()),
            Some("toolCall") => parts.push(format!("[{}]", b["name"].as_str().unwrap_or(""))),
            _ => {}
        }
    }
    if parts.is_empty()
        && let Some(err) = v.get("errorMessage").and_then(|e| e.as_str())
    {
        return format!("({err})");
    }
    parts.join(" ")
}
