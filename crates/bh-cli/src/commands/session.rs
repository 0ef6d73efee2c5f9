//! `bh session …`: read, validate, fork and list Pi coding-agent sessions.

use std::io::Write;
use std::path::{Path, PathBuf};

use bh_session::{
    ForkOptions, ForkTarget, Problem, Session, SessionError, list_sessions, session_dir_for_cwd,
};
use clap::Subcommand;
use serde_json::{Value, json};

use crate::context::Ctx;
use crate::display;
use crate::error::{CliError, ErrorKind, print_json};
use crate::units::human_size;

mod view;
use crate::command_error::session_error;
pub(crate) use view::tree_text;
use view::{export, tree};

#[derive(Subcommand, Debug)]
pub enum SessionCmd {
    /// Header, counts, active leaf, name, models, tokens and cost, problems.
    Show {
        /// The session: a file (.jsonl), or a session id prefix as Pi takes it.
        file: PathBuf,
        /// The HTML report instead (as `bh session export --html`, and as
        /// `bh exec show ID --html` for a run).
        #[arg(long)]
        html: bool,
        /// With --html: write the report here instead of to stdout (refused
        /// if it exists, unless --force).
        #[arg(long, short = 'o', value_name = "FILE", requires = "html")]
        out: Option<PathBuf>,
        /// With --html: replace an existing --out file.
        #[arg(long, requires = "html")]
        force: bool,
    },
    /// The entry tree as `git log --graph` draws history: the active path on
    /// the left, side branches to its right, runs of tool steps folded.
    Tree {
        /// The session: a file, or a session id prefix as Pi takes it.
        file: PathBuf,
        /// One row per entry: do not fold runs of tool steps.
        #[arg(long)]
        full: bool,
    },
    /// Check that files are structurally sound; every problem with its line.
    Validate {
        /// The session files (or session id prefixes) to check.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// List every problem (by default a file's first 20, then a count).
        #[arg(long)]
        all: bool,
    },
    /// The messages a model would see (exactly as Pi builds them).
    Context {
        /// The session: a file, or a session id prefix as Pi takes it.
        file: PathBuf,
        /// Build the context for this entry (id or unique prefix of at least 4
        /// hex digits) instead of the active leaf.
        #[arg(long, value_name = "ID")]
        entry: Option<String>,
    },
    /// Write a fork of a session to a new file and print its path.
    Fork {
        /// The session to fork: a file, or a session id prefix as Pi takes it.
        file: PathBuf,
        /// Fork at this entry (id or unique prefix of at least 4 hex digits;
        /// default: the active leaf). Whole-tree forks
        /// make it the active leaf by appending an entry under it.
        #[arg(long, value_name = "ID")]
        entry: Option<String>,
        /// Copy only the root→entry path (Pi's createBranchedSession)
        /// instead of the whole tree (Pi's forkFrom).
        #[arg(long)]
        path_only: bool,
        /// Working directory recorded in the new header; the fork goes to
        /// that project's session folder (default: the source's cwd and folder).
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// Exact output path (refused if it exists).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// A self-contained HTML report of a session (one file, no network): the
    /// tree, every message, tool calls with their diffs, checkpoint markers.
    Export {
        /// The session: a file, or a session id prefix as Pi takes it.
        file: PathBuf,
        /// Write HTML (the only format so far; the default).
        #[arg(long)]
        html: bool,
        /// Write the report here instead of to stdout (refused if it exists,
        /// unless --force).
        #[arg(long, short = 'o', value_name = "FILE")]
        out: Option<PathBuf>,
        /// Replace an existing --out file.
        #[arg(long)]
        force: bool,
    },
    /// The sessions Pi keeps for a project, newest first.
    #[command(visible_alias = "ls")]
    List {
        /// Project directory (default: the current directory, see `-C`).
        #[arg(long, visible_alias = "project", value_name = "DIR")]
        cwd: Option<PathBuf>,
    },
}

pub fn run(cmd: SessionCmd, ctx: &Ctx) -> Result<(), CliError> {
    match cmd {
        SessionCmd::Show {
            file,
            html: true,
            out,
            force,
        } => export(ctx, &file, out.as_deref(), force),
        SessionCmd::Show { file, .. } => show(ctx, &file),
        SessionCmd::Tree { file, full } => tree(ctx, &file, full),
        SessionCmd::Validate { files, all } => validate(ctx, &files, all),
        SessionCmd::Context { file, entry } => context(ctx, &file, entry.as_deref()),
        SessionCmd::Fork {
            file,
            entry,
            path_only,
            cwd,
            out,
        } => fork(ctx, &file, entry, path_only, cwd, out),
        SessionCmd::Export {
            file,
            html: _,
            out,
            force,
        } => export(ctx, &file, out.as_deref(), force),
        SessionCmd::List { cwd } => ls(ctx, cwd),
    }
}

fn load(ctx: &Ctx, file: &Path) -> Result<Session, CliError> {
    load_resolved(&crate::names::session_path(ctx, file)?, file)
}

/// [`load`] of `path`, what `file` (as the user gave it) resolved to.
fn load_resolved(path: &Path, file: &Path) -> Result<Session, CliError> {
    if path.is_dir() {
        return Err(CliError::new(
            ErrorKind::Usage,
            format!("{}: is a directory, not a session file", file.display()),
        ));
    }
    Session::load(path).map_err(|e| match e {
        SessionError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            CliError::new(
                ErrorKind::NotFound,
                format!("{}: no such file", file.display()),
            )
        }
        other => session_error(other),
    })
}

