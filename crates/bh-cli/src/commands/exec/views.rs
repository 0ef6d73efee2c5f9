//! `bh exec list` and `bh exec show ID [--html]`: what executions ran, how
//! they ended, and what they changed — read from the execution folders and
//! the repository, never modifying either.

use std::path::Path;

use bh_exec::{ChangeFacts, ExecutionRecord, change_facts, list_executions};
use serde_json::{Value, json};

use crate::command_error::exec_error;
use crate::context::Ctx;
use crate::display::{escape, fit, stdout_width};
use crate::error::{CliError, ErrorKind, print_json};
use crate::ids;
use crate::ui::outln;

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

fn model(r: &ExecutionRecord) -> String {
    r.plan
        .as_ref()
        .and_then(|p| p.model.clone())
        .unwrap_or_else(|| "(none)".into())
}

fn summary_json(r: &ExecutionRecord) -> Value {
    let plan = r.plan.as_ref();
    let result = r.result.as_ref();
    json!({
        "id": r.id,
        "state": r.status.as_str(),
        "model": plan.and_then(|p| p.model.clone()),
        "plan_sha256": plan.map(|p| &p.plan_sha256),
        "base": plan.map(|p| &p.base.commit),
        "session": plan.map(|p| &p.session.id),
        "entry": plan.map(|p| &p.session.entry),
        "prompt": plan.map(|p| &p.prompt.text),
        "commit": result.and_then(|x| x.commit.clone()),
        "ref": result.and_then(|x| x.output_ref.clone()),
        "dir": r.dir,
        "problems": r.problems,
    })
}

/// `bh exec list`.
pub(crate) fn list(ctx: &Ctx) -> Result<(), CliError> {
    let records = list_executions(&ctx.state_dir).map_err(exec_error)?;
    if ctx.json {
        let items: Vec<Value> = records.iter().map(summary_json).collect();
        return print_json(&json!({ "executions": items }));
    }
    if records.is_empty() {
        outln!(
            "no executions under {}",
            ctx.state_dir.join(bh_exec::EXECUTIONS_DIR).display()
        )?;
        return Ok(());
    }
    let width = stdout_width();
    for r in &records {
        let commit = r
            .result
            .as_ref()
            .and_then(|x| x.commit.as_deref())
            .map(short)
            .unwrap_or("-");
        let prompt = r
            .plan
            .as_ref()
            .map(|p| p.prompt.text.lines().next().unwrap_or("").to_owned())
            .unwrap_or_else(|| "(plan unreadable)".into());
        let line = format!(
            "{}  {:<10}  {:<12}  {}  {}",
            r.id,
            r.status.as_str(),
            commit,
            escape(&model(r)),
            escape(&prompt)
        );
        match width {
            Some(w) => outln!("{}", fit(&line, w))?,
            None => outln!("{line}")?,
        }
    }
    Ok(())
}

/// The record `query` names: a unique id prefix, or the output ref
/// (`refs/better-harness/executions/…`) of a run — the one that committed
/// to it, else the latest that tried.
fn find(ctx: &Ctx, query: &str) -> Result<ExecutionRecord, CliError> {
    let records = list_executions(&ctx.state_dir).map_err(exec_error)?;
    if query.starts_with("refs/") {
        let planned = |r: &ExecutionRecord| {
            r.plan.as_ref().is_some_and(|p| p.output_ref == query)
                || r.result
                    .as_ref()
                    .is_some_and(|x| x.output_ref.as_deref() == Some(query))
        };
        let mut tried: Vec<ExecutionRecord> = records.into_iter().filter(planned).collect();
        let committed = tried
            .iter()
            .rposition(|r| r.result.as_ref().is_some_and(|x| x.commit.is_some()));
        let pick = committed.or_else(|| tried.len().checked_sub(1));
        return match pick {
            Some(i) => Ok(tried.swap_remove(i)),
            None => Err(CliError::new(
                ErrorKind::NotFound,
                format!(
                    "no execution here made or tried {} (`bh exec list` shows them)",
                    crate::display::escape(query)
                ),
            )),
        };
    }
    let id = ids::resolve(
        bh_protocol::prefix::Named::Execution,
        "bh exec list",
        query,
        records.iter().map(|r| r.id.as_str()),
    )?
    .to_owned();
    records
        .into_iter()
        .find(|r| r.id == id)
        .ok_or_else(|| CliError::internal(format!("execution {id} vanished")))
}

