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

/// `bh` in the world around `state` (its folder: HOME is `home` beside
/// it), with `state` as its state dir.
fn bh_with_state(state: &Path) -> Command {
    let w = crate::world_at(state.parent().unwrap()).with_state(state);
    Command::from_std(w.bh(&w.root))
}

fn export(state: &Path, session: &Path, out: &Path) {
    let o = bh_with_state(state)
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

const CSP_SCRIPT: &str = r#"
import { chromium } from 'playwright-core';
const [, , file] = process.argv;
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync'] });
const page = await browser.newPage();
const violations = [];
page.on('console', m => { if (/Content Security Policy/.test(m.text())) violations.push(m.text()); });
const requests = [];
page.on('request', r => requests.push(r.url()));
await page.goto('file://' + file);
await page.waitForTimeout(300);
const out = { slipped: await page.evaluate(() => [window.__inline, window.__handler, window.__js,
  window.__styled]), url: page.url() };
// The report's own script runs: "expand all" opens every fold.
const toggle = page.locator('[data-toggle="open"]').first();
out.toggle = await toggle.count();
if (out.toggle) {
  await toggle.click();
  out.open = await page.evaluate(() => Array.from(document.querySelectorAll('details')).every(d => d.open));
}
// A form or a javascript: link is dead too.
await page.evaluate(() => document.getElementById('bh-slip-form').submit());
await page.waitForTimeout(200);
out.afterSubmit = page.url();
out.violations = violations;
out.requests = requests;
await browser.close();
console.log(JSON.stringify(out));
"#;

/// The CSP in a real browser: a report into which an escaping slip let
/// markup through (inserted here by hand) runs none of it — no inline
/// script, no event handler, no `javascript:` URL, no form submission,
/// no `<base>` — while the report's own script (admitted by hash) works.
#[test]
fn the_reports_csp_admits_only_its_own_script_in_chromium() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs_err::canonicalize(tmp.path()).unwrap();
    let report = root.join("r.html");
    export(
        &root.join("state"),
        &scenario("s07-extension-entries"),
        &report,
    );
    let text = fs_err::read_to_string(&report).unwrap();
    let slip = concat!(
        "<base href=\"http://127.0.0.1:9/\">",
        "<script>window.__inline = 1</script>",
        "<img src=\"data:,x\" onerror=\"window.__handler = 1\">",
        "<iframe src=\"javascript:parent.__js = 1\"></iframe>",
        "<div style=\"x\" onclick=\"window.__styled = 1\" id=\"bh-slip-div\"></div>",
        "<form id=\"bh-slip-form\" action=\"http://127.0.0.1:9/steal\" method=\"get\"></form>",
    );
    let slipped = text.replacen("<body>\n", &format!("<body>\n{slip}"), 1);
    assert_ne!(slipped, text);
    let file = root.join("slipped.html");
    fs_err::write(&file, slipped).unwrap();
    let Some(browser) = bh_test_support::browser::browser() else {
        return;
    };
    let out = browser.run_script(CSP_SCRIPT, &[file.to_str().unwrap()]);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        v["slipped"],
        serde_json::json!([null, null, null, null]),
        "{v:#}"
    );
    assert!(
        v["toggle"].as_u64().unwrap() > 0,
        "the report has its toggle: {v:#}"
    );
    assert_eq!(v["open"], true, "the report's own script ran: {v:#}");
    assert!(
        !v["violations"].as_array().unwrap().is_empty(),
        "the browser reports what it refused: {v:#}"
    );
    assert!(
        v["afterSubmit"].as_str().unwrap().starts_with("file://"),
        "the form went nowhere: {v:#}"
    );
    let requests: Vec<&str> = v["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert!(
        requests.iter().all(|r| !r.starts_with("http")),
        "nothing fetched: {requests:?}"
    );
}

