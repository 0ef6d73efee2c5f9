//! The HTML report of one executor run (`bh exec show --html`): the plan's
//! digests and model, the prompt, the conversation the run appended to the
//! forked session (messages, tool calls with their diffs, checkpoints), the
//! diffstat and patch of the change, and the commit's provenance trailers.

use std::fmt::Write as _;

use bh_session::{Session, summarize};

use crate::entry::{View, unified};
use crate::html::{page, push_escaped};
use crate::session::path_entries;

/// One file of the change (`None` counts: binary).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiffStatRow {
    pub path: String,
    pub added: Option<u64>,
    pub deleted: Option<u64>,
}

/// Everything the report shows, gathered by the caller.
#[derive(Clone, Debug, Default)]
pub struct ExecReport<'a> {
    /// The execution id.
    pub execution: &'a str,
    /// How it ended (`committed`, `no-changes`, `aborted`, `failed`, …).
    pub state: &'a str,
    /// Ordered facts: plan digest, base, session, model, commit, ref, limits…
    pub facts: Vec<(String, String)>,
    pub prompt: &'a str,
    /// The commit's provenance trailers, in their order.
    pub trailers: Vec<(String, String)>,
    pub diffstat: Vec<DiffStatRow>,
    pub patch: Option<&'a str>,
    /// The forked session the run continued.
    pub session: Option<&'a Session>,
    /// The planned entry: the report shows what came after it.
    pub from_entry: &'a str,
}

/// The whole report, one self-contained HTML document.
pub fn exec_html(r: &ExecReport<'_>) -> String {
    let title = format!("Execution {}", r.execution);
    let mut b = String::with_capacity(64 * 1024 + r.patch.map_or(0, str::len) * 2);
    b.push_str("<header class=\"page\"><h1>");
    push_escaped(&mut b, &title);
    b.push_str(" <span class=\"badge\" id=\"state\">");
    push_escaped(&mut b, r.state);
    b.push_str("</span></h1>\n");
    dl(&mut b, "facts", &r.facts);
    crate::html::toolbar(&mut b);
    b.push_str("</header>\n");

    b.push_str("<section id=\"prompt\"><h2>Prompt</h2><pre>");
    push_escaped(&mut b, r.prompt);
    b.push_str("</pre></section>\n");

    b.push_str("<main id=\"conversation\"><h2>Conversation continued</h2>\n");
    conversation(&mut b, r);
    b.push_str("</main>\n");

    b.push_str("<section id=\"changes\"><h2>Changes</h2>\n");
    diffstat(&mut b, &r.diffstat);
    if let Some(p) = r.patch.filter(|p| !p.is_empty()) {
        b.push_str("<details class=\"patch\" open><summary>Patch</summary>");
        unified(&mut b, p);
        b.push_str("</details>\n");
    }
    b.push_str("</section>\n");

    b.push_str("<section id=\"trailers\"><h2>Trailers</h2>\n");
    if r.trailers.is_empty() {
        b.push_str("<p>(no commit, so no trailers)</p>\n");
    } else {
        b.push_str("<pre>");
        for (k, v) in &r.trailers {
            push_escaped(&mut b, k);
            b.push_str(": ");
            push_escaped(&mut b, v);
            b.push('\n');
        }
        b.push_str("</pre>\n");
    }
    b.push_str("</section>\n");
    page(&title, &b)
}

fn dl(b: &mut String, id: &str, rows: &[(String, String)]) {
    let _ = writeln!(b, "<dl class=\"meta\" id=\"{id}\">");
    for (k, v) in rows {
        b.push_str("<dt>");
        push_escaped(b, k);
        b.push_str("</dt><dd>");
        push_escaped(b, v);
        b.push_str("</dd>\n");
    }
    b.push_str("</dl>\n");
}

