//! `bh worktree` through the CLI on real repositories: JSON documents, exit
//! codes, racing processes, and (with Node and npm) the real Pi loading a
//! session `bh worktree enter` prepared.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use bh_test_support::TestRepo;
use serde_json::{Value, json};

/// A repository with `src/`, an ignored `.env` and `target/`, plus a state
/// folder for bh.
struct Env {
    t: TestRepo,
    w: bh_test_support::cli::World,
    repo: PathBuf,
}

impl std::ops::Deref for Env {
    type Target = TestRepo;
    fn deref(&self) -> &TestRepo {
        &self.t
    }
}

impl Env {
    fn new() -> Env {
        let t = TestRepo::new();
        t.write("src/lib.rs", "pub fn a() {}\n");
        t.write(".gitignore", ".env\ntarget/\n");
        t.commit_all("base");
        t.write(".env", "SECRET=1\n");
        let w = crate::world_at(&t.root);
        Env {
            repo: t.dir.clone(),
            w,
            t,
        }
    }

    fn wt(&self, name: &str) -> PathBuf {
        self.root.join("repo.worktrees").join(name)
    }

    fn agent(&self) -> PathBuf {
        self.root.join("agent")
    }

    fn bh(&self) -> Command {
        self.w.bh(&self.repo)
    }

    fn run(&self, args: &[&str]) -> Output {
        self.bh().args(args).output().unwrap()
    }

