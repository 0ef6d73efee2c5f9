//! `bh checkpoint` through the CLI, on real repositories with real git: that
//! each command parses, its exit codes, its human and `--json` output, and
//! what only the CLI does (paths relative to the current directory, the hook,
//! the environment it gives git). What the store does — restore safety,
//! prune, concurrency, filters, trust — is tested through the library in
//! `crates/bh-checkpoint/tests/it/`.
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
    // (its mode, and what is refused: bh-checkpoint/tests/it/trust.rs)
    // open to others: exit 3, the message says why
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
fn user_git_dir_is_byte_identical_after_the_commands() {
    let env = Env::git_project();
    env.write("staged.txt", "staged\n");
    env.git(&["add", "staged.txt"]);
    env.write("untracked.txt", "u\n");
    env.write("src/main.rs", "fn main() { changed() }\n");
    let before = tree_state(&env.project.join(".git"));
    // what the store does to it: bh-checkpoint/tests/it/trust.rs; here the
    // commands' own paths (the hook, list's read-only open)
    env.snapshot();
    env.json(&["checkpoint", "list"]);
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

/// The user's git configuration (their `$HOME`) reaches the store the CLI
/// opens: a global ignore file applies, a global clean filter never runs.
/// (What a snapshot stores, byte for byte: bh-checkpoint/tests/it/storage.rs.)
#[test]
fn the_users_global_git_config_reaches_the_store() {
    let env = Env::git_project();
    let trace = env.root.join("filter-ran");
    let global_ignore = env.home.join("global-ignore");
    fs::write(&global_ignore, "*.tmp\n").unwrap();
    fs::write(
        env.home.join(".gitconfig"),
        format!(
            "[core]\n\texcludesFile = {}\n[filter \"evil\"]\n\tclean = sh -c 'touch {}; echo SECRET'\n",
            global_ignore.display(),
            trace.display()
        ),
    )
    .unwrap();
    env.write(".gitattributes", "*.dat filter=evil\n");
    env.write("data.dat", "raw data\n");
    env.write("scratch.tmp", "t\n");
    let snap = env.snapshot();
    let changed = pairs(&snap["changed"], "status", "path");
    assert!(changed.iter().any(|(_, p)| p == "data.dat"), "{changed:?}");
    assert!(
        !changed.iter().any(|(_, p)| p == "scratch.tmp"),
        "{changed:?}"
    );
    assert!(!trace.exists(), "a clean filter ran");
}

/// `--max-file-size` parses; what a snapshot skips is in `--json` as
/// `{path, reason}` (and counted on the checkpoint), a warning on stderr in
/// the human output, and the exit code stays 0. (Which files are skipped,
/// and that restores leave them alone: bh-checkpoint/tests/it/storage.rs.)
#[test]
fn snapshot_reports_what_it_skips() {
    let env = Env::git_project();
    env.write("big.bin", &"x".repeat(3000));
    let out = env.json(&["checkpoint", "snapshot", "--max-file-size", "2KiB"]);
    let snap = &out["snapshot"];
    let skipped = pairs(&snap["skipped"], "path", "reason");
    assert!(
        skipped
            .iter()
            .any(|(p, r)| p == "big.bin" && r.contains("size cap")),
        "{skipped:?}"
    );
    assert_eq!(snap["checkpoint"]["skipped"], 1, "{snap}");
    env.write("README.md", "# changed\n");
    let out = env
        .bh()
        .args(["checkpoint", "snapshot", "--max-file-size", "2KiB"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bh: warning: not captured: big.bin ("),
        "{stderr}"
    );
}

/// Restore's paths are relative to the current directory; `--json` names
/// what was restored, deleted and kept, the mode and the safety checkpoint;
/// the human output lists them, notes kept files and prints an undo command
/// that works. (What additive and exact restores do:
/// bh-checkpoint/tests/it/restore.rs.)
#[test]
fn restore_output_and_paths_relative_to_the_current_directory() {
    let env = Env::new();
    env.write("a.txt", "a1\n");
    env.write("dir/b.txt", "b1\n");
    let id = env.snapshot_id();
    env.write("a.txt", "a2\n");
    env.write("dir/b.txt", "b2\n");
    env.write("other-new.txt", "new\n");

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
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["restore"]["restored"], serde_json::json!(["dir/b.txt"]));
    assert_eq!(env.read("dir/b.txt"), "b1\n");
    assert_eq!(env.read("a.txt"), "a2\n");

    // no path = everything, additive: `--json` fields
    let out = env.json(&["checkpoint", "restore", &id]);
    let r = &out["restore"];
    assert_eq!(r["restored"], serde_json::json!(["a.txt"]), "{out}");
    assert_eq!(r["deleted"], serde_json::json!([]), "{out}");
    assert_eq!(r["kept"], serde_json::json!(["other-new.txt"]), "{out}");
    assert_eq!(r["mode"], "additive", "{out}");
    assert_eq!(r["checkpoint"]["id"], id.as_str(), "{out}");
    assert!(r["safety"]["id"].is_string(), "{out}");
    assert!(out["project"].is_string(), "{out}");

    // the human output, --exact
    env.write("a.txt", "a3\n");
    let out = env
        .bh()
        .args(["checkpoint", "restore", &id, "--exact"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("restored a.txt\n"), "{text}");
    assert!(text.contains("deleted  other-new.txt\n"), "{text}");
    let prefix = format!("restored checkpoint {id}: 1 written, 1 deleted; undo with: ");
    let undo = text
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no undo command: {text}"));
    let words: Vec<&str> = undo.split_whitespace().collect();
    assert_eq!(words[..3], ["bh", "checkpoint", "restore"], "{undo}");
    assert_eq!(words[4], "--exact", "{undo}");
    // the undo command works
    let out = env.bh().args(&words[1..]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(env.read("a.txt"), "a3\n");
    assert!(env.project.join("other-new.txt").exists());
    // additive from there: a note on stderr about the kept file
    let out = env
        .bh()
        .args(["checkpoint", "restore", &id])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("kept 1 file created since the checkpoint (use --exact to remove them)"),
        "{stderr}"
    );
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
    assert_eq!(err["error"]["kind"], "refused");
    let err = env.json_err(&["checkpoint", "restore", &id, "no-such-file"], 4);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not in checkpoint")
    );
    assert_eq!(err["error"]["kind"], "not_found");
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
    assert_eq!(err["error"]["kind"], "usage");
    // a restore that would replace a directory holding files no checkpoint
    // holds: refused (exit 3), naming them
    fs::remove_file(env.project.join("a.txt")).unwrap();
    env.write(".gitignore", "*.secret\n");
    env.write("a.txt/data.secret", "precious\n");
    let err = env.json_err(&["checkpoint", "restore", &id, "a.txt"], 3);
    assert_eq!(err["error"]["kind"], "refused");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a.txt/data.secret"),
        "{err}"
    );
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
    let capped = env.json(&["checkpoint", "diff", &id, "--max-file-size", "4KiB"]);
    assert_eq!(capped["diff"]["entries"], out["diff"]["entries"]);
}

/// `prune` needs a policy (exit 2); `--keep` and `--older-than` parse;
/// `--json` reports what was removed and kept and the sizes, the human
/// output one line; `list` names each checkpoint's kind. (What is pruned:
/// bh-checkpoint/tests/it/prune.rs.)
#[test]
fn prune_output_and_checkpoint_kinds() {
    let env = Env::new();
    let mut ids = Vec::new();
    for i in 0..3 {
        env.write("f.txt", &format!("v{i}\n"));
        ids.push(env.snapshot_id());
    }
    env.write("f.txt", "unsaved\n");
    env.json(&["checkpoint", "restore", &ids[0]]);
    let list = env.json(&["checkpoint", "list"]);
    let kinds: Vec<&str> = list["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["pre-restore", "snapshot", "snapshot", "snapshot"]);
    let usage = env.bh().args(["checkpoint", "prune"]).output().unwrap();
    assert_eq!(usage.status.code(), Some(2));
    let err = env.json_err(&["checkpoint", "prune"], 2);
    assert_eq!(err["error"]["kind"], "usage");
    let out = env.json(&["checkpoint", "prune", "--keep", "2"]);
    let p = &out["prune"];
    assert_eq!(p["removed"].as_array().unwrap().len(), 1, "{out}");
    assert_eq!(p["removed"][0]["id"], ids[0].as_str(), "{out}");
    assert_eq!(p["kept"], 3, "{out}");
    assert!(p["size_before"].as_u64().unwrap() > 0, "{out}");
    assert!(p["size_after"].is_u64(), "{out}");
    let out = env.json(&["checkpoint", "prune", "--older-than", "1h"]);
    assert_eq!(out["prune"]["removed"], serde_json::json!([]));
    let out = env
        .bh()
        .args(["checkpoint", "prune", "--keep", "0"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("removed 3 checkpoints, kept 0; store "),
        "{text}"
    );
    assert!(
        env.json(&["checkpoint", "list"])["checkpoints"]
            .as_array()
            .unwrap()
            .is_empty()
    );
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

/// The folders above a store handed to someone else: exit code 3.
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
    // (each way: bh-checkpoint/tests/it/trust.rs; here the exit code, for
    // a store that exists and for one that does not yet)
    let env = Env::git_project();
    env.snapshot();
    std::os::unix::fs::chown(&env.state, Some(65534), Some(65534)).unwrap();
    refused(&env, "state root owned by uid 65534");
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
