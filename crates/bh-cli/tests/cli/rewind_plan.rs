//! `bh rewind` on a real repository with a session the scripted agent wrote:
//! the session edits `a`, its `bash` creates `b` and deletes `c`; then a
//! commit outside the session changes `d` and the user deletes `e`. A
//! rewind to the first prompt reverts `a`, removes `b`, restores `c` and
//! leaves `d` and `e` as they are; `--dry-run` changes nothing (tree, index,
//! refs, store); `--undo` returns; a conflict on `a` is refused and listed,
//! `--force a` takes it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const SCRIPT: &str = r#"
{"toolCalls": [{"name": "edit", "arguments": {"path": "a", "edits": [{"oldText": "a0", "newText": "a1"}]}}]}
{"toolCalls": [{"name": "bash", "arguments": {"command": "echo b1 > b && rm c"}}]}
{"text": "done"}
"#;

struct Env {
    w: bh_test_support::cli::World,
    root: PathBuf,
    repo: PathBuf,
    session: PathBuf,
}

impl Env {
    /// The scenario: the session's calls, then the outside commit to `d`
    /// and the user deleting `e`.
    fn new() -> Env {
        let env = Env::with_script(SCRIPT);
        assert_eq!(env.read("a"), "a1\n");
        assert_eq!(env.read("b"), "b1\n");
        assert!(!env.repo.join("c").exists());
        // Outside the session.
        fs_err::write(env.repo.join("d"), "d1\n").unwrap();
        env.w
            .git_stdout(&env.repo, &["commit", "-q", "-am", "outside change to d"]);
        fs_err::remove_file(env.repo.join("e")).unwrap();
        env
    }

