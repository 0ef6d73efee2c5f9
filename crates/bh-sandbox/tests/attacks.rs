//! Attacks on the kernel boundary (design/sandbox.md, round 3): the test
//! binary itself is the attacker, run inside the sandbox (`attacker`), so
//! that each attack is the raw system call, not a tool that may be missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// The attacker makes raw system calls on purpose.
#![allow(unsafe_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bh_sandbox::{Policy, Sandbox};

struct Run {
    out: String,
}

fn spawn_script(policy: &Policy, cwd: &Path, script: &str) -> bh_sandbox::Confined {
    let sb = Sandbox::new(policy, cwd).unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(script)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    sb.spawn(cmd).unwrap()
}

fn run(policy: &Policy, cwd: &Path, script: &str) -> Run {
    let mut c = spawn_script(policy, cwd, script);
    let mut out = String::new();
    c.child_mut()
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    c.child_mut()
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    c.wait().unwrap();
    Run { out: out + &err }
}

fn project() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("project");
    fs_err::create_dir_all(p.join(".git")).unwrap();
    fs_err::write(p.join(".git/config"), "[core]\n").unwrap();
    (t, p)
}

fn policy(p: &Path) -> Policy {
    Policy {
        writable: vec![p.to_owned()],
        read_only: vec![p.join(".git")],
        visible: vec![],
        private_tmp: true,
        network: true,
    }
}

/// Runs this test binary inside the sandbox as the attacker: `attacker`
/// below performs the attacks named in `BH_ATTACK` and prints one line each.
fn attack(policy: &Policy, cwd: &Path, attacks: &str) -> Run {
    let exe = std::env::current_exe().unwrap();
    run(
        policy,
        cwd,
        &format!(
            "BH_ATTACK='{attacks}' BH_ATTACK_DIR='{}' '{}' --ignored --exact attacker --nocapture --test-threads=1",
            cwd.display(),
            exe.display()
        ),
    )
}