/// Refuses a file that is not a Pi session at all (no session header), with
/// the validator's own message, instead of listing a problem per line.
fn require_session(s: &Session, file: &Path) -> Result<(), CliError> {
    s.require_header(&format!("{}", file.display()))
        .map(|_| ())
        .map_err(session_error)
}

/// Human output: every line with its control characters escaped, since
/// sessions and file names are text a stranger may have written.
fn out(text: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            stdout.write_all(b"\n")?;
        }
        stdout.write_all(display::escape(line).as_bytes())?;
    }
    stdout.flush()?;
    Ok(())
}

/// `LINE: error|warning: message (entry ID)`.
fn problem_line(p: &Problem) -> String {
    let sev = if p.is_error() { "error" } else { "warning" };
    let mut t = format!("{}: {sev}: {}", p.line, p.message);
    if let Some(id) = &p.entry_id {
        t.push_str(&format!(" (entry {id})"));
    }
    t
}

fn problems_json(problems: &[Problem]) -> Value {
    serde_json::to_value(problems).unwrap_or(Value::Null)
}

// ----- show ------------------------------------------------------------------

fn show(ctx: &Ctx, given: &Path) -> Result<(), CliError> {
    // An id prefix is shown as the file it named.
    let resolved = crate::names::session_path(ctx, given)?;
    let s = load_resolved(&resolved, given)?;
    require_session(&s, given)?;
    let file = resolved.as_path();
    let stats = s.stats();
    let leaf = s.leaf().map(|e| e.id.clone());
    if ctx.json {
        let doc = json!({
            "file": file.display().to_string(),
            "header": s.header(),
            "version": s.source_version(),
            "entries": stats.entries,
            "entryTypes": stats.entry_types,
            "messages": stats.messages,
            "roles": stats.roles,
            "leaf": leaf,
            "name": s.name(),
            "models": stats.models,
            "totals": stats.totals,
            "labels": s.labels().iter().map(|l| json!({"targetId": l.target_id, "label": l.label})).collect::<Vec<_>>(),
            "valid": s.is_valid(),
            "problems": problems_json(s.problems()),
        });
        return print_json(&doc);
    }
    let mut t = String::new();
    t.push_str(&format!("file:      {}\n", file.display()));
    match s.header() {
        Some(h) => {
            t.push_str(&format!("session:   {}\n", h.id));
            t.push_str(&format!(
                "version:   {}{}\n",
                s.source_version(),
                if s.source_version() < 3 {
                    " (migrated to 3 in memory)"
                } else {
                    ""
                }
            ));
            if let Some(ts) = &h.timestamp {
                t.push_str(&format!("created:   {ts}\n"));
            }
            if let Some(cwd) = &h.cwd {
                t.push_str(&format!("cwd:       {cwd}\n"));
            }
            if let Some(p) = &h.parent_session {
                t.push_str(&format!("parent:    {p}\n"));
            }
        }
        None => t.push_str("session:   (no header)\n"),
    }
    if let Some(name) = s.name() {
        t.push_str(&format!("name:      {name}\n"));
    }
    let types: Vec<String> = stats
        .entry_types
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    t.push_str(&format!(
        "entries:   {} ({})\n",
        stats.entries,
        types.join(", ")
    ));
    let roles: Vec<String> = stats
        .roles
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    t.push_str(&format!(
        "messages:  {} ({})\n",
        stats.messages,
        roles.join(", ")
    ));
    t.push_str(&format!(
        "leaf:      {}\n",
        leaf.as_deref().unwrap_or("(none)")
    ));
    t.push_str(&format!(
        "models:    {}\n",
        if stats.models.is_empty() {
            "(none)".to_owned()
        } else {
            stats.models.join(", ")
        }
    ));
    let tot = stats.totals;
    t.push_str(&format!(
        "tokens:    {} (input {}, output {}, cache read {}, cache write {})\n",
        tot.total_tokens, tot.input, tot.output, tot.cache_read, tot.cache_write
    ));
    t.push_str(&format!("cost:      ${:.6}\n", tot.cost));
    if !s.labels().is_empty() {
        let labels: Vec<String> = s
            .labels()
            .iter()
            .map(|l| format!("{}={}", l.target_id, l.label))
            .collect();
        t.push_str(&format!("labels:    {}\n", labels.join(", ")));
    }
    if s.problems().is_empty() {
        t.push_str("problems:  none\n");
    } else {
        t.push_str(&format!("problems:  {}\n", s.problems().len()));
        for p in s.problems() {
            t.push_str(&format!("  {p}\n"));
        }
    }
    out(&t)
}

