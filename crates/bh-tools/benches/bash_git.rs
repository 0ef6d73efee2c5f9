//! The cost of commits from the sandbox: one `bash` tool call in a
//! repository with N branches, sandboxed with the git dir read-only (before)
//! and with the git dir overlaid and brokered (now), for a command that
//! leaves `.git` alone and for one `git commit`; beside them, the same
//! `git commit` run bare (the raw git baseline). Medians of R runs.
//!
//! `cargo bench -p bh-tools --bench bash_git -- --runs 30 --branches 1000`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use bh_tools::{BashSandbox, Profile, Toolbox, ToolboxOptions};
use serde_json::json;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .args(["-c", "user.name=b", "-c", "user.email=b@x"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(st.status.success(), "git {args:?}: {st:?}");
}

const COMMIT: &str = "echo x >> a.txt && git -c user.name=b -c user.email=b@x commit -qam step";

fn main() {
    let runs = arg("--runs", 30);
    let branches = arg("--branches", 1000);
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let repo = tmp.path().join("repo");
    fs_err::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    fs_err::write(repo.join("a.txt"), "a\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "one"]);
    let refs: String = (0..branches)
        .map(|i| format!("create refs/heads/b{i} HEAD\n"))
        .collect();
    let mut c = Command::new("git")
        .args(["update-ref", "--stdin"])
        .current_dir(&repo)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(c.stdin.as_mut().unwrap(), refs.as_bytes()).unwrap();
    drop(c.stdin.take());
    assert!(c.wait().unwrap().success());
    let toolbox = |overlay: bool| {
        let mut o = ToolboxOptions::new(&repo, Profile::Interactive, tmp.path().join("out"));
        o.sandbox = BashSandbox {
            git_overlays: overlay.then(|| tmp.path().join("state/bash-git")),
            ..BashSandbox::default()
        };
        Toolbox::new(o).unwrap()
    };
    let (ro, ov) = (toolbox(false), toolbox(true));
    let call = |tb: &Toolbox, command: &str| {
        let t = Instant::now();
        let r = tb.call("bash", &json!({ "command": command }));
        let ms = t.elapsed().as_secs_f64() * 1e3;
        (ms, r)
    };
    let (mut bare, mut ro_true, mut ov_true, mut ov_commit) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        let st = Command::new("bash")
            .args(["-c", COMMIT])
            .current_dir(&repo)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap();
        assert!(st.success());
        bare.push(t.elapsed().as_secs_f64() * 1e3);
        ro_true.push(call(&ro, "true").0);
        ov_true.push(call(&ov, "true").0);
        let (ms, r) = call(&ov, COMMIT);
        assert!(
            r.text_content().contains("[git: refs/heads/main"),
            "{}",
            r.text_content()
        );
        ov_commit.push(ms);
    }
    let (b, rt, ot, oc) = (
        median(bare),
        median(ro_true),
        median(ov_true),
        median(ov_commit),
    );
    println!("{branches} branches, {runs} runs, medians");
    println!("| operation | median |\n|---|---:|");
    println!("| `git commit -qam` bare (raw git baseline) | {b:.2} ms |");
    println!("| bash `true`, git dir read-only (before) | {rt:.2} ms |");
    println!(
        "| bash `true`, git dir overlaid + broker | {ot:.2} ms (+{:.2} ms) |",
        ot - rt
    );
    println!(
        "| bash `git commit -qam`, overlaid + broker | {oc:.2} ms (+{:.2} ms over bare git) |",
        oc - b
    );
}
