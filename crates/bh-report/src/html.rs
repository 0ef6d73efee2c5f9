//! The page shell and the escaping every report uses.

use std::fmt::Write as _;

/// `text` safe inside HTML text and double- or single-quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    push_escaped(&mut out, text);
    out
}

/// Appends `text` HTML-escaped to `out`.
pub(crate) fn push_escaped(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control and invisible characters (other than tab/newline)
            // are shown, not obeyed or hidden.
            c if c != '\n' && c != '\t' && crate::visible::hidden(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
}

/// The page around `body`: metadata, the CSP that forbids every fetch, the
/// style sheet and the small script (expand/collapse all).
pub(crate) fn page(title: &str, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + STYLE.len() + 1024);
    out.push_str("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"");
    out.push_str(&csp());
    out.push_str("\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str("<meta name=\"generator\" content=\"Better Harness\">\n<title>");
    push_escaped(&mut out, title);
    out.push_str("</title>\n<style>");
    out.push_str(STYLE);
    out.push_str("</style>\n</head>\n<body>\n");
    out.push_str(body);
    out.push_str("<script>");
    out.push_str(SCRIPT);
    out.push_str("</script>\n</body>\n</html>\n");
    out
}

/// The page's policy: nothing is fetched (but inline images), and the only
/// style and script that run are the report's own, admitted by their SHA-256
/// — one escaping slip can add text, never a script that runs; no `<base>`,
/// no form submission anywhere.
pub(crate) fn csp() -> String {
    format!(
        "default-src 'none'; style-src '{}'; script-src '{}'; img-src data:; \
         base-uri 'none'; form-action 'none'",
        source_hash(STYLE),
        source_hash(SCRIPT)
    )
}

/// A CSP hash source (`sha256-<base64>`) of an inline element's text.
fn source_hash(text: &str) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(text.as_bytes());
    format!(
        "sha256-{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

const STYLE: &str = r#"
:root { --fg:#1f2328; --muted:#656d76; --bg:#fff; --panel:#f6f8fa; --line:#d0d7de;
  --user:#0969da; --asst:#8250df; --tool:#1a7f37; --err:#cf222e; --meta:#9a6700; }
* { box-sizing: border-box; }
body { font: 14px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--fg);
  background: var(--bg); margin: 0 auto; max-width: 1100px; padding: 16px 24px 64px; }
h1 { font-size: 22px; margin: 8px 0; } h2 { font-size: 17px; margin: 24px 0 8px;
  border-bottom: 1px solid var(--line); padding-bottom: 4px; }
code, pre, .graph { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0; }
dl.meta dt { color: var(--muted); } dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.toolbar button { font: inherit; margin-right: 8px; }
ol.graph { list-style: none; padding: 0; margin: 0; overflow-x: auto; }
ol.graph li { line-height: 1.35; white-space: pre; } ol.graph a { color: inherit; text-decoration: none; }
ol.graph a:hover { background: var(--panel); }
.g { color: var(--muted); } .leaf { font-weight: 600; }
details > summary { cursor: pointer; }
details.fold > summary, details.branch > summary { color: var(--muted); }
details.branch { border-left: 3px solid var(--line); padding-left: 10px; margin: 6px 0; }
section.entry { border: 1px solid var(--line); border-radius: 6px; margin: 8px 0; padding: 6px 10px; }
section.entry > header { display: flex; gap: 10px; align-items: baseline; color: var(--muted); font-size: 12px; }
section.entry > header .role { font-weight: 600; text-transform: uppercase; letter-spacing: .03em; }
section.role-user .role { color: var(--user); } section.role-assistant .role { color: var(--asst); }
section.role-toolResult .role { color: var(--tool); } section.error .role { color: var(--err); }
section.meta { border-style: dashed; } section.meta .role { color: var(--meta); }
section.active-leaf { box-shadow: 0 0 0 2px var(--asst); }
.text { white-space: pre-wrap; overflow-wrap: anywhere; margin: 4px 0; }
.thinking { color: var(--muted); font-style: italic; }
pre { background: var(--panel); padding: 8px; border-radius: 4px; overflow-x: auto; white-space: pre-wrap; margin: 4px 0; }
.diff .add { color: #1a7f37; background: #e6ffec; display: block; }
.diff .del { color: #cf222e; background: #ffebe9; display: block; }
.diff .hunk { color: var(--muted); display: block; }
.badge { display: inline-block; border: 1px solid var(--line); border-radius: 10px; padding: 0 8px;
  font-size: 11px; color: var(--muted); }
.badge.cp { border-color: var(--tool); color: var(--tool); } .badge.err { border-color: var(--err); color: var(--err); }
img.inline { max-width: 100%; border: 1px solid var(--line); }
table.diffstat { border-collapse: collapse; } table.diffstat td { padding: 0 12px 0 0; }
table.diffstat .add { color: #1a7f37; } table.diffstat .del { color: #cf222e; }
"#;

const SCRIPT: &str = r#"
document.querySelectorAll('[data-toggle]').forEach(function (b) {
  b.addEventListener('click', function () {
    var open = b.getAttribute('data-toggle') === 'open';
    document.querySelectorAll('details').forEach(function (d) { d.open = open; });
  });
});
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_controls() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(escape("a\u{1b}[31m"), "a\\u{1b}[31m");
        assert_eq!(escape("l1\nl2\tx"), "l1\nl2\tx");
    }

    #[test]
    fn the_page_forbids_fetches() {
        let p = page("t<", "<p>b</p>");
        assert!(p.contains("default-src 'none'"));
        assert!(p.contains("<title>t&lt;</title>"));
        assert!(!p.contains("http://") && !p.contains("https://"));
    }

    #[test]
    fn the_csp_admits_only_the_reports_own_script_and_style() {
        let p = page("t", "<p>b</p>");
        let policy = csp();
        assert!(p.contains(&policy));
        assert!(!policy.contains("unsafe-inline"), "{policy}");
        assert!(policy.contains("base-uri 'none'") && policy.contains("form-action 'none'"));
        assert!(policy.contains(&format!("script-src '{}'", source_hash(SCRIPT))));
        assert!(policy.contains(&format!("style-src '{}'", source_hash(STYLE))));
        // The hashed texts are exactly what the page holds.
        assert!(p.contains(&format!("<script>{SCRIPT}</script>")));
        assert!(p.contains(&format!("<style>{STYLE}</style>")));
        assert_eq!(p.matches("<script").count(), 1);
    }

    #[test]
    fn invisible_characters_are_shown_in_reports() {
        assert_eq!(escape("a\u{e0041}\u{200b}b"), "a\\u{e0041}\\u{200b}b");
    }
}