const VIEWS_SCRIPT: &str = r#"
import { chromium } from 'playwright-core';
const [, , file] = process.argv;
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync'] });
const page = await browser.newPage();
const errors = [];
page.on('pageerror', e => errors.push(String(e)));
await page.goto('file://' + file);
const state = () => page.evaluate(() => {
  const all = Array.from(document.querySelectorAll('section.entry'));
  const seen = all.filter(s => s.closest('[hidden]') === null);
  return { total: all.length, shown: seen.length,
    roles: seen.map(s => Array.from(s.classList).find(c => c.startsWith('role-'))),
    errors: seen.map(s => s.classList.contains('error') || s.querySelector('.tool.error') !== null),
    labeled: seen.map(s => s.classList.contains('labeled')),
    toolsShown: Array.from(document.querySelectorAll('.tool')).filter(t => getComputedStyle(t).display !== 'none').length,
    text: seen.map(s => s.textContent.toLowerCase()),
    status: document.getElementById('shown').textContent,
    users: all.filter(s => s.classList.contains('role-user')).length };
});
const out = { start: await state() };
for (const v of ['user', 'no-tools', 'errors', 'labeled', 'all', 'default']) {
  await page.click(`[data-view="${v}"]`);
  out[v] = await state();
  out[v].pressed = await page.getAttribute(`[data-view="${v}"]`, 'aria-pressed');
}
const word = await page.evaluate(() => {
  const t = document.querySelector('section.role-user .text');
  return (t ? t.textContent : '').split(/\s+/).find(w => /^[a-z]{5,}$/i.test(w)) || '';
});
await page.fill('#search', word);
out.word = word;
out.search = await state();
await page.fill('#search', 'zzqxnotaword');
out.nothing = await state();
out.errorsInPage = errors;
await browser.close();
console.log(JSON.stringify(out));
"#;

/// The views and the search of a report, in Chromium: each view shows what
/// its button says and the count says how many; a search keeps exactly the
/// entries holding the word.
#[test]
fn the_reports_views_and_search_work_in_chromium() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs_err::canonicalize(tmp.path()).unwrap();
    let Some(browser) = bh_test_support::browser::browser() else {
        return;
    };
    for (name, has_errors, has_labels) in [
        ("s03-tool-errors", true, false),
        ("s23-clone-with-labels-on-path", false, true),
    ] {
        let report = root.join(format!("{name}.html"));
        export(&root.join("state"), &scenario(name), &report);
        let out = browser.run_script(VIEWS_SCRIPT, &[report.to_str().unwrap()]);
        let v: Value = serde_json::from_str(out.trim()).unwrap();
        let n = |k: &str, f: &str| v[k][f].as_u64().unwrap();
        assert!(v["errorsInPage"].as_array().unwrap().is_empty(), "{v:#}");
        let total = n("start", "total");
        assert!(total > 0);
        assert_eq!(n("start", "shown"), total, "{name}: all shown at first");
        assert_eq!(v["start"]["status"], format!("{total} of {total} entries"));
        // User: exactly the user's messages.
        assert_eq!(n("user", "shown"), n("user", "users"), "{name}: {v:#}");
        assert!(n("user", "shown") > 0);
        assert!(
            v["user"]["roles"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r == "role-user")
        );
        assert_eq!(v["user"]["pressed"], "true");
        // No tools: no tool card visible, no standalone result.
        assert_eq!(n("no-tools", "toolsShown"), 0, "{name}: {v:#}");
        assert!(
            v["no-tools"]["roles"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r != "role-toolResult" && r != "role-bashExecution")
        );
        // Errors and labels: only those, and some when the session has them.
        assert!(
            v["errors"]["errors"]
                .as_array()
                .unwrap()
                .iter()
                .all(|e| e == true)
        );
        assert_eq!(n("errors", "shown") > 0, has_errors, "{name}: {v:#}");
        assert!(
            v["labeled"]["labeled"]
                .as_array()
                .unwrap()
                .iter()
                .all(|e| e == true)
        );
        assert_eq!(n("labeled", "shown") > 0, has_labels, "{name}: {v:#}");
        assert_eq!(n("all", "shown"), total);
        assert_eq!(n("default", "shown"), total);
        // Search: every entry kept holds the word; none matches nonsense.
        let word = v["word"].as_str().unwrap().to_lowercase();
        assert!(!word.is_empty(), "{name}: a word to search for: {v:#}");
        let kept = v["search"]["text"].as_array().unwrap();
        assert!(!kept.is_empty(), "{name}: {v:#}");
        assert!(kept.iter().all(|t| t.as_str().unwrap().contains(&word)));
        assert_eq!(
            v["search"]["status"],
            format!("{} of {total} entries", kept.len())
        );
        assert_eq!(n("nothing", "shown"), 0);
        assert_eq!(v["nothing"]["status"], format!("0 of {total} entries"));
    }
}

