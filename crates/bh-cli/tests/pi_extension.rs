//! The Pi extension (`integrations/pi/`) inside the real Pi, 1.6.0 and
//! 0.73.1 (installed from npm by `bh_test_support::pi`), driven in RPC mode
//! by the mock OpenAI-compatible server on 127.0.0.1: checkpoints before
//! every mutating call tagged with the calling entry, and `/tree` back to an
//! entry with "conversation and files" restoring exactly that point's files.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fs_err as fs;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc;

use bh_test_support::TestRepo;
use bh_test_support::mock_openai::{Seen, chunk, serve, usage};
use bh_test_support::pi::{PiRelease, RealPi, real_pi};
use serde_json::{Value, json};

fn extension_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../integrations/pi")
}

/// One streamed tool call, then the usage chunk.
fn tool_call(id: &str, name: &str, args: Value) -> String {
    let mut s = chunk(
        json!({"role": "assistant", "tool_calls": [{"index": 0, "id": id, "type": "function",
            "function": {"name": name, "arguments": args.to_string()}}]}),
        None,
    );
    s.push_str(&chunk(json!({}), Some("tool_calls")));
    s.push_str(&usage(10, 5));
    s
}

fn text(t: &str) -> String {
    let mut s = chunk(json!({"role": "assistant", "content": t}), None);
    s.push_str(&chunk(json!({}), Some("stop")));
    s.push_str(&usage(10, 5));
    s
}

/// A test-only extension: `/test-tree ID` navigates the tree like `/tree`.
const TREE_DRIVER: &str = r#"
export default function (pi: any) {
  pi.registerCommand("test-tree", {
    description: "navigate to an entry (test)",
    handler: async (args: string, ctx: any) => {
      const r = await ctx.navigateTree(args.trim(), { summarize: false });
      ctx.ui.notify(`navigated cancelled=${!!r?.cancelled}`, "info");
    },
  });
}
"#;

struct Run {
    /// `bh` as the extension finds it (`BH_BIN`).
    bh_bin: PathBuf,
    pi: RealPi,
    repo: TestRepo,
    scratch: PathBuf,
    state: PathBuf,
}

struct Rpc {
    stdin: ChildStdin,
    events: mpsc::Receiver<Value>,
    child: std::process::Child,
    notes: Vec<String>,
}

impl Rpc {
    fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Reads records until `done` says so, answering UI dialogs with
    /// `select` (first option named so) and `true` for confirms.
    fn until(&mut self, select: &str, mut done: impl FnMut(&Value) -> bool) {
        loop {
            let v = self
                .events
                .recv_timeout(std::time::Duration::from_secs(120))
                .unwrap_or_else(|_| panic!("Pi went silent; notes so far: {:?}", self.notes));
            if v["type"] == "extension_ui_request" {
                match v["method"].as_str().unwrap_or("") {
                    "select" => {
                        let id = v["id"].clone();
                        self.send(
                            json!({"type": "extension_ui_response", "id": id, "value": select}),
                        );
                    }
                    "confirm" => {
                        let id = v["id"].clone();
                        self.send(
                            json!({"type": "extension_ui_response", "id": id, "confirmed": true}),
                        );
                    }
                    "notify" => self
                        .notes
                        .push(v["message"].as_str().unwrap_or("").to_owned()),
                    _ => {}
                }
            }
            if done(&v) {
                return;
            }
        }
    }
}

impl Run {
    fn new(release: PiRelease) -> Option<Run> {
        let pi = real_pi(release)?;
        let repo = TestRepo::new();
        repo.write("keep.txt", "base\n");
        repo.commit_all("initial");
        let scratch = repo.root.join("scratch");
        let state = repo.root.join("state");
        fs::create_dir_all(scratch.join("agent")).unwrap();
        Some(Run {
            bh_bin: PathBuf::from(env!("CARGO_BIN_EXE_bh")),
            pi,
            repo,
            scratch,
            state,
        })
    }

    fn start(&self, responses: Vec<String>) -> Rpc {
        self.start_seen(responses).0
    }