/// `bh exec show ID [--html [--out FILE [--force]]]`.
pub(crate) fn show(
    ctx: &Ctx,
    query: &str,
    html: bool,
    out: Option<&Path>,
    force: bool,
) -> Result<(), CliError> {
    if out.is_some() && !html {
        return Err(CliError::usage("--out needs --html"));
    }
    let r = find(ctx, query)?;
    let facts = change_facts(&ctx.git(), &r, html);
    if html {
        return write_html(ctx, &r, &facts, out, force);
    }
    if ctx.json {
        let mut doc = summary_json(&r);
        if let Value::Object(map) = &mut doc {
            map.insert("plan".into(), json!(r.plan));
            map.insert(
                "result".into(),
                r.result_json.clone().unwrap_or(Value::Null),
            );
            map.insert("trailers".into(), trailers_json(&facts));
            map.insert("diffstat".into(), json!(facts.diffstat));
            map.insert("ref_now".into(), json!(facts.ref_now));
            map.insert("git_problems".into(), json!(facts.problems));
        }
        return print_json(&json!({ "execution": doc }));
    }
    print_human(&r, &facts)?;
    Ok(())
}

fn trailers_json(facts: &ChangeFacts) -> Value {
    match &facts.trailers {
        Some(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        ),
        None => Value::Null,
    }
}

fn print_human(r: &ExecutionRecord, facts: &ChangeFacts) -> std::io::Result<()> {
    outln!("execution {}: {}", r.id, r.status.as_str())?;
    if let Some(p) = &r.plan {
        outln!("  plan:       sha256:{}", p.plan_sha256)?;
        outln!("  base:       {} (tree {})", p.base.commit, p.base.tree)?;
        outln!(
            "  session:    {} sha256:{}",
            escape(&p.session.file.display().to_string()),
            p.session.sha256
        )?;
        outln!(
            "  entry:      {} (path sha256:{}, {} entries)",
            escape(&p.session.entry),
            p.session.path_sha256,
            p.session.path_length
        )?;
        outln!("  prompt:     sha256:{}", p.prompt.sha256)?;
        for line in p.prompt.text.lines() {
            outln!("    │ {}", escape(line))?;
        }
        outln!("  model:      {}", escape(&model(r)))?;
        outln!(
            "  limits:     {} tool calls, {}s",
            p.limits.max_tool_calls,
            p.limits.timeout_secs
        )?;
    }
    if let Some(x) = &r.result {
        if let Some(c) = &x.commit {
            outln!("  commit:     {c}")?;
        }
        if let Some(rf) = &x.output_ref {
            let now = match &facts.ref_now {
                Some(at) if Some(at) == x.commit.as_ref() => String::new(),
                Some(at) => format!(" (now at {at})"),
                None => " (deleted since)".into(),
            };
            outln!("  ref:        {rf}{now}")?;
        }
        outln!(
            "  tools:      {} call(s); stop: {}{}",
            x.tool_calls,
            x.stop_reason.as_deref().unwrap_or("-"),
            x.reason
                .as_deref()
                .map(|why| format!(" ({})", escape(why)))
                .unwrap_or_default()
        )?;
        if let Some(p) = &x.patch {
            outln!("  patch:      {}", escape(&p.display().to_string()))?;
        }
    }
    outln!(
        "  forked:     {}",
        escape(&r.session_file().display().to_string())
    )?;
    if let Some(t) = &facts.trailers {
        outln!("  trailers:")?;
        for (k, v) in t {
            outln!("    {k}: {}", escape(v))?;
        }
    }
    if !facts.diffstat.is_empty() {
        outln!("  diffstat:")?;
        let (mut plus, mut minus) = (0, 0);
        for f in &facts.diffstat {
            match (f.added, f.deleted) {
                (Some(a), Some(d)) => {
                    plus += a;
                    minus += d;
                    outln!(
                        "    {:>6} {:>6}  {}",
                        format!("+{a}"),
                        format!("-{d}"),
                        escape(&f.path)
                    )?;
                }
                _ => outln!("    {:>13}  {}", "binary", escape(&f.path))?,
            }
        }
        outln!("    {} file(s), +{plus} -{minus}", facts.diffstat.len())?;
    }
    for p in r.problems.iter().chain(&facts.problems) {
        outln!("  problem:    {}", escape(p))?;
    }
    outln!("  folder:     {}", escape(&r.dir.display().to_string()))?;
    Ok(())
}

