//! `bh session show`: header, counts, active leaf, name, models, tokens and cost,
//! problems; or with `--html` the report.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::{load_resolved, out, problems_json, require_session};
use crate::context::Ctx;
use crate::error::{CliError, print_json};

// The variant's doc comment in `SessionCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
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
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    if args.html {
        return super::view::export(ctx, &args.file, args.out.as_deref(), args.force);
    }
    show(ctx, &args.file)
}

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
