//! What the sandbox's test binaries share: a project with a git dir, the
//! workspace-write policy over it, and a script run (or spawned) under a
//! policy. `#[allow(dead_code)]`: not every binary uses every piece.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bh_sandbox::{Policy, Sandbox};

/// How a sandboxed script ended, and its stdout then stderr.
pub struct Run {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub out: String,
}

/// `<tmp>/project` with `.git/config` and `a.txt`.
pub fn project() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("project");
    fs_err::create_dir_all(p.join(".git")).unwrap();
    fs_err::write(p.join(".git/config"), "[core]\n").unwrap();
    fs_err::write(p.join("a.txt"), "a\n").unwrap();
    (t, p)
}

/// Write the project, not its git dir; a private `/tmp`; network on.
pub fn policy(p: &Path) -> Policy {
    Policy {
        writable: vec![p.to_owned()],
        read_only: vec![p.join(".git")],
        visible: vec![],
        private_tmp: true,
        network: true,
        hidden: Vec::new(),
        allow_sockets: Vec::new(),
        deny_unix_sockets: false,
        overlays: Vec::new(),
    }
}

/// `bash -c script` in `cwd` under `policy`, stdout and stderr piped.
pub fn spawn_script(policy: &Policy, cwd: &Path, script: &str) -> bh_sandbox::Confined {
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

/// [`spawn_script`] to its end.
pub fn run(policy: &Policy, cwd: &Path, script: &str) -> Run {
    let mut c = spawn_script(policy, cwd, script);
    let out = output(&mut c);
    let st = c.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    Run {
        code: st.code(),
        signal: st.signal(),
        out,
    }
}

/// Everything a sandboxed command spawned with both pipes printed: its
/// stdout, then its stderr (read beside it, so that neither pipe fills).
pub fn output(c: &mut bh_sandbox::Confined) -> String {
    let mut so = c.child_mut().stdout.take().unwrap();
    let mut se = c.child_mut().stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut e = String::new();
        se.read_to_string(&mut e).unwrap();
        e
    });
    let mut out = String::new();
    so.read_to_string(&mut out).unwrap();
    out + &err.join().unwrap()
}

/// Runs this test binary again as `nobody` (through `setpriv`) with `args`
/// (test names, or a filter), and checks that `passed` tests passed. The
/// re-run gets a folder of its own outside `/tmp` in `BH_TEST_OUTSIDE`.
/// Skipped, saying why, where this process is not root (it is unprivileged
/// already) or `setpriv` is missing. CI runs as root: this is how the
/// unprivileged path, the one most users take, is exercised there.
pub fn rerun_as_nobody(args: &[&str], passed: usize) {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root to switch to nobody (this run is unprivileged already)");
        return;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: setpriv (util-linux) is not installed");
        return;
    }
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    nix::unistd::chown(
        base.path(),
        Some(nix::unistd::Uid::from_raw(65534)),
        Some(nix::unistd::Gid::from_raw(65534)),
    )
    .unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(std::env::current_exe().unwrap())
        .args(args)
        .current_dir("/")
        .env("HOME", "/")
        .env("TMPDIR", "/tmp")
        .env("BH_TEST_OUTSIDE", base.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains(&format!("{passed} passed")),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A folder outside `/tmp` (the private `/tmp` would hide one there
/// anyway): under `BH_TEST_OUTSIDE` when set (the non-root re-run's own
/// folder, see [`rerun_as_nobody`]), else the target's scratch folder.
pub fn outside() -> tempfile::TempDir {
    match std::env::var_os("BH_TEST_OUTSIDE") {
        Some(d) => tempfile::tempdir_in(d).unwrap(),
        None => tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap(),
    }
}

/// A listening socket at `path`, non-blocking so that the host can ask
/// afterwards whether anything connected ([`never_reached`]).
pub fn listen(path: &Path) -> std::os::unix::net::UnixListener {
    let l = std::os::unix::net::UnixListener::bind(path).unwrap();
    l.set_nonblocking(true).unwrap();
    l
}

/// No connection is waiting on `l`: the attack never reached it.
pub fn never_reached(l: &std::os::unix::net::UnixListener, what: &str) {
    assert!(l.accept().is_err(), "a connection reached {what}");
}
