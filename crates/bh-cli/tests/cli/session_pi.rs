//! Interop with the real Pi (0.73.1): every file `bh session fork` and the
//! session writer produce must load in Pi (`pi --export` and RPC
//! `get_messages`), with the same leaf, entry count and context as `bh`.
//!
//! Pi is installed from npm into the target directory by
//! `bh_test_support::pi` on first use; the tests skip (with a printed reason)
//! only when `node` or `npm` is absent.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command as Proc, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use assert_cmd::Command;
use bh_protocol::message::{
    AssistantMessage, Content, ContentBlock, ToolResultMessage, Usage, UserMessage,
};
use bh_test_support::cli::World;
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../bh-session/tests/fixtures")
}

/// The real Pi 0.73.1 as `(node, dist/cli.js)`, installed by the shared
/// test support when Node and npm are present (`None`, reason printed, when not).
fn legacy_pi() -> Option<(PathBuf, PathBuf)> {
    bh_test_support::pi::real_pi(bh_test_support::pi::PiRelease::Legacy).map(|p| (p.node, p.cli))
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

#[derive(Debug)]
struct PiReport {
    export_rc: Option<i32>,
    export_output: String,
    export_leaf: Value,
    export_entries: usize,
    rpc_ok: bool,
    rpc_stderr: String,
    messages: Vec<Value>,
}

/// `node` in `w`, Pi kept quiet and offline (HOME and the agent folder are
/// the world's).
fn pi_command(w: &World, node: &Path) -> Proc {
    let mut cmd = w.command(node);
    cmd.envs(bh_test_support::pi::QUIET_ENV);
    cmd
}

/// Ask Pi about a copy of `file` (Pi may append to or migrate what it opens).
fn pi_check(node: &Path, cli: &Path, file: &Path) -> PiReport {
    let w = crate::world();
    let root = w.root.clone();
    let w = w.with_home(&root);
    fs_err::create_dir_all(&w.agent).unwrap();
    let mut report = PiReport {
        export_rc: None,
        export_output: String::new(),
        export_leaf: Value::Null,
        export_entries: 0,
        rpc_ok: false,
        rpc_stderr: String::new(),
        messages: Vec::new(),
    };

    // 1. pi --export
    let exp = root.join("export.jsonl");
    fs_err::copy(file, &exp).unwrap();
    let html = root.join("out.html");
    let mut cmd = pi_command(&w, node);
    cmd.arg(cli).arg("--export").arg(&exp).arg(&html);
    let out = cmd.output().unwrap();
    report.export_rc = out.status.code();
    report.export_output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if let Ok(text) = fs_err::read_to_string(&html)
        && let Some(i) = text.find("id=\"session-data\"")
    {
        let rest = &text[i..];
        let start = rest.find('>').unwrap() + 1;
        let end = rest.find("</script>").unwrap();
        let data: Value = serde_json::from_slice(&b64decode(rest[start..end].trim())).unwrap();
        report.export_leaf = data["leafId"].clone();
        report.export_entries = data["entries"].as_array().map_or(0, Vec::len);
    }

    // 2. RPC get_messages (stdin stays open until the answers are in).
    let rpcf = root.join("rpc.jsonl");
    fs_err::copy(file, &rpcf).unwrap();
    let mut cmd = pi_command(&w, node);
    cmd.arg(cli)
        .args(["--mode", "rpc", "--no-extensions", "--session"])
        .arg(&rpcf)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let done = done.clone();
        std::thread::spawn(move || {
            for _ in 0..1200 {
                if done.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            // Our own child, by its pid.
            let _ = Proc::new("kill").arg(pid.to_string()).status();
        })
    };
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(
            b"{\"id\":\"s\",\"type\":\"get_state\"}\n{\"id\":\"m\",\"type\":\"get_messages\"}\n",
        )
        .unwrap();
    stdin.flush().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut pending = 2;
    for line in stdout.lines() {
        let Ok(line) = line else { break };
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if v["type"] != "response" {
            continue;
        }
        match v["id"].as_str() {
            Some("s") => {
                report.rpc_ok = v["success"] == true;
                pending -= 1;
            }
            Some("m") => {
                report.messages = v["data"]["messages"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                pending -= 1;
            }
            _ => {}
        }
        if pending == 0 {
            break;
        }
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    done.store(true, Ordering::SeqCst);
    let _ = watchdog.join();
    report.rpc_stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    report
}

fn bh_json(args: &[&std::ffi::OsStr]) -> Value {
    let w = crate::world();
    let out = Command::from_std(w.bh(&w.root))
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bh {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Everything `bh` says about `file` agrees with what the real Pi says.
fn assert_pi_agrees(node: &Path, cli: &Path, file: &Path, what: &str) -> Result<(), String> {
    let show = bh_json(&["session".as_ref(), "show".as_ref(), file.as_os_str()]);
    let ctx = bh_json(&["session".as_ref(), "context".as_ref(), file.as_os_str()]);
    let pi = pi_check(node, cli, file);
    let fail = |m: String| Err(format!("{what} ({}): {m}\n{pi:?}", file.display()));
    if show["valid"] != true {
        return fail(format!("bh says invalid: {}", show["problems"]));
    }
    if pi.export_rc != Some(0) {
        return fail(format!("pi --export failed: {}", pi.export_output));
    }
    if pi.export_entries != show["entries"].as_u64().unwrap_or(0) as usize {
        return fail(format!(
            "entries: pi {} bh {}",
            pi.export_entries, show["entries"]
        ));
    }
    if pi.export_leaf != show["leaf"] {
        return fail(format!("leaf: pi {} bh {}", pi.export_leaf, show["leaf"]));
    }
    if !pi.rpc_ok {
        return fail(format!("pi rpc failed: {}", pi.rpc_stderr));
    }
    let ours = ctx["messages"].as_array().cloned().unwrap_or_default();
    if ours != pi.messages {
        return fail(format!(
            "context differs: pi {} messages, bh {}\npi: {}\nbh: {}",
            pi.messages.len(),
            ours.len(),
            serde_json::to_string(&pi.messages).unwrap_or_default(),
            serde_json::to_string(&ours).unwrap_or_default()
        ));
    }
    Ok(())
}

fn fork(src: &Path, out: &Path, cwd: &Path, extra: &[&str]) -> PathBuf {
    let w = crate::world();
    let o = Command::from_std(w.bh(&w.root))
        .args(["session", "fork"])
        .args(extra)
        .arg("--cwd")
        .arg(cwd)
        .arg("--out")
        .arg(out)
        .arg(src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let printed = String::from_utf8(o.stdout).unwrap();
    assert_eq!(printed.trim_end(), out.display().to_string());
    out.to_path_buf()
}

fn session_fixtures() -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        for e in fs_err::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }
    let mut v = Vec::new();
    walk(&fixtures().join("pi-0.73.1"), &mut v);
    walk(&fixtures().join("pi-mono-v1"), &mut v);
    v.sort();
    v
}

/// A new session written with the library writer: a small tree with every
/// entry kind `bh` writes, and a leaf chosen by appending under an entry.
fn write_new_session(agent: &Path, cwd: &Path) -> Vec<PathBuf> {
    let mut w = bh_session::SessionWriter::create_for_cwd(agent, cwd.to_str().unwrap()).unwrap();
    w.append_model_change("fake", "fake-model").unwrap();
    w.append_thinking_level_change("medium").unwrap();
    let u1 = w
        .append_message(&UserMessage::new(
            Content::Blocks(vec![ContentBlock::text("Hello from bh")]),
            1_767_225_600_000,
        ))
        .unwrap();
    let usage = Usage {
        input: 10,
        output: 5,
        total_tokens: 15,
        ..Usage::default()
    };
    let call =
        json!({"type":"toolCall","id":"call_1","name":"read","arguments":{"path":"README.md"}});
    let a1 = w
        .append_message(&AssistantMessage {
            role: "assistant".into(),
            content: vec![serde_json::from_value(call).unwrap()],
            api: "openai-completions".into(),
            provider: "fake".into(),
            model: "fake-model".into(),
            usage: usage.clone(),
            stop_reason: "toolUse".into(),
            timestamp: 1_767_225_601_000,
            error_message: None,
            response_id: None,
            response_model: None,
            raw_stop_reason: None,
            duration_ms: None,
            thinking_level: None,
            extra: Default::default(),
        })
        .unwrap();
    w.append_message(&ToolResultMessage {
        role: "toolResult".into(),
        tool_call_id: "call_1".into(),
        tool_name: "read".into(),
        content: vec![ContentBlock::text("# readme")],
        details: None,
        is_error: false,
        timestamp: 1_767_225_602_000,
        extra: Default::default(),
    })
    .unwrap();
    w.append_custom_message(
        "bh-note",
        json!("A note injected by bh"),
        true,
        Some(json!({"k":1})),
    )
    .unwrap();
    w.append_custom("bh-state", Some(json!({"n": 1}))).unwrap();
    w.append_label(&u1, Some("start")).unwrap();
    w.append_session_info("Written by bh").unwrap();
    // A second branch from the first user message.
    w.branch(Some(&u1)).unwrap();
    w.append_message(&UserMessage::new(
        Content::Text("Other branch".into()),
        1_767_225_603_000,
    ))
    .unwrap();
    let first = w.path().to_path_buf();

    // Copy it and choose the assistant message as the active leaf.
    let second = first.with_file_name("selected-leaf.jsonl");
    fs_err::copy(&first, &second).unwrap();
    bh_session::select_leaf(&second, &a1).unwrap();
    vec![first, second]
}

#[test]
fn real_pi_loads_what_bh_writes() {
    let Some((node, cli)) = legacy_pi() else {
        return;
    };
    eprintln!("real Pi: {} with {}", cli.display(), node.display());

    let work = tempfile::tempdir().unwrap();
    let proj = work.path().join("project");
    fs_err::create_dir_all(&proj).unwrap();
    let outdir = work.path().join("forks");
    fs_err::create_dir_all(&outdir).unwrap();

    let mut jobs: Vec<(PathBuf, String)> = Vec::new();
    for (i, src) in session_fixtures().into_iter().enumerate() {
        let s = bh_session::Session::load(&src).unwrap();
        if s.header().is_none() || !s.is_valid() {
            continue; // nothing Pi-loadable to fork (or a known-broken source)
        }
        let before = fs_err::read(&src).unwrap();
        let out = fork(&src, &outdir.join(format!("whole-{i}.jsonl")), &proj, &[]);
        assert_eq!(fs_err::read(&src).unwrap(), before);
        jobs.push((out, format!("whole-tree fork of {}", src.display())));
    }
    let s07 = session_fixtures()
        .into_iter()
        .find(|p| p.to_str().unwrap().contains("s07-extension-entries"))
        .unwrap();
    let s06 = session_fixtures()
        .into_iter()
        .find(|p| p.to_str().unwrap().contains("s06-rpc-session-ops"))
        .unwrap();
    let s23 = session_fixtures()
        .into_iter()
        .find(|p| p.to_str().unwrap().contains("s23-clone"))
        .unwrap();
    for (name, src, extra) in [
        ("path-s07-leaf", &s07, vec!["--path-only"]),
        (
            "path-s07-inner",
            &s07,
            vec!["--path-only", "--entry", "825ff67b"],
        ),
        (
            "path-s07-branch",
            &s07,
            vec!["--path-only", "--entry", "0097eeb9"],
        ),
        ("path-s06-compaction", &s06, vec!["--path-only"]),
        (
            "path-s06-early",
            &s06,
            vec!["--path-only", "--entry", "82161236"],
        ),
        ("path-s23-broken", &s23, vec!["--path-only"]),
        ("whole-s07-at-entry", &s07, vec!["--entry", "bc9ba822"]),
        ("whole-s06-at-entry", &s06, vec!["--entry", "d358efe8"]),
    ] {
        let out = fork(src, &outdir.join(format!("{name}.jsonl")), &proj, &extra);
        jobs.push((out, name.to_owned()));
    }
    let agent = work.path().join("agent");
    for p in write_new_session(&agent, &proj) {
        jobs.push((p, "new session from SessionWriter".to_owned()));
    }

    // Two workers (a 2-core machine); each Pi check starts Node twice.
    let jobs = std::sync::Mutex::new(jobs);
    let failures = std::sync::Mutex::new(Vec::new());
    let checked = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let Some((file, what)) = jobs.lock().unwrap().pop() else {
                        return;
                    };
                    checked.fetch_add(1, Ordering::SeqCst);
                    if let Err(e) = assert_pi_agrees(&node, &cli, &file, &what) {
                        failures.lock().unwrap().push(e);
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    eprintln!(
        "real Pi checked {} files, {} failed",
        checked.load(Ordering::SeqCst),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The session the executor forks and continues loads in the real Pi with
/// the same context `bh` computes.
#[test]
fn real_pi_loads_the_executor_fork() {
    let Some((node, cli)) = legacy_pi() else {
        return;
    };
    let w = crate::world();
    let root = w.root.clone();
    let w = w.with_home(&root);
    let repo = root.join("repo");
    fs_err::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        w.git(&repo, args);
    };
    git(&["init", "-q"]);
    fs_err::write(repo.join("a.txt"), "a\n").unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "base"]);
    let src = session_fixtures()
        .into_iter()
        .find(|p| p.to_str().unwrap().contains("s04-continue-multi-run"))
        .unwrap();
    fs_err::write(
        root.join("turns.jsonl"),
        "{\"toolCalls\": [{\"name\": \"write\", \"arguments\": {\"path\": \"b.txt\", \"content\": \"b\\n\"}}]}\n{\"text\": \"Done.\"}\n",
    )
    .unwrap();
    let model = format!("scripted/{}", root.join("turns.jsonl").display());
    let bh = |args: &[&str]| {
        let out = w.bh(&root).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    bh(&[
        "exec",
        "plan",
        "--repo",
        "repo",
        "--base",
        "HEAD",
        "--session",
        src.to_str().unwrap(),
        "--entry",
        "188efa0e",
        "--prompt",
        "add b",
        "--model",
        &model,
    ]);
    // keep the worktree: Pi refuses a session whose cwd no longer exists
    let out: Value = serde_json::from_slice(&bh(&[
        "--json",
        "exec",
        "run",
        "--plan",
        "plan.json",
        "--yes",
        "--keep-worktree",
    ]))
    .unwrap();
    assert_eq!(out["result"]["state"], "committed");
    let forked = PathBuf::from(out["result"]["forked_session"].as_str().unwrap());
    assert_pi_agrees(&node, &cli, &forked, "executor fork").unwrap();
}
