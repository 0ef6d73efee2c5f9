//! `bh session export --html`: the self-contained report (written in
//! `view.rs`, shared with `show --html`).

use std::path::PathBuf;

use crate::context::Ctx;
use crate::error::CliError;

// The variant's doc comment in `SessionCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
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
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    super::view::export(ctx, &args.file, args.out.as_deref(), args.force)
}