/// The attacks, as raw syscalls from inside the sandbox. Each prints
/// `<name>: ok` when it got through, `<name>: refused <errno>` otherwise.
#[test]
#[ignore]
fn attacker() {
    use std::ffi::CString;
    let Ok(list) = std::env::var("BH_ATTACK") else {
        return;
    };
    let dir = PathBuf::from(std::env::var("BH_ATTACK_DIR").unwrap());
    let cs = |p: &Path| CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let config = cs(&dir.join(".git/config"));
    let say = |name: &str, ok: bool| {
        if ok {
            println!("{name}: ok");
        } else {
            println!("{name}: refused {}", std::io::Error::last_os_error());
        }
    };
    // Appends to `.git/config` through `fd` (relative `rel`), `true` when written.
    let write_at = |fd: i32, rel: &CString| unsafe {
        let f = libc::openat(fd, rel.as_ptr(), libc::O_WRONLY | libc::O_APPEND);
        if f < 0 {
            return false;
        }
        let n = libc::write(f, b"pwned\n".as_ptr().cast(), 6);
        libc::close(f);
        n == 6
    };
    for a in list.split(',') {
        match a {
            "mknod" => {
                let blk = cs(&dir.join("blk"));
                let r = unsafe {
                    libc::mknod(blk.as_ptr(), libc::S_IFBLK | 0o600, libc::makedev(7, 0))
                };
                say(a, r == 0);
            }
            "mount_setattr" => unsafe {
                let git = cs(&dir.join(".git"));
                let fd = libc::open(git.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
                let attr: [u64; 4] = [0, 1, 0, 0]; // attr_clr = MOUNT_ATTR_RDONLY
                let r = libc::syscall(
                    libc::SYS_mount_setattr,
                    fd,
                    c"".as_ptr(),
                    0x1000 | 0x8000, // AT_EMPTY_PATH | AT_RECURSIVE
                    attr.as_ptr(),
                    32usize,
                );
                say(a, r == 0 && write_at(libc::AT_FDCWD, &config) || { false });
            },
            "open_tree" => unsafe {
                let p = cs(&dir);
                // Not recursive: the clone leaves the read-only bind out.
                let fd = libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, p.as_ptr(), 1) as i32;
                say(
                    a,
                    fd >= 0 && write_at(fd, &CString::new(".git/config").unwrap()),
                );
            },
            "open_by_handle_at" => unsafe {
                let mut h = vec![0u8; 8 + 128];
                h[..4].copy_from_slice(&128u32.to_ne_bytes());
                let mut mount_id = 0;
                let r = libc::syscall(
                    libc::SYS_name_to_handle_at,
                    libc::AT_FDCWD,
                    config.as_ptr(),
                    h.as_mut_ptr(),
                    &mut mount_id as *mut i32,
                    0,
                );
                let p = cs(&dir);
                let mfd = libc::open(p.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
                let f = if r == 0 {
                    libc::syscall(
                        libc::SYS_open_by_handle_at,
                        mfd,
                        h.as_mut_ptr(),
                        libc::O_WRONLY | libc::O_APPEND,
                    ) as i32
                } else {
                    -1
                };
                say(
                    a,
                    f >= 0 && libc::write(f, b"pwned\n".as_ptr().cast(), 6) == 6,
                );
            },
            "mount" => unsafe {
                let git = cs(&dir.join(".git"));
                let r = libc::mount(
                    std::ptr::null(),
                    git.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REMOUNT | libc::MS_BIND,
                    std::ptr::null(),
                );
                say(a, r == 0 && write_at(libc::AT_FDCWD, &config));
            },
            "umount" => unsafe {
                let git = cs(&dir.join(".git"));
                let r = libc::umount2(git.as_ptr(), libc::MNT_DETACH);
                say(a, r == 0 && write_at(libc::AT_FDCWD, &config));
            },
            "tiocsti" => unsafe {
                // Push a command into the terminal on stdin (the user's shell
                // would read it as typed).
                let mut ok = true;
                for b in b"echo INJECTED\n" {
                    ok = ok && libc::ioctl(0, libc::TIOCSTI, b as *const u8) == 0;
                }
                say(a, ok);
            },
            "devtty" => unsafe {
                let f = libc::open(c"/dev/tty".as_ptr(), libc::O_RDWR);
                say(a, f >= 0);
            },
            "fds" => {
                // Descriptors inherited from the harness's caller.
                let fds = std::env::var("BH_ATTACK_FDS").unwrap();
                let mut it = fds.split(',').map(|n| n.parse::<i32>().unwrap());
                let (log, dir) = (it.next().unwrap(), it.next().unwrap());
                let n = unsafe { libc::write(log, b"pwned\n".as_ptr().cast(), 6) };
                say("fds-log", n == 6);
                let via = CString::new(format!("/proc/self/fd/{dir}/.git/config")).unwrap();
                say("fds-dir", write_at(libc::AT_FDCWD, &via));
                say(
                    "fds-dirat",
                    write_at(dir, &CString::new(".git/config").unwrap()),
                );
            }
            other => println!("{other}: unknown attack"),
        }
    }
}

#[test]
fn root_power_cannot_undo_the_read_only_binds_or_make_devices() {
    let (_t, p) = project();
    let r = attack(
        &policy(&p),
        &p,
        "mknod,mount_setattr,open_tree,open_by_handle_at,mount,umount",
    );
    for a in [
        "mknod",
        "mount_setattr",
        "open_tree",
        "open_by_handle_at",
        "mount",
        "umount",
    ] {
        assert!(r.out.contains(&format!("{a}: refused")), "{a}: {}", r.out);
    }
    assert_eq!(
        fs_err::read_to_string(p.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!p.join("blk").exists());
}

#[test]
fn the_command_has_no_capability_left() {
    let (_t, p) = project();
    let r = run(
        &policy(&p),
        &p,
        "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status",
    );
    let lines: Vec<&str> = r.out.lines().collect();
    assert_eq!(lines.len(), 5, "{}", r.out);
    for l in lines {
        assert!(l.ends_with("0000000000000000"), "{}", r.out);
    }
}

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
fn kill_stop_0_cannot_stall_the_timeout() {
    let (_t, p) = project();
    let mut c = spawn_script(
        &policy(&p),
        &p,
        "echo ready; kill -STOP 0; echo resumed; sleep 600",
    );
    // The command is about to stop its group (before setsid: also the
    // intermediate's); give the signal a moment to land.
    let mut out = c.child_mut().stdout.take().unwrap();
    let mut ready = [0u8; 6];
    out.read_exact(&mut ready).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    // What bh's timeout does: SIGTERM, then SIGKILL.
    c.terminate();
    c.kill();
    assert!(wait_or_hang(c).is_some(), "the wait never returned");
    let mut s = String::new();
    let _ = out.read_to_string(&mut s);
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

/// Run by `tiocsti_through_a_pseudo_terminal_is_refused`: a process whose
/// controlling terminal is a pseudo-terminal spawns the attacker.
#[test]
#[ignore]
fn tty_helper() {
    let Ok(dir) = std::env::var("BH_TTY_HELPER_DIR") else {
        return;
    };
    let p = PathBuf::from(dir);
    let sb = Sandbox::new(&policy(&p), &p).unwrap();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", "attacker", "--nocapture"])
        .env("BH_ATTACK", "tiocsti,devtty")
        .env("BH_ATTACK_DIR", &p)
        .env_remove("BH_TTY_HELPER_DIR")
        .current_dir(&p)
        .stdout(Stdio::piped());
    let mut c = sb.spawn(cmd).unwrap();
    let mut out = String::new();
    c.child_mut()
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    c.wait().unwrap();
    fs_err::write(p.join("tty-result"), out).unwrap();
}

#[test]
fn tiocsti_through_a_pseudo_terminal_is_refused() {
    if Command::new("setsid").arg("--version").output().is_err() {
        eprintln!("skipped: setsid (util-linux) is not installed");
        return;
    }
    let (_t, p) = project();
    let (mut m, mut sl) = (-1, -1);
    // SAFETY: openpty(3) into two ints; the fds are owned right after.
    let r = unsafe {
        libc::openpty(
            &mut m,
            &mut sl,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both fds were just opened and are owned here alone.
    let (master, slave_fd) = unsafe {
        use std::os::fd::FromRawFd;
        (
            std::os::fd::OwnedFd::from_raw_fd(m),
            std::os::fd::OwnedFd::from_raw_fd(sl),
        )
    };
    let slave = || Stdio::from(slave_fd.try_clone().unwrap());
    // setsid -c: a new session whose controlling terminal is the pty.
    let mut h = Command::new("setsid")
        .arg("-c")
        .arg(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "tty_helper", "--nocapture"])
        .env("BH_TTY_HELPER_DIR", &p)
        .stdin(slave())
        .stdout(slave())
        .stderr(slave())
        .spawn()
        .unwrap();
    drop(slave_fd);
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let mut buf = [0u8; 4096];
        // Ends with EIO once every slave is closed.
        while let Ok(n @ 1..) = nix::unistd::read(&master, &mut buf) {
            v.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&v).into_owned()
    });
    let st = h.wait().unwrap();
    let term = reader.join().unwrap();
    let out = fs_err::read_to_string(p.join("tty-result")).unwrap_or_default();
    assert!(st.success(), "{term}{out}");
    assert!(out.contains("tiocsti: refused"), "{out}{term}");
    assert!(out.contains("devtty: refused"), "{out}{term}");
    assert!(!term.contains("INJECTED"), "{out}{term}");
}

#[test]
fn inherited_descriptors_do_not_reach_the_command() {
    let (t, p) = project();
    let log = t.path().join("caller.log");
    fs_err::write(&log, "").unwrap();
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // As bh's caller would leave them: open without close-on-exec.
    // SAFETY: plain open(2) calls; the fds are closed below.
    let (lfd, dfd) = unsafe {
        (
            libc::open(c(&log).as_ptr(), libc::O_WRONLY | libc::O_APPEND),
            libc::open(c(&p).as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY),
        )
    };
    assert!(lfd >= 0 && dfd >= 0);
    let exe = std::env::current_exe().unwrap();
    let r = run(
        &policy(&p),
        &p,
        &format!(
            "ls -l /proc/self/fd; BH_ATTACK=fds BH_ATTACK_FDS={lfd},{dfd} BH_ATTACK_DIR='{}' '{}' --ignored --exact attacker --nocapture",
            p.display(),
            exe.display()
        ),
    );
    // SAFETY: closing the two fds opened above.
    unsafe {
        libc::close(lfd);
        libc::close(dfd);
    }
    for a in ["fds-log", "fds-dir", "fds-dirat"] {
        assert!(r.out.contains(&format!("{a}: refused")), "{a}: {}", r.out);
    }
    assert_eq!(fs_err::read_to_string(&log).unwrap(), "");
    assert_eq!(
        fs_err::read_to_string(p.join(".git/config")).unwrap(),
        "[core]\n"
    );
}

/// The same attacks as an unprivileged user (the non-root user namespace
/// path): this binary re-run as `nobody` through `setpriv`. Skipped, saying
/// why, where this process is not root or `setpriv` is missing.
#[test]
fn the_attacks_fail_for_a_non_root_user_too() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root to switch to nobody");
        return;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: setpriv (util-linux) is not installed");
        return;
    }
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(std::env::current_exe().unwrap())
        .args(["--skip", "non_root_user"])
        .current_dir("/")
        .env("HOME", "/")
        .env("TMPDIR", "/tmp")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains(" 0 failed"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
