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

/// The buttons and the search box over the conversation: expand or
/// collapse every fold; show all entries, the default view, no tool calls,
/// only the user's messages, only failures, only labelled entries (Pi's
/// `/share` export has the same views); and a search that keeps the entries
/// holding every word typed (it opens the folds they sit in). All of it is
/// the page's own script: without script the whole report is shown.
pub(crate) fn toolbar(b: &mut String) {
    b.push_str(
        "<div class=\"toolbar\"><button type=\"button\" data-toggle=\"open\">Expand all</button>\
         <button type=\"button\" data-toggle=\"close\">Collapse all</button>\
         <span class=\"views\" role=\"group\" aria-label=\"Show\">\
         <button type=\"button\" data-view=\"default\" aria-pressed=\"true\" title=\"Everything, internal entries folded\">Default</button>\
         <button type=\"button\" data-view=\"no-tools\" aria-pressed=\"false\" title=\"Messages without tool calls and results\">No tools</button>\
         <button type=\"button\" data-view=\"user\" aria-pressed=\"false\" title=\"Only the user's messages\">User</button>\
         <button type=\"button\" data-view=\"errors\" aria-pressed=\"false\" title=\"Only entries that failed\">Errors</button>\
         <button type=\"button\" data-view=\"labeled\" aria-pressed=\"false\" title=\"Only labelled entries\">Labelled</button>\
         <button type=\"button\" data-view=\"all\" aria-pressed=\"false\" title=\"Everything, every fold open\">All</button></span>\
         <input type=\"search\" id=\"search\" placeholder=\"Search entries\" aria-label=\"Search entries\" autocomplete=\"off\">\
         <span id=\"shown\" aria-live=\"polite\"></span></div>\n",
    );
}

/// The style sheet (its own file so that it reads as CSS).
const STYLE: &str = include_str!("style.css");

const SCRIPT: &str = r#"
document.querySelectorAll('[data-toggle]').forEach(function (b) {
  b.addEventListener('click', function () {
    var open = b.getAttribute('data-toggle') === 'open';
    document.querySelectorAll('details').forEach(function (d) { d.open = open; });
  });
});
(function () {
  var sections = Array.prototype.slice.call(document.querySelectorAll('section.entry'));
  var words = sections.map(function (s) { return s.textContent.toLowerCase(); });
  var search = document.getElementById('search');
  var shown = document.getElementById('shown');
  var view = 'default';
  function has(s, c) { return s.classList.contains(c); }
  function keep(s) {
    switch (view) {
      case 'user': return has(s, 'role-user');
      case 'errors': return has(s, 'error') || s.querySelector('.tool.error') !== null;
      case 'labeled': return has(s, 'labeled');
      case 'no-tools':
        return !has(s, 'role-toolResult') && !has(s, 'role-bashExecution') &&
          (!has(s, 'role-assistant') || s.querySelector(':scope > .text, :scope > .thinking') !== null);
      default: return true;
    }
  }
  function apply() {
    var tokens = search ? search.value.toLowerCase().split(/\s+/).filter(Boolean) : [];
    var n = 0;
    sections.forEach(function (s, i) {
      var ok = keep(s) && tokens.every(function (t) { return words[i].indexOf(t) >= 0; });
      s.hidden = !ok;
      if (!ok) return;
      n++;
      if (tokens.length || view === 'all')
        for (var d = s.parentElement; d; d = d.parentElement) if (d.tagName === 'DETAILS') d.open = true;
    });
    document.querySelectorAll('details.internal, details.branch').forEach(function (d) {
      d.hidden = d.querySelector('section.entry:not([hidden])') === null;
    });
    document.body.classList.toggle('no-tools', view === 'no-tools');
    if (shown) shown.textContent = n + ' of ' + sections.length + ' entries';
  }
  document.querySelectorAll('[data-view]').forEach(function (b) {
    b.addEventListener('click', function () {
      view = b.getAttribute('data-view');
      document.querySelectorAll('[data-view]').forEach(function (o) {
        o.setAttribute('aria-pressed', o === b ? 'true' : 'false');
      });
      apply();
    });
  });
  if (search) search.addEventListener('input', apply);
  apply();
})();
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
