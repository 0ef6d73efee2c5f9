//! `bh session list`: the sessions Pi keeps for a project, newest first.

use std::path::PathBuf;

use bh_session::{list_sessions, session_dir_for_cwd};
use serde_json::json;

use super::out;
use crate::command_error::session_error;
use crate::context::Ctx;
use crate::error::{CliError, print_json};
use crate::units::human_size;

// The variant's doc comment in `SessionCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Project directory (default: the current directory, see `-C`).
    #[arg(long, visible_alias = "project", value_name = "DIR")]
    cwd: Option<PathBuf>,
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    ls(ctx, args.cwd)
}

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
