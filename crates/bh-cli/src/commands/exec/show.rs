//! `bh exec show ID|REF`: one execution (the views live in `views.rs`).

use std::path::PathBuf;

use super::views;
use crate::context::Ctx;
use crate::error::CliError;

// The variant's doc comment in `ExecCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The execution id, a unique prefix of at least 4 hex digits, or its
    /// output ref (refs/better-harness/executions/…).
    id: String,
    /// Write a self-contained HTML report (to stdout unless --out).
    #[arg(long)]
    html: bool,
    /// Write the report here (refused if it exists, unless --force).
    #[arg(long, short = 'o', value_name = "FILE")]
    out: Option<PathBuf>,
    /// Replace an existing --out file.
    #[arg(long)]
    force: bool,
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    views::show(ctx, &args.id, args.html, args.out.as_deref(), args.force)
}
