//! `bh task show ID|DIR`: one task's outcome, reasons, violations and paths.

use bh_task::list::{list_tasks, read_task};
use serde_json::json;

use super::print_report;
use crate::context::Ctx;
use crate::display;
use crate::error::{CliError, ErrorKind, print_json};
use crate::ui::outln;

// The variant's doc comment in `TaskCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The task id (or a unique prefix of at least 4 hex digits), or its
    /// artifact folder (a path: contains `/`, or an existing directory).
    task: String,
}

/// `bh task show ID|DIR`.
pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let task = args.task.as_str();
    let as_path = ctx.abs(std::path::Path::new(task));
    let record = if task.contains('/') || as_path.is_dir() {
        let path = as_path.join("state.json");
        if !path.is_file() {
            return Err(CliError::new(
                ErrorKind::NotFound,
                format!("cannot read {}: no such task state", path.display()),
            ));
        }
        read_task(task, &as_path)
    } else {
        let root = ctx.state_dir.join("tasks");
        let records = list_tasks(&root).map_err(|e| {
            CliError::internal(format!("cannot list the tasks in {}: {e}", root.display()))
        })?;
        let id = crate::ids::resolve(
            bh_protocol::prefix::Named::Task,
            "bh task list",
            task,
            records.iter().map(|r| r.id.as_str()),
        )?
        .to_owned();
        records
            .into_iter()
            .find(|r| r.id == id)
            .ok_or_else(|| CliError::internal(format!("task {id} vanished")))?
    };
    let Some(report) = &record.report else {
        let why = record.problems.first().cloned();
        if let Some(why) = why {
            return Err(CliError::new(
                ErrorKind::Invalid,
                display::escape(&why).into_owned(),
            ));
        }
        if ctx.json {
            return print_json(&json!({
                "id": record.id,
                "outcome": null,
                "task": record.task,
                "artifacts": record.dir,
            }));
        }
        outln!(
            "task {}: no outcome yet (running, or stopped before it wrote state.json)",
            display::escape(&record.id)
        )?;
        outln!("  command:   {}", display::escape(&record.argv().join(" ")))?;
        outln!(
            "  artifacts: {}",
            display::escape(&record.dir.display().to_string())
        )?;
        return Ok(());
    };
    if ctx.json {
        return print_json(&serde_json::to_value(report).map_err(CliError::internal)?);
    }
    print_report(report)?;
    Ok(())
}
