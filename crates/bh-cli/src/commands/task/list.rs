//! `bh task list`: the tasks under the state folder, oldest first.

use bh_task::list::list_tasks;
use serde_json::json;

use crate::context::Ctx;
use crate::display;
use crate::error::{CliError, print_json};
use crate::ui::outln;

/// `bh task list`.
pub(super) fn run(ctx: &Ctx) -> Result<(), CliError> {
    let root = ctx.state_dir.join("tasks");
    let records = list_tasks(&root).map_err(|e| {
        CliError::internal(format!("cannot list the tasks in {}: {e}", root.display()))
    })?;
    if ctx.json {
        let items: Vec<serde_json::Value> = records
            .iter()
            .map(|r| {
                json!({
                    "id": r.id,
                    "outcome": r.outcome(),
                    "branch": r.task.as_ref().and_then(|t| t["branch"].as_str()),
                    "base": r.task.as_ref().and_then(|t| t["base"].as_str()),
                    "candidate": r.report.as_ref().and_then(|x| x.candidate.clone()),
                    "argv": r.argv(),
                    "dir": r.dir,
                    "problems": r.problems,
                })
            })
            .collect();
        return print_json(&json!({ "tasks": items }));
    }
    if records.is_empty() {
        outln!("no tasks under {}", root.display())?;
        return Ok(());
    }
    let width = display::stdout_width();
    for r in &records {
        let outcome = r.outcome().map_or("unfinished", super::outcome_word);
        let base = r
            .task
            .as_ref()
            .and_then(|t| t["base"].as_str())
            .map_or("-", |b| &b[..b.len().min(12)]);
        let branch = r
            .task
            .as_ref()
            .and_then(|t| t["branch"].as_str())
            .map_or("detached", |b| b.strip_prefix("refs/heads/").unwrap_or(b));
        let line = format!(
            "{}  {:<16}  {}  {}  {}",
            r.id,
            outcome,
            display::escape(branch),
            base,
            display::escape(&r.argv().join(" "))
        );
        match width {
            Some(w) => outln!("{}", display::fit(&line, w))?,
            None => outln!("{line}")?,
        }
    }
    Ok(())
}
