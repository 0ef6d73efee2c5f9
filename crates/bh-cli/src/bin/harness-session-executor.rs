//! `harness-session-executor`: the same program as `bh`, entered through its
//! executor name (`bh exec …`). It re-executes `bh` from the same folder with
//! this name as argv[0], so both names share one implementation.

use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let me = std::env::current_exe().ok();
    let bh = me
        .as_ref()
        .and_then(|p| p.parent())
        .map(|dir| dir.join("bh"))
        .filter(|p| p.exists());
    let Some(bh) = bh else {
        eprintln!("harness-session-executor: cannot find the `bh` binary next to this one");
        return ExitCode::from(1);
    };
    let err = Command::new(bh)
        .arg0("harness-session-executor")
        .args(std::env::args_os().skip(1))
        .exec();
    eprintln!("harness-session-executor: cannot run bh: {err}");
    ExitCode::from(1)
}
