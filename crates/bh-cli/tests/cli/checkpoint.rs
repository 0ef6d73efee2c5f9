//! `bh checkpoint` through the CLI, on real repositories with real git.
//!
//! Over 600 lines: one test binary per command family (each binary is a separate link); tests are independent.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use fs_err::os::unix::fs::symlink;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use pretty_assertions::assert_eq;
use serde_json::Value;

struct Env {
    w: bh_test_support::cli::World,
    root: PathBuf,
    project: PathBuf,
    state: PathBuf,
    home: PathBuf,
}

impl Env {
    fn new() -> Env {
        let w = crate::world();
        let project = w.root.join("project");
        fs::create_dir_all(&project).unwrap();
        Env {
            root: w.root.clone(),
            state: w.state.clone(),
            home: w.home.clone(),
            project,
            w,
        }
    }

    /// A project that is a git repository with one commit.
    fn git_project() -> Env {
        let env = Env::new();
        env.write("src/main.rs", "fn main() {}\n");
        env.write("README.md", "# readme\n");
        env.git(&["init", "-q"]);
        env.git(&["add", "-A"]);
        env.git(&["commit", "-q", "-m", "initial"]);
        env
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.project.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.project.join(rel)).unwrap()
    }

    /// Plain git in the project, as the user runs it.
    fn git(&self, args: &[&str]) -> String {
        self.w.git_stdout(&self.project, args)
    }

    fn bh(&self) -> Command {
        self.w.bh(&self.project)
    }

    /// Runs `bh --json …`, expects success, returns the JSON document.
    fn json(&self, args: &[&str]) -> Value {
        let out = self.bh().arg("--json").args(args).output().unwrap();
        assert!(
            out.status.success(),
            "bh {args:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Runs `bh --json …`, expects failure with `code`, returns the error JSON.
    fn json_err(&self, args: &[&str], code: i32) -> Value {
        let out = self.bh().arg("--json").args(args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(code),
            "bh {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn snapshot(&self) -> Value {
        self.json(&["checkpoint", "snapshot"])["snapshot"].clone()
    }

    fn snapshot_id(&self) -> String {
        self.snapshot()["checkpoint"]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn store_dir(&self) -> PathBuf {
        let list = self.json(&["checkpoint", "list"]);
        PathBuf::from(list["store"].as_str().unwrap())
    }
}

/// `(a, b)` string pairs of the objects in a JSON array, e.g. `("M", "a.txt")`.
fn pairs(list: &Value, a: &str, b: &str) -> Vec<(String, String)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e[a].as_str().unwrap().to_owned(),
                e[b].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Every file under `dir` (relative path → bytes, plus a marker for links/modes).
fn tree_state(dir: &Path) -> BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            let meta = fs::symlink_metadata(&p).unwrap();
            if meta.is_symlink() {
                out.insert(
                    rel,
                    format!("link:{}", fs::read_link(&p).unwrap().display()),
                );
            } else if meta.is_dir() {
                walk(base, &p, out);
            } else {
                let bytes = fs::read(&p).unwrap();
                out.insert(
                    rel,
                    format!(
                        "{:o}:{}",
                        meta.permissions().mode() & 0o777,
                        String::from_utf8_lossy(&bytes)
                    ),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

#[test]
fn snapshot_list_and_debounce() {
    let env = Env::git_project();
    let first = env.snapshot();
    assert_eq!(first["created"], true);
    assert_eq!(first["changed"].as_array().unwrap().len(), 2);
    let again = env.snapshot();
    assert_eq!(again["created"], false, "nothing changed: reuse");
    assert_eq!(again["checkpoint"]["id"], first["checkpoint"]["id"]);
    // mtime bump alone is not a change
    env.write("README.md", "# readme\n");
    assert_eq!(env.snapshot()["created"], false);
    env.write("README.md", "# changed\n");
    let third = env.json(&[
        "checkpoint",
        "snapshot",
        "--tool",
        "Edit",
        "--session",
        "s-1",
        "--entry",
        "e-9",
    ]);
    assert_eq!(third["snapshot"]["created"], true);
    assert_eq!(third["snapshot"]["changed"][0]["path"], "README.md");
    let list = env.json(&["checkpoint", "list"]);
    let cps = list["checkpoints"].as_array().unwrap();
    assert_eq!(cps.len(), 2);
    assert_eq!(cps[0]["tool"], "Edit");
    assert_eq!(cps[0]["session"], "s-1");
    assert_eq!(cps[0]["entry"], "e-9");
    assert_eq!(cps[0]["files_changed"], 1);
    assert!(list["store_size"].as_u64().unwrap() > 0);
    // human output says so too
    let out = env.bh().args(["checkpoint", "snapshot"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("no changes since checkpoint"));
    let out = env.bh().args(["checkpoint", "list"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2 checkpoints"), "{text}");
    assert!(text.contains("Edit"), "{text}");
}

#[test]
fn store_is_private_and_outside_the_project() {
    let env = Env::git_project();
    env.snapshot();
    let store = env.store_dir();
    assert!(store.starts_with(env.state.join("checkpoints")));
    let name = store.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("project-"), "{name}");
    assert_eq!(
        fs::metadata(&store).unwrap().permissions().mode() & 0o777,
        0o700
    );
    // open to others: refused, and nothing is changed
    fs::set_permissions(&store, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = env.json_err(&["checkpoint", "snapshot"], 3);
    assert_eq!(err["error"]["kind"], "refused");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("open to group or others")
    );
    fs::set_permissions(&store, std::fs::Permissions::from_mode(0o700)).unwrap();
    // a state dir inside the project: refused before anything is created
    let err = env.json_err(
        &[
            "--state-dir",
            env.project.join(".bh-state").to_str().unwrap(),
            "checkpoint",
            "snapshot",
        ],
        3,
    );
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("overlap"),
        "{err}"
    );
    // ... and the message says what to do.
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("pass --state-dir DIR (or set BH_STATE_DIR) to a folder outside"),
        "{err}"
    );
    assert!(!env.project.join(".bh-state").exists());
    // a project inside the state dir: refused
    let inner = env.state.join("checkpoints/inner");
    fs::create_dir_all(&inner).unwrap();
    let err = env.json_err(
        &[
            "checkpoint",
            "snapshot",
            "--project",
            inner.to_str().unwrap(),
        ],
        3,
    );
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("overlap"),
        "{err}"
    );
}

#[test]
fn store_owned_by_someone_else_is_refused() {
    if !nix_is_root() {
        eprintln!("skipped: needs root to chown a store to another user");
        return;
    }
    let env = Env::git_project();
    env.snapshot();
    let store = env.store_dir();
    std::os::unix::fs::chown(&store, Some(65534), Some(65534)).unwrap();
    let err = env.json_err(&["checkpoint", "list"], 3);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("owned by uid 65534"),
        "{err}"
    );
}

fn with_stdin(mut cmd: Command, input: String) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn nix_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout == b"0\n")
        .unwrap_or(false)
}

#[test]
fn user_git_dir_is_byte_identical_after_every_command() {
    let env = Env::git_project();
    env.write("staged.txt", "staged\n");
    env.git(&["add", "staged.txt"]);
    env.write("untracked.txt", "u\n");
    env.write("src/main.rs", "fn main() { changed() }\n");
    let before = tree_state(&env.project.join(".git"));
    let id = env.snapshot_id();
    env.write("new.txt", "n\n");
    env.snapshot();
    env.json(&["checkpoint", "list"]);
    env.json(&["checkpoint", "diff", &id]);
    env.json(&["checkpoint", "restore", &id, "src/main.rs"]);
    env.json(&["checkpoint", "restore", &id, "--exact"]);
    env.json(&["checkpoint", "prune", "--keep", "2"]);
    let mut hook = env.bh();
    hook.args(["checkpoint", "hook", "claude-code"]);
    let out = with_stdin(
        hook,
        serde_json::json!({
            "session_id": "abc", "cwd": env.project, "tool_name": "Write",
            "tool_input": {"file_path": "x"}, "hook_event_name": "PreToolUse"
        })
        .to_string(),
    );
    assert!(out.status.success());
    let after = tree_state(&env.project.join(".git"));
    assert_eq!(before, after, "the user's .git changed");
}

#[test]
fn inherited_git_index_file_does_not_touch_the_users_index() {
    let env = Env::git_project();
    let index = env.project.join(".git/index");
    let before = fs::read(&index).unwrap();
    env.write("new.txt", "n\n");
    let out = env
        .bh()
        .env("GIT_INDEX_FILE", &index)
        .env("GIT_DIR", env.project.join(".git"))
        .env("GIT_WORK_TREE", &env.project)
        .args(["--json", "checkpoint", "snapshot"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read(&index).unwrap(), before);
    assert!(!env.git(&["status", "--porcelain"]).contains("A  new.txt"));
}

#[test]
fn bytes_are_stored_exactly_despite_filters_and_attributes() {
    let env = Env::git_project();
    // A global clean filter that would rewrite content (and leave a trace).
    let trace = env.root.join("filter-ran");
    fs::write(
        env.home.join(".gitconfig"),
        format!(
            "[filter \"evil\"]\n\tclean = sh -c 'touch {0}; echo SECRET'\n\tsmudge = sh -c 'touch {0}; echo SMUDGED'\n[core]\n\tautocrlf = true\n",
            trace.display()
        ),
    )
    .unwrap();
    env.write(
        ".gitattributes",
        "*.dat filter=evil\n*.txt text eol=crlf\n*.id ident\n",
    );
    let crlf = "line1\r\nline2\nline3\r\n";
    env.write("data.dat", "raw data\n");
    env.write("mixed.txt", crlf);
    env.write("file.id", "$Id$\n");
    let id = env.snapshot_id();
    assert!(!trace.exists(), "a clean filter ran");
    fs::remove_file(env.project.join("data.dat")).unwrap();
    fs::remove_file(env.project.join("mixed.txt")).unwrap();
    fs::remove_file(env.project.join("file.id")).unwrap();
    env.json(&["checkpoint", "restore", &id]);
    assert!(!trace.exists(), "a smudge filter ran");
    assert_eq!(env.read("data.dat"), "raw data\n");
    assert_eq!(env.read("mixed.txt"), crlf);
    assert_eq!(env.read("file.id"), "$Id$\n");
}

#[test]
fn committed_files_with_conversions_are_stored_raw_when_seeding() {
    // The user's own index holds *converted* blobs; seeding must not trust them.
    let env = Env::new();
    env.write(".gitattributes", "*.txt text eol=lf\n");
    env.write("a.txt", "one\r\ntwo\r\n");
    env.git(&["init", "-q"]);
    env.git(&["add", "-A"]);
    env.git(&["commit", "-q", "-m", "i"]);
    let id = env.snapshot_id();
    fs::remove_file(env.project.join("a.txt")).unwrap();
    env.json(&["checkpoint", "restore", &id, "a.txt"]);
    assert_eq!(env.read("a.txt"), "one\r\ntwo\r\n");
}

#[test]
fn ignore_rules_of_the_user_apply() {
    let env = Env::git_project();
    env.write(".gitignore", "*.log\n");
    env.write("app.log", "log\n");
    fs::write(env.project.join(".git/info/exclude"), "secret.env\n").unwrap();
    env.write("secret.env", "KEY=1\n");
    let global_ignore = env.home.join("global-ignore");
    fs::write(&global_ignore, "*.tmp\n").unwrap();
    fs::write(
        env.home.join(".gitconfig"),
        format!("[core]\n\texcludesFile = {}\n", global_ignore.display()),
    )
    .unwrap();
    env.write("scratch.tmp", "t\n");
    env.write("kept.txt", "k\n");
    let snap = env.snapshot();
    let changed: Vec<&str> = snap["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert!(changed.contains(&"kept.txt"), "{changed:?}");
    for ignored in ["app.log", "secret.env", "scratch.tmp"] {
        assert!(
            !changed.contains(&ignored),
            "{ignored} captured: {changed:?}"
        );
    }
}

#[test]
fn symlinks_and_exec_bits_round_trip() {
    let env = Env::new();
    env.write("script.sh", "#!/bin/sh\necho hi\n");
    fs::set_permissions(
        env.project.join("script.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    env.write("target.txt", "t\n");
    symlink("target.txt", env.project.join("link")).unwrap();
    symlink("/etc/hostname", env.project.join("outside-link")).unwrap();
    symlink("missing", env.project.join("dangling")).unwrap();
    let before = tree_state(&env.project);
    let id = env.snapshot_id();
    fs::remove_file(env.project.join("link")).unwrap();
    fs::remove_file(env.project.join("dangling")).unwrap();
    fs::remove_file(env.project.join("outside-link")).unwrap();
    fs::set_permissions(
        env.project.join("script.sh"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    env.write("link", "now a file\n");
    env.json(&["checkpoint", "restore", &id]);
    assert_eq!(tree_state(&env.project), before);
}

#[test]
fn nested_repos_unreadable_and_large_files_never_fail_a_snapshot() {
    let env = Env::git_project();
    // an empty nested repository (no commit) and one with a commit
    env.w
        .git_command({
            let d = env.project.join("empty-nested");
            fs::create_dir_all(&d).unwrap();
            d
        })
        .args(["init", "-q"])
        .status()
        .unwrap();
    env.write("full-nested/f.txt", "x\n");
    let nested = env.project.join("full-nested");
    for args in [
        &["init", "-q"][..],
        &["add", "-A"],
        &[
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@b",
            "commit",
            "-qm",
            "x",
        ],
    ] {
        assert!(
            env.w
                .git_command(&nested)
                .args(args)
                .status()
                .unwrap()
                .success()
        );
    }
    env.write("big.bin", &"x".repeat(3000));
    env.write("fine.txt", "fine\n");
    let out = env.json(&["checkpoint", "snapshot", "--max-file-size", "2KiB"]);
    let snap = &out["snapshot"];
    assert_eq!(snap["created"], true);
    let skipped = pairs(&snap["skipped"], "path", "reason");
    assert!(
        skipped
            .iter()
            .any(|(p, r)| p == "empty-nested" && r.contains("nested")),
        "{skipped:?}"
    );
    assert!(
        skipped
            .iter()
            .any(|(p, r)| p == "full-nested" && r.contains("nested")),
        "{skipped:?}"
    );
    assert!(
        skipped
            .iter()
            .any(|(p, r)| p == "big.bin" && r.contains("size cap")),
        "{skipped:?}"
    );
    let changed = snap["changed"].to_string();
    assert!(changed.contains("fine.txt"));
    assert!(!changed.contains("big.bin"));
    // the nested repository itself is untouched
    assert!(nested.join(".git/HEAD").exists());
    // an exact restore never deletes what was skipped
    let id = snap["checkpoint"]["id"].as_str().unwrap().to_owned();
    env.json(&["checkpoint", "restore", &id, "--exact"]);
    assert!(env.project.join("big.bin").exists());
    assert!(nested.join("f.txt").exists());
}

#[test]
fn unreadable_file_is_skipped_and_recorded() {
    let env = Env::git_project();
    env.write("secret.txt", "s\n");
    env.write("ok.txt", "ok\n");
    fs::set_permissions(
        env.project.join("secret.txt"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    let mut cmd = if nix_is_root() {
        // root reads everything: run bh as nobody, on files nobody owns, from a
        // copy of the binary nobody can reach (the build folder may be private).
        let bin = env.root.join("bh");
        fs::copy(env.w.bin(), &bin).unwrap();
        for dir in [&env.root, &env.project, &env.home] {
            chown_r(dir);
        }
        let mut c = env.w.command("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .current_dir(&env.project);
        c
    } else {
        env.bh()
    };
    // git refuses repositories owned by someone else unless told otherwise
    fs::write(env.home.join(".gitconfig"), "[safe]\n\tdirectory = *\n").unwrap();
    if nix_is_root() {
        chown_r(&env.home);
    }
    let out = cmd
        .args(["--json", "checkpoint", "snapshot"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let skipped = doc["snapshot"]["skipped"].to_string();
    assert!(
        skipped.contains("secret.txt") && skipped.contains("unreadable"),
        "{skipped}"
    );
    assert!(doc["snapshot"]["changed"].to_string().contains("ok.txt"));
}

fn chown_r(dir: &Path) {
    std::os::unix::fs::lchown(dir, Some(65534), Some(65534)).unwrap();
    if fs::symlink_metadata(dir).unwrap().is_dir() {
        for e in fs::read_dir(dir).unwrap() {
            chown_r(&e.unwrap().path());
        }
    }
}

#[test]
fn restore_is_additive_by_default_and_exact_on_request() {
    let env = Env::new();
    env.write("a.txt", "a1\n");
    env.write("dir/b.txt", "b1\n");
    env.write("dir/c.txt", "c1\n");
    let id = env.snapshot_id();
    env.write("a.txt", "a2\n");
    env.write("dir/b.txt", "b2\n");
    fs::remove_file(env.project.join("dir/c.txt")).unwrap();
    env.write("dir/new.txt", "new\n");
    env.write("other-new.txt", "new\n");

    // path-scoped restore: only dir/b.txt
    let out = env.json(&["checkpoint", "restore", &id, "dir/b.txt"]);
    assert_eq!(out["restore"]["restored"], serde_json::json!(["dir/b.txt"]));
    assert_eq!(env.read("dir/b.txt"), "b1\n");
    assert_eq!(env.read("a.txt"), "a2\n");
    assert!(!env.project.join("dir/c.txt").exists());

    // a directory, from inside it (paths are relative to the current directory)
    // (a plain folder: name the project, or the subfolder would be its own project)
    let out = env
        .bh()
        .current_dir(env.project.join("dir"))
        .args([
            "--json",
            "checkpoint",
            "restore",
            "--project",
            "..",
            &id,
            ".",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(env.read("dir/c.txt"), "c1\n");
    assert!(
        env.project.join("dir/new.txt").exists(),
        "additive keeps new files"
    );
    assert_eq!(env.read("a.txt"), "a2\n");

    // no path = everything, still additive
    let out = env.json(&["checkpoint", "restore", &id]);
    assert_eq!(env.read("a.txt"), "a1\n");
    assert!(env.project.join("other-new.txt").exists());
    assert!(out["restore"]["kept"].to_string().contains("other-new.txt"));

    // exact removes files created since, but never ignored ones
    env.write(".gitignore", "*.log\n");
    env.write("debug.log", "keep me\n");
    let out = env.json(&["checkpoint", "restore", &id, "--exact"]);
    let deleted = out["restore"]["deleted"].to_string();
    assert!(
        deleted.contains("other-new.txt") && deleted.contains("dir/new.txt"),
        "{deleted}"
    );
    assert!(!env.project.join("other-new.txt").exists());
    assert!(!env.project.join(".gitignore").exists());
    assert_eq!(env.read("debug.log"), "keep me\n");

    // every restore is undoable: the safety checkpoint brings the state back
    let safety = out["restore"]["safety"]["id"].as_str().unwrap().to_owned();
    env.json(&["checkpoint", "restore", &safety, "--exact"]);
    assert!(env.project.join("other-new.txt").exists());
    assert!(env.project.join(".gitignore").exists());
}

#[test]
fn restore_refuses_bad_input() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    let id = env.snapshot_id();
    let err = env.json_err(&["checkpoint", "restore", &id, "../outside.txt"], 3);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("outside the project"),
        "{err}"
    );
    let err = env.json_err(&["checkpoint", "restore", &id, "/etc/passwd"], 3);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("outside the project")
    );
    let err = env.json_err(&["checkpoint", "restore", &id, "no-such-file"], 4);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not in checkpoint")
    );
    let err = env.json_err(&["checkpoint", "restore", "deadbeef"], 4);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no checkpoint matches")
    );
    // Not an id at all: a usage error, as everywhere (issue 26).
    let err = env.json_err(&["checkpoint", "restore", "zz"], 2);
    assert_eq!(err["error"]["kind"], "usage");
    let err = env.json_err(&["checkpoint", "prune", "--older-than", "3 fortnights"], 2);
    let _ = err;
}

#[test]
fn restore_never_destroys_what_no_checkpoint_holds() {
    let env = Env::new();
    env.write("thing", "was a file\n");
    let id = env.snapshot_id();
    fs::remove_file(env.project.join("thing")).unwrap();
    // now a directory holding an ignored file the store cannot have
    env.write(".gitignore", "*.secret\n");
    env.write("thing/data.secret", "precious\n");
    let err = env.json_err(&["checkpoint", "restore", &id, "thing"], 3);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("thing/data.secret"),
        "{err}"
    );
    assert_eq!(env.read("thing/data.secret"), "precious\n");
    // a directory whose files are all captured can be replaced (undoable)
    fs::remove_file(env.project.join("thing/data.secret")).unwrap();
    env.write("thing/plain.txt", "captured\n");
    let out = env.json(&["checkpoint", "restore", &id, "thing"]);
    assert_eq!(env.read("thing"), "was a file\n");
    let safety = out["restore"]["safety"]["id"].as_str().unwrap().to_owned();
    fs::remove_file(env.project.join("thing")).unwrap();
    env.json(&["checkpoint", "restore", &safety, "thing/plain.txt"]);
    assert_eq!(env.read("thing/plain.txt"), "captured\n");
}

#[test]
fn diff_against_the_current_tree() {
    let env = Env::new();
    env.write("a.txt", "one\n");
    env.write("b.txt", "bee\n");
    let id = env.snapshot_id();
    env.write("a.txt", "two\n");
    env.write("c.txt", "new\n");
    fs::remove_file(env.project.join("b.txt")).unwrap();
    let out = env.json(&["checkpoint", "diff", &id]);
    let entries = pairs(&out["diff"]["entries"], "status", "path");
    assert_eq!(
        entries,
        vec![
            ("M".into(), "a.txt".into()),
            ("D".into(), "b.txt".into()),
            ("A".into(), "c.txt".into())
        ]
    );
    let patch = env
        .bh()
        .args(["checkpoint", "diff", &id, "a.txt"])
        .output()
        .unwrap();
    let patch = String::from_utf8_lossy(&patch.stdout);
    assert!(patch.contains("-one") && patch.contains("+two"), "{patch}");
    assert!(!patch.contains("c.txt"));
    let stat = env
        .bh()
        .args(["checkpoint", "diff", &id, "--stat"])
        .output()
        .unwrap();
    let stat = String::from_utf8_lossy(&stat.stdout);
    assert!(stat.contains("3 files changed"), "{stat}");
    // diff creates no checkpoint
    assert_eq!(
        env.json(&["checkpoint", "list"])["checkpoints"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn prune_by_count_and_age_then_repack() {
    let env = Env::new();
    for i in 0..5 {
        env.write("f.txt", &format!("v{i}\n"));
        env.snapshot();
    }
    let usage = env.bh().args(["checkpoint", "prune"]).output().unwrap();
    assert_eq!(usage.status.code(), Some(2));
    let out = env.json(&["checkpoint", "prune", "--keep", "2"]);
    assert_eq!(out["prune"]["removed"].as_array().unwrap().len(), 3);
    let list = env.json(&["checkpoint", "list"]);
    let cps = list["checkpoints"].as_array().unwrap();
    assert_eq!(cps.len(), 2);
    // the newest survive and stay restorable
    let id = cps[1]["id"].as_str().unwrap().to_owned();
    env.json(&["checkpoint", "restore", &id]);
    assert_eq!(env.read("f.txt"), "v3\n");
    let out = env.json(&["checkpoint", "prune", "--older-than", "1h"]);
    assert_eq!(out["prune"]["removed"].as_array().unwrap().len(), 0);
    let out = env.json(&["checkpoint", "prune", "--keep", "0"]);
    assert!(!out["prune"]["removed"].as_array().unwrap().is_empty());
    assert!(
        env.json(&["checkpoint", "list"])["checkpoints"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    // and snapshots work again afterwards
    assert_eq!(env.snapshot()["created"], true);
    fsck(&env);
}

fn fsck(env: &Env) {
    let store = env.store_dir();
    let out = env
        .w
        .git_command(&env.root)
        .args([
            "--git-dir",
            store.join("git").to_str().unwrap(),
            "fsck",
            "--strict",
            "--no-dangling",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fsck: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn eight_concurrent_processes_lose_nothing() {
    let env = Env::git_project();
    for i in 0..200 {
        env.write(&format!("files/{i}.txt"), &format!("{i}\n"));
    }
    let mut children = Vec::new();
    for p in 0..8 {
        for round in 0..3 {
            env.write(&format!("proc{p}/round{round}.txt"), "x\n");
        }
        let mut cmd = env.bh();
        cmd.args([
            "--json",
            "checkpoint",
            "snapshot",
            "--tool",
            &format!("p{p}"),
        ]);
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        children.push(cmd.spawn().unwrap());
    }
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // a final snapshot captures everything; all checkpoints are consistent
    env.snapshot();
    let list = env.json(&["checkpoint", "list"]);
    let cps = list["checkpoints"].as_array().unwrap();
    let mut seqs: Vec<u64> = cps.iter().map(|c| c["seq"].as_u64().unwrap()).collect();
    seqs.dedup();
    assert_eq!(seqs.len(), cps.len(), "sequence numbers are unique");
    fsck(&env);
    let latest = cps[0]["id"].as_str().unwrap().to_owned();
    fs::remove_dir_all(env.project.join("files")).unwrap();
    env.json(&["checkpoint", "restore", &latest]);
    assert_eq!(env.read("files/199.txt"), "199\n");
}

#[test]
fn killed_snapshot_never_blocks_the_next() {
    let env = Env::new();
    for i in 0..3000 {
        env.write(&format!("d{}/f{i}.txt", i % 30), &format!("{i}\n"));
    }
    for delay in [5u64, 40, 120] {
        let mut child = env.bh().args(["checkpoint", "snapshot"]).spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay));
        let _ = child.kill();
        let _ = child.wait();
        env.write("after-kill.txt", &format!("{delay}\n"));
        let snap = env.snapshot();
        assert_eq!(snap["created"], true);
    }
    fsck(&env);
}

#[test]
fn non_git_project_and_project_resolution() {
    let env = Env::git_project();
    // from a subdirectory, the project is the repository's top level
    let sub = env.project.join("src");
    let out = env
        .bh()
        .current_dir(&sub)
        .args(["--json", "checkpoint", "snapshot"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["project"].as_str().unwrap(),
        env.project.to_str().unwrap()
    );
    // a plain folder is its own project
    let plain = env.root.join("plain");
    fs::create_dir_all(&plain).unwrap();
    fs::write(plain.join("x.txt"), "x").unwrap();
    let doc = env.json(&[
        "checkpoint",
        "snapshot",
        "--project",
        plain.to_str().unwrap(),
    ]);
    assert_eq!(doc["project"].as_str().unwrap(), plain.to_str().unwrap());
    assert_eq!(doc["snapshot"]["changed"][0]["path"], "x.txt");
    let err = env.json_err(&["checkpoint", "list", "--project", "/no/such/dir"], 4);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/no/such/dir")
    );
}

#[test]
fn checkpoints_survive_the_user_rewriting_history_and_gc() {
    let env = Env::git_project();
    env.write("data/keep.txt", "precious\n");
    env.git(&["add", "-A"]);
    env.git(&["commit", "-q", "-m", "second"]);
    env.git(&["gc", "-q"]); // everything packed: the seed hard-links the pack
    let id = env.snapshot_id();
    // rewrite history: drop the commit and collect everything unreachable
    env.git(&["reset", "-q", "--hard", "HEAD~1"]);
    env.git(&["reflog", "expire", "--expire=now", "--all"]);
    env.git(&["gc", "-q", "--prune=now"]);
    assert!(!env.project.join("data/keep.txt").exists());
    env.json(&["checkpoint", "restore", &id]);
    assert_eq!(env.read("data/keep.txt"), "precious\n");
    fsck(&env);
}

#[test]
fn claude_code_hook_snapshots_mutating_tools_and_never_blocks() {
    let env = Env::git_project();
    let event = |tool: &str, cwd: &Path| {
        serde_json::json!({
            "session_id": "sess-42", "cwd": cwd, "tool_name": tool,
            "tool_input": {}, "hook_event_name": "PreToolUse", "tool_use_id": "toolu_1"
        })
        .to_string()
    };
    let run = |stdin: String, extra: &[&str]| {
        let mut cmd = env.bh();
        cmd.args(["checkpoint", "hook", "claude-code"]).args(extra);
        with_stdin(cmd, stdin)
    };
    let out = run(event("Read", &env.project), &[]);
    assert!(out.status.success());
    assert!(
        env.json(&["checkpoint", "list"])["checkpoints"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let out = run(event("Edit", &env.project.join("src")), &[]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty(), "the hook prints nothing on stdout");
    let list = env.json(&["checkpoint", "list"]);
    assert_eq!(list["checkpoints"][0]["tool"], "Edit");
    assert_eq!(list["checkpoints"][0]["session"], "sess-42");
    // configurable tool list
    env.write("x.txt", "x\n");
    let out = run(event("Edit", &env.project), &["--tools", "Bash"]);
    assert!(out.status.success());
    assert_eq!(
        env.json(&["checkpoint", "list"])["checkpoints"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // garbage in, or a broken store: warn, exit 0
    let out = run("not json".into(), &[]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning"));
    fs::set_permissions(env.store_dir(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = run(event("Write", &env.project), &[]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("open to group or others"));
}

#[test]
fn demo_runs_end_to_end() {
    let env = Env::new();
    let out = env.bh().args(["demo"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("verified: src/main.rs back, README.md back, ignored target/ untouched, scratch.txt gone: yes"), "{text}");
    assert!(text.contains("ran: committed"), "{text}");
    assert!(text.contains("Better-Harness-Entry: "), "{text}");
    // Without --keep the folder is gone: no command that names it.
    assert!(text.contains("run `bh demo --keep` to keep it"), "{text}");
    assert!(!text.contains("git show <ref>"), "{text}");
}

#[test]
fn demo_keep_prints_an_inspect_command_that_works() {
    let env = Env::new();
    let out = env.bh().args(["demo", "--keep"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let cmd = text
        .lines()
        .find_map(|l| l.split("inspect with: ").nth(1))
        .unwrap_or_else(|| panic!("no inspect command: {text}"));
    let words: Vec<&str> = cmd.split_whitespace().collect();
    assert_eq!(words[0], "git", "{cmd}");
    let shown = bh_test_support::git_command()
        .args(&words[1..])
        .output()
        .unwrap();
    assert!(shown.status.success(), "{cmd}: {shown:?}");
    assert!(String::from_utf8_lossy(&shown.stdout).contains("Better-Harness-Execution: "));
    let kept = text
        .lines()
        .find_map(|l| l.strip_prefix("kept the demo folder: "))
        .unwrap();
    fs::remove_dir_all(kept).unwrap();
}

#[test]
fn many_new_files_round_trip_byte_for_byte() {
    // Enough new files to take the parallel pre-hash path, plus one file above
    // the streaming threshold and some binary and empty files.
    let env = Env::new();
    for i in 0..700 {
        env.write(
            &format!("tree/{}/{i}.txt", i % 13),
            &"line\n".repeat(i % 40),
        );
    }
    let mut binary: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    binary.extend_from_slice(b"\0\r\n\xff");
    fs::write(env.project.join("blob.bin"), &binary).unwrap();
    let big: Vec<u8> = (0..9_500_000u32).map(|i| (i % 251) as u8).collect();
    fs::write(env.project.join("big.dat"), &big).unwrap();
    let before = tree_state(&env.project);
    let snap = env.snapshot();
    assert_eq!(snap["changed"].as_array().unwrap().len(), 702);
    let id = snap["checkpoint"]["id"].as_str().unwrap().to_owned();
    fs::remove_dir_all(env.project.join("tree")).unwrap();
    fs::write(env.project.join("big.dat"), b"truncated").unwrap();
    fs::remove_file(env.project.join("blob.bin")).unwrap();
    env.json(&["checkpoint", "restore", &id]);
    assert_eq!(tree_state(&env.project), before);
    assert_eq!(fs::read(env.project.join("big.dat")).unwrap(), big);
    fsck(&env);
}

#[test]
fn files_changed_match_the_trees() {
    // The change list a snapshot records must be exactly the difference
    // between the previous checkpoint's tree and the new one.
    let env = Env::git_project();
    env.write("keep.txt", "k\n");
    env.write("mod.txt", "1\n");
    env.write("del.txt", "d\n");
    env.write("to-link.txt", "l\n");
    env.write("to-dir", "file\n");
    env.write("exec.sh", "#!/bin/sh\n");
    env.write("grows.bin", "small\n");
    let a = env.snapshot()["checkpoint"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let b0 = env.snapshot();
    assert_eq!(b0["created"], false);
    env.write("mod.txt", "2\n");
    fs::remove_file(env.project.join("del.txt")).unwrap();
    fs::remove_file(env.project.join("to-link.txt")).unwrap();
    symlink("keep.txt", env.project.join("to-link.txt")).unwrap();
    fs::remove_file(env.project.join("to-dir")).unwrap();
    env.write("to-dir/inner.txt", "i\n");
    fs::set_permissions(
        env.project.join("exec.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    env.write("grows.bin", &"x".repeat(5000));
    env.write("added.txt", "a\n");
    let snap = env.json(&["checkpoint", "snapshot", "--max-file-size", "4KiB"])["snapshot"].clone();
    let recorded = pairs(&snap["changed"], "status", "path");
    let diff = env.json(&["checkpoint", "diff", &a, "--max-file-size", "4KiB"]);
    let truth = pairs(&diff["diff"]["entries"], "status", "path");
    assert_eq!(recorded, truth);
    assert!(
        truth.contains(&("D".into(), "grows.bin".into())),
        "{truth:?}"
    );
    assert!(
        truth.contains(&("T".into(), "to-link.txt".into())),
        "{truth:?}"
    );
    assert_eq!(
        snap["checkpoint"]["files_changed"].as_u64().unwrap() as usize,
        truth.len()
    );
}

// ---- issue 12: a trusted store, exact skip records, hostile path bytes ----

impl Env {
    /// A plain (non-git) project whose folder is named `name` (any bytes).
    fn named(name: &[u8]) -> Env {
        use std::os::unix::ffi::OsStrExt;
        let w = crate::world();
        let project = w.root.join(std::ffi::OsStr::from_bytes(name));
        fs::create_dir_all(&project).unwrap();
        Env {
            root: w.root.clone(),
            state: w.state.clone(),
            home: w.home.clone(),
            project,
            w,
        }
    }
}

#[test]
fn a_250_character_skipped_path_is_never_deleted_by_an_exact_restore() {
    let env = Env::git_project();
    let long = format!("{}.bin", "l".repeat(246));
    assert_eq!(long.len(), 250);
    env.write(&long, &"x".repeat(3000));
    env.write("fine.txt", "fine\n");
    let out = env.json(&["checkpoint", "snapshot", "--max-file-size", "2KiB"]);
    let snap = &out["snapshot"];
    let skipped = pairs(&snap["skipped"], "path", "reason");
    assert!(skipped.iter().any(|(p, _)| *p == long), "{skipped:?}");
    let id = snap["checkpoint"]["id"].as_str().unwrap().to_owned();
    // restored with the default cap, the safety checkpoint captures the file,
    // so it shows as "created since": only the skip record protects it
    let out = env.json(&["checkpoint", "restore", &id, "--exact"]);
    assert!(
        env.project.join(&long).exists(),
        "the skipped file was deleted: {out}"
    );
    assert!(
        !out["restore"]["deleted"].to_string().contains("lll"),
        "{out}"
    );
}

/// Snapshot, list, diff and restore in a project whose own path holds a
/// newline, a tab and a byte that is not UTF-8, with files named alike.
fn hostile_round_trip(env: &Env) {
    use std::os::unix::ffi::OsStrExt;
    let names: [&[u8]; 4] = [
        b"new\nline.txt",
        b"tab\there.txt",
        b"bad\xffbyte.txt",
        b"dir\n/in\tside.txt",
    ];
    let path = |n: &[u8]| env.project.join(std::ffi::OsStr::from_bytes(n));
    for n in names {
        fs::create_dir_all(path(n).parent().unwrap()).unwrap();
        fs::write(path(n), n).unwrap();
    }
    let first = env.snapshot();
    assert_eq!(first["created"], true, "{first}");
    let id = first["checkpoint"]["id"].as_str().unwrap().to_owned();
    let list = env.json(&["checkpoint", "list"]);
    assert_eq!(list["checkpoints"].as_array().unwrap().len(), 1, "{list}");
    for n in names {
        fs::write(path(n), b"changed").unwrap();
    }
    fs::write(path(b"late\nfile"), b"late").unwrap();
    let diff = env.json(&["checkpoint", "diff", &id]);
    let entries = diff["diff"]["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 5, "{diff}");
    let out = env.json(&["checkpoint", "restore", &id, "--exact"]);
    for n in names {
        assert_eq!(fs::read(path(n)).unwrap(), n, "{out}");
    }
    assert!(!path(b"late\nfile").exists(), "{out}");
    // and back again, from the safety checkpoint
    let safety = out["restore"]["safety"]["id"].as_str().unwrap().to_owned();
    env.json(&["checkpoint", "restore", &safety]);
    assert_eq!(fs::read(path(b"late\nfile")).unwrap(), b"late");
}

#[test]
fn a_project_path_with_a_newline_tab_and_invalid_utf8_works() {
    let env = Env::named(b"pro\nject\tx");
    hostile_round_trip(&env);
    // A project path that is not UTF-8: `--json` shows it lossily, never panics.
    let env = Env::named(b"bad\xffproject");
    hostile_round_trip(&env);
    let env = Env::named(b"repo\nwith\tgit");
    env.write("tracked.txt", "t\n");
    env.git(&["init", "-q"]);
    env.git(&["add", "-A"]);
    env.git(&["commit", "-q", "-m", "initial"]);
    hostile_round_trip(&env);
    // the store is the repository's: asked from a subfolder, the same one
    fs::create_dir_all(env.project.join("sub")).unwrap();
    let list = env.json(&["checkpoint", "list"]);
    let from_sub = env
        .bh()
        .current_dir(env.project.join("sub"))
        .args(["--json", "checkpoint", "list"])
        .output()
        .unwrap();
    assert!(from_sub.status.success());
    let from_sub: Value = serde_json::from_slice(&from_sub.stdout).unwrap();
    assert_eq!(from_sub["store"], list["store"]);
}

/// Every way the folders above a store can be handed to someone else.
#[test]
fn a_state_directory_another_user_can_change_is_refused() {
    if !nix_is_root() {
        eprintln!("skipped: needs root to chown a state directory to another user");
        return;
    }
    let refused = |env: &Env, what: &str| {
        let out = env
            .bh()
            .args(["--json", "checkpoint", "list"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(3),
            "{what}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // the state root owned by another user (they could rename `checkpoints`
    // away and put a look-alike store in its place)
    let env = Env::git_project();
    env.snapshot();
    std::os::unix::fs::chown(&env.state, Some(65534), Some(65534)).unwrap();
    refused(&env, "state root owned by uid 65534");
    // `checkpoints/` owned by another user
    let env = Env::git_project();
    env.snapshot();
    std::os::unix::fs::chown(env.state.join("checkpoints"), Some(65534), Some(65534)).unwrap();
    refused(&env, "checkpoints/ owned by uid 65534");
    // group- or world-writable on the way
    let env = Env::git_project();
    env.snapshot();
    fs::set_permissions(&env.state, std::fs::Permissions::from_mode(0o777)).unwrap();
    refused(&env, "state root mode 777");
    let env = Env::git_project();
    env.snapshot();
    fs::set_permissions(
        env.state.join("checkpoints"),
        std::fs::Permissions::from_mode(0o770),
    )
    .unwrap();
    refused(&env, "checkpoints/ mode 770");
    // a symlink on the way (even to a folder the user owns)
    let env = Env::git_project();
    let elsewhere = env.root.join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o700)).unwrap();
    fs::create_dir_all(&env.state).unwrap();
    symlink(&elsewhere, env.state.join("checkpoints")).unwrap();
    refused(&env, "checkpoints/ is a symlink");
    // and nothing was made through it
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
}

/// While `restore --exact` runs, another process keeps exchanging the
/// directory `sub` with a symlink to a folder outside the project: nothing
/// may be written or deleted outside, whatever the interleaving.
#[test]
fn a_directory_swapped_for_a_symlink_during_restore_never_leads_outside() {
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let env = Env::new();
    let outside = env.root.join("outside");
    fs::create_dir_all(&outside).unwrap();
    let decoys: Vec<String> = (0..50).map(|i| format!("new{i:03}")).collect();
    for d in &decoys {
        fs::write(outside.join(d), "decoy\n").unwrap();
    }
    let sub = env.project.join("sub");
    for i in 0..200 {
        env.write(&format!("sub/f{i:03}"), &format!("content {i}\n"));
    }
    let id = env.snapshot_id();
    symlink(&outside, env.project.join("swap")).unwrap();
    let outside_state = || {
        let mut names: Vec<String> = fs::read_dir(&outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    for round in 0..12 {
        // The round's start: `sub` the real folder, `swap` the symlink to
        // `outside`. The last round's restore may have removed either one
        // (`swap` is not in the checkpoint, and --exact deletes what is not).
        let swap = env.project.join("swap");
        let kind = |p: &std::path::Path| fs::symlink_metadata(p).ok().map(|m| m.is_symlink());
        if kind(&sub) == Some(true) {
            fs::remove_file(&sub).unwrap();
        }
        if kind(&sub).is_none() {
            if kind(&swap) == Some(false) {
                fs::rename(&swap, &sub).unwrap();
            } else {
                fs::create_dir(&sub).unwrap();
            }
        }
        match kind(&swap) {
            Some(true) => {}
            Some(false) => fs::remove_dir_all(&swap).unwrap(),
            None => {}
        }
        if kind(&swap).is_none() {
            symlink(&outside, &swap).unwrap();
        }
        // the state to restore from: the checkpoint's files gone, new ones made
        for e in fs::read_dir(&sub).unwrap() {
            fs::remove_file(e.unwrap().path()).unwrap();
        }
        for d in &decoys {
            fs::write(sub.join(d), "made since\n").unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let stop = stop.clone();
            let (a, b) = (sub.clone(), env.project.join("swap"));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = renameat2(AT_FDCWD, &a, AT_FDCWD, &b, RenameFlags::RENAME_EXCHANGE);
                }
            })
        };
        let out = env
            .bh()
            .args(["--json", "checkpoint", "restore", &id, "--exact"])
            .output()
            .unwrap();
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        let now = outside_state();
        assert_eq!(
            now,
            decoys,
            "round {round}: the folder outside the project changed ({}{})",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for d in &decoys {
            assert_eq!(fs::read_to_string(outside.join(d)).unwrap(), "decoy\n");
        }
    }
}

#[test]
fn list_where_no_store_exists_creates_none() {
    // Outside any repository and inside a fresh one: nothing to list, nothing made.
    for env in [Env::new(), Env::git_project()] {
        let before = env.state.exists().then(|| walk_names(&env.state));
        let out = env.bh().args(["checkpoint", "list"]).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.starts_with("0 checkpoints of "), "{text}");
        assert!(text.contains("no checkpoint store yet"), "{text}");
        let doc = env.json(&["checkpoint", "list"]);
        assert_eq!(doc["checkpoints"], serde_json::json!([]));
        assert_eq!(doc["store"], Value::Null);
        // The project named is the one a snapshot would protect: from a
        // subfolder of a repository, its top.
        assert_eq!(
            doc["project"],
            fs::canonicalize(&env.project).unwrap().to_str().unwrap()
        );
        fs::create_dir_all(env.project.join("sub")).unwrap();
        let out = env
            .bh()
            .args(["checkpoint", "list"])
            .current_dir(env.project.join("sub"))
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let in_sub = env.project.join("sub");
        let shown = if env.project.join(".git").exists() {
            &env.project
        } else {
            &in_sub
        };
        assert!(
            text.starts_with(&format!(
                "0 checkpoints of {} (",
                fs::canonicalize(shown).unwrap().display()
            )),
            "{text}"
        );
        fs::remove_dir(env.project.join("sub")).unwrap();
        let after = env.state.exists().then(|| walk_names(&env.state));
        assert_eq!(before, after, "checkpoint list wrote into the state folder");
        assert!(!env.state.join("checkpoints").exists());
        // Once a snapshot made the store, list shows it.
        env.snapshot_id();
        let doc = env.json(&["checkpoint", "list"]);
        assert_eq!(doc["checkpoints"].as_array().unwrap().len(), 1);
        assert!(doc["store"].is_string());
    }
}

fn walk_names(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn prune_keep_counts_snapshots_and_undo_points_go_with_them() {
    let env = Env::git_project();
    let mut ids = Vec::new();
    for i in 0..4 {
        env.write("f.txt", &format!("v{i}\n"));
        ids.push(env.snapshot_id());
    }
    // Three restores of an old snapshot from unsaved states: three undo points,
    // newer than every snapshot.
    for i in 0..3 {
        env.write("f.txt", &format!("unsaved {i}\n"));
        env.json(&["checkpoint", "restore", &ids[0]]);
    }
    let list = env.json(&["checkpoint", "list"]);
    let kinds: Vec<&str> = list["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "pre-restore",
            "pre-restore",
            "pre-restore",
            "snapshot",
            "snapshot",
            "snapshot",
            "snapshot"
        ]
    );
    // --keep 2 keeps two snapshots (not the three undo points alone), and
    // the undo points newer than them.
    let out = env.json(&["checkpoint", "prune", "--keep", "2"]);
    assert_eq!(out["prune"]["removed"].as_array().unwrap().len(), 2);
    let list = env.json(&["checkpoint", "list"]);
    let left: Vec<&str> = list["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "snapshot")
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(left, [ids[3].as_str(), ids[2].as_str()]);
    // Pruning everything gives the space back (the shadow index no longer
    // holds the last state's blobs), and snapshots work again afterwards.
    let before = list["store_size"].as_u64().unwrap();
    let out = env.json(&["checkpoint", "prune", "--keep", "0"]);
    let after = out["prune"]["size_after"].as_u64().unwrap();
    assert!(after < before / 2, "store {before} -> {after} bytes");
    assert_eq!(env.snapshot()["created"], true);
    fsck(&env);
}

#[test]
fn the_first_snapshot_says_what_it_holds_not_changes() {
    let env = Env::git_project();
    let out = env.bh().args(["checkpoint", "snapshot"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("(the first: 2 files)"), "{text}");
    env.write("README.md", "# changed\n");
    let out = env.bh().args(["checkpoint", "snapshot"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("(1 file changed)"), "{text}");
}
