//! `bh session tree`: the entry tree as `git log --graph` draws history
//! (the drawing lives in `view.rs`, shared with the REPL's `/tree`).

use std::path::PathBuf;

use crate::context::Ctx;
use crate::error::CliError;

// The variant's doc comment in `SessionCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The session: a file, or a session id prefix as Pi takes it.
    file: PathBuf,
    /// One row per entry: do not fold runs of tool steps.
    #[arg(long)]
    full: bool,
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    super::view::tree(ctx, &args.file, args.full)
}
