//! The kernel boundary attacked from inside (round 3): root's power, the
//! terminal, inherited descriptors, System V IPC, the calls Landlock does
//! not mediate. Each attack is this test binary re-run inside the sandbox
//! (`attacker`, ignored), and each effect is checked on the host. Run as
//! root (CI) and, through `setpriv`, as `nobody`.

#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bh_sandbox::Sandbox;

mod common;
use common::{policy, project};

fn attacker_cmd(action: &str, dir: &Path) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", "attacker", "--nocapture", "-q"])
        .env("BH_ATTACK", action)
        .env("BH_ATTACK_DIR", dir)
        .current_dir(dir);
    cmd
}

/// Runs one attack inside the sandbox; returns everything it printed.
fn attack(action: &str, extra: &[(&str, String)]) -> (tempfile::TempDir, PathBuf, String) {
    let (t, p) = project();
    let out = attack_in(&p, action, extra, Stdio::null());
    (t, p, out)
}

fn attack_in(p: &Path, action: &str, extra: &[(&str, String)], stdin: Stdio) -> String {
    let sb = Sandbox::new(&policy(p), p).unwrap();
    let mut cmd = attacker_cmd(action, p);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut c = sb.spawn(cmd).unwrap();
    let out = common::output(&mut c);
    c.wait().unwrap();
    out
}

fn config_untouched(p: &Path) {
    assert_eq!(
        fs_err::read_to_string(p.join(".git/config")).unwrap(),
        "[core]\n"
    );
}

fn refused(out: &str, name: &str) {
    assert!(
        out.contains(&format!("ATTACK {name} refused")),
        "{name}: {out}"
    );
    assert!(!out.contains(&format!("ATTACK {name} succeeded")), "{out}");
}

#[test]
fn no_device_nodes_and_no_capability_left() {
    let (_t, p, out) = attack("mknod", &[]);
    refused(&out, "mknod-block");
    refused(&out, "mknod-char");
    assert!(!p.join("disk").exists() && !p.join("chr").exists());
    // Every capability set is empty, the bounding set too.
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(out.contains(&format!("{set}:\t0000000000000000")), "{out}");
    }
}

#[test]
fn the_read_only_bind_cannot_be_undone_through_the_mount_api() {
    let (_t, p, out) = attack("mounts", &[]);
    for name in [
        "mount_setattr",
        "open_tree_clone",
        "userns_remount",
        "userns_umount",
        "userns_open_tree",
    ] {
        refused(&out, name);
    }
    config_untouched(&p);
}

#[test]
fn open_by_handle_at_cannot_reach_the_git_dir() {
    let (_t, p, out) = attack("handle", &[]);
    refused(&out, "open_by_handle_at");
    config_untouched(&p);
}

#[test]
fn keys_modules_bpf_and_ptrace_are_denied() {
    let (_t, _p, out) = attack("misc", &[]);
    for name in ["keyctl", "add_key", "bpf", "init_module", "ptrace"] {
        refused(&out, name);
    }
}

