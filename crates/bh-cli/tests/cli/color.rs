//! `--color=auto|always|never` (global, before or after the subcommand) and
//! `NO_COLOR`: colour on a terminal (a pseudo-terminal from util-linux
//! `script`) by default, never in a pipe, never with `--json`. Tried on
//! `bh session tree` (ids, roles, the leaf), a checkpoint diff and an error.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use bh_test_support::cli::World;

const FIXTURE: &str = "../bh-session/tests/fixtures/pi-0.73.1/s04-continue-multi-run/2026-11-30T10-09-12-513Z_01a22bee-1340-7689-b93e-a75d86f1286e.jsonl";

const ESC: &str = "\u{1b}[";

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
            w: w.with_home(&root),
            root,
        }
    }

    /// `program` in the world, with a terminal that does colour and `extra`.
    fn command(&self, program: &Path, extra: &[(&str, &str)]) -> Command {
        let mut cmd = self.w.command(program);
        cmd.env("TERM", "xterm");
        for (k, v) in extra {
            cmd.env(k, v);
        }
        cmd
    }

    /// `bh ARGS` on a pseudo-terminal: what it showed, and whether it succeeded.
    fn on_tty(&self, args: &[&str], extra: &[(&str, &str)]) -> (String, bool) {
        let line = std::iter::once(self.w.bin().display().to_string())
            .chain(args.iter().map(|a| (*a).to_owned()))
            .map(|a| format!("'{a}'"))
            .collect::<Vec<_>>()
            .join(" ");
        let mut cmd = self.command(Path::new(script_bin().unwrap()), extra);
        cmd.arg("-qfec").arg(line).arg("/dev/null");
        let out = cmd.output().unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            out.status.success(),
        )
    }

    /// `bh ARGS` with pipes: stdout, stderr.
    fn piped(&self, args: &[&str]) -> (String, String) {
        let mut cmd = self.command(self.w.bin(), &[]);
        cmd.args(args);
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
    let mut cmd = env.command(env.w.bin(), &[]);
    cmd.args(["--color=sometimes", "session", "ls"]);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("sometimes") && stderr.contains("always"),
        "{stderr}"
    );
}