// ----- validate --------------------------------------------------------------

/// Problems a file's human report lists before it counts the rest.
const MAX_PROBLEMS_SHOWN: usize = 20;

fn validate(ctx: &Ctx, files: &[PathBuf], all: bool) -> Result<(), CliError> {
    let mut reports = Vec::new();
    let mut invalid = 0usize;
    let mut missing = 0usize;
    let mut text = String::new();
    for f in files {
        match load(ctx, f) {
            Ok(s) => {
                let valid = s.is_valid();
                if !valid {
                    invalid += 1;
                }
                let errors = s.errors().count();
                let warnings = s.problems().len() - errors;
                text.push_str(&format!(
                    "{}: {} ({errors} error(s), {warnings} warning(s))\n",
                    f.display(),
                    if valid { "ok" } else { "INVALID" }
                ));
                // A file that is not a session at all (HTML, a log) has a
                // problem per line: show the first few and count the rest.
                let problems = s.problems();
                let shown = if all {
                    problems.len()
                } else {
                    problems.len().min(MAX_PROBLEMS_SHOWN)
                };
                for p in &problems[..shown] {
                    text.push_str(&format!("{}:{}\n", f.display(), problem_line(p)));
                }
                if shown < problems.len() {
                    text.push_str(&format!(
                        "{}: … {} more problem(s) (--all shows every one, --json lists them)\n",
                        f.display(),
                        problems.len() - shown
                    ));
                }
                reports.push(json!({
                    "file": f.display().to_string(),
                    "valid": valid,
                    "errors": errors,
                    "warnings": warnings,
                    "problems": problems_json(s.problems()),
                }));
            }
            Err(e) if e.kind == ErrorKind::NotFound => {
                missing += 1;
                text.push_str(&format!("{}: MISSING ({})\n", f.display(), e.message));
                reports.push(json!({
                    "file": f.display().to_string(),
                    "valid": false,
                    "missing": true,
                    "error": e.message,
                }));
            }
            Err(e) => return Err(e),
        }
    }
    let failure = if missing > 0 {
        Some(CliError::new(
            ErrorKind::NotFound,
            format!("{missing} of {} file(s) not found", files.len()),
        ))
    } else if invalid > 0 {
        Some(CliError::new(
            ErrorKind::Invalid,
            format!("{invalid} of {} file(s) failed validation", files.len()),
        ))
    } else {
        None
    };
    if ctx.json {
        let doc = json!({ "valid": failure.is_none(), "files": reports });
        match failure {
            None => print_json(&doc),
            // One JSON document: the report, with the standard error object.
            Some(err) => Err(err.with_details(doc)),
        }
    } else {
        out(&text)?;
        match failure {
            None => Ok(()),
            Some(err) => Err(err),
        }
    }
}