fn write_html(
    ctx: &Ctx,
    r: &ExecutionRecord,
    facts: &ChangeFacts,
    out: Option<&Path>,
    force: bool,
) -> Result<(), CliError> {
    let Some(plan) = &r.plan else {
        return Err(CliError::new(
            ErrorKind::Invalid,
            format!(
                "execution {}: {}",
                r.id,
                r.problems.first().map_or("no plan", String::as_str)
            ),
        ));
    };
    let session = bh_session::Session::load(r.session_file()).ok();
    let mut rows: Vec<(String, String)> = vec![
        ("plan".into(), format!("sha256:{}", plan.plan_sha256)),
        ("model".into(), model(r)),
        (
            "base".into(),
            format!("{} (tree {})", plan.base.commit, plan.base.tree),
        ),
        (
            "session".into(),
            format!("{} (sha256:{})", plan.session.id, plan.session.sha256),
        ),
        (
            "session file".into(),
            plan.session.file.display().to_string(),
        ),
        (
            "entry".into(),
            format!(
                "{} (path sha256:{}, {} entries)",
                plan.session.entry, plan.session.path_sha256, plan.session.path_length
            ),
        ),
        ("prompt".into(), format!("sha256:{}", plan.prompt.sha256)),
        (
            "limits".into(),
            format!(
                "{} tool calls, {}s",
                plan.limits.max_tool_calls, plan.limits.timeout_secs
            ),
        ),
    ];
    if let Some(x) = &r.result {
        if let Some(c) = &x.commit {
            rows.push(("commit".into(), c.clone()));
        }
        if let Some(rf) = &x.output_ref {
            rows.push(("ref".into(), rf.clone()));
        }
        rows.push((
            "stop".into(),
            format!(
                "{} after {} tool call(s){}",
                x.stop_reason.as_deref().unwrap_or("-"),
                x.tool_calls,
                x.reason
                    .as_deref()
                    .map(|w| format!(": {w}"))
                    .unwrap_or_default()
            ),
        ));
    }
    rows.push((
        "forked session".into(),
        r.session_file().display().to_string(),
    ));
    for p in r.problems.iter().chain(&facts.problems) {
        rows.push(("problem".into(), p.clone()));
    }
    let report = bh_report::ExecReport {
        execution: &r.id,
        state: r.status.as_str(),
        facts: rows,
        prompt: &plan.prompt.text,
        trailers: facts.trailers.clone().unwrap_or_default(),
        diffstat: facts
            .diffstat
            .iter()
            .map(|f| bh_report::DiffStatRow {
                path: f.path.clone(),
                added: f.added,
                deleted: f.deleted,
            })
            .collect(),
        patch: facts.patch.as_deref(),
        session: session.as_ref(),
        from_entry: &plan.session.entry,
    };
    let html = bh_report::exec_html(&report);
    let Some(dest) = out else {
        if ctx.json {
            return Err(CliError::usage(
                "--json needs --out FILE (the report itself is not JSON)",
            ));
        }
        crate::ui::write_bytes(html.as_bytes())?;
        return Ok(());
    };
    let dest = ctx.abs(dest);
    if dest.is_dir() {
        return Err(CliError::usage(format!(
            "{}: is a directory, not a file",
            dest.display()
        )));
    }
    if dest.exists() && !force {
        return Err(CliError::new(
            ErrorKind::Refused,
            format!("{}: exists (use --force to replace it)", dest.display()),
        ));
    }
    bh_fs::write_atomic(&dest, html.as_bytes(), 0o600)
        .map_err(|e| CliError::internal(format!("cannot write {}: {e}", dest.display())))?;
    if ctx.json {
        return print_json(&json!({ "execution": r.id, "html": dest }));
    }
    outln!("wrote {}", dest.display())?;
    Ok(())
}