    /// The repository (a, c, d, e committed) and one prompt answered by
    /// `script`.
    fn with_script(script: &str) -> Env {
        let w = crate::world();
        let root = w.root.clone();
        let repo = root.join("repo");
        fs_err::create_dir_all(&repo).unwrap();
        w.git(&repo, &["init", "-q", "-b", "main"]);
        for f in ["a", "c", "d", "e"] {
            fs_err::write(repo.join(f), format!("{f}0\n")).unwrap();
        }
        w.git(&repo, &["add", "."]);
        w.git(&repo, &["commit", "-q", "-m", "init"]);
        fs_err::write(root.join("script.jsonl"), script).unwrap();
        let env = Env {
            session: root.join("s.jsonl"),
            w,
            root,
            repo,
        };
        let out = env
            .bh()
            .args(["agent", "--script"])
            .arg(env.root.join("script.jsonl"))
            .arg("--session")
            .arg(&env.session)
            .args(["-p", "change things"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        env
    }

    fn bh(&self) -> Command {
        self.w.bh(&self.repo)
    }

    fn read(&self, rel: &str) -> String {
        fs_err::read_to_string(self.repo.join(rel)).unwrap_or_else(|_| "<gone>".into())
    }

    fn first_prompt(&self) -> String {
        fs_err::read_to_string(&self.session)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|v| v["message"]["role"] == "user")
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// `bh --json rewind …`: exit code and the document.
    fn rewind(&self, args: &[&str]) -> (i32, Value, String) {
        let out = self
            .bh()
            .args(["--json", "rewind"])
            .args(args)
            .output()
            .unwrap();
        let doc = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (
            out.status.code().unwrap_or(-1),
            doc,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn to_first(&self, extra: &[&str]) -> (i32, Value, String) {
        let entry = self.first_prompt();
        let session = self.session.display().to_string();
        let mut args = vec!["--session", &session, "--entry", &entry];
        args.extend_from_slice(extra);
        self.rewind(&args)
    }

    /// Every file under `dir` (but `skip`), with its bytes.
    fn files(dir: &Path, skip: &str, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in fs_err::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if p.file_name().is_some_and(|n| n == skip) {
                continue;
            }
            let t = e.file_type().unwrap();
            if t.is_dir() {
                Env::files(&p, skip, out);
            } else if t.is_symlink() {
                out.insert(
                    p.clone(),
                    fs_err::read_link(&p)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                );
            } else {
                out.insert(p.clone(), fs_err::read(&p).unwrap());
            }
        }
    }

    /// The work tree, the user's index and refs, and the checkpoint store.
    fn digest(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut all = BTreeMap::new();
        Env::files(&self.repo, ".git", &mut all);
        Env::files(&self.repo.join(".git"), "objects", &mut all);
        Env::files(&self.root.join("state"), "-", &mut all);
        all
    }
}

fn paths(doc: &Value, key: &str) -> Vec<String> {
    doc["rewind"]["plan"][key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {doc}"))
        .iter()
        .map(|v| {
            v.as_str()
                .map_or_else(|| v["path"].as_str().unwrap().to_owned(), str::to_owned)
        })
        .collect()
}

#[test]
fn rewind_reverts_only_the_sessions_paths_and_undo_returns() {
    let env = Env::new();
    let before = env.digest();
    // Dry run: the plan, nothing changed anywhere.
    let (code, doc, err) = env.to_first(&["--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["dry_run"], true);
    assert_eq!(paths(&doc, "revert"), ["a", "c"]);
    assert_eq!(paths(&doc, "delete"), ["b"]);
    assert_eq!(paths(&doc, "left_alone"), ["d", "e"]);
    assert!(paths(&doc, "conflicts").is_empty());
    assert_eq!(doc["rewind"]["plan"]["calls"], 2);
    assert!(doc["rewind"]["plan"]["approximate"].is_null(), "{doc}");
    assert_eq!(env.digest(), before, "a dry run changed something");

    // The real run.
    let (code, doc, err) = env.to_first(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(doc["rewind"]["undo"]["id"].is_string(), "{doc}");
    assert_eq!(env.read("a"), "a0\n");
    assert_eq!(env.read("b"), "<gone>");
    assert_eq!(env.read("c"), "c0\n");
    assert_eq!(env.read("d"), "d1\n", "the outside commit's change stays");
    assert_eq!(env.read("e"), "<gone>", "the user's deletion stays");
    let leaf_to = doc["leaf"]["to"].clone();
    assert!(doc["leaf"]["appended"].is_string(), "{doc}");
    let _ = leaf_to;

    // Undo: files back to the state before the rewind.
    let (code, doc, err) = env.rewind(&["--undo"]);
    assert_eq!(code, 0, "{err}");
    assert!(doc["leaf"]["appended"].is_string(), "{doc}");
    assert_eq!(env.read("a"), "a1\n");
    assert_eq!(env.read("b"), "b1\n");
    assert_eq!(env.read("c"), "<gone>");
    assert_eq!(env.read("d"), "d1\n");
    assert_eq!(env.read("e"), "<gone>");
    // Nothing more to undo.
    let (code, _, err) = env.rewind(&["--undo"]);
    assert_eq!(code, 4, "{err}");
}

#[test]
fn a_conflict_is_refused_and_listed_and_force_takes_it() {
    let env = Env::new();
    // Someone changes `a` after the session's last change.
    fs_err::write(env.repo.join("a"), "mine\n").unwrap();
    let (code, doc, err) = env.to_first(&[]);
    assert_eq!(code, 3, "{err}");
    let message = doc["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("rewind refused") && message.contains("a ("),
        "{doc}"
    );
    let conflicts = doc["plan"]["conflicts"].as_array().unwrap();
    assert_eq!(conflicts.len(), 1, "{doc}");
    assert_eq!(conflicts[0]["path"], "a");
    assert_eq!(conflicts[0]["forced"], false);
    // Refused means untouched.
    assert_eq!(env.read("a"), "mine\n");
    assert_eq!(env.read("b"), "b1\n");
    assert_eq!(env.read("c"), "<gone>");
    // The dry run lists it too, and exits 0.
    let (code, doc, _) = env.to_first(&["--dry-run"]);
    assert_eq!(code, 0);
    assert_eq!(doc["rewind"]["plan"]["conflicts"][0]["path"], "a");
    // Forcing another path does not take it.
    let (code, _, _) = env.to_first(&["--force", "b"]);
    assert_eq!(code, 3);
    assert_eq!(env.read("a"), "mine\n");
    // --force a does.
    let (code, doc, err) = env.to_first(&["--force", "a"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["rewind"]["plan"]["conflicts"][0]["forced"], true);
    assert_eq!(env.read("a"), "a0\n");
    assert_eq!(env.read("b"), "<gone>");
    assert_eq!(env.read("c"), "c0\n");
    assert_eq!(env.read("d"), "d1\n");
    // The undo brings back the other person's bytes too.
    let (code, _, err) = env.rewind(&["--undo"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(env.read("a"), "mine\n");
}

#[test]
fn a_session_without_after_records_falls_back_and_says_so() {
    let env = Env::new();
    // As an older bh wrote it: no after-records in the journal.
    let serve = env.root.join("state/serve");
    for e in fs_err::read_dir(&serve).unwrap() {
        let p = e.unwrap().path();
        let kept: String = fs_err::read_to_string(&p)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("{\"after\""))
            .map(|l| format!("{l}\n"))
            .collect();
        fs_err::write(&p, kept).unwrap();
    }
    let (code, doc, err) = env.to_first(&["--dry-run"]);
    assert_eq!(code, 0, "{err}");
    let note = doc["rewind"]["plan"]["approximate"]
        .as_str()
        .unwrap_or_default();
    assert!(note.contains("no after-record"), "{doc}");
    assert_eq!(paths(&doc, "revert"), ["a", "c"]);
    assert_eq!(paths(&doc, "delete"), ["b"]);
    let (code, _, err) = env.to_first(&[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(env.read("a"), "a0\n");
    assert_eq!(env.read("b"), "<gone>");
    assert_eq!(env.read("c"), "c0\n");
    assert_eq!(env.read("d"), "d1\n");
    assert_eq!(env.read("e"), "<gone>");
}

/// Commits from the sandbox are part of what a rewind puts back: the
/// session commits on `main`, then makes and commits on `feature`; the
/// rewind moves `main` back, deletes `feature`, puts HEAD back on `main`
/// and its index with it (a clean `git status` but for the files); the
/// undo moves them all forward again. A branch someone else moved since is
/// a conflict, refused and listed until `--force REF`.
#[test]
fn a_rewind_moves_the_sessions_commits_back_and_undo_returns() {
    const COMMITS: &str = r#"
{"toolCalls": [{"name": "bash", "arguments": {"command": "echo a1 > a && git add a && git -c user.name=agent -c user.email=a@x commit -qm 'agent: a1'"}}]}
{"toolCalls": [{"name": "bash", "arguments": {"command": "git checkout -q -b feature && echo f > f && git add f && git -c user.name=agent -c user.email=a@x commit -qm 'agent: f'"}}]}
{"text": "done"}
"#;
    let env = Env::with_script(COMMITS);
    let log = |r: &str| env.w.git_stdout(&env.repo, &["log", "--format=%s", r]);
    assert_eq!(log("main"), "agent: a1\ninit\n");
    assert_eq!(log("feature"), "agent: f\nagent: a1\ninit\n");
    assert_eq!(
        env.w.git_stdout(&env.repo, &["symbolic-ref", "HEAD"]),
        "refs/heads/feature\n"
    );
    let before = env.digest();
    let (code, doc, err) = env.to_first(&["--dry-run"]);
    assert_eq!(code, 0, "{err}");
    let refs = doc["rewind"]["plan"]["refs"].as_array().unwrap();
    let names: Vec<&str> = refs.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["HEAD", "refs/heads/main", "refs/heads/feature"],
        "{doc}"
    );
    assert_eq!(env.digest(), before, "a dry run changed something");

    let (code, _, err) = env.to_first(&[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(log("main"), "init\n");
    assert!(
        env.w
            .git_stdout(&env.repo, &["branch", "--list", "feature"])
            .is_empty()
    );
    assert_eq!(
        env.w.git_stdout(&env.repo, &["symbolic-ref", "HEAD"]),
        "refs/heads/main\n"
    );
    assert_eq!(env.read("a"), "a0\n");
    assert_eq!(env.read("f"), "<gone>");
    assert_eq!(
        env.w.git_stdout(&env.repo, &["status", "--porcelain"]),
        "",
        "index and files agree"
    );
    let reflog = env
        .w
        .git_stdout(&env.repo, &["reflog", "show", "--format=%gs", "main"]);
    assert!(reflog.starts_with("bh: rewind"), "{reflog}");

    let (code, _, err) = env.rewind(&["--undo"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(log("main"), "agent: a1\ninit\n");
    assert_eq!(log("feature"), "agent: f\nagent: a1\ninit\n");
    assert_eq!(
        env.w.git_stdout(&env.repo, &["symbolic-ref", "HEAD"]),
        "refs/heads/feature\n"
    );
    assert_eq!(env.read("f"), "f\n");

    // Someone moves main after the session: a conflict, then --force.
    env.w
        .git_stdout(&env.repo, &["branch", "-f", "main", "feature"]);
    let (code, doc, err) = env.to_first(&[]);
    assert_eq!(code, 3, "{err}");
    let conflicts = doc["plan"]["conflicts"].as_array().unwrap();
    assert!(
        conflicts.iter().any(|c| c["path"] == "refs/heads/main"),
        "{doc}"
    );
    assert_eq!(
        log("main"),
        "agent: f\nagent: a1\ninit\n",
        "refused means untouched"
    );
    let (code, _, err) = env.to_first(&["--force", "refs/heads/main"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(log("main"), "init\n");
}