/// The entries on the forked session's active path after the planned entry.
fn conversation(b: &mut String, r: &ExecReport<'_>) {
    let Some(s) = r.session else {
        b.push_str("<p>(the forked session cannot be read)</p>\n");
        return;
    };
    let path = s
        .leaf()
        .and_then(|leaf| s.path_to_root(&leaf.id).ok())
        .unwrap_or_default();
    let after: Vec<usize> = match path.iter().position(|e| e.id == r.from_entry) {
        Some(at) => path[at + 1..]
            .iter()
            .filter_map(|e| s.index_of(&e.id))
            .collect(),
        None => Vec::new(),
    };
    if after.is_empty() {
        b.push_str("<p>(the run appended nothing after entry <code>");
        push_escaped(b, r.from_entry);
        b.push_str("</code>)</p>\n");
        return;
    }
    let summaries = summarize(s);
    let view = View::new(s, &summaries, &after, &[]);
    path_entries(b, &view, &after);
}

fn diffstat(b: &mut String, rows: &[DiffStatRow]) {
    if rows.is_empty() {
        b.push_str("<p>(no changes)</p>\n");
        return;
    }
    let (mut plus, mut minus) = (0u64, 0u64);
    b.push_str("<table class=\"diffstat\"><tbody>\n");
    for row in rows {
        b.push_str("<tr><td><code>");
        push_escaped(b, &row.path);
        b.push_str("</code></td>");
        match (row.added, row.deleted) {
            (Some(a), Some(d)) => {
                plus += a;
                minus += d;
                let _ = writeln!(
                    b,
                    "<td class=\"add\">+{a}</td><td class=\"del\">-{d}</td></tr>"
                );
            }
            _ => b.push_str("<td colspan=\"2\">binary</td></tr>\n"),
        }
    }
    let _ = write!(
        b,
        "</tbody></table>\n<p>{} file{} changed, {plus} insertion{}, {minus} deletion{}</p>\n",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" },
        if plus == 1 { "" } else { "s" },
        if minus == 1 { "" } else { "s" },
    );
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn session() -> Session {
        let lines = [
            r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
            r#"{"type":"message","id":"aaaa0001","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"before the plan","timestamp":1}}"#,
            r#"{"type":"message","id":"aaaa0002","parentId":"aaaa0001","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"<script>alert(1)</script> continue","timestamp":1}}"#,
            r#"{"type":"message","id":"aaaa0003","parentId":"aaaa0002","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"write","arguments":{"path":"hello.txt","content":"hello\n"}}],"model":"m","stopReason":"toolUse","timestamp":1}}"#,
        ];
        Session::parse((lines.join("\n") + "\n").into_bytes(), None)
    }

    #[test]
    fn shows_only_what_the_run_appended_escaped() {
        let s = session();
        let html = exec_html(&ExecReport {
            execution: "x1-ab",
            state: "committed",
            facts: vec![("model".into(), "openai/<m>".into())],
            prompt: "go <on>",
            trailers: vec![("Better-Harness-Entry".into(), "aaaa0001".into())],
            diffstat: vec![DiffStatRow {
                path: "hello.txt".into(),
                added: Some(1),
                deleted: Some(0),
            }],
            patch: Some("+hello\n"),
            session: Some(&s),
            from_entry: "aaaa0001",
        });
        assert!(html.contains("id=\"e-aaaa0002\""));
        assert!(html.contains("id=\"e-aaaa0003\""));
        assert!(
            !html.contains("id=\"e-aaaa0001\""),
            "the planned entry is history"
        );
        assert!(!html.contains("<script>alert"));
        assert!(html.contains("openai/&lt;m&gt;"));
        assert!(html.contains("Better-Harness-Entry: aaaa0001"));
        assert!(html.contains("1 file changed, 1 insertion, 0 deletions"));
    }

    #[test]
    fn nothing_appended_is_said() {
        let s = session();
        let html = exec_html(&ExecReport {
            execution: "x1",
            state: "no-changes",
            session: Some(&s),
            from_entry: "aaaa0003",
            ..Default::default()
        });
        assert!(html.contains("the run appended nothing"));
        assert!(html.contains("(no changes)"));
        assert!(html.contains("(no commit, so no trailers)"));
    }
}