#[test]
fn export_refuses_to_overwrite_and_to_write_into_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let out = tmp.path().join("r.html");
    fs_err::write(&out, "mine").unwrap();
    let bh = || bh_with_state(&state);
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

/// `session show --html` is the export under the name `exec show --html`
/// taught: the same report, refused over an existing file, `--out` only
/// with `--html`.
#[test]
fn session_show_html_is_the_export() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let exported = tmp.path().join("e.html");
    export(&state, &scenario("s02-tools-json-mode"), &exported);
    let shown = tmp.path().join("s.html");
    let bh = || bh_with_state(&state);
    let o = bh()
        .args(["session", "show"])
        .arg(scenario("s02-tools-json-mode"))
        .args(["--html", "-o"])
        .arg(&shown)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        fs_err::read(&shown).unwrap(),
        fs_err::read(&exported).unwrap()
    );
    let again = bh()
        .args(["session", "show"])
        .arg(scenario("s02-tools-json-mode"))
        .args(["--html", "-o"])
        .arg(&shown)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(3), "{again:?}");
    let no_html = bh()
        .args(["session", "show"])
        .arg(scenario("s02-tools-json-mode"))
        .args(["-o"])
        .arg(tmp.path().join("x.html"))
        .output()
        .unwrap();
    assert_eq!(no_html.status.code(), Some(2), "{no_html:?}");
    assert!(!tmp.path().join("x.html").exists());
}

/// A session bh's own agent wrote carries each call's checkpoint in the
/// result's details: the report badges the call with it, store or no store.
#[test]
fn a_bh_agent_sessions_calls_carry_their_checkpoint_badges() {
    let t = bh_test_support::TestRepo::new();
    t.write("a.txt", "a\n");
    t.commit_all("base");
    let script = t.root.join("turns.jsonl");
    fs_err::write(
        &script,
        "{\"toolCalls\": [{\"name\": \"write\", \"arguments\": {\"path\": \"b.txt\", \"content\": \"b\\n\"}}]}\n{\"text\": \"done\"}\n",
    )
    .unwrap();
    let w = crate::world_at(&t.root);
    let agent_dir = w.agent.clone();
    let o = Command::from_std(w.bh(&t.dir))
        .args(["--json", "agent", "--script"])
        .arg(&script)
        .args(["-p", "go"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let session = fs_err::read_dir(agent_dir.join("sessions"))
        .unwrap()
        .flat_map(|d| fs_err::read_dir(d.unwrap().path()).unwrap())
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .unwrap();
    let text = fs_err::read_to_string(&session).unwrap();
    let result: Value = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["message"]["role"] == "toolResult")
        .unwrap();
    let id = result["message"]["details"]["checkpoint"]
        .as_str()
        .unwrap()
        .to_owned();
    // Another state directory: no store to ask, the session alone says it.
    let report = t.root.join("r.html");
    export(&t.root.join("other-state"), &session, &report);
    let html = fs_err::read_to_string(&report).unwrap();
    assert!(
        html.contains(&format!("<span class=\"badge cp\" title=\"checkpoint before this call (bh checkpoint restore {id})\">")),
        "{id} badged"
    );
}