    fn json(&self, args: &[&str]) -> (i32, Value) {
        let mut full = vec!["--json"];
        full.extend_from_slice(args);
        let out = self.run(&full);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
            panic!(
                "{args:?}: not one JSON document ({e}): {text}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap(), v)
    }
}

#[test]
fn create_list_dispose_with_json_and_exit_codes() {
    let env = Env::new();
    let (code, v) = env.json(&["worktree", "create", "feat"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["worktree"]["state"], "ready");
    assert_eq!(v["worktree"]["branch"], "feat");
    assert_eq!(v["worktree"]["envLinks"], json!([".env"]));
    let wt = env.wt("feat");
    assert!(
        fs::symlink_metadata(wt.join(".env"))
            .unwrap()
            .file_type()
            .is_symlink()
    );

    // Same name again: refused (3); a bad name: usage (2).
    assert_eq!(env.json(&["worktree", "create", "feat"]).0, 3);
    assert_eq!(env.json(&["worktree", "create", "../x"]).0, 2);

    fs::write(wt.join("dirty.txt"), "x").unwrap();
    let (code, v) = env.json(&["worktree", "list"]);
    assert_eq!(code, 0);
    let list = v["worktrees"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["main"], true);
    assert_eq!(list[1]["name"], "feat");
    assert_eq!(list[1]["state"], "ready");
    assert_eq!(list[1]["dirty"], 1);
    assert_eq!(list[1]["unpushed"], Value::Null, "no upstream: unknown");

    let human = env.run(&["worktree", "list"]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("feat") && text.contains("ready") && text.contains("unknown"),
        "{text}"
    );

    // Dirty: refused (3) without --force, nothing removed.
    let (code, v) = env.json(&["worktree", "dispose", "feat"]);
    assert_eq!(code, 3, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("uncommitted")
    );
    assert!(wt.exists());
    // Unknown name: not found (4).
    assert_eq!(env.json(&["worktree", "dispose", "nope"]).0, 4);

    let (code, v) = env.json(&["worktree", "dispose", "feat", "--force"]);
    assert_eq!(code, 0, "{v}");
    assert!(!wt.exists());
    assert_eq!(
        v["branchDeleted"], true,
        "created and merged (no new commits)"
    );
    assert_eq!(v["ignored"]["files"], json!([".env"]));
    let id = v["checkpoint"]["id"].as_str().unwrap().to_owned();
    // The checkpoint holds the untracked file.
    env.git(&["worktree", "add", "-q", "--detach", wt.to_str().unwrap()]);
    let out = env
        .bh()
        .current_dir(&wt)
        .args(["checkpoint", "restore", &id])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read_to_string(wt.join("dirty.txt")).unwrap(), "x");
}

#[test]
fn a_failing_post_create_command_exits_9_and_leaves_nothing() {
    let env = Env::new();
    env.write(
        ".better-harness/worktree.toml",
        "post_create = [\"true\", \"exit 4\"]\n",
    );
    let (code, v) = env.json(&["worktree", "create", "bad"]);
    assert_eq!(code, 9, "{v}");
    assert_eq!(v["error"]["kind"], "worker_failed");
    assert!(!env.wt("bad").exists());
    let (_, v) = env.json(&["worktree", "list"]);
    assert_eq!(v["worktrees"].as_array().unwrap().len(), 1);
}

#[test]
fn two_processes_racing_to_create_one_target_one_is_busy() {
    let env = Env::new();
    env.write(
        ".better-harness/worktree.toml",
        "post_create = [\"sleep 1\"]\n",
    );
    let spawn = || {
        env.bh()
            .args(["--json", "worktree", "create", "race"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = spawn();
    let b = spawn();
    let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
    let mut codes: Vec<i32> = outs.iter().map(|o| o.status.code().unwrap()).collect();
    codes.sort();
    assert_eq!(codes, vec![0, 3], "{outs:?}");
    let loser = outs.iter().find(|o| o.status.code() == Some(3)).unwrap();
    let v: Value = serde_json::from_slice(&loser.stdout).unwrap();
    assert!(
        v["error"]["message"].as_str().unwrap().contains("busy"),
        "{v}"
    );
    assert_eq!(
        env.json(&["worktree", "list"]).1["worktrees"][1]["state"],
        "ready"
    );
}

fn source_session(env: &Env) -> PathBuf {
    let dir = env.agent().join("sessions").join("--src--");
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("2026-01-01T00-00-00-000Z_0199a000-0000-7000-8000-000000000001.jsonl");
    let lines = [
        json!({"type":"session","version":3,"id":"0199a000-0000-7000-8000-000000000001","timestamp":"2026-01-01T00:00:00.000Z","cwd": env.repo}),
        json!({"type":"message","id":"aaaa0001","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hello","timestamp":1767225601000u64}}),
        json!({"type":"message","id":"aaaa0002","parentId":"aaaa0001","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"api":"anthropic-messages","provider":"anthropic","model":"m","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1767225602000u64}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    fs::write(&file, text).unwrap();
    file
}

#[test]
fn enter_prints_the_target_and_racing_processes_consume_the_handoff_once() {
    let env = Env::new();
    assert_eq!(env.json(&["worktree", "create", "e"]).0, 0);
    let src = source_session(&env);
    let before = fs::read(&src).unwrap();
    let out = env.run(&["worktree", "enter", "e", "--session", src.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read(&src).unwrap(), before);
    let target = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(target.is_file());
    let wt = env.wt("e");
    // stderr says what to run next, with the real paths.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "bh: next: cd {} && pi --session {}",
            wt.display(),
            target.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("or: bh agent --cwd "), "{stderr}");
    let text = fs::read_to_string(&target).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["cwd"], wt.to_str().unwrap());
    let orient: Vec<&Value> = lines
        .iter()
        .filter(|l| l["customType"] == "better-harness-transition")
        .collect();
    assert_eq!(orient.len(), 1);
    assert_eq!(
        lines.last().unwrap()["customType"],
        "better-harness-transition"
    );
    assert_eq!(lines.last().unwrap()["parentId"], "aaaa0002");

    let mut children: Vec<_> = (0..4)
        .map(|_| {
            env.bh()
                .args(["--json", "worktree", "consume"])
                .arg(&target)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let statuses: Vec<String> = children
        .drain(..)
        .map(|c| {
            let o = c.wait_with_output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let v: Value = serde_json::from_slice(&o.stdout).unwrap();
            v["status"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| *s == "verified").count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| *s == "notPending").count(),
        3,
        "{statuses:?}"
    );
    let text = fs::read_to_string(&target).unwrap();
    assert_eq!(
        text.matches("better-harness-transition-verification")
            .count(),
        1
    );

    // The real Pi loads the prepared session.
    pi_loads(&target, &text);
}

#[test]
fn enter_with_errors_maps_exit_codes() {
    let env = Env::new();
    let src = source_session(&env);
    let s = src.to_str().unwrap();
    assert_eq!(
        env.json(&["worktree", "enter", "ghost", "--session", s]).0,
        4
    );
    assert_eq!(env.json(&["worktree", "create", "e"]).0, 0);
    assert_eq!(
        env.json(&[
            "worktree",
            "enter",
            "e",
            "--session",
            s,
            "--entry",
            "ffff9999"
        ])
        .0,
        4
    );
    // Not an entry id at all: a usage error, as everywhere (issue 26).
    assert_eq!(
        env.json(&[
            "worktree",
            "enter",
            "e",
            "--session",
            s,
            "--entry",
            "zzzz9999"
        ])
        .0,
        2
    );
    let (code, v) = env.json(&[
        "worktree",
        "enter",
        "e",
        "--session",
        s,
        "--entry",
        "aaaa0001",
    ]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["carry"], "from-entry");
    let target = PathBuf::from(v["target"].as_str().unwrap());
    let text = fs::read_to_string(&target).unwrap();
    assert_eq!(
        text.lines().count(),
        3,
        "header, the entry, the orientation"
    );
    pi_loads(&target, &text);

    // A session Pi has not written yet: a valid session with only the orientation.
    let missing = env.root.join("unwritten.jsonl");
    let (code, v) = env.json(&[
        "worktree",
        "enter",
        "e",
        "--session",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["carry"], "empty");
    let target = PathBuf::from(v["target"].as_str().unwrap());
    let text = fs::read_to_string(&target).unwrap();
    assert_eq!(text.lines().count(), 2);
    pi_loads(&target, &text);
}

fn pi_loads(target: &Path, text: &str) {
    let Some(pi) = bh_test_support::pi::real_pi(bh_test_support::pi::PiRelease::Legacy) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("s.jsonl");
    fs::copy(target, &copy).unwrap();
    let html = tmp.path().join("out.html");
    let out = pi
        .command(tmp.path())
        .arg("--export")
        .arg(&copy)
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pi --export failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let page = fs::read_to_string(&html).unwrap();
    let i = page
        .find("id=\"session-data\"")
        .expect("session data in the export");
    let rest = &page[i..];
    let start = rest.find('>').unwrap() + 1;
    let end = rest.find("</script>").unwrap();
    let data: Value = serde_json::from_slice(&b64decode(rest[start..end].trim())).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(data["leafId"], last["id"], "Pi's leaf is our last entry");
    assert_eq!(
        data["entries"].as_array().unwrap().len(),
        text.lines().count() - 1,
        "Pi kept every entry"
    );
}

fn b64decode(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut buf = 0u32;
    let mut bits = 0;
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => continue,
        };
        buf = (buf << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buf >> bits) as u8);
        }
    }
    out
}

/// On a terminal, `worktree create` shows each stage and post-create command
/// as it runs; in a pipe (and with `--json`) nothing but the result.
#[test]
fn create_shows_progress_on_a_terminal_only() {
    let env = Env::new();
    env.write(
        ".better-harness/worktree.toml",
        "post_create = [\"true\", \"echo built > built.txt\"]\n",
    );
    let piped = env.run(&["worktree", "create", "quiet"]);
    assert!(piped.status.success());
    let err = String::from_utf8_lossy(&piped.stderr);
    assert!(
        !err.contains('\u{1b}') && !err.contains("post-create 1/2"),
        "{err}"
    );

    let Some(script) = ["/usr/bin/script", "/bin/script"]
        .iter()
        .find(|p| Path::new(p).exists())
    else {
        eprintln!("skipped the terminal part: util-linux `script` (a pseudo-terminal) is missing");
        return;
    };
    let out = env
        .w
        .command(script)
        .arg("-qec")
        .arg(format!("{} worktree create loud", env.w.bin().display()))
        .arg("/dev/null")
        .current_dir(&env.repo)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let screen = bh_test_support::strip_sgr(&String::from_utf8_lossy(&out.stdout));
    for line in [
        "✓ git worktree add",
        "✓ post-create 1/2: true",
        "✓ post-create 2/2: echo built > built.txt",
    ] {
        assert!(screen.contains(line), "{line:?} in {screen:?}");
    }
    assert!(env.wt("loud").join("built.txt").is_file());
}