    fn start_seen(&self, responses: Vec<String>) -> (Rpc, Seen) {
        let (base, seen) = serve(responses);
        fs::write(
            self.scratch.join("agent/models.json"),
            json!({"providers": {"mock": {"baseUrl": base, "api": "openai-completions", "apiKey": "k",
                "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
                "models": [{"id": "m", "reasoning": false, "input": ["text"],
                    "contextWindow": 100000, "maxTokens": 1000,
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}]}}})
            .to_string(),
        )
        .unwrap();
        let driver = self.scratch.join("tree-driver.ts");
        fs::write(&driver, TREE_DRIVER).unwrap();
        let mut cmd: Command = self.pi.command(&self.scratch);
        cmd.current_dir(&self.repo.dir)
            .args(["--mode", "rpc", "--model", "mock/m", "--thinking", "off"])
            .args([
                "--no-skills",
                "--no-prompt-templates",
                "--no-themes",
                "--no-context-files",
            ])
            .arg("-e")
            .arg(extension_dir())
            .arg("-e")
            .arg(&driver)
            .env("BH_BIN", &self.bh_bin)
            .env("BH_STATE_DIR", &self.state)
            .env("GIT_CONFIG_GLOBAL", self.repo.home.join(".gitconfig"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).split(b'\n') {
                let Ok(line) = line else { return };
                if let Ok(v) = serde_json::from_slice::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        let rpc = Rpc {
            stdin: child.stdin.take().unwrap(),
            events: rx,
            child,
            notes: Vec::new(),
        };
        (rpc, seen)
    }

    fn session_files(&self) -> Vec<PathBuf> {
        let dir = self.scratch.join("agent/sessions");
        let mut files = Vec::new();
        for d in fs::read_dir(&dir).unwrap() {
            for f in fs::read_dir(d.unwrap().path()).unwrap() {
                files.push(f.unwrap().path());
            }
        }
        files
    }

    fn session_file(&self) -> PathBuf {
        let mut files = self.session_files();
        assert_eq!(files.len(), 1, "{files:?}");
        files.pop().unwrap()
    }

    fn bh(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_bh"));
        c.env("BH_STATE_DIR", &self.state)
            .env("PI_CODING_AGENT_DIR", self.scratch.join("agent"))
            .env("HOME", &self.scratch)
            .current_dir(&self.repo.dir);
        c
    }

    fn checkpoints(&self) -> Vec<Value> {
        let out = Command::new(env!("CARGO_BIN_EXE_bh"))
            .args(["--json", "checkpoint", "list", "--project"])
            .arg(&self.repo.dir)
            .env("BH_STATE_DIR", &self.state)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["checkpoints"].as_array().unwrap().clone()
    }
}

fn entries(file: &Path) -> Vec<Value> {
    fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The end of a prompt's work: `agent_settled` in 1.x, `agent_end` before.
fn settled(release: PiRelease) -> impl FnMut(&Value) -> bool {
    move |v: &Value| match release {
        PiRelease::Current => v["type"] == "agent_settled",
        PiRelease::Legacy => v["type"] == "agent_end",
    }
}

fn scripted_run_and_tree(release: PiRelease) {
    let Some(run) = Run::new(release) else {
        return;
    };
    let responses = vec![
        tool_call(
            "call_w",
            "write",
            json!({"path": "a.txt", "content": "one\n"}),
        ),
        tool_call(
            "call_b",
            "bash",
            json!({"command": "echo made-by-bash > b.txt && rm keep.txt"}),
        ),
        tool_call(
            "call_e",
            "edit",
            json!({"path": "a.txt", "edits": [{"oldText": "one", "newText": "two"}]}),
        ),
        text("done"),
    ];
    let mut rpc = run.start(responses);
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "go"}));
    rpc.until("", settled(release));
    assert_eq!(
        run.repo.read("a.txt"),
        "two\n",
        "notes: {:?}; session: {}",
        rpc.notes,
        fs::read_to_string(run.session_file()).unwrap_or_default()
    );
    assert_eq!(run.repo.read("b.txt"), "made-by-bash\n");
    assert!(!run.repo.dir.join("keep.txt").exists());

