//! `bh session export --html` of a Pi session, rendered by headless Chromium
//! (playwright-core): a 3,000-line output in a scroll box, one diff per edit,
//! internal entries folded away, a checkpoint badge on each call bh tagged
//! (the project's store, found from the session's `cwd`), and session text
//! that tries markup, `</style>`, `javascript:` and terminal escapes staying
//! inert. Screenshots (light and dark) are left next to the report.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use assert_cmd::Command;
use bh_test_support::cli::World;
use serde_json::{Value, json};

const SID: &str = "0199aaaa-1111-7000-8000-00000000beef";

/// Asks a checkpoint server (as Pi's extension does) for a snapshot before
/// the `tool` call of `entry`; returns the checkpoint's short id.
fn snapshot(w: &World, project: &Path, tool: &str, entry: &str) -> String {
    let mut child = w
        .bh(&w.root)
        .args(["checkpoint", "serve", "--project"])
        .arg(project)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let req = json!({"op": "snapshot", "id": 1, "tool": tool, "session": SID, "entry": entry});
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{req}").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    first["ok"]["snapshot"]["checkpoint"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{text}"))
        .to_owned()
}

fn entry(id: &str, parent: Option<&str>, rest: Value) -> Value {
    let mut v = json!({"id": id, "parentId": parent, "timestamp": "2026-12-01T10:00:00.000Z"});
    for (k, x) in rest.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

fn assistant(content: Value) -> Value {
    json!({"type": "message", "message": {"role": "assistant", "content": content,
        "api": "openai-completions", "provider": "fake", "model": "fake-model",
        "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "toolUse", "timestamp": 1}})
}

fn result(call: &str, tool: &str, text: &str, details: Value) -> Value {
    json!({"type": "message", "message": {"role": "toolResult", "toolCallId": call,
        "toolName": tool, "content": [{"type": "text", "text": text}], "details": details,
        "isError": false, "timestamp": 1}})
}

const HOSTILE: &str = "<script>document.title='pwned';window.pwned=1</script></style>\
<style>body{display:none}</style><a href=\"javascript:window.pwned=2\">click</a> \
[md](javascript:window.pwned=3) \u{1b}]0;pwned\u{7} \u{1b}]8;;javascript:window.pwned=4\u{1b}\\link\u{1b}]8;;\u{1b}\\ \
<img src=x onerror=\"window.pwned=5\">";

/// A Pi-shaped session (header v3, as Pi 1.6 writes) in `project`.
fn session(dir: &Path, project: &Path) -> PathBuf {
    let seq: String = (1..=3000).map(|i| format!("{i}\n")).collect();
    let entries = [
        json!({"type": "session", "version": 3, "id": SID, "timestamp": "2026-12-01T10:00:00.000Z",
               "cwd": project.to_str().unwrap()}),
        entry(
            "e0000001",
            None,
            json!({"type": "model_change", "provider": "fake", "modelId": "fake-model"}),
        ),
        entry(
            "e0000002",
            Some("e0000001"),
            json!({"type": "thinking_level_change", "thinkingLevel": "medium"}),
        ),
        entry(
            "e0000003",
            Some("e0000002"),
            json!({"type": "message", "message": {"role": "user",
            "content": [{"type": "text", "text": format!("Count, edit and write. {HOSTILE}")}], "timestamp": 1}}),
        ),
        entry(
            "a0000001",
            Some("e0000003"),
            assistant(json!([
            {"type": "thinking", "thinking": "Counting first."},
            {"type": "toolCall", "id": "call_bash", "name": "bash", "arguments": {"command": "seq 1 3000"}}])),
        ),
        entry(
            "r0000001",
            Some("a0000001"),
            result("call_bash", "bash", &seq, json!({})),
        ),
        entry(
            "a0000002",
            Some("r0000001"),
            assistant(json!([
            {"type": "toolCall", "id": "call_edit", "name": "edit", "arguments": {"path": "a.txt",
             "edits": [{"oldText": "hello\n", "newText": "hello world\n"}]}}])),
        ),
        entry(
            "r0000002",
            Some("a0000002"),
            result(
                "call_edit",
                "edit",
                "Successfully replaced 1 block(s) in a.txt.",
                json!({"diff": "-1 hello\n+1 hello world", "firstChangedLine": 1}),
            ),
        ),
        entry(
            "c0000001",
            Some("r0000002"),
            json!({"type": "custom", "customType": "better-harness.set-leaf",
            "data": {"leaf": "r0000002"}}),
        ),
        entry(
            "e0000004",
            Some("c0000001"),
            json!({"type": "model_change", "provider": "fake", "modelId": "fake-model-2"}),
        ),
        entry(
            "m0000001",
            Some("e0000004"),
            json!({"type": "custom_message", "customType": "note",
            "content": "", "display": true}),
        ),
        entry(
            "a0000003",
            Some("m0000001"),
            assistant(json!([
            {"type": "toolCall", "id": "call_write", "name": "write", "arguments": {"path": "b.txt",
             "content": "new file\n"}}])),
        ),
        entry(
            "r0000003",
            Some("a0000003"),
            result("call_write", "write", "Wrote 9 bytes to b.txt", json!({})),
        ),
        entry(
            "a0000004",
            Some("r0000003"),
            json!({"type": "message", "message": {"role": "assistant",
            "content": [{"type": "text", "text": "Done."}], "model": "fake-model-2", "stopReason": "stop",
            "timestamp": 1}}),
        ),
    ];
    let f = dir.join("2026-12-01T10-00-00-000Z_pi.jsonl");
    let text: String = entries.iter().map(|e| format!("{e}\n")).collect();
    fs_err::write(&f, text).unwrap();
    f
}

const SCRIPT: &str = r#"
import { chromium } from 'playwright-core';
const [, , file, light, dark] = process.argv;
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
const requests = [];
page.on('request', r => requests.push(r.url()));
const errors = [];
page.on('pageerror', e => errors.push(String(e)));
page.on('console', m => { if (m.type() === 'error') errors.push(m.text()); });
await page.goto('file://' + file);
const out = await page.evaluate(() => {
  const long = [...document.querySelectorAll('pre')].find(p => p.textContent.includes('\n2999\n'));
  const cs = long && getComputedStyle(long);
  const tool = name => document.querySelector(`div.tool[data-tool="${name}"]`);
  const badges = name => [...(tool(name)?.querySelectorAll('.head .badge.cp') ?? [])].map(b => b.textContent);
  const internal = [...document.querySelectorAll('details.internal')];
  const setLeaf = document.getElementById('e-c0000001');
  return {
    title: document.title, pwned: window.pwned ?? null,
    scripts: document.querySelectorAll('script').length,
    styles: document.querySelectorAll('style').length,
    jsLinks: document.querySelectorAll('a[href^="javascript"], [onerror]').length,
    bodyVisible: getComputedStyle(document.body).display !== 'none',
    long: long ? { cls: long.className, overflowY: cs.overflowY, maxHeight: cs.maxHeight,
      client: long.clientHeight, scroll: long.scrollHeight, visible: long.checkVisibility(),
      inTool: !!long.closest('div.tool[data-tool="bash"]'),
      foldable: long.parentElement.matches('details.output[open]') } : null,
    editDiffs: tool('edit')?.querySelectorAll('pre.diff').length ?? -1,
    editDiffText: tool('edit')?.querySelector('pre.diff')?.textContent ?? null,
    resultSections: document.querySelectorAll('section.role-toolResult').length,
    badges: { bash: badges('bash'), edit: badges('edit'), write: badges('write') },
    internal: internal.map(d => ({ open: d.open, summary: d.querySelector('summary').textContent })),
    setLeafInside: !!setLeaf?.closest('details.internal'),
    setLeafVisible: setLeaf ? setLeaf.checkVisibility() : null,
    emptyCardInside: !!document.getElementById('e-m0000001')?.closest('details.internal'),
    thinkingFolded: [...document.querySelectorAll('details.thinking')].every(d => !d.open),
    userText: document.getElementById('e-e0000003')?.textContent ?? null,
  };
});
await page.screenshot({ path: light, fullPage: true });
await page.emulateMedia({ colorScheme: 'dark' });
out.darkBg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
await page.screenshot({ path: dark, fullPage: true });
out.requests = requests;
out.errors = errors;
await browser.close();
console.log(JSON.stringify(out));
"#;

/// A project with two checkpoints taken as Pi's extension takes them, the
/// session in it, and its report: (report, before the edit, before the write).
fn exported(root: &Path) -> (PathBuf, String, String) {
    let w = crate::world_at(root);
    let project = root.join("project");
    fs_err::create_dir_all(&project).unwrap();
    fs_err::write(project.join("a.txt"), "hello\n").unwrap();
    w.git(&project, &["init", "-q"]);
    w.git(&project, &["add", "."]);
    w.git(&project, &["commit", "-qm", "init"]);
    // Checkpoints as Pi's extension takes them: before the edit, and (the
    // edit done) before the write; none before the bash call.
    let before_edit = snapshot(&w, &project, "edit", "a0000002");
    fs_err::write(project.join("a.txt"), "hello world\n").unwrap();
    let before_write = snapshot(&w, &project, "write", "a0000003");
    assert_ne!(before_edit, before_write);

    let file = session(root, &project);
    let out = root.join("report.html");
    let o = Command::from_std(w.bh(&w.root))
        .args(["session", "export", "--html"])
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = fs_err::read_to_string(&out).unwrap();
    assert!(!html.contains("<script>document"), "markup is escaped");
    assert!(!html.contains("</style><style>body"), "markup is escaped");
    assert!(html.contains("\\u{1b}]0;pwned\\u{7}"), "escapes are shown");
    assert!(
        html.contains("2 calls with a checkpoint"),
        "the header says so"
    );

    (out, before_edit, before_write)
}

#[test]
fn a_pi_sessions_report_folds_scrolls_badges_and_stays_inert() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs_err::canonicalize(tmp.path()).unwrap();
    let (out, before_edit, before_write) = exported(&root);
    let Some(browser) = bh_test_support::browser::browser() else {
        return;
    };
    let (light, dark) = (root.join("light.png"), root.join("dark.png"));
    let v: Value = serde_json::from_str(
        browser
            .run_script(
                SCRIPT,
                &[
                    out.to_str().unwrap(),
                    light.to_str().unwrap(),
                    dark.to_str().unwrap(),
                ],
            )
            .trim(),
    )
    .unwrap();
    if let Ok(keep) = std::env::var("BH_KEEP_REPORT_SHOTS") {
        for p in [&out, &light, &dark] {
            fs_err::copy(p, Path::new(&keep).join(p.file_name().unwrap())).unwrap();
        }
    }
    // Inert: nothing ran, nothing was fetched, the page's own style holds.
    assert_eq!(v["pwned"], Value::Null, "{v}");
    assert_eq!(v["title"], format!("Session {SID}"), "{v}");
    assert_eq!(v["scripts"], 1, "{v}");
    assert_eq!(v["styles"], 1, "{v}");
    assert_eq!(v["jsLinks"], 0, "{v}");
    assert_eq!(v["bodyVisible"], true, "{v}");
    assert!(v["errors"].as_array().unwrap().is_empty(), "{v}");
    assert_eq!(v["requests"].as_array().unwrap().len(), 1, "{v}");
    assert!(
        v["userText"]
            .as_str()
            .unwrap()
            .contains("<script>document.title"),
        "shown as text: {v}"
    );
    // 3,000 lines in a scroll box, in the bash call's card, visible.
    let long = &v["long"];
    assert_eq!(long["overflowY"], "auto", "{v}");
    assert_ne!(long["maxHeight"], "none", "{v}");
    assert!(long["client"].as_f64().unwrap() < 700.0, "{v}");
    assert!(
        long["scroll"].as_f64().unwrap() > 10.0 * long["client"].as_f64().unwrap(),
        "{v}"
    );
    assert_eq!(long["visible"], true, "{v}");
    assert_eq!(long["inTool"], true, "{v}");
    assert_eq!(long["foldable"], true, "open, and can be folded: {v}");
    // One diff per edit: the result's, not the call's arguments again.
    assert_eq!(v["editDiffs"], 1, "{v}");
    assert!(
        v["editDiffText"]
            .as_str()
            .unwrap()
            .contains("+1 hello world")
    );
    assert_eq!(v["resultSections"], 0, "results sit in their calls: {v}");
    // Badges on the tagged calls only.
    assert_eq!(
        v["badges"]["edit"],
        json!([format!("⚑ {before_edit}")]),
        "{v}"
    );
    assert_eq!(
        v["badges"]["write"],
        json!([format!("⚑ {before_write}")]),
        "{v}"
    );
    assert_eq!(v["badges"]["bash"], json!([]), "{v}");
    // Internal entries: folded away, counted.
    let internal = v["internal"].as_array().unwrap();
    assert_eq!(internal.len(), 2, "{v}");
    assert!(internal.iter().all(|d| d["open"] == false), "{v}");
    assert!(
        internal[0]["summary"]
            .as_str()
            .unwrap()
            .starts_with("2 internal entries: model_change, thinking_level_change"),
        "{v}"
    );
    assert!(
        internal[1]["summary"]
            .as_str()
            .unwrap()
            .contains("better-harness.set-leaf"),
        "{v}"
    );
    assert_eq!(v["setLeafInside"], true, "{v}");
    assert_eq!(v["setLeafVisible"], false, "{v}");
    assert_eq!(v["emptyCardInside"], true, "{v}");
    assert_eq!(v["thinkingFolded"], true, "{v}");
    assert_ne!(v["darkBg"], "rgb(255, 255, 255)", "dark scheme: {v}");
    assert!(light.is_file() && dark.is_file());
}
