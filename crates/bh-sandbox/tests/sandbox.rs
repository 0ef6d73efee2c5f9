//! The sandbox tried as an attacker would: every test runs a real shell
//! under a real policy (as root in CI: Landlock and namespaces apply).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bh_sandbox::{Policy, Sandbox, SandboxError};

mod common;
use common::{policy, project, run};

/// `sleep` processes whose command line contains `marker` (a unique
/// argument).
fn with_marker(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for e in fs_err::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(cmdline) = fs_err::read(format!("/proc/{pid}/cmdline"))
            && cmdline.starts_with(b"sleep\0")
            && String::from_utf8_lossy(&cmdline).contains(marker)
            && bh_proc::process_state(pid) != Some('Z')
        {
            found.push(pid);
        }
    }
    found
}

fn marker() -> String {
    format!(
        "{}.{}",
        std::process::id() % 10000,
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    )
}

#[test]
fn writes_only_under_writable_roots() {
    let (t, p) = project();
    // Beside the project under the (hidden) /tmp, and in a folder the
    // command sees but may not write.
    let outside = t.path().join("outside.txt");
    let seen = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let seen_file = seen.path().join("outside.txt");
    let mut pol = policy(&p);
    pol.visible.push(t.path().to_owned());
    let r = run(
        &pol,
        &p,
        &format!(
            "echo b > a.txt && mkdir -p sub && echo c > sub/c && mv sub/c sub/d && echo ok; echo x > {}; echo x > {}; ls {}",
            outside.display(),
            seen_file.display(),
            seen.path().display(),
        ),
    );
    assert!(r.out.contains("ok"), "{}", r.out);
    // Under the private /tmp the carried-over folder is a read-only bind;
    // elsewhere Landlock refuses.
    assert!(
        r.out.contains("outside.txt: Read-only file system"),
        "{}",
        r.out
    );
    // Outside /tmp Landlock refuses; a build dir under /tmp (a clone there)
    // is hidden by the private /tmp altogether. Either way nothing lands.
    assert!(
        r.out.contains("outside.txt: Permission denied")
            || (seen.path().starts_with("/tmp")
                && r.out.contains("outside.txt: No such file or directory")),
        "{}",
        r.out
    );
    assert!(!seen_file.exists());
    assert!(!outside.exists());
    assert_eq!(fs_err::read_to_string(p.join("a.txt")).unwrap(), "b\n");
    assert!(p.join("sub/d").exists());
    assert!(!outside.exists());
    assert!(!seen_file.exists());
}