    // One checkpoint per mutating call, tagged with the assistant entry that
    // made it.
    let file = run.session_file();
    let all = entries(&file);
    let session_id = all[0]["id"].as_str().unwrap().to_owned();
    let mut caller: BTreeMap<String, String> = BTreeMap::new(); // tool call id -> entry id
    let mut result_of: BTreeMap<String, String> = BTreeMap::new(); // tool call id -> result entry id
    for e in &all {
        let m = &e["message"];
        if m["role"] == "assistant" {
            for c in m["content"].as_array().unwrap() {
                if c["type"] == "toolCall" {
                    caller.insert(
                        c["id"].as_str().unwrap().into(),
                        e["id"].as_str().unwrap().into(),
                    );
                }
            }
        }
        if m["role"] == "toolResult" {
            result_of.insert(
                m["toolCallId"].as_str().unwrap().into(),
                e["id"].as_str().unwrap().into(),
            );
        }
    }
    let mut cps: Vec<Value> = run
        .checkpoints()
        .into_iter()
        .filter(|c| c["session"] == json!(session_id))
        .collect();
    cps.sort_by_key(|c| c["seq"].as_u64());
    let tagged: Vec<(String, String)> = cps
        .iter()
        .map(|c| {
            (
                c["tool"].as_str().unwrap().into(),
                c["entry"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        tagged,
        vec![
            ("write".to_owned(), caller["call_w"].clone()),
            ("bash".to_owned(), caller["call_b"].clone()),
            ("edit".to_owned(), caller["call_e"].clone()),
        ],
        "notes: {:?}",
        rpc.notes
    );

    // /tree back to the write's result: "conversation and files" gives the
    // files of that point — a.txt as written, no bash changes.
    let target = result_of["call_w"].clone();
    rpc.send(json!({"id": "t1", "type": "prompt", "message": format!("/test-tree {target}")}));
    rpc.until("Conversation and files", |v| {
        v["type"] == "extension_ui_request"
            && v["method"] == "notify"
            && v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("navigated"))
    });
    assert!(
        rpc.notes
            .iter()
            .any(|n| n.contains("navigated cancelled=false")),
        "{:?}",
        rpc.notes
    );
    assert_eq!(run.repo.read("a.txt"), "one\n", "notes: {:?}", rpc.notes);
    assert!(!run.repo.dir.join("b.txt").exists(), "bash's file survived");
    assert_eq!(
        run.repo.read("keep.txt"),
        "base\n",
        "bash's deletion not undone"
    );
    let undo = rpc
        .notes
        .iter()
        .find(|n| n.contains("undo with: /restore"))
        .unwrap_or_else(|| panic!("no undo hint: {:?}", rpc.notes))
        .clone();
    // The hint works: back to the state before the rewind.
    let cmd = undo.split("undo with: ").nth(1).unwrap().to_owned();
    rpc.send(json!({"id": "u1", "type": "prompt", "message": cmd}));
    rpc.until("", |v| {
        v["type"] == "extension_ui_request"
            && v["method"] == "notify"
            && v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("restored "))
    });
    assert_eq!(run.repo.read("a.txt"), "two\n");
    assert_eq!(run.repo.read("b.txt"), "made-by-bash\n");

    // /fork from the first prompt with "conversation and files": the files
    // go back to before the first call.
    let first_user = all.iter().find(|e| e["message"]["role"] == "user").unwrap()["id"].clone();
    rpc.send(json!({"id": "f1", "type": "fork", "entryId": first_user}));
    rpc.until("Conversation and files", |v| {
        v["type"] == "response" && v["command"] == "fork"
    });
    assert!(!run.repo.dir.join("a.txt").exists(), "{:?}", rpc.notes);
    assert!(!run.repo.dir.join("b.txt").exists());
    assert_eq!(run.repo.read("keep.txt"), "base\n");
    drop(rpc.stdin);
    let _ = rpc.child.wait();
}

#[test]
fn pi_1_6_checkpoints_every_mutating_call_and_rewinds_files_on_tree() {
    scripted_run_and_tree(PiRelease::Current);
}

#[test]
fn pi_0_73_checkpoints_every_mutating_call_and_rewinds_files_on_tree() {
    scripted_run_and_tree(PiRelease::Legacy);
}

fn notified(prefix: &'static str) -> impl FnMut(&Value) -> bool {
    move |v: &Value| {
        v["type"] == "extension_ui_request"
            && v["method"] == "notify"
            && v["message"].as_str().is_some_and(|m| m.contains(prefix))
    }
}

fn worktree_enter(release: PiRelease) {
    let Some(run) = Run::new(release) else {
        return;
    };
    let responses = vec![
        text("hello"),
        tool_call(
            "call_w",
            "write",
            json!({"path": "w.txt", "content": "in the worktree\n"}),
        ),
        text("done"),
    ];
    let (mut rpc, seen) = run.start_seen(responses);
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "hi"}));
    rpc.until("", settled(release));
    rpc.send(json!({"id": "c1", "type": "prompt", "message": "/worktree create feat"}));
    rpc.until("", notified("feat"));
    assert!(
        rpc.notes.last().unwrap().contains("created"),
        "{:?}",
        rpc.notes
    );
    rpc.send(json!({"id": "e1", "type": "prompt", "message": "/worktree enter feat"}));
    rpc.until("", notified("arrived in worktree"));
    let note = rpc.notes.last().unwrap().clone();
    let worktree = PathBuf::from(
        note.trim_start_matches("arrived in worktree ")
            .split(" (")
            .next()
            .unwrap(),
    );
    assert!(worktree.join(".git").exists(), "{note}");
    assert_ne!(worktree, run.repo.dir);
    // The next tool call lands in the worktree.
    rpc.send(json!({"id": "p2", "type": "prompt", "message": "write it"}));
    rpc.until("", settled(release));
    assert_eq!(
        fs::read_to_string(worktree.join("w.txt")).unwrap(),
        "in the worktree\n",
        "{:?}",
        rpc.notes
    );
    assert!(!run.repo.dir.join("w.txt").exists());
    // One orientation entry in the next model request.
    let requests = seen.lock().unwrap().clone();
    let next = &requests[1].1;
    let orientations = next["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| {
            m.to_string()
                .contains("[better-harness] This session moved")
        })
        .count();
    assert_eq!(orientations, 1, "{next:#}");
    // The handoff was consumed once, by the new runtime.
    let target = run
        .session_files()
        .into_iter()
        .find(|f| {
            fs::read_to_string(f)
                .unwrap()
                .contains("better-harness-transition")
        })
        .unwrap();
    let out = run
        .bh()
        .args(["--json", "worktree", "consume"])
        .arg(&target)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "notPending", "{v}");
    let verified = fs::read_to_string(&target)
        .unwrap()
        .matches("better-harness-transition-verification")
        .count();
    assert_eq!(verified, 1);
    drop(rpc.stdin);
    let _ = rpc.child.wait();
}

