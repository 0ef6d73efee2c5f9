//! `bh session …` (being written; see issue 3).

use clap::Subcommand;

use crate::context::Ctx;
use crate::error::CliError;

#[derive(Subcommand, Debug)]
pub enum SessionCmd {}

pub fn run(cmd: SessionCmd, _ctx: &Ctx) -> Result<(), CliError> {
    match cmd {}
}
