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
