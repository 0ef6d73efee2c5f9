//! Progress on long work: shown on a terminal (a pseudo-terminal from
//! util-linux `script`), never in a pipe nor with `--json`, where only the
//! normal output appears. A first snapshot of a tree of 600 files (by hand
//! and before `bh agent -p`'s first mutating call), and `exec run` (checks, worktree, model turns, tool calls, commit). Skipped,
//! saying why, where `script` is missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use bh_test_support::cli::World;

const FIXTURE: &str = "../bh-session/tests/fixtures/pi-0.73.1/s04-continue-multi-run/2026-11-30T10-09-12-513Z_01a22bee-1340-7689-b93e-a75d86f1286e.jsonl";

const SCRIPT: &str = "{\"toolCalls\": [{\"name\": \"write\", \"arguments\": {\"path\": \"hello.txt\", \"content\": \"hello\\n\"}}]}\n{\"text\": \"Done.\"}\n";

fn script_bin() -> Option<&'static str> {
    ["/usr/bin/script", "/bin/script"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

struct Env {
    w: World,
    root: PathBuf,
}

impl Env {
    fn new() -> Env {
        let w = crate::world();
        let root = w.root.clone();
        Env {
            w: w.with_home(&root).with_agent(root.join("pi")),
            root,
        }
    }

    /// `program` in the world, with a terminal that does colour.
    fn command(&self, program: &Path) -> Command {
        let mut cmd = self.w.command(program);
        cmd.env("TERM", "xterm");
        cmd
    }

    /// `bh ARGS` on a pseudo-terminal: everything it showed (stdout and
    /// stderr share the terminal).
    fn on_tty(&self, args: &[&str]) -> String {
        let line = std::iter::once(self.w.bin().display().to_string())
            .chain(args.iter().map(|a| (*a).to_owned()))
            .map(|a| format!("'{a}'"))
            .collect::<Vec<_>>()
            .join(" ");
        let mut cmd = self.command(Path::new(script_bin().unwrap()));
        cmd.arg("-qfec").arg(line).arg("/dev/null");
        let out = cmd.output().unwrap();
        let screen = bh_test_support::strip_sgr(&String::from_utf8_lossy(&out.stdout));
        assert!(out.status.success(), "{screen}");
        screen
    }

    /// `bh ARGS` with stdout and stderr pipes.
    fn piped(&self, args: &[&str]) -> (String, String) {
        let mut cmd = self.command(self.w.bin());
        cmd.args(args);
        let out = cmd.output().unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert!(out.status.success(), "{stdout}{stderr}");
        (stdout, stderr)
    }

    fn git(&self, dir: &Path, args: &[&str]) {
        self.w.git(dir, args);
    }
}

/// The progress display's marks: the spinner's line erase and the done mark.
fn has_progress(text: &str) -> bool {
    text.contains("\x1b[2K") || text.contains('✓')
}

#[test]
fn a_first_snapshot_shows_its_progress_on_a_terminal_only() {
    if script_bin().is_none() {
        eprintln!("skipped: util-linux `script` (a pseudo-terminal) is missing");
        return;
    }
    let env = Env::new();
    for project in ["a", "b", "c"] {
        let dir = env.root.join(project);
        fs_err::create_dir_all(&dir).unwrap();
        for i in 0..600 {
            fs_err::write(dir.join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
        }
    }
    let screen = env.on_tty(&["checkpoint", "snapshot", "--project", "a"]);
    assert!(screen.contains("hashing new files: 600/600"), "{screen}");
    assert!(screen.contains("✓ writing the checkpoint"), "{screen}");
    assert!(screen.contains("created checkpoint"), "{screen}");
    // A later snapshot is quick: no display.
    fs_err::write(env.root.join("a/new.txt"), "new\n").unwrap();
    let screen = env.on_tty(&["checkpoint", "snapshot", "--project", "a"]);
    assert!(!has_progress(&screen), "{screen}");
    // In a pipe, and with --json on a terminal: only the normal output.
    let (stdout, stderr) = env.piped(&["checkpoint", "snapshot", "--project", "b"]);
    assert_eq!(stderr, "");
    assert!(stdout.starts_with("created checkpoint "), "{stdout}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let screen = env.on_tty(&["--json", "checkpoint", "snapshot", "--project", "c"]);
    assert!(!has_progress(&screen), "{screen}");
    assert!(!screen.contains("hashing"), "{screen}");
}

#[test]
fn the_agents_first_snapshot_shows_its_progress_on_a_terminal_only() {
    if script_bin().is_none() {
        eprintln!("skipped: util-linux `script` (a pseudo-terminal) is missing");
        return;
    }
    let env = Env::new();
    for project in ["a", "b", "c"] {
        let dir = env.root.join(project);
        fs_err::create_dir_all(&dir).unwrap();
        for i in 0..600 {
            fs_err::write(dir.join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
        }
    }
    fs_err::write(env.root.join("turns.jsonl"), SCRIPT).unwrap();
    let model = format!("scripted/{}", env.root.join("turns.jsonl").display());
    let agent = |project: &'static str| {
        ["-C", project, "agent", "--model", "MODEL", "-p", "go"].map(|a| {
            if a == "MODEL" {
                model.clone()
            } else {
                a.to_owned()
            }
        })
    };
    let args = agent("a");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let screen = env.on_tty(&args);
    assert!(screen.contains("hashing new files: 600/600"), "{screen}");
    assert!(screen.contains("✓ writing the checkpoint"), "{screen}");
    assert!(screen.contains("Done."), "{screen}");
    assert_eq!(
        fs_err::read_to_string(env.root.join("a/hello.txt")).unwrap(),
        "hello\n"
    );
    // The project now has a checkpoint: the next run shows no display.
    let screen = env.on_tty(&args);
    assert!(!has_progress(&screen), "{screen}");
    // In a pipe, and with --json on a terminal: no display.
    let args = agent("b");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (stdout, stderr) = env.piped(&args);
    assert!(
        !has_progress(&stderr) && !stderr.contains("hashing"),
        "{stderr}"
    );
    assert_eq!(stdout.trim(), "Done.");
    let mut args = agent("c").to_vec();
    args.insert(0, "--json".to_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let screen = env.on_tty(&args);
    assert!(
        !has_progress(&screen) && !screen.contains("hashing"),
        "{screen}"
    );
}

#[test]
fn exec_run_shows_its_phases_and_tool_calls_on_a_terminal_only() {
    if script_bin().is_none() {
        eprintln!("skipped: util-linux `script` (a pseudo-terminal) is missing");
        return;
    }
    let env = Env::new();
    let repo = env.root.join("repo");
    fs_err::create_dir_all(&repo).unwrap();
    env.git(&repo, &["init", "-q", "-b", "main"]);
    fs_err::write(repo.join("a.txt"), "a\n").unwrap();
    env.git(&repo, &["add", "-A"]);
    env.git(&repo, &["commit", "-q", "-m", "base"]);
    fs_err::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE),
        env.root.join("s.jsonl"),
    )
    .unwrap();
    fs_err::write(env.root.join("turns.jsonl"), SCRIPT).unwrap();
    let model = format!("scripted/{}", env.root.join("turns.jsonl").display());
    let plan = |prompt: &str, out: &str| {
        env.piped(&[
            "exec",
            "plan",
            "--repo",
            "repo",
            "--base",
            "main",
            "--session",
            "s.jsonl",
            "--entry",
            "188efa0e",
            "--prompt",
            prompt,
            "--model",
            &model,
            "--out",
            out,
        ]);
    };
    plan("Add a greeting file", "p1.json");
    let screen = env.on_tty(&["exec", "run", "--plan", "p1.json", "--yes"]);
    for phase in [
        "✓ checking the plan",
        "✓ opening the base",
        "✓ model turn 1",
        "write hello.txt",
        "✓ model turn 2",
        "✓ recording the result",
    ] {
        assert!(screen.contains(phase), "{phase:?} missing:\n{screen}");
    }
    assert!(screen.contains(": committed"), "{screen}");
    // In a pipe: the result lines only.
    plan("Add another greeting file", "p2.json");
    let (stdout, stderr) = env.piped(&["exec", "run", "--plan", "p2.json", "--yes"]);
    assert!(
        !has_progress(&stderr) && !stderr.contains("model turn"),
        "{stderr}"
    );
    assert!(
        !has_progress(&stdout) && !stdout.contains("model turn"),
        "{stdout}"
    );
    assert!(stdout.contains(": committed"), "{stdout}");
}
