//! The command's session, namespaces and end (design/sandbox.md, round 3,
//! classes 20, 21 and 27), beside the attacks of `boundary.rs`: no
//! controlling terminal and a session of its own, git never prompts, new
//! IPC/UTS namespaces that hide the host's System V queues, and a kill that
//! ends everything even when the intermediate is stopped. Run as root and,
//! through `setpriv`, as `nobody`.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// The attacker makes raw system calls on purpose.
#![allow(unsafe_code)]

mod common;
use common::{policy, project, run, spawn_script};

/// Namespace inode of this process, e.g. `ipc:[4026531839]`.
fn ns(kind: &str) -> String {
    fs_err::read_link(format!("/proc/self/ns/{kind}"))
        .unwrap()
        .display()
        .to_string()
}

#[test]
fn host_sysv_queues_are_out_of_reach_and_ipc_uts_are_new() {
    let (_t, p) = project();
    // SAFETY: a System V queue of the test's own, removed below.
    let id = unsafe { libc::msgget(libc::IPC_PRIVATE, libc::IPC_CREAT | 0o600) };
    assert!(id >= 0, "msgget: {}", std::io::Error::last_os_error());
    let r = run(
        &policy(&p),
        &p,
        &format!(
            "ipcs -q; ipcrm -q {id} && echo REMOVED; readlink /proc/self/ns/ipc /proc/self/ns/uts"
        ),
    );
    // SAFETY: IPC_STAT into a zeroed struct, then IPC_RMID of our queue.
    let alive = unsafe {
        let mut ds: libc::msqid_ds = std::mem::zeroed();
        let alive = libc::msgctl(id, libc::IPC_STAT, &mut ds) == 0;
        libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut());
        alive
    };
    assert!(alive, "the host's queue was removed from inside: {}", r.out);
    assert!(!r.out.contains("REMOVED"), "{}", r.out);
    assert!(
        !r.out
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some(&id.to_string())),
        "the host's queue is visible inside: {}",
        r.out
    );
    assert!(!r.out.contains(&ns("ipc")), "{}", r.out);
    assert!(!r.out.contains(&ns("uts")), "{}", r.out);
    assert!(
        r.out.contains("ipc:[") && r.out.contains("uts:["),
        "{}",
        r.out
    );
}

#[test]
fn git_never_prompts_inside() {
    let (_t, p) = project();
    let r = run(&policy(&p), &p, "echo prompt=$GIT_TERMINAL_PROMPT");
    assert!(r.out.contains("prompt=0"), "{}", r.out);
}

/// Waits for `c` on a thread; `None` when it has not returned in a minute
/// (a hang guard, not a timing assertion).
fn wait_or_hang(mut c: bh_sandbox::Confined) -> Option<std::process::ExitStatus> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(c.wait().ok());
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .ok()
        .flatten()
}

#[test]
fn kill_reaps_a_stopped_intermediate() {
    let (_t, p) = project();
    let c = spawn_script(&policy(&p), &p, "sleep 600");
    // Whatever stopped it (a signal from a process of the same user).
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(c.id() as i32),
        nix::sys::signal::Signal::SIGSTOP,
    )
    .unwrap();
    c.kill();
    assert!(wait_or_hang(c).is_some(), "the wait never returned");
}

#[test]
fn the_command_has_no_controlling_terminal_and_its_own_session() {
    let (_t, p) = project();
    // Field 7 of /proc/self/stat is tty_nr: 0 without a terminal; the
    // session leader is the command itself (pid 2 in its namespace).
    let r2 = run(
        &policy(&p),
        &p,
        "read -r a b c d e sid tty rest < /proc/self/stat; echo sid=$sid tty=$tty",
    );
    assert!(r2.out.contains("tty=0"), "{}", r2.out);
    assert!(r2.out.contains("sid=2"), "{}", r2.out);
}

/// The same tests as `nobody` (the non-root user namespace path), through
/// `setpriv`; skipped, saying why, where this process is not root or
/// `setpriv` is missing.
#[test]
fn the_same_holds_for_a_non_root_user() {
    common::rerun_as_nobody(&["--skip", "non_root_user"], 4);
}