#[test]
fn read_only_holes_inside_a_writable_root() {
    let (_t, p) = project();
    let r = run(
        &policy(&p),
        &p,
        "echo '[core]\nfsmonitor=evil' >> .git/config; rm -f .git/config; mkdir .git/hooks; mv .git gone; echo done",
    );
    assert!(r.out.contains("Read-only file system"), "{}", r.out);
    assert!(r.out.contains("done"));
    assert_eq!(
        fs_err::read_to_string(p.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!p.join(".git/hooks").exists());
    assert!(!p.join("gone").exists());
}

#[test]
fn a_protected_file_outside_stays_read_only_and_the_rest_of_home_too() {
    let (t, p) = project();
    let home = t.path().join("home");
    fs_err::create_dir_all(&home).unwrap();
    fs_err::write(home.join(".gitconfig"), "[user]\n").unwrap();
    // The protected file even inside a writable root.
    let inner = p.join(".gitconfig-fake");
    fs_err::write(&inner, "[user]\n").unwrap();
    let mut pol = policy(&p);
    pol.read_only.push(home.join(".gitconfig"));
    pol.read_only.push(inner.clone());
    let r = run(
        &pol,
        &p,
        &format!(
            "echo '[filter \"x\"]' >> {}; echo '[filter \"x\"]' >> {}; touch {}/new; echo done",
            home.join(".gitconfig").display(),
            inner.display(),
            home.display()
        ),
    );
    assert!(r.out.contains("done"), "{}", r.out);
    assert_eq!(
        fs_err::read_to_string(home.join(".gitconfig")).unwrap(),
        "[user]\n"
    );
    assert_eq!(fs_err::read_to_string(&inner).unwrap(), "[user]\n");
    assert!(!home.join("new").exists());
}

#[test]
fn a_writable_root_inside_a_read_only_folder_stays_writable() {
    // The task layout: the worker's repository lives in the harness's state
    // folder, which is protected.
    let (t, p) = project();
    let state = t.path().join("state");
    let work = state.join("tasks/t1/worktree");
    fs_err::create_dir_all(work.join(".git")).unwrap();
    fs_err::write(state.join("config"), "x\n").unwrap();
    let pol = Policy {
        writable: vec![work.clone()],
        read_only: vec![state.clone(), p.join(".git")],
        visible: vec![],
        private_tmp: true,
        network: true,
        hidden: Vec::new(),
        allow_sockets: Vec::new(),
        deny_unix_sockets: false,
        overlays: Vec::new(),
    };
    let r = run(
        &pol,
        &work,
        &format!(
            "echo ok > f && git init -q . && echo y > {}/config; echo y > {}/tasks/t1/other; echo done",
            state.display(),
            state.display()
        ),
    );
    assert!(r.out.contains("done"), "{}", r.out);
    assert_eq!(fs_err::read_to_string(work.join("f")).unwrap(), "ok\n");
    assert_eq!(fs_err::read_to_string(state.join("config")).unwrap(), "x\n");
    assert!(!state.join("tasks/t1/other").exists());
}

#[test]
fn private_tmp_hides_the_hosts_tmp_and_keeps_nothing() {
    let (_t, p) = project();
    let host = tempfile::NamedTempFile::new().unwrap();
    let name = format!("bh-sandbox-leak-{}", marker());
    let r = run(
        &policy(&p),
        &p,
        &format!(
            "test -e {} && echo host-visible; echo x > /tmp/{name} && cat /tmp/{name}; ls /tmp | wc -l",
            host.path().display()
        ),
    );
    assert!(!r.out.contains("host-visible"), "{}", r.out);
    assert!(r.out.contains('x'), "{}", r.out);
    assert!(!Path::new("/tmp").join(&name).exists());
}

/// The project lies under `/tmp` (as tests' and many users' scratch
/// checkouts do): the private `/tmp` carries it inside folders made only to
/// reach it. A write beside the project, into one of those, would vanish
/// with the tmpfs while looking like the host's folder: it fails instead.
/// `/tmp`'s own scratch space still takes writes, and the project too.
#[test]
fn a_write_beside_a_project_under_tmp_fails_instead_of_vanishing() {
    let (t, p) = project();
    assert!(
        p.starts_with("/tmp"),
        "the project is under /tmp: {}",
        p.display()
    );
    let r = run(
        &policy(&p),
        &p,
        "echo x > ../beside.txt 2>/dev/null && echo beside-written; \
         mkdir ../made 2>/dev/null && echo made-dir; \
         echo y > /tmp/scratch && echo scratch-ok; \
         echo z > in-project.txt && echo project-ok",
    );
    assert!(!r.out.contains("beside-written"), "{}", r.out);
    assert!(!r.out.contains("made-dir"), "{}", r.out);
    assert!(
        r.out.contains("scratch-ok") && r.out.contains("project-ok"),
        "{}",
        r.out
    );
    assert!(!t.path().join("beside.txt").exists());
    assert_eq!(
        fs_err::read_to_string(p.join("in-project.txt")).unwrap(),
        "z\n"
    );
}

#[test]
fn a_symlink_or_a_cwd_under_the_hidden_tmp_cannot_reach_the_read_only_hole() {
    // The command starts inside the project (which lives under /tmp): a
    // relative write must meet the read-only bind, not the host's copy.
    let (_t, p) = project();
    let r = run(&policy(&p), &p, "echo x >> ./.git/config; pwd");
    assert!(r.out.contains("Read-only file system"), "{}", r.out);
    assert_eq!(
        fs_err::read_to_string(p.join(".git/config")).unwrap(),
        "[core]\n"
    );
}

#[test]
fn the_command_is_pid_2_and_sees_only_its_namespace() {
    let (_t, p) = project();
    let r = run(&policy(&p), &p, "echo pid=$$; ls /proc | grep -c '^[0-9]'");
    assert!(r.out.contains("pid=2"), "{}", r.out);
}

#[test]
fn exit_status_and_signals_pass_through() {
    let (_t, p) = project();
    assert_eq!(run(&policy(&p), &p, "exit 7").code, Some(7));
    let r = run(&policy(&p), &p, "kill -TERM $$");
    assert_eq!(r.signal, Some(15), "code {:?}", r.code);
}

#[test]
fn a_forking_setsid_daemon_dies_with_the_command() {
    let (_t, p) = project();
    let m = marker();
    // Double fork, setsid, fds closed, then keep forking and writing.
    let script = format!(
        "setsid bash -c 'exec 0<&- 1>&- 2>&-; (while true; do sleep {m} & echo x >> log; sleep 0.01; done) &' & sleep 0.2; echo started"
    );
    let r = run(&policy(&p), &p, &script);
    assert!(r.out.contains("started"), "{}", r.out);
    assert_eq!(with_marker(&m), Vec::<u32>::new());
    let size = fs_err::metadata(p.join("log"))
        .map(|m| m.len())
        .unwrap_or(0);
    // Nothing of the daemon is left to write: the size cannot change.
    let again = fs_err::metadata(p.join("log"))
        .map(|m| m.len())
        .unwrap_or(0);
    assert_eq!(size, again);
}

#[test]
fn kill_takes_every_process_of_the_namespace() {
    let (_t, p) = project();
    let m = marker();
    let sb = Sandbox::new(&policy(&p), &p).unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(format!("setsid sleep {m} & sleep {m} & echo up; wait"))
        .current_dir(&p)
        .stdout(Stdio::piped());
    let mut c = sb.spawn(cmd).unwrap();
    let mut line = [0u8; 3];
    c.child_mut()
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut line)
        .unwrap();
    let start = Instant::now();
    while with_marker(&m).len() < 2 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(with_marker(&m).len(), 2);
    c.kill();
    c.wait().unwrap();
    assert_eq!(with_marker(&m), Vec::<u32>::new());
}