#[test]
fn a_host_sysv_queue_is_invisible_and_survives() {
    // SAFETY: msgget/msgctl with integer arguments and a stack struct.
    let id = unsafe { libc::msgget(libc::IPC_PRIVATE, libc::IPC_CREAT | 0o666) };
    assert!(id >= 0);
    let (_t, _p, out) = attack("ipc", &[("BH_ATTACK_ID", id.to_string())]);
    refused(&out, "msgctl-rmid");
    let mut ds: libc::msqid_ds = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let alive = unsafe { libc::msgctl(id, libc::IPC_STAT, &mut ds) } == 0;
    unsafe { libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
    assert!(alive, "the host's queue was removed: {out}");
}

#[test]
fn inherited_descriptors_do_not_reach_the_command() {
    let (t, p) = project();
    let log = t.path().join("caller.log");
    fs_err::write(&log, "").unwrap();
    let f = fs_err::OpenOptions::new().append(true).open(&log).unwrap();
    let dir = fs_err::File::open(&p).unwrap();
    // Inheritable, as a caller's descriptors are.
    for fd in [f.as_raw_fd(), dir.as_raw_fd()] {
        // SAFETY: fcntl on our own descriptors.
        unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
    }
    let out = attack_in(
        &p,
        "fds",
        &[
            ("BH_ATTACK_LOG_FD", f.as_raw_fd().to_string()),
            ("BH_ATTACK_DIR_FD", dir.as_raw_fd().to_string()),
        ],
        Stdio::null(),
    );
    refused(&out, "inherited-log");
    refused(&out, "inherited-dir");
    refused(&out, "proc-fd-dir");
    assert_eq!(fs_err::read_to_string(&log).unwrap(), "");
    config_untouched(&p);
}

fn openpty() -> (OwnedFd, OwnedFd) {
    let (mut m, mut s) = (0, 0);
    // SAFETY: openpty with out-pointers to stack ints.
    let r = unsafe {
        libc::openpty(
            &mut m,
            &mut s,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0);
    // SAFETY: fresh descriptors we own.
    unsafe { (OwnedFd::from_raw_fd(m), OwnedFd::from_raw_fd(s)) }
}

/// Run by `tiocsti_cannot_type_into_the_users_terminal` as a session
/// leader whose controlling terminal is the test's pseudo-terminal (the
/// user's shell's situation): the sandboxed command inherits it as stdin.
#[test]
#[ignore]
fn tty_harness() {
    let Ok(dir) = std::env::var("BH_TTY_DIR") else {
        return;
    };
    let out = attack_in(Path::new(&dir), "tty", &[], Stdio::inherit());
    fs_err::write(Path::new(&dir).join("attack.out"), out).unwrap();
}

#[test]
fn tiocsti_cannot_type_into_the_users_terminal() {
    let (_t, p) = project();
    let (master, slave) = openpty();
    let s = slave.as_raw_fd();
    let mut h = Command::new(std::env::current_exe().unwrap());
    h.args(["--ignored", "--exact", "tty_harness", "-q"])
        .env("BH_TTY_DIR", &p)
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid/ioctl are async-signal-safe.
    unsafe {
        h.pre_exec(|| {
            libc::setsid();
            if libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    assert!(h.status().unwrap().success());
    let out = fs_err::read_to_string(p.join("attack.out")).unwrap();
    refused(&out, "tiocsti");
    refused(&out, "open-dev-tty");
    // The shell's input is empty: nothing was typed into the terminal.
    // SAFETY: fcntl/read on our own descriptor and a stack buffer.
    unsafe {
        libc::fcntl(s, libc::F_SETFL, libc::O_NONBLOCK);
        let mut b = [0u8; 64];
        let n = libc::read(s, b.as_mut_ptr().cast(), b.len());
        assert!(n <= 0, "typed: {:?}", &b[..n as usize]);
    }
    drop(master);
}

#[test]
fn kill_stop_0_does_not_hang_the_harness() {
    let (_t, p) = project();
    let sb = Sandbox::new(&policy(&p), &p).unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg("kill -STOP 0; kill -STOP -1; echo still")
        .current_dir(&p)
        .stdout(Stdio::piped());
    let mut c = sb.spawn(cmd).unwrap();
    let mut out = String::new();
    // The command stops itself (its own group); the harness's kill must
    // still end it and `wait` return.
    let mut stdout = c.child_mut().stdout.take().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    c.terminate();
    c.kill();
    // Returns (before the fix it hung: the intermediate was stopped too).
    let st = c.wait().unwrap();
    stdout.read_to_string(&mut out).unwrap();
    assert!(!st.success(), "{out}");
}

/// The same attacks as `nobody`, through `setpriv`; skipped, saying why,
/// where this process is not root or `setpriv` is missing.
#[test]
fn the_boundary_holds_for_a_non_root_user() {
    let names = [
        "no_device_nodes_and_no_capability_left",
        "the_read_only_bind_cannot_be_undone_through_the_mount_api",
        "open_by_handle_at_cannot_reach_the_git_dir",
        "keys_modules_bpf_and_ptrace_are_denied",
        "a_host_sysv_queue_is_invisible_and_survives",
        "inherited_descriptors_do_not_reach_the_command",
        "tiocsti_cannot_type_into_the_users_terminal",
        "kill_stop_0_does_not_hang_the_harness",
    ];
    common::rerun_as_nobody(&names, names.len());
}

// --- the attacker, run inside the sandbox ---------------------------------

fn say(name: &str, ok: bool) {
    let e = std::io::Error::last_os_error();
    if ok {
        println!("ATTACK {name} succeeded");
    } else {
        println!("ATTACK {name} refused ({e})");
    }
}

fn cs(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// Appends to `.git/config` relative to `fd`; true when it worked.
fn write_at(fd: libc::c_int, rel: &str) -> bool {
    let rel = CString::new(rel).unwrap();
    // SAFETY: openat/write/close on a NUL-terminated path.
    unsafe {
        let f = libc::openat(fd, rel.as_ptr(), libc::O_WRONLY | libc::O_APPEND);
        if f < 0 {
            return false;
        }
        let ok = libc::write(f, b"[x]\n".as_ptr().cast(), 4) == 4;
        libc::close(f);
        ok
    }
}

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

fn clear_rdonly(fd: libc::c_int) -> bool {
    let attr = MountAttr {
        attr_set: 0,
        attr_clr: 1,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: mount_setattr(2) with a stack struct of the size passed.
    unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd,
            c"".as_ptr(),
            0x1000u32 | 0x8000u32,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        ) == 0
    }
}

fn open_tree(path: &Path, flags: u32) -> libc::c_int {
    let p = cs(path);
    // SAFETY: open_tree(2) on a NUL-terminated path.
    unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, p.as_ptr(), flags) as libc::c_int }
}

/// Only an unprivileged nested user + mount namespace: its copy of the
/// mounts is locked.
fn nested_userns() -> bool {
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    // SAFETY: unshare with integer flags.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) } != 0 {
        return false;
    }
    let _ = fs_err::write("/proc/self/setgroups", "deny");
    let _ = fs_err::write("/proc/self/uid_map", format!("0 {uid} 1"));
    let _ = fs_err::write("/proc/self/gid_map", format!("0 {gid} 1"));
    true
}

#[test]
#[ignore]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario, read top to bottom"
)]
fn attacker() {
    let Ok(action) = std::env::var("BH_ATTACK") else {
        return;
    };
    let dir = PathBuf::from(std::env::var("BH_ATTACK_DIR").unwrap());
    let git = dir.join(".git");
    match action.as_str() {
        "mknod" => unsafe {
            let d = cs(&dir.join("disk"));
            say(
                "mknod-block",
                libc::mknod(d.as_ptr(), libc::S_IFBLK | 0o600, libc::makedev(7, 0)) == 0,
            );
            let d = cs(&dir.join("chr"));
            say(
                "mknod-char",
                libc::mknod(d.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) == 0,
            );
            print!("{}", fs_err::read_to_string("/proc/self/status").unwrap());
        },
        "mounts" => {
            let fd = open_tree(&git, 0x80000); // O_CLOEXEC, no clone
            say(
                "mount_setattr",
                fd >= 0 && clear_rdonly(fd) && write_at(libc::AT_FDCWD, ".git/config"),
            );
            let fd = open_tree(&dir, 1 | 0x80000); // OPEN_TREE_CLONE, not recursive
            say("open_tree_clone", fd >= 0 && write_at(fd, ".git/config"));
            if !nested_userns() {
                for n in ["userns_remount", "userns_umount", "userns_open_tree"] {
                    say(n, false);
                }
                return;
            }
            let g = cs(&git);
            // SAFETY: mount/umount2 with NUL-terminated paths.
            unsafe {
                let r = libc::mount(
                    std::ptr::null(),
                    g.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REMOUNT | libc::MS_BIND,
                    std::ptr::null(),
                );
                say(
                    "userns_remount",
                    r == 0 && write_at(libc::AT_FDCWD, ".git/config"),
                );
                let r = libc::umount2(g.as_ptr(), libc::MNT_DETACH);
                say(
                    "userns_umount",
                    r == 0 && write_at(libc::AT_FDCWD, ".git/config"),
                );
            }
            let fd = open_tree(&dir, 1 | 0x80000);
            say("userns_open_tree", fd >= 0 && write_at(fd, ".git/config"));
        }
        "handle" => unsafe {
            #[repr(C)]
            struct Handle {
                bytes: u32,
                kind: i32,
                f: [u8; 128],
            }
            let mut h = Handle {
                bytes: 128,
                kind: 0,
                f: [0; 128],
            };
            let mut mnt: libc::c_int = 0;
            let c = cs(&git.join("config"));
            let named = libc::syscall(
                libc::SYS_name_to_handle_at,
                libc::AT_FDCWD,
                c.as_ptr(),
                &mut h as *mut Handle,
                &mut mnt,
                0,
            ) == 0;
            let d = cs(&dir);
            let mfd = libc::open(d.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
            let f = libc::syscall(
                libc::SYS_open_by_handle_at,
                mfd,
                &mut h as *mut Handle,
                libc::O_WRONLY | libc::O_APPEND,
            ) as libc::c_int;
            say(
                "open_by_handle_at",
                named && f >= 0 && libc::write(f, b"[x]\n".as_ptr().cast(), 4) == 4,
            );
        },
        "misc" => unsafe {
            say(
                "keyctl",
                libc::syscall(libc::SYS_keyctl, 0 /* GET_KEYRING_ID */, -3, 0) >= 0,
            );
            say(
                "add_key",
                libc::syscall(
                    libc::SYS_add_key,
                    c"user".as_ptr(),
                    c"bh".as_ptr(),
                    c"x".as_ptr(),
                    1,
                    -3,
                ) >= 0,
            );
            say(
                "bpf",
                libc::syscall(libc::SYS_bpf, 0, std::ptr::null::<u8>(), 0) >= 0,
            );
            say(
                "init_module",
                libc::syscall(
                    libc::SYS_init_module,
                    std::ptr::null::<u8>(),
                    0,
                    c"".as_ptr(),
                ) == 0
                    || *libc::__errno_location() != libc::EPERM,
            );
            say("ptrace", libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) == 0);
        },
        "ipc" => unsafe {
            let id: i32 = std::env::var("BH_ATTACK_ID").unwrap().parse().unwrap();
            say(
                "msgctl-rmid",
                libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()) == 0,
            );
        },
        "fds" => {
            let log: i32 = std::env::var("BH_ATTACK_LOG_FD").unwrap().parse().unwrap();
            let d: i32 = std::env::var("BH_ATTACK_DIR_FD").unwrap().parse().unwrap();
            // SAFETY: write(2) on a descriptor number and a static buffer.
            say(
                "inherited-log",
                unsafe { libc::write(log, b"x".as_ptr().cast(), 1) } == 1,
            );
            say("inherited-dir", write_at(d, ".git/config"));
            say(
                "proc-fd-dir",
                write_at(libc::AT_FDCWD, &format!("/proc/self/fd/{d}/.git/config")),
            );
        }
        "tty" => unsafe {
            let mut ok = true;
            for b in b"echo pwned\n" {
                ok = ok && libc::ioctl(0, libc::TIOCSTI, b as *const u8) == 0;
            }
            say("tiocsti", ok);
            let f = libc::open(c"/dev/tty".as_ptr(), libc::O_RDWR);
            say("open-dev-tty", f >= 0);
        },
        other => panic!("unknown attack {other}"),
    }
}

#[test]
fn a_grant_through_a_symlink_or_of_a_protected_path_is_refused() {
    let (_t, p) = project();
    fs_err::create_dir_all(p.join(".git/hooks")).unwrap();
    fs_err::os::unix::fs::symlink(".git/hooks", p.join("build-cache")).unwrap();
    let mut pol = policy(&p);
    pol.writable.push(p.join("build-cache"));
    let err = Sandbox::new(&pol, &p).err().unwrap().to_string();
    assert!(
        err.contains("build-cache") && err.contains("symbolic link"),
        "{err}"
    );
    let mut pol = policy(&p);
    pol.writable.push(p.join(".git"));
    let err = Sandbox::new(&pol, &p).err().unwrap().to_string();
    assert!(err.contains(".git") && err.contains("protected"), "{err}");
    // The report names canonical paths.
    let sb = Sandbox::new(&policy(&p), &p).unwrap();
    let canon = fs_err::canonicalize(&p).unwrap();
    assert_eq!(sb.report().writable, vec![canon.clone()]);
    assert_eq!(sb.report().read_only, vec![canon.join(".git")]);
}
