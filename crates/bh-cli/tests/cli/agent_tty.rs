//! The interactive `bh agent` on a real pseudo-terminal (util-linux
//! `script`): a bracketed paste of several lines is one prompt, the history
//! is kept per user across sessions, Tab completes slash commands (and never
//! creates a checkpoint store), and `/rewind` takes conversation and files back.
//! Skipped, saying why, where `script` is missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use bh_test_support::cli::World;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

fn script_bin() -> Option<&'static str> {
    ["/usr/bin/script", "/bin/script"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

struct Tty {
    child: Child,
    screen: Arc<Mutex<Vec<u8>>>,
}

impl Tty {
    fn start(w: &World, repo: &Path, args: &str) -> Tty {
        Tty::start_with(w, repo, args, &[])
    }

    fn start_with(w: &World, repo: &Path, args: &str, envs: &[(&str, &str)]) -> Tty {
        let mut child = w
            .command(script_bin().unwrap())
            .arg("-qfec")
            .arg(format!("{} agent {args}", w.bin().display()))
            .arg("/dev/null")
            .current_dir(repo)
            .env("TERM", "xterm")
            .envs(envs.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let screen = Arc::new(Mutex::new(Vec::new()));
        let mut out = child.stdout.take().unwrap();
        let s = screen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                s.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Tty { child, screen }
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    /// Waits (a generous deadline against hangs, not a timing assertion)
    /// until the screen shows `text` `count` times.
    fn wait_for(&self, text: &str, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.screen().matches(text).count() < count {
            assert!(
                Instant::now() < deadline,
                "never saw {text:?} x{count}:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until `text` shows after the last `marker` (a prompt after an
    /// answer: the editor is then in raw mode, so what is sent next is read
    /// as keys, not by the terminal's line discipline).
    fn wait_after(&self, marker: &str, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.screen();
            if let Some(i) = screen.rfind(marker)
                && screen[i + marker.len()..].contains(text)
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "never saw {text:?} after {marker:?}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    fn finish(mut self) -> String {
        drop(self.child.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}:\n{}", self.screen());
        self.screen()
    }
}

fn repo() -> (World, PathBuf, PathBuf) {
    let w = crate::world();
    let root = w.root.clone();
    let repo = root.join("repo");
    fs_err::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        w.git(&repo, args);
    };
    git(&["init", "-q", "-b", "main"]);
    fs_err::write(repo.join("README.md"), "hi\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "init"]);
    fs_err::write(
        root.join("turns.jsonl"),
        "{\"text\": \"first answer\"}\n{\"text\": \"second answer\"}\n",
    )
    .unwrap();
    (w, root, repo)
}

fn user_texts(session: &Path) -> Vec<String> {
    fs_err::read_to_string(session)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["message"]["role"] == "user")
        .map(|v| {
            let c = &v["message"]["content"];
            c.as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| c[0]["text"].as_str().unwrap_or("").to_owned())
        })
        .collect()
}

#[test]
fn a_pasted_multi_line_text_is_one_prompt_and_history_is_kept() {
    if script_bin().is_none() {
        eprintln!("skipped: util-linux `script` (a pseudo-terminal) is missing");
        return;
    }
    let (w, root, repo) = repo();
    let session = root.join("s.jsonl");
    let args = format!(
        "--script {} --session {}",
        root.join("turns.jsonl").display(),
        session.display()
    );
    let mut tty = Tty::start(&w, &repo, &args);
    tty.wait_for("> ", 1);
    // A bracketed paste of three lines, then Enter: one prompt.
    tty.send(b"\x1b[200~line one\nline two\nline three\x1b[201~\r");
    tty.wait_after("first answer", "> ");
    // Tab completes the command: "/qu" + Tab + Enter quits.
    tty.send(b"/qu\t\r");
    tty.finish();
    assert_eq!(
        user_texts(&session),
        vec!["line one\nline two\nline three".to_owned()]
    );
    let history_file = root.join("state/agent-history");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs_err::metadata(&history_file)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "the history is private: {mode:o}");
    }
    let history = fs_err::read_to_string(&history_file).unwrap();
    assert!(history.contains("line one"), "{history}");

    // A second session: Up recalls the pasted prompt from the history.
    let session2 = root.join("s2.jsonl");
    let args = format!(
        "--script {} --session {}",
        root.join("turns.jsonl").display(),
        session2.display()
    );
    let mut tty = Tty::start(&w, &repo, &args);
    tty.wait_for("> ", 1);
    tty.send(b"\x1b[A\x1b[A\r");
    tty.wait_after("first answer", "> ");
    tty.send(b"/quit\r");
    tty.finish();
    assert_eq!(
        user_texts(&session2),
        vec!["line one\nline two\nline three".to_owned()]
    );
}

fn write_call(path: &str, content: &str) -> String {
    use bh_test_support::mock_openai::{chunk, usage};
    let args = serde_json::json!({"path": path, "content": content}).to_string();
    [
        chunk(
            serde_json::json!({"tool_calls": [{"index": 0, "id": format!("call_{path}"), "type": "function",
                "function": {"name": "write", "arguments": args}}]}),
            None,
        ),
        chunk(serde_json::json!({}), Some("tool_calls")),
        usage(10, 5),
    ]
    .concat()
}

fn answer(text: &str) -> String {
    use bh_test_support::mock_openai::{chunk, usage};
    [
        chunk(
            serde_json::json!({"role": "assistant", "content": text}),
            None,
        ),
        chunk(serde_json::json!({}), Some("stop")),
        usage(10, 2),
    ]
    .concat()
}

#[test]
fn rewind_takes_conversation_and_files_back_to_a_prompt() {
    if script_bin().is_none() {
        eprintln!("skipped: util-linux `script` (a pseudo-terminal) is missing");
        return;
    }
    let (w, root, repo) = repo();
    let (base, seen) = bh_test_support::mock_openai::serve(vec![
        write_call("a.txt", "one\n"),
        answer("wrote a"),
        write_call("b.txt", "two\n"),
        answer("wrote b"),
        answer("fresh start"),
    ]);
    let session = root.join("s.jsonl");
    let args = format!(
        "--model openai/gpt-test --base-url {base} --session {}",
        session.display()
    );
    let mut tty = Tty::start_with(&w, &repo, &args, &[("OPENAI_API_KEY", "sk-test")]);
    tty.wait_for("> ", 1);
    tty.send(b"write a\r");
    tty.wait_after("wrote a", "> ");
    tty.send(b"write b\r");
    tty.wait_after("wrote b", "> ");
    assert_eq!(fs_err::read_to_string(repo.join("b.txt")).unwrap(), "two\n");
    let first = fs_err::read_to_string(&session)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["message"]["role"] == "user")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Asked which halves; "b" = conversation and files.
    tty.send(format!("/rewind {}\r", &first[..6]).as_bytes());
    tty.wait_for("rewind [b/c/f]? ", 1);
    tty.send(b"b\r");
    tty.wait_after("conversation rewound", "> ");
    assert!(!repo.join("a.txt").exists(), "{}", tty.screen());
    assert!(!repo.join("b.txt").exists(), "{}", tty.screen());
    assert_eq!(
        fs_err::read_to_string(repo.join("README.md")).unwrap(),
        "hi\n"
    );
    tty.send(b"again\r");
    tty.wait_after("fresh start", "> ");
    tty.send(b"/quit\r");
    let screen = tty.finish();
    assert!(screen.contains("undo: /redo"), "{screen}");
    assert!(screen.contains("undo: /tree "), "{screen}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 5);
    let last = seen[4].1["messages"].to_string();
    assert!(last.contains("again"), "{last}");
    for gone in ["write a", "write b", "wrote a", "a.txt", "b.txt"] {
        assert!(
            !last.contains(gone),
            "{gone:?} is still in the context: {last}"
        );
    }
}

#[test]
fn completing_restore_never_creates_a_checkpoint_store() {
    if script_bin().is_none() {
        eprintln!("skipped: util-linux `script` (a pseudo-terminal) is missing");
        return;
    }
    let (w, root, repo) = repo();
    let args = format!(
        "--no-checkpoints --script {} --session {}",
        root.join("turns.jsonl").display(),
        root.join("s.jsonl").display()
    );
    let mut tty = Tty::start(&w, &repo, &args);
    tty.wait_for("> ", 1);
    // Tab after "/restore ": candidates would come from the store; then
    // Ctrl-U clears the line and /quit ends.
    tty.send(b"/restore \t\t\x15/quit\r");
    tty.finish();
    let stores = root.join("state/checkpoints");
    let found: Vec<_> = fs_err::read_dir(&stores)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    assert!(found.is_empty(), "a store was created: {found:?}");
}

#[test]
fn the_first_snapshot_of_a_large_tree_shows_its_progress() {
    if script_bin().is_none() {
        eprintln!("skipped: util-linux `script` (a pseudo-terminal) is missing");
        return;
    }
    let (w, root, repo) = repo();
    for i in 0..600 {
        fs_err::write(repo.join(format!("f{i:03}.txt")), format!("file {i}\n")).unwrap();
    }
    fs_err::write(
        root.join("write.jsonl"),
        "{\"toolCalls\": [{\"name\": \"write\", \"arguments\": {\"path\": \"new.txt\", \"content\": \"x\\n\"}}]}\n{\"text\": \"wrote it\"}\n",
    )
    .unwrap();
    let args = format!(
        "--script {} --session {}",
        root.join("write.jsonl").display(),
        root.join("s.jsonl").display()
    );
    let mut tty = Tty::start(&w, &repo, &args);
    tty.wait_for("> ", 1);
    tty.send(b"write a file\r");
    tty.wait_after("wrote it", "> ");
    tty.send(b"/quit\r");
    let screen = bh_test_support::strip_sgr(&tty.finish());
    assert!(screen.contains("hashing new files: 600/600"), "{screen}");
    assert!(screen.contains("✓ writing the checkpoint"), "{screen}");
    assert_eq!(fs_err::read_to_string(repo.join("new.txt")).unwrap(), "x\n");
}

#[test]
fn the_prompt_names_the_worktree_the_session_is_in() {
    if script_bin().is_none() {
        eprintln!("skipped: util-linux `script` (a pseudo-terminal) is missing");
        return;
    }
    let (w, root, repo) = repo();
    let args = format!(
        "--no-checkpoints --script {} --session {}",
        root.join("turns.jsonl").display(),
        root.join("s.jsonl").display()
    );
    let mut tty = Tty::start(&w, &repo, &args);
    tty.wait_for("> ", 1);
    tty.send(b"/worktree create feat\r");
    tty.wait_for("[feat] > ", 1);
    tty.send(b"/worktree dispose --force\r");
    tty.wait_after("disposed worktree feat", "> ");
    tty.send(b"/quit\r");
    let screen = tty.finish();
    let after = &screen[screen.rfind("disposed worktree feat").unwrap()..];
    assert!(!after.contains("[feat]"), "{after}");
}

#[test]
fn thinking_is_set_apart_from_the_answer() {
    if script_bin().is_none() {
        eprintln!("skipped: util-linux `script` (a pseudo-terminal) is missing");
        return;
    }
    let (w, root, repo) = repo();
    fs_err::write(
        root.join("think.jsonl"),
        "{\"thinking\": \"Let me answer briefly.\", \"text\": \"Hello!\"}\n",
    )
    .unwrap();
    let args = format!(
        "--no-checkpoints --script {} --session {}",
        root.join("think.jsonl").display(),
        root.join("s.jsonl").display()
    );
    let mut tty = Tty::start(&w, &repo, &args);
    tty.wait_for("> ", 1);
    tty.send(b"hi\r");
    tty.wait_for("Hello!", 1);
    tty.wait_after("Hello!", "> ");
    tty.send(b"/quit\r");
    let screen = tty.finish();
    assert!(!screen.contains("briefly.Hello!"), "{screen}");
    // Labelled and dim (SGR 2) on a terminal, the answer on a line of its own.
    assert!(
        screen.contains(
            "\u{1b}[2mthinking: \u{1b}[m\u{1b}[2mLet me answer briefly.\u{1b}[m\r\nHello!"
        ),
        "{screen:?}"
    );
}
