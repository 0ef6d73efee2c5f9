//! Shared by the Pi-extension tests (`pi_extension.rs`,
//! `pi_extension_cmds.rs`): the real Pi in RPC mode with the extension and a
//! test-only tree driver loaded, the mock model server, and readers for what
//! Pi and `bh` left behind. Included with `#[path]`, so each test binary uses
//! only part of it.

#![allow(dead_code)]

use fs_err as fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc;

use bh_test_support::TestRepo;
use bh_test_support::cli::World;
use bh_test_support::mock_openai::{Seen, chunk, serve, usage};
use bh_test_support::pi::{PiRelease, RealPi, real_pi};
use serde_json::{Value, json};

pub fn extension_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../integrations/pi")
}

/// One streamed tool call, then the usage chunk.
pub fn tool_call(id: &str, name: &str, args: Value) -> String {
    let mut s = chunk(
        json!({"role": "assistant", "tool_calls": [{"index": 0, "id": id, "type": "function",
            "function": {"name": name, "arguments": args.to_string()}}]}),
        None,
    );
    s.push_str(&chunk(json!({}), Some("tool_calls")));
    s.push_str(&usage(10, 5));
    s
}

pub fn text(t: &str) -> String {
    let mut s = chunk(json!({"role": "assistant", "content": t}), None);
    s.push_str(&chunk(json!({}), Some("stop")));
    s.push_str(&usage(10, 5));
    s
}

/// A test-only extension: `/test-tree ID` navigates the tree like `/tree`.
pub const TREE_DRIVER: &str = r#"
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

pub struct Run {
    /// The hermetic environment of Pi and `bh`: HOME is `scratch`, Pi's
    /// agent folder `scratch/agent`, the state dir `state`.
    pub w: World,
    /// `bh` as the extension finds it (`BH_BIN`).
    pub bh_bin: PathBuf,
    pub pi: RealPi,
    pub repo: TestRepo,
    pub scratch: PathBuf,
    pub state: PathBuf,
    /// Pi's `TMPDIR` (where `/exec` writes its plan).
    pub tmp: PathBuf,
}

pub struct Rpc {
    pub stdin: ChildStdin,
    pub events: mpsc::Receiver<Value>,
    pub child: std::process::Child,
    pub notes: Vec<String>,
    /// The answer to confirm dialogs.
    pub confirm: bool,
    /// Answers to select dialogs whose options do not hold `until`'s
    /// `select` (the first of these the dialog offers).
    pub also_select: Vec<String>,
}

impl Rpc {
    pub fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Reads records until `done` says so, answering UI dialogs with
    /// `select` (first option named so) and [`Rpc::confirm`] for confirms.
    pub fn until(&mut self, select: &str, mut done: impl FnMut(&Value) -> bool) {
        loop {
            let v = self
                .events
                .recv_timeout(std::time::Duration::from_secs(120))
                .unwrap_or_else(|_| panic!("Pi went silent; notes so far: {:?}", self.notes));
            if v["type"] == "extension_ui_request" {
                match v["method"].as_str().unwrap_or("") {
                    "select" => {
                        let id = v["id"].clone();
                        let offered = |o: &str| {
                            v["options"]
                                .as_array()
                                .is_some_and(|a| a.iter().any(|x| x == o))
                        };
                        let answer = std::iter::once(select)
                            .chain(self.also_select.iter().map(String::as_str))
                            .find(|o| offered(o))
                            .unwrap_or(select)
                            .to_owned();
                        self.send(
                            json!({"type": "extension_ui_response", "id": id, "value": answer}),
                        );
                    }
                    "confirm" => {
                        let id = v["id"].clone();
                        self.send(
                            json!({"type": "extension_ui_response", "id": id, "confirmed": self.confirm}),
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
    pub fn new(release: PiRelease) -> Option<Run> {
        let pi = real_pi(release)?;
        let repo = TestRepo::new();
        repo.write("keep.txt", "base\n");
        repo.commit_all("initial");
        let scratch = repo.root.join("scratch");
        let state = repo.root.join("state");
        let tmp = repo.root.join("tmp");
        fs::create_dir_all(scratch.join("agent")).unwrap();
        fs::create_dir_all(&tmp).unwrap();
        let w = crate::world_at(&repo.root)
            .with_home(&scratch)
            .with_agent(scratch.join("agent"))
            .with_state(&state);
        Some(Run {
            w,
            tmp,
            bh_bin: PathBuf::from(env!("CARGO_BIN_EXE_bh")),
            pi,
            repo,
            scratch,
            state,
        })
    }

    pub fn start(&self, responses: Vec<String>) -> Rpc {
        self.start_seen(responses).0
    }

    /// Pi with the extension and the tree driver, the mock model serving
    /// `responses`; the caller adds the mode.
    pub fn pi_cmd(&self, responses: Vec<String>) -> (Command, Seen) {
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
        let mut cmd: Command = self.pi.command_in(&self.w);
        cmd.current_dir(&self.repo.dir)
            .args(["--model", "mock/m", "--thinking", "off"])
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
            .env("TMPDIR", &self.tmp)
            .env("GIT_CONFIG_GLOBAL", self.repo.home.join(".gitconfig"));
        (cmd, seen)
    }

    pub fn start_seen(&self, responses: Vec<String>) -> (Rpc, Seen) {
        let (mut cmd, seen) = self.pi_cmd(responses);
        cmd.args(["--mode", "rpc"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        (Rpc::spawned(cmd), seen)
    }

    pub fn session_files(&self) -> Vec<PathBuf> {
        let dir = self.scratch.join("agent/sessions");
        let mut files = Vec::new();
        for d in fs::read_dir(&dir).unwrap() {
            for f in fs::read_dir(d.unwrap().path()).unwrap() {
                files.push(f.unwrap().path());
            }
        }
        files
    }

    pub fn session_file(&self) -> PathBuf {
        let mut files = self.session_files();
        assert_eq!(files.len(), 1, "{files:?}");
        files.pop().unwrap()
    }

    pub fn bh(&self) -> Command {
        self.w.bh(&self.repo.dir)
    }

    pub fn checkpoints(&self) -> Vec<Value> {
        let out = self
            .bh()
            .args(["--json", "checkpoint", "list", "--project"])
            .arg(&self.repo.dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["checkpoints"].as_array().unwrap().clone()
    }
}

impl Rpc {
    /// Pi in RPC mode from `cmd` (its stdin and stdout piped).
    pub fn spawned(mut cmd: Command) -> Rpc {
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
        Rpc {
            stdin: child.stdin.take().unwrap(),
            events: rx,
            child,
            notes: Vec::new(),
            confirm: true,
            also_select: Vec::new(),
        }
    }
}

pub fn entries(file: &Path) -> Vec<Value> {
    fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The end of a prompt's work: `agent_settled` in 1.x, `agent_end` before.
pub fn settled(release: PiRelease) -> impl FnMut(&Value) -> bool {
    move |v: &Value| match release {
        PiRelease::Current => v["type"] == "agent_settled",
        PiRelease::Legacy => v["type"] == "agent_end",
    }
}

pub fn notified(prefix: impl Into<String>) -> impl FnMut(&Value) -> bool {
    let prefix: String = prefix.into();
    move |v: &Value| {
        v["type"] == "extension_ui_request"
            && v["method"] == "notify"
            && v["message"]
                .as_str()
                .is_some_and(|m| m.contains(prefix.as_str()))
    }
}