#[test]
fn orphans_are_reaped_while_the_command_runs() {
    let (_t, p) = project();
    // 300 orphans that exit at once; with no init reaping them they would
    // stay zombies until the end (the command itself would be PID 1).
    let script = "for i in $(seq 300); do (true &) ; done; \
        for i in $(seq 200); do z=$(grep -l '^State:.Z' /proc/[0-9]*/status 2>/dev/null | wc -l); \
        [ $z -eq 0 ] && { echo reaped; exit 0; }; sleep 0.05; done; echo zombies=$z";
    let r = run(&policy(&p), &p, script);
    assert!(r.out.contains("reaped"), "{}", r.out);
}

#[test]
fn no_network_cuts_even_loopback_and_network_keeps_it() {
    let (_t, p) = project();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let with = run(&policy(&p), &p, &script);
    assert!(with.out.contains("connected"), "{}", with.out);
    let mut pol = policy(&p);
    pol.network = false;
    let without = run(&pol, &p, &script);
    assert!(!without.out.contains("connected"), "{}", without.out);
}

#[test]
fn a_build_in_the_project_works() {
    let (_t, p) = project();
    fs_err::write(p.join("m.c"), "int main(void){return 3;}\n").unwrap();
    let have_cc = Command::new("cc").arg("--version").output().is_ok();
    let script = if have_cc {
        "cc -o m m.c && ./m; echo rc=$?"
    } else {
        "printf '#!/bin/sh\\nexit 3\\n' > m && chmod +x m && ./m; echo rc=$?"
    };
    let r = run(&policy(&p), &p, script);
    assert!(r.out.contains("rc=3"), "{}", r.out);
}

/// A protected path that does not exist inside a writable root could be
/// created by the command (a planted `~/.gitconfig`), and no mount can
/// cover what is not there: refused, naming it and the root. One inside a
/// read-only folder is kept by the folder; one outside every writable root
/// cannot be created anyway.
#[test]
fn a_missing_protected_path_inside_a_writable_root_is_refused() {
    let (_t, p) = project();
    let mut pol = policy(&p);
    pol.read_only.push(p.join("not-there"));
    let e = Sandbox::new(&pol, &p).err().unwrap();
    assert!(matches!(e, SandboxError::Unprotectable { .. }), "{e}");
    let e = e.to_string();
    assert!(
        e.contains(&format!(
            "{}/not-there",
            fs_err::canonicalize(&p).unwrap().display()
        )) && e.contains("does not exist")
            && e.contains("create it first"),
        "{e}"
    );
    let mut pol = policy(&p);
    pol.read_only.push(p.join(".git/hooks/not-there"));
    pol.read_only.push(PathBuf::from("/nonexistent-bh-dir/x"));
    Sandbox::new(&pol, &p).unwrap();
}