fn exec_from_pi(release: PiRelease) {
    let Some(run) = Run::new(release) else {
        return;
    };
    let responses = vec![
        text("hello"),
        // The execution's own agent (bh exec run), same mock endpoint.
        tool_call(
            "call_x",
            "write",
            json!({"path": "x.txt", "content": "executed\n"}),
        ),
        text("done"),
    ];
    let mut rpc = run.start(responses);
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "hi"}));
    rpc.until("", settled(release));
    rpc.send(json!({"id": "x1", "type": "prompt", "message": "/exec add x.txt"}));
    rpc.until("", notified("execution"));
    let note = rpc.notes.last().unwrap().clone();
    assert!(
        note.contains("refs/better-harness/executions/"),
        "{:?}",
        rpc.notes
    );
    let refs = run.repo.git(&[
        "for-each-ref",
        "--format=%(refname) %(objectname)",
        "refs/better-harness/executions/",
    ]);
    let (name, commit) = refs
        .trim()
        .split_once(' ')
        .unwrap_or_else(|| panic!("no ref: {refs:?} {:?}", rpc.notes));
    assert!(
        note.contains(name) && note.contains(commit),
        "{note} vs {refs}"
    );
    assert_eq!(
        run.repo.git(&["show", &format!("{commit}:x.txt")]),
        "executed"
    );
    assert!(
        !run.repo.dir.join("x.txt").exists(),
        "the execution ran elsewhere"
    );
    drop(rpc.stdin);
    let _ = rpc.child.wait();
}

#[test]
fn pi_1_6_worktree_enter_moves_the_session_and_consumes_the_handoff_once() {
    worktree_enter(PiRelease::Current);
}

#[test]
fn pi_0_73_worktree_enter_moves_the_session_and_consumes_the_handoff_once() {
    worktree_enter(PiRelease::Legacy);
}

#[test]
fn pi_1_6_exec_commits_under_the_executions_namespace() {
    exec_from_pi(PiRelease::Current);
}

#[test]
fn pi_0_73_exec_commits_under_the_executions_namespace() {
    exec_from_pi(PiRelease::Legacy);
}

fn broken_bh_never_blocks_a_tool(release: PiRelease) {
    let Some(mut run) = Run::new(release) else {
        return;
    };
    run.bh_bin = run.repo.root.join("no-such-bh");
    let responses = vec![
        tool_call(
            "call_w",
            "write",
            json!({"path": "a.txt", "content": "written\n"}),
        ),
        text("done"),
    ];
    let mut rpc = run.start(responses);
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "go"}));
    rpc.until("", settled(release));
    assert_eq!(run.repo.read("a.txt"), "written\n", "the tool was blocked");
    assert!(
        rpc.notes
            .iter()
            .any(|n| n.contains("checkpoint before write failed")),
        "no visible warning: {:?}",
        rpc.notes
    );
    drop(rpc.stdin);
    let _ = rpc.child.wait();
}

#[test]
fn pi_1_6_a_failing_checkpoint_warns_and_never_blocks() {
    broken_bh_never_blocks_a_tool(PiRelease::Current);
}

#[test]
fn pi_0_73_a_failing_checkpoint_warns_and_never_blocks() {
    broken_bh_never_blocks_a_tool(PiRelease::Legacy);
}