// ----- context ---------------------------------------------------------------

fn preview(v: &Value) -> String {
    fn content_text(c: &Value) -> String {
        match c {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .map(|b| match b.get("type").and_then(Value::as_str) {
                    Some("text") => b
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    Some("thinking") => format!(
                        "(thinking) {}",
                        b.get("thinking").and_then(Value::as_str).unwrap_or("")
                    ),
                    Some("toolCall") => format!(
                        "(tool call {} {})",
                        b.get("name").and_then(Value::as_str).unwrap_or("?"),
                        b.get("arguments").map(Value::to_string).unwrap_or_default()
                    ),
                    Some("image") => "(image)".to_owned(),
                    Some(other) => format!("({other})"),
                    None => String::new(),
                })
                .collect::<Vec<_>>()
                .join(" "),
            _ => String::new(),
        }
    }
    let role = v.get("role").and_then(Value::as_str).unwrap_or("?");
    let text = match role {
        "branchSummary" | "compactionSummary" => v
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        "bashExecution" => format!(
            "$ {}\n{}",
            v.get("command").and_then(Value::as_str).unwrap_or(""),
            v.get("output").and_then(Value::as_str).unwrap_or("")
        ),
        "system" => {
            let sections: Vec<String> = v
                .get("sections")
                .and_then(Value::as_object)
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            format!("(sections: {})", sections.join(", "))
        }
        _ => v.get("content").map(content_text).unwrap_or_default(),
    };
    let mut one: String = text.replace('\n', " ⏎ ");
    if one.chars().count() > 200 {
        one = one.chars().take(200).collect::<String>() + "…";
    }
    one
}

fn context(ctx: &Ctx, file: &Path, entry: Option<&str>) -> Result<(), CliError> {
    let s = load(ctx, file)?;
    if s.header().is_none() {
        return Err(CliError::new(
            ErrorKind::Invalid,
            format!("{}: not a Pi session (no header)", file.display()),
        ));
    }
    let entry = entry.map(|q| crate::names::entry_id(&s, q)).transpose()?;
    let c = s.context(entry.as_deref()).map_err(session_error)?;
    if ctx.json {
        let messages: Vec<Value> = c
            .messages
            .iter()
            .map(|m| serde_json::from_str(m.message.get()).unwrap_or(Value::Null))
            .collect();
        return print_json(&json!({
            "file": file.display().to_string(),
            "leaf": c.leaf,
            "thinkingLevel": c.thinking_level,
            "model": c.model,
            "system": c.system,
            "entryIds": c.messages.iter().map(|m| m.entry_id.clone()).collect::<Vec<_>>(),
            "messages": messages,
        }));
    }
    let mut t = String::new();
    t.push_str(&format!(
        "leaf {}  thinking {}  model {}\n",
        c.leaf.as_deref().unwrap_or("(none)"),
        c.thinking_level,
        c.model
            .as_ref()
            .map(|m| format!(
                "{}/{}",
                m.provider.as_deref().unwrap_or("?"),
                m.model_id.as_deref().unwrap_or("?")
            ))
            .unwrap_or_else(|| "(none)".to_owned())
    ));
    if let Some(sys) = &c.system {
        let names: Vec<&str> = sys.sections.iter().map(|(n, _)| n.as_str()).collect();
        t.push_str(&format!(
            "system prompt: sections [{}]  tools [{}]\n",
            names.join(", "),
            sys.tools.join(", ")
        ));
    }
    for (i, m) in c.messages.iter().enumerate() {
        let v: Value = serde_json::from_str(m.message.get()).unwrap_or(Value::Null);
        let role = v.get("role").and_then(Value::as_str).unwrap_or("?");
        t.push_str(&format!(
            "[{}] {role} ({}): {}\n",
            i + 1,
            m.entry_id,
            preview(&v)
        ));
    }
    if c.messages.is_empty() {
        t.push_str("(no messages)\n");
    }
    out(&t)
}