/// A protected path that is a symbolic link (a stow-managed `~/.gitconfig`)
/// inside a writable root is kept as the link *and* its target: the link
/// can be neither removed, replaced nor retargeted, the target not written.
/// A link to a missing file is refused like a missing path.
#[test]
fn a_protected_link_is_kept_as_link_and_target() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    fs_err::create_dir_all(home.join("dotfiles")).unwrap();
    fs_err::write(home.join("dotfiles/gitconfig"), "[user]\n").unwrap();
    fs_err::os::unix::fs::symlink("dotfiles/gitconfig", home.join(".gitconfig")).unwrap();
    let pol = Policy {
        writable: vec![home.clone()],
        read_only: vec![home.join(".gitconfig")],
        ..policy(&home)
    };
    let sb = Sandbox::new(&pol, &home).unwrap();
    assert_eq!(
        sb.report().links_pinned,
        [fs_err::canonicalize(&home).unwrap().join(".gitconfig")]
    );
    let r = run(
        &pol,
        &home,
        "rm -f .gitconfig 2>/dev/null && echo removed; \
         echo '[core] fsmonitor = evil' > planted; mv -f planted .gitconfig 2>/dev/null && echo replaced; \
         ln -sfn planted .gitconfig 2>/dev/null && echo retargeted; \
         echo '[core] fsmonitor = evil' >> .gitconfig 2>/dev/null && echo appended; \
         echo ok > other.txt && echo home-writable",
    );
    for bad in ["removed", "replaced", "retargeted", "appended"] {
        assert!(!r.out.contains(bad), "{bad}: {}", r.out);
    }
    assert!(r.out.contains("home-writable"), "{}", r.out);
    assert_eq!(
        fs_err::read_link(home.join(".gitconfig")).unwrap(),
        PathBuf::from("dotfiles/gitconfig")
    );
    assert_eq!(
        fs_err::read_to_string(home.join("dotfiles/gitconfig")).unwrap(),
        "[user]\n"
    );
    // Dangling: writing through it would create the target.
    fs_err::remove_file(home.join("dotfiles/gitconfig")).unwrap();
    let e = Sandbox::new(&pol, &home).err().unwrap().to_string();
    assert!(e.contains("symbolic link to a missing file"), "{e}");
}

#[test]
fn a_failed_step_is_named() {
    let (_t, p) = project();
    let t = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let cwd = t.path().join("gone");
    fs_err::create_dir(&cwd).unwrap();
    let sb = Sandbox::new(&policy(&p), &cwd).unwrap();
    fs_err::remove_dir(&cwd).unwrap();
    let mut cmd = Command::new("true");
    cmd.current_dir(&p);
    let err = sb.spawn(cmd).err().unwrap();
    assert!(matches!(err, SandboxError::Setup { .. }), "{err}");
    // The step that failed is named: re-entering the working folder, or
    // (when the build dir lies under /tmp) carrying it over onto the private /tmp.
    let text = err.to_string();
    assert!(
        text.contains("working folder") || text.contains("carry a path over"),
        "{err}"
    );
}

#[test]
fn a_missing_writable_root_is_an_error_naming_it() {
    let (_t, p) = project();
    let mut pol = policy(&p);
    pol.writable.push(p.join("nope"));
    let err = Sandbox::new(&pol, &p).err().unwrap();
    assert!(err.to_string().contains("nope"), "{err}");
}

/// Run by `kill_9_of_the_harness_kills_the_worker` in a process of its own.
#[test]
#[ignore]
fn helper_harness() {
    let Ok(m) = std::env::var("BH_SANDBOX_HELPER_MARKER") else {
        return;
    };
    let dir = PathBuf::from(std::env::var("BH_SANDBOX_HELPER_DIR").unwrap());
    let sb = Sandbox::new(&policy(&dir), &dir).unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(format!("setsid sleep {m} & sleep {m}"))
        .current_dir(&dir);
    let c = sb.spawn(cmd).unwrap();
    println!("spawned");
    std::thread::sleep(Duration::from_secs(600));
    drop(c);
}

