use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bh_checkpoint::{Store, StoreOptions};
use bh_core::{Agent, AgentConfig, Event, Limits};
use bh_git::GitRunner;
use bh_llm::{Api, ModelSpec, Provider, ScriptedProvider, ThinkingLevel};
use bh_session::{Session, SessionWriter};
use bh_tools::{Profile, Toolbox, ToolboxOptions};
use serde_json::Value;

pub struct Fx {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub repo: PathBuf,
    pub runner: GitRunner,
}

pub fn git(repo: &Path, args: &[&str]) -> String {
    let out = bh_test_support::git_command()
        .current_dir(repo)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

pub fn fx() -> Fx {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs_err::canonicalize(tmp.path()).unwrap();
    let repo = root.join("repo");
    fs_err::create_dir_all(&repo).unwrap();
    fs_err::create_dir_all(root.join("home")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    fs_err::write(repo.join("README.md"), "hello\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    let env: Vec<(OsString, OsString)> = vec![
        ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
        ("HOME".into(), root.join("home").into_os_string()),
    ];
    Fx {
        _tmp: tmp,
        runner: GitRunner::new("git", env),
        root,
        repo,
    }
}

pub fn scripted(src: &str) -> Arc<dyn Provider> {
    Arc::new(
        ScriptedProvider::from_str(src, ModelSpec::new("scripted", "test", Api::Scripted)).unwrap(),
    )
}

impl Fx {
    pub fn store(&self) -> Arc<Store> {
        Arc::new(
            Store::open(
                &self.runner,
                &self.repo,
                &StoreOptions::new(self.root.join("state")),
            )
            .unwrap(),
        )
    }

    pub fn new_session(&self) -> SessionWriter {
        SessionWriter::create_for_cwd(&self.root.join("agent"), self.repo.to_str().unwrap())
            .unwrap()
    }

    pub fn config(
        &self,
        provider: Arc<dyn Provider>,
        session: SessionWriter,
        checkpoints: bool,
        limits: Limits,
    ) -> AgentConfig {
        let toolbox = Toolbox::new(ToolboxOptions::new(
            &self.repo,
            Profile::Interactive,
            self.root.join("out"),
        ))
        .unwrap();
        AgentConfig {
            provider,
            toolbox: Arc::new(toolbox),
            tools: None,
            session,
            checkpoints: checkpoints.then(|| self.store()),
            system_prompt: Some("You are a test.".into()),
            thinking: ThinkingLevel::Off,
            max_tokens: None,
            limits,
        }
    }

    pub fn agent(&self, script: &str, limits: Limits) -> Agent {
        Agent::new(self.config(scripted(script), self.new_session(), true, limits)).unwrap()
    }
}

/// Every `message` of the session in file order.
pub fn messages(path: &Path) -> Vec<Value> {
    fs_err::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "message")
        .map(|v| v["message"].clone())
        .collect()
}

/// The session loads without problems, every tool call has exactly one result
/// and each entry's parent is the previous entry.
pub fn assert_valid(path: &Path) -> Session {
    let s = Session::load(path).unwrap();
    assert!(s.is_valid(), "problems: {:?}", s.problems());
    assert!(s.problems().is_empty(), "problems: {:?}", s.problems());
    let mut prev: Option<String> = None;
    for e in s.entries() {
        assert_eq!(e.parent_id, prev, "entry {} is not chained", e.id);
        prev = Some(e.id.clone());
    }
    let msgs = messages(path);
    let mut open: Vec<String> = Vec::new();
    for m in &msgs {
        match m["role"].as_str().unwrap() {
            "assistant" => {
                assert!(open.is_empty(), "unanswered tool calls {open:?}");
                for b in m["content"].as_array().unwrap() {
                    if b["type"] == "toolCall" {
                        open.push(b["id"].as_str().unwrap().to_owned());
                    }
                }
            }
            "toolResult" => {
                let id = m["toolCallId"].as_str().unwrap();
                let pos = open.iter().position(|o| o == id).expect("orphan result");
                open.remove(pos);
            }
            _ => assert!(open.is_empty(), "unanswered tool calls {open:?}"),
        }
    }
    s
}

pub fn event_types(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            serde_json::to_value(e).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// Whether process `pid` still runs (a zombie does not count).
pub fn pid_alive(pid: i32) -> bool {
    fs_err::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

/// Whether the command that wrote its pid to `file` in the repository is
/// gone (or never got as far as writing it).
/// Whether the command that wrote `file` is gone. Under the bash sandbox
/// the pid it wrote is one of its PID namespace, so this looks for any live
/// process (host-wide) still working in the repository instead.
pub fn command_gone(repo: &Path, file: &str) -> bool {
    let _ = file;
    let repo = fs_err::canonicalize(repo).unwrap();
    !fs_err::read_dir("/proc").unwrap().flatten().any(|e| {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            return false;
        };
        fs_err::read_link(e.path().join("cwd")).is_ok_and(|cwd| cwd == repo) && pid_alive(pid)
    })
}
