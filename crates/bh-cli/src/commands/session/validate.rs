//! `bh session validate`: check that files are structurally sound; every problem
//! with its line.

use std::path::PathBuf;

use serde_json::json;

use super::{load, out, problem_line, problems_json};
use crate::context::Ctx;
use crate::error::{CliError, ErrorKind, print_json};

// The variant's doc comment in `SessionCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The session files (or session id prefixes) to check.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// List every problem (by default a file's first 20, then a count).
    #[arg(long)]
    all: bool,
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    validate(ctx, &args.files, args.all)
}

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