#[test]
fn kill_9_of_the_harness_kills_the_worker() {
    let (_t, p) = project();
    let m = marker();
    let mut h = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "helper_harness", "--nocapture"])
        .env("BH_SANDBOX_HELPER_MARKER", &m)
        .env("BH_SANDBOX_HELPER_DIR", &p)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while with_marker(&m).len() < 2 && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(with_marker(&m).len(), 2, "the worker did not start");
    h.kill().unwrap(); // SIGKILL: no destructor runs in the harness
    h.wait().unwrap();
    let start = Instant::now();
    while !with_marker(&m).is_empty() && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(with_marker(&m), Vec::<u32>::new());
}

/// The non-root path (a user namespace with uid/gid maps first): the same
/// attack tests, re-run as `nobody` through `setpriv`. Skipped, saying why,
/// where this process is not root or `setpriv` is missing.
#[test]
fn the_same_attacks_hold_for_a_non_root_user() {
    common::rerun_as_nobody(
        &[
            "read_only_holes_inside_a_writable_root",
            "private_tmp_hides_the_hosts_tmp",
            "the_command_is_pid_2",
            "kill_takes_every_process",
            "orphans_are_reaped",
        ],
        5,
    );
}

/// A key file and a credential folder on the host, readable to the user:
/// hidden, the command reads nothing of them (an empty file, an empty
/// folder it cannot write), and cannot uncover them; the host's files stay.
#[test]
fn hidden_paths_cannot_be_read_listed_or_uncovered() {
    let (t, p) = project();
    let state = t.path().join("state");
    let ssh = t.path().join("home/.ssh");
    fs_err::create_dir_all(&state).unwrap();
    fs_err::create_dir_all(&ssh).unwrap();
    fs_err::write(state.join("plan.key"), "SECRET-KEY-BYTES").unwrap();
    fs_err::write(ssh.join("id_ed25519"), "PRIVATE-KEY").unwrap();
    let missing = t.path().join("home/.aws");
    let pol = Policy {
        // Visible on the private /tmp (the temp dir lives there).
        visible: vec![t.path().to_owned()],
        hidden: vec![state.join("plan.key"), ssh.clone(), missing],
        ..policy(&p)
    };
    let sb = Sandbox::new(&pol, &p).unwrap();
    assert_eq!(sb.report().hidden.len(), 2, "{:?}", sb.report());
    let r = run(
        &pol,
        &p,
        &format!(
            "cat {key}; echo; ls -A {ssh}; cat {ssh}/id_ed25519; echo x > {ssh}/new; \
             umount {ssh} 2>&1; umount {key} 2>&1; cat {key}; cat {ssh}/id_ed25519; echo done",
            key = state.join("plan.key").display(),
            ssh = ssh.display()
        ),
    );
    assert!(r.out.contains("done"), "{}", r.out);
    assert!(!r.out.contains("SECRET-KEY-BYTES"), "{}", r.out);
    assert!(!r.out.contains("PRIVATE-KEY"), "{}", r.out);
    assert!(!ssh.join("new").exists());
    assert_eq!(
        fs_err::read_to_string(state.join("plan.key")).unwrap(),
        "SECRET-KEY-BYTES"
    );
    assert_eq!(
        fs_err::read_to_string(ssh.join("id_ed25519")).unwrap(),
        "PRIVATE-KEY"
    );
}

/// The private `/tmp` has a size: at most 4 GiB, a quarter of the memory
/// (unbounded, a command filling it starved the machine).
#[test]
fn the_private_tmp_has_a_size_limit() {
    let (_t, p) = project();
    let r = run(&policy(&p), &p, "stat -f -c '%b %S' /tmp");
    assert_eq!(r.code, Some(0), "{}", r.out);
    let mut it = r.out.split_whitespace().map(|n| n.parse::<u64>().unwrap());
    let (blocks, size) = (it.next().unwrap(), it.next().unwrap());
    let bytes = blocks * size;
    assert!(bytes > 0 && bytes <= 4 << 30, "{bytes} bytes");
}
