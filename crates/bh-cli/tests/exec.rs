//! `bh exec plan/verify` and `harness-session-executor` through the CLI.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::Path;
use std::process::Command;

use assert_cmd::prelude::*;
use serde_json::Value;

const FIXTURE: &str = "../bh-session/tests/fixtures/pi-0.73.1/s04-continue-multi-run/2026-11-30T10-09-12-513Z_01a22bee-1340-7689-b93e-a75d86f1286e.jsonl";

#[test]
fn plan_then_verify_and_tamper() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let repo = root.join("repo");
    fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(&repo)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &root)
            .env("GIT_AUTHOR_NAME", "U")
            .env("GIT_AUTHOR_EMAIL", "u@example.invalid")
            .env("GIT_COMMITTER_NAME", "U")
            .env("GIT_COMMITTER_EMAIL", "u@example.invalid")
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    git(&["init", "-q", "-b", "main"]);
    fs::write(repo.join("a.txt"), "a\n").unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "base"]);
    let session = root.join("s.jsonl");
    fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE),
        &session,
    )
    .unwrap();
    let refs_before = git(&["for-each-ref"]);
    let plan = root.join("plan.json");
    let out = Command::cargo_bin("bh")
        .unwrap()
        .current_dir(&root)
        .args([
            "--json",
            "exec",
            "plan",
            "--repo",
            "repo",
            "--base",
            "main",
            "--session",
            "s.jsonl",
        ])
        .args([
            "--entry",
            "188efa0e",
            "--prompt",
            "go on",
            "--model",
            "scripted/demo",
            "--out",
            "plan.json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["plan"]["base"]["commit"],
        git(&["rev-parse", "main"]).as_str()
    );
    assert_eq!(git(&["for-each-ref"]), refs_before);
    // refuses to overwrite
    let again = Command::cargo_bin("bh")
        .unwrap()
        .current_dir(&root)
        .args([
            "exec",
            "plan",
            "--repo",
            "repo",
            "--base",
            "main",
            "--session",
            "s.jsonl",
        ])
        .args([
            "--entry",
            "188efa0e",
            "--prompt",
            "go on",
            "--out",
            "plan.json",
        ])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(3));
    // the executor's own name runs the same program
    let verify = |name: &str| {
        let bin = assert_cmd::cargo::cargo_bin(name);
        Command::new(bin)
            .current_dir(&root)
            .args(if name == "bh" { vec!["exec"] } else { vec![] })
            .args(["--json", "verify", "--plan"])
            .arg(&plan)
            .output()
            .unwrap()
    };
    assert!(verify("harness-session-executor").status.success());
    assert!(verify("bh").status.success());
    let text = fs::read_to_string(&plan).unwrap();
    fs::write(&plan, text.replace("go on", "go wild")).unwrap();
    let out = verify("harness-session-executor");
    assert_eq!(out.status.code(), Some(20));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("digest mismatch")
    );
}
