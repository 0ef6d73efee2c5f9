//! The command line as a whole: `--version` names the commit, shell
//! completions and a manual page come from the same definition as the
//! parser, and a reader that goes away (`bh … | head`) ends a command
//! quietly (exit 141, nothing on stderr, nothing kept deleted).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

use bh_test_support::cli::World;

/// `bh` in `w` (its state dir inside the world).
fn bh(w: &World) -> Command {
    w.bh(&w.root)
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let w = crate::world();
    let out = bh(&w).arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(&format!("bh {} (", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    // In a checkout, the commit is HEAD's (read from .git by the build script).
    let head = bh_test_support::git_command()
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).unwrap());
    match head {
        Some(sha) => assert!(text.contains(&sha[..12]), "{text} vs {sha}"),
        None => assert!(text.contains("unknown commit"), "{text}"),
    }
}

#[test]
fn completions_and_the_manual_page_cover_every_command() {
    let w = crate::world();
    for shell in ["bash", "zsh", "fish"] {
        let out = bh(&w).args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8(out.stdout).unwrap();
        for cmd in ["checkpoint", "session", "worktree", "exec", "agent"] {
            assert!(text.contains(cmd), "{shell} completion lacks {cmd}");
        }
    }
    let out = bh(&w).args(["completions", "tcsh-nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = bh(&w).arg("man").output().unwrap();
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains(".TH bh"), "{}", &page[..page.len().min(300)]);
    assert!(page.contains("worktree"));
}

/// Every `bh-…(1)` a page lists is a page `bh man …` prints, each with its
/// exit codes as an EXIT STATUS section (the executor's codes on exec's pages).
#[test]
fn man_prints_every_page_it_lists() {
    let w = crate::world();
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        let out = bh(&w).arg("man").args(&path).output().unwrap();
        assert!(out.status.success(), "bh man {path:?}: {out:?}");
        let page = String::from_utf8(out.stdout).unwrap();
        let name = if path.is_empty() {
            "bh".to_owned()
        } else {
            format!("bh-{}", path.join("-"))
        };
        assert!(page.contains(&format!(".TH {name} 1")), "{name}: {page}");
        assert!(page.contains(".SH \"EXIT STATUS\""), "{name}");
        assert!(!page.contains(".SH EXTRA"), "{name}");
        assert_eq!(
            page.contains("the output ref already exists"),
            path.first().is_some_and(|p| p == "exec"),
            "{name}"
        );
        let prefix = format!("{}\\-", name.replace('-', "\\-"));
        for line in page.lines() {
            if let Some(sub) = line
                .strip_prefix(&prefix)
                .and_then(|r| r.strip_suffix("(1)"))
            {
                let mut next = path.clone();
                next.push(sub.replace("\\-", "-"));
                todo.push(next);
            }
        }
        seen += 1;
    }
    assert!(seen > 20, "only {seen} pages");
    // The synopsis shows the command as typed, a name's own `-` kept.
    let out = bh(&w)
        .args(["man", "checkpoint", "hook", "claude-code"])
        .output()
        .unwrap();
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(
        page.contains("\\fBbh checkpoint hook claude\\-code\\fR"),
        "{page}"
    );
    let out = bh(&w).args(["man", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bh-checkpoint(1)"));
}

/// A session whose tree is far larger than a pipe's buffer.
fn big_session(dir: &Path) -> std::path::PathBuf {
    let f = dir.join("big.jsonl");
    let mut text = String::from(
        "{\"type\":\"session\",\"version\":3,\"id\":\"big\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/tmp/x\"}\n",
    );
    let mut parent = "null".to_owned();
    for i in 0..4000 {
        let id = format!("{i:08x}");
        text.push_str(&format!(
            "{{\"type\":\"message\",\"id\":\"{id}\",\"parentId\":{parent},\"timestamp\":\"t\",\"message\":{{\"role\":\"user\",\"content\":\"a prompt long enough to fill the pipe quickly, number {i}\",\"timestamp\":1}}}}\n"
        ));
        parent = format!("\"{id}\"");
    }
    fs_err::write(&f, text).unwrap();
    f
}

#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    let w = crate::world();
    let dir = tempfile::tempdir().unwrap();
    let f = big_session(dir.path());
    for args in [
        &["session", "tree", "--full"][..],
        &["--json", "session", "tree"],
        &["session", "export", "--html"],
        // Line by line through `ui::outln!` (a panic before issue 26).
        &["session", "context"],
        &["--json", "session", "context"],
    ] {
        let mut child = bh(&w)
            .args(args)
            .arg(&f)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read one byte, then close the pipe while bh still has much to write.
        let mut stdout = child.stdout.take().unwrap();
        let mut one = [0u8; 1];
        stdout.read_exact(&mut one).unwrap();
        drop(stdout);
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(141), "{args:?}: {out:?}");
        assert!(
            out.stderr.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn generated_texts_end_quietly_when_the_reader_is_gone() {
    let w = crate::world();
    // The reader is gone before bh writes a byte (`bh completions bash | true`).
    for args in [
        &["completions", "bash"][..],
        &["completions", "zsh"],
        &["man"],
        &["--help"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = bh(&w)
            .args(args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert!(
            out.stderr.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(141), "{args:?}: {out:?}");
    }
}

#[test]
fn demo_keep_keeps_its_folder_when_the_reader_goes_away() {
    let w = crate::world();
    let mut child = bh(&w)
        .args(["demo", "--keep"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = Vec::new();
    // The first line names the project inside the kept folder.
    let mut byte = [0u8; 1];
    while stdout.read_exact(&mut byte).is_ok() && byte[0] != b'\n' {
        first.push(byte[0]);
    }
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let line = String::from_utf8(first).unwrap();
    let project = line
        .strip_prefix("project: ")
        .and_then(|r| r.split(" (").next())
        .unwrap_or_else(|| panic!("first line: {line}"));
    assert!(Path::new(project).is_dir(), "{project} was deleted");
    assert!(out.stderr.is_empty() || out.status.success(), "{out:?}");
    let _ = fs_err::remove_dir_all(Path::new(project).parent().unwrap());
}
