//! `bh session export --html`: one self-contained file that a real headless
//! browser (Chromium through playwright-core) renders, whose tree and side
//! branches expand, and that fetches nothing — even when the session's text
//! is markup that would fetch or run something.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn scenario(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../bh-session/tests/fixtures/pi-0.73.1")
        .join(name);
    let mut files: Vec<PathBuf> = fs_err::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files.remove(0)
}

fn export(state: &Path, session: &Path, out: &Path) {
    let o = Command::cargo_bin("bh")
        .unwrap()
        .arg("--state-dir")
        .arg(state)
        .args(["session", "export", "--html"])
        .arg(session)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    use std::os::unix::fs::PermissionsExt;
    let mode = fs_err::metadata(out).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode, 0o600,
        "a report is as private as the session it shows"
    );
}

/// A session whose text tries to fetch and to run script.
fn hostile_session(dir: &Path) -> PathBuf {
    let f = dir.join("hostile.jsonl");
    let lines = [
        r#"{"type":"session","version":3,"id":"h1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp/x"}"#,
        r#"{"type":"message","id":"aaaa0001","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"<img src=\"http://127.0.0.1:9/pixel.png\"><script>fetch('http://127.0.0.1:9/x')</script>","timestamp":1}}"#,
        r#"{"type":"message","id":"aaaa0002","parentId":"aaaa0001","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"edit","arguments":{"path":"a.html","edits":[{"oldText":"<link rel=stylesheet href=http://127.0.0.1:9/s.css>","newText":"<iframe src=http://127.0.0.1:9/></iframe>"}]}}],"model":"m","stopReason":"toolUse","timestamp":1}}"#,
        r#"{"type":"message","id":"aaaa0003","parentId":"aaaa0002","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":[{"type":"image","mimeType":"image/png\" onerror=\"fetch('http://127.0.0.1:9/')","data":"AAAA"}],"timestamp":1}}"#,
    ];
    fs_err::write(&f, lines.join("\n") + "\n").unwrap();
    f
}

const SCRIPT: &str = r#"
import { chromium } from 'playwright-core';
const [, , file, shot] = process.argv;
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
const page = await browser.newPage();
const requests = [];
page.on('request', r => requests.push(r.url()));
const errors = [];
page.on('pageerror', e => errors.push(String(e)));
page.on('console', m => { if (m.type() === 'error') errors.push(m.text()); });
await page.goto('file://' + file);
const out = { title: await page.title(), h1: await page.textContent('h1'),
  rows: await page.locator('#tree > ol.graph > li').count(),
  sections: await page.locator('section.entry').count() };
async function expand(sel) {
  const d = page.locator(sel).first();
  if (await d.count() === 0) return null;
  const inner = d.locator(':scope > :not(summary)').first();
  const before = await inner.isVisible();
  await d.locator(':scope > summary').click();
  return [before, await inner.isVisible()];
}
out.fold = await expand('details.fold');
out.branch = await expand('details.branch');
await page.screenshot({ path: shot, fullPage: true });
out.requests = requests;
out.errors = errors;
await browser.close();
console.log(JSON.stringify(out));
"#;

fn render(file: &Path) -> Option<Value> {
    let browser = bh_test_support::browser::browser()?;
    let shot = file.with_extension("png");
    let out = browser.run_script(SCRIPT, &[file.to_str().unwrap(), shot.to_str().unwrap()]);
    assert!(shot.is_file());
    Some(serde_json::from_str(out.trim()).unwrap())
}

#[test]
fn the_report_renders_expands_and_fetches_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs_err::canonicalize(tmp.path()).unwrap();
    let state = root.join("state");

    // The report is one file: no reference to anything outside it.
    let branched = root.join("s07.html");
    export(&state, &scenario("s07-extension-entries"), &branched);
    let tools = root.join("s02.html");
    export(&state, &scenario("s02-tools-json-mode"), &tools);
    let hostile = root.join("hostile.html");
    export(&state, &hostile_session(&root), &hostile);
    let text = fs_err::read_to_string(&hostile).unwrap();
    assert!(
        !text.contains("<script>fetch"),
        "markup from the session is escaped"
    );
    assert!(
        !text.contains("<img src=\"http"),
        "markup from the session is escaped"
    );
    assert!(text.contains("&lt;script&gt;fetch("));

    let Some(v) = render(&branched) else { return };
    assert!(v["errors"].as_array().unwrap().is_empty(), "{v}");
    assert_eq!(
        v["requests"].as_array().unwrap().len(),
        1,
        "only the file itself: {v}"
    );
    // 21 entries, one a tool result drawn inside its call's card.
    assert_eq!(v["sections"], 20, "{v}");
    assert!(
        v["h1"]
            .as_str()
            .unwrap()
            .contains("Corpus extension session"),
        "{v}"
    );
    // The side branch is closed, and opens.
    assert_eq!(v["branch"], serde_json::json!([false, true]), "{v}");

    let v = render(&tools).unwrap();
    assert_eq!(v["fold"], serde_json::json!([false, true]), "{v}");
    assert_eq!(v["requests"].as_array().unwrap().len(), 1, "{v}");

    let v = render(&hostile).unwrap();
    assert_eq!(
        v["requests"].as_array().unwrap().len(),
        1,
        "the session's markup fetched something: {v}"
    );
    assert!(v["errors"].as_array().unwrap().is_empty(), "{v}");
}

#[test]
fn export_refuses_to_overwrite_and_to_write_into_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let out = tmp.path().join("r.html");
    fs_err::write(&out, "mine").unwrap();
    let bh = || {
        let mut c = Command::cargo_bin("bh").unwrap();
        c.arg("--state-dir").arg(&state);
        c
    };
    let o = bh()
        .args(["session", "export"])
        .arg(scenario("s01-plain-text"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("r.html"));
    assert_eq!(fs_err::read_to_string(&out).unwrap(), "mine");
    let o = bh()
        .args(["session", "export"])
        .arg(scenario("s01-plain-text"))
        .arg("--out")
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = bh()
        .args(["session", "export"])
        .arg(scenario("s01-plain-text"))
        .arg("--out")
        .arg(&out)
        .arg("--force")
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(
        fs_err::read_to_string(&out)
            .unwrap()
            .starts_with("<!doctype html>")
    );
}
