//! `--color=auto|always|never` (global, before or after the subcommand) and
//! `NO_COLOR`: colour on a terminal (a pseudo-terminal from util-linux
//! `script`) by default, never in a pipe, never with `--json`. Tried on
//! `bh session tree` (ids, roles, the leaf), a checkpoint diff and an error.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use assert_cmd::prelude::*;

const FIXTURE: &str = "../bh-session/tests/fixtures/pi-0.73.1/s04-continue-multi-run/2026-11-30T10-09-12-513Z_01a22bee-1340-7689-b93e-a75d86f1286e.jsonl";

const ESC: &str = "\u{1b}[";

fn script_bin() -> Option<&'static str> {
    ["/usr/bin/script", "/bin/script"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

struct Env {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Env {
    fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let root = fs_err::canonicalize(tmp.path()).unwrap();
        Env { _tmp: tmp, root }
    }

    fn envs(&self, cmd: &mut Command, extra: &[(&str, &str)]) {
        cmd.current_dir(&self.root)
            .env("HOME", &self.root)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("BH_STATE_DIR", self.root.join("state"))
            .env("TERM", "xterm")
            .env_remove("NO_COLOR")
            .env_remove("XDG_STATE_HOME")
            .stdin(Stdio::null());
        for (k, v) in extra {
            cmd.env(k, v);
        }
    }

    /// `bh ARGS` on a pseudo-terminal: what it showed, and whether it succeeded.
    fn on_tty(&self, args: &[&str], extra: &[(&str, &str)]) -> (String, bool) {
        let bh = assert_cmd::cargo::cargo_bin("bh");
        let line = std::iter::once(bh.display().to_string())
            .chain(args.iter().map(|a| (*a).to_owned()))
            .map(|a| format!("'{a}'"))
            .collect::<Vec<_>>()
            .join(" ");
        let mut cmd = Command::new(script_bin().unwrap());
        cmd.arg("-qfec").arg(line).arg("/dev/null");
        self.envs(&mut cmd, extra);
        let out = cmd.output().unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            out.status.success(),
        )
    }

    /// `bh ARGS` with pipes: stdout, stderr.
    fn piped(&self, args: &[&str]) -> (String, String) {
        let mut cmd = Command::cargo_bin("bh").unwrap();
        cmd.args(args);
        self.envs(&mut cmd, &[]);
        let out = cmd.output().unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

fn fixture() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(FIXTURE)
        .display()
        .to_string()
}

#[test]
fn the_session_tree_is_coloured_on_a_terminal_unless_told_not_to() {
    if script_bin().is_none() {
        eprintln!("skipped: util-linux `script` (a pseudo-terminal) is missing");
        return;
    }
    let env = Env::new();
    let file = fixture();
    // Wide enough that no line is cut (the pipe's lines never are).
    let (screen, ok) = env.on_tty(&["session", "tree", &file], &[("COLUMNS", "1000")]);
    assert!(ok, "{screen}");
    // Ids yellow, the user's words bold, the leaf bold green.
    assert!(screen.contains(&format!("{ESC}33m")), "{screen:?}");
    assert!(screen.contains(&format!("{ESC}1m")), "{screen:?}");
    assert!(
        screen.contains(&format!("{ESC}1;32m  ← leaf{ESC}m")),
        "{screen:?}"
    );
    // The words are those of the uncoloured tree.
    let (piped, _) = env.piped(&["session", "tree", &file]);
    assert!(!piped.contains(ESC), "{piped:?}");
    assert_eq!(
        bh_test_support::strip_sgr(&screen).replace("\r\n", "\n"),
        piped
    );
    // Cut to a narrow terminal, the leaf marker stays whole.
    let (narrow, _) = env.on_tty(&["session", "tree", &file], &[("COLUMNS", "40")]);
    let narrow = bh_test_support::strip_sgr(&narrow);
    let leaf_row = narrow.lines().find(|l| l.contains("← leaf")).unwrap();
    assert!(leaf_row.ends_with("…  ← leaf"), "{narrow}");
    assert_eq!(leaf_row.chars().count(), 40, "{leaf_row:?}");

    for (args, extra) in [
        (vec!["--color=never", "session", "tree", &file], vec![]),
        (vec!["session", "tree", &file, "--color", "never"], vec![]),
        (vec!["session", "tree", &file], vec![("NO_COLOR", "1")]),
        (vec!["session", "tree", &file], vec![("TERM", "dumb")]),
    ] {
        let (screen, ok) = env.on_tty(&args, &extra);
        assert!(ok, "{screen}");
        assert!(!screen.contains(ESC), "{args:?} {extra:?}: {screen:?}");
    }

    // `always` colours a pipe too; --json never.
    let (forced, _) = env.piped(&["session", "tree", &file, "--color=always"]);
    assert!(forced.contains(&format!("{ESC}33m")), "{forced:?}");
    let (json, _) = env.piped(&["--color=always", "--json", "session", "tree", &file]);
    assert!(!json.contains('\u{1b}'), "{json}");
    serde_json::from_str::<serde_json::Value>(&json).unwrap();
}

#[test]
fn errors_are_marked_red_on_a_terminal_only() {
    if script_bin().is_none() {
        eprintln!("skipped: util-linux `script` (a pseudo-terminal) is missing");
        return;
    }
    let env = Env::new();
    let missing = env.root.join("missing.jsonl");
    let missing = missing.to_str().unwrap();
    let (screen, ok) = env.on_tty(&["session", "tree", missing], &[]);
    assert!(!ok);
    assert!(
        screen.contains(&format!("{ESC}1;31mbh: error:{ESC}m ")),
        "{screen:?}"
    );
    let (_, stderr) = env.piped(&["session", "tree", missing]);
    assert!(stderr.starts_with("bh: error: "), "{stderr:?}");
}

#[test]
fn a_bad_color_value_is_a_usage_error_naming_the_choices() {
    let env = Env::new();
    let mut cmd = Command::cargo_bin("bh").unwrap();
    cmd.args(["--color=sometimes", "session", "ls"]);
    env.envs(&mut cmd, &[]);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("sometimes") && stderr.contains("always"),
        "{stderr}"
    );
}