// ----- fork ------------------------------------------------------------------

fn fork(
    ctx: &Ctx,
    file: &Path,
    entry: Option<String>,
    path_only: bool,
    cwd: Option<PathBuf>,
    out_path: Option<PathBuf>,
) -> Result<(), CliError> {
    // Resolved once: the file forked is the file read.
    let src_path = crate::names::session_path(ctx, file)?;
    let s = load_resolved(&src_path, file)?;
    if s.header().is_none() {
        return Err(CliError::new(
            ErrorKind::Invalid,
            format!(
                "cannot fork: {}: source session file is empty or invalid",
                file.display()
            ),
        ));
    }
    let entry = entry.map(|q| crate::names::entry_id(&s, &q)).transpose()?;
    let cwd = cwd.map(|c| ctx.abs(&c).display().to_string());
    let target = match (&out_path, &cwd) {
        (Some(o), _) => ForkTarget::File(ctx.abs(o)),
        (None, Some(c)) => ForkTarget::Dir(session_dir_for_cwd(&ctx.pi_agent_dir()?, c)),
        (None, None) => ForkTarget::Dir(bh_session::fork::default_fork_dir(&src_path)),
    };
    let opts = ForkOptions {
        path_only,
        entry,
        cwd,
        ..ForkOptions::default()
    };
    let forked = bh_session::fork(&s, &target, &opts).map_err(session_error)?;
    if ctx.json {
        return print_json(&json!({
            "path": forked.path.display().to_string(),
            "sessionId": forked.session_id,
            "entries": forked.entries,
            "leaf": forked.leaf,
            "parentSession": src_path.display().to_string(),
            "pathOnly": path_only,
        }));
    }
    out(&format!("{}\n", forked.path.display()))
}

// ----- ls --------------------------------------------------------------------

fn ls(ctx: &Ctx, cwd: Option<PathBuf>) -> Result<(), CliError> {
    let cwd = cwd.map(|c| ctx.abs(&c)).unwrap_or_else(|| ctx.cwd.clone());
    let dir = session_dir_for_cwd(&ctx.pi_agent_dir()?, &cwd.display().to_string());
    let sessions = list_sessions(&dir).map_err(session_error)?;
    if ctx.json {
        return print_json(&json!({
            "dir": dir.display().to_string(),
            "cwd": cwd.display().to_string(),
            "sessions": sessions,
        }));
    }
    let mut t = String::new();
    if sessions.is_empty() {
        t.push_str(&format!("no sessions in {}\n", dir.display()));
    }
    for s in &sessions {
        let when = jiff::Timestamp::from_millisecond(s.modified_ms)
            .map(|t| t.strftime("%Y-%m-%d %H:%M").to_string())
            .unwrap_or_else(|_| "?".to_owned());
        let mut first: String = s.first_message.replace('\n', " ");
        if first.chars().count() > 60 {
            first = first.chars().take(60).collect::<String>() + "…";
        }
        let title = match &s.name {
            Some(n) => format!("{n} — {first}"),
            None => first,
        };
        t.push_str(&format!(
            "{when}  {:>9}  {:>4} msgs  {title}\n    {}\n",
            human_size(s.size),
            s.message_count,
            s.path.display()
        ));
    }
    out(&t)
}
