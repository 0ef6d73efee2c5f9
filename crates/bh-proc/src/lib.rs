//! Process utilities at the bottom of the workspace (out of `bh-sandbox`,
//! issue 26, so that only the crates that sandbox depend on the sandbox):
//! a child that dies with its parent ([`die_with_parent`]) or is told to
//! stop when it dies ([`terminate_with_parent`]), and the one `/proc`
//! process stamp ([`process_start_time`], with [`process_state`],
//! [`process_parent`] and [`process_group`]).
//!
//! The crate's `unsafe` is two `pre_exec` closures, audited here: each runs
//! between `fork` and `exec` in a child of a possibly multi-threaded parent,
//! so it calls only async-signal-safe functions (`prctl`, `getppid`,
//! `_exit`), allocates nothing and takes no lock.
#![allow(unsafe_code)]

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Asks the kernel to SIGKILL the child `cmd` spawns when the spawning
/// thread's process dies (`PR_SET_PDEATHSIG`). The one copy used by
/// `bh-git`, `bh-tools` and `bh-task` for processes that are not sandboxed.
pub fn die_with_parent(cmd: &mut Command) {
    // SAFETY: the closure runs between fork and exec and only calls prctl(2),
    // which is async-signal-safe; it allocates nothing and takes no locks.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Asks the kernel to send SIGTERM to the child `cmd` spawns when the
/// spawning thread's process dies, so that a `bh` child with its own stop
/// handling (an `exec run` worker of `bh exec batch`) ends through it when
/// its parent is killed with SIGKILL. A parent that died before the request
/// took effect is seen (`getppid`) and the child exits at once.
pub fn terminate_with_parent(cmd: &mut Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs between fork and exec and only calls
    // prctl(2), getppid(2) and _exit(2), which are async-signal-safe; it
    // allocates nothing and takes no locks.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(143);
            }
            Ok(())
        });
    }
}

/// Start time of a process (field 22 of `/proc/<pid>/stat`, clock ticks
/// since boot): with the pid, a stamp that a reused pid does not match.
/// `None` when no such process runs. The one `/proc` process stamp.
pub fn process_start_time(pid: u32) -> Option<u64> {
    stat_field(pid, 19)?.parse().ok()
}

/// State of a process (field 3 of `/proc/<pid>/stat`, e.g. `'Z'`), `None`
/// when it does not exist.
pub fn process_state(pid: u32) -> Option<char> {
    stat_field(pid, 0)?.chars().next()
}

/// Parent pid of a process (field 4 of `/proc/<pid>/stat`).
pub fn process_parent(pid: u32) -> Option<i32> {
    stat_field(pid, 1)?.parse().ok()
}

/// Process group of a process (field 5 of `/proc/<pid>/stat`).
pub fn process_group(pid: u32) -> Option<i32> {
    stat_field(pid, 2)?.parse().ok()
}

/// Field `3 + n` of `/proc/<pid>/stat` (after `pid (comm)`, whose comm may
/// hold spaces and parentheses).
fn stat_field(pid: u32, n: usize) -> Option<String> {
    let stat = fs_err::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(n).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn this_process_has_a_stamp_a_state_and_a_parent() {
        let me = std::process::id();
        assert!(process_start_time(me).is_some());
        assert!(matches!(process_state(me), Some('R' | 'S')));
        assert_eq!(
            process_parent(me),
            Some(std::os::unix::process::parent_id() as i32)
        );
        assert_eq!(process_group(me), Some(own_group()));
        assert_eq!(process_start_time(u32::MAX), None);
    }

    fn own_group() -> i32 {
        // SAFETY: getpgid(0) only reads the calling process's group.
        unsafe { libc::getpgid(0) }
    }

    #[test]
    fn a_child_told_to_die_with_its_parent_still_runs() {
        let mut cmd = Command::new("true");
        die_with_parent(&mut cmd);
        assert!(cmd.status().unwrap().success());
        let mut cmd = Command::new("true");
        terminate_with_parent(&mut cmd);
        assert!(cmd.status().unwrap().success());
    }
}
