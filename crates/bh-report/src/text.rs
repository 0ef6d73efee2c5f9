//! Text, code, preformatted output and diffs, escaped.

use std::fmt::Write as _;

use crate::html::push_escaped;

/// Text as written (no Markdown but for fenced code blocks, which become
/// scrollable code boxes).
pub(crate) fn text(b: &mut String, t: &str, class: &str) {
    if t.is_empty() {
        return;
    }
    let _ = write!(b, "<div class=\"{class}\">");
    let mut rest = t;
    while let Some((before, code, after)) = fence(rest) {
        push_escaped(b, before.strip_suffix('\n').unwrap_or(before));
        b.push_str("<pre class=\"code\">");
        push_escaped(b, code);
        b.push_str("</pre>");
        rest = after.strip_prefix('\n').unwrap_or(after);
    }
    push_escaped(b, rest);
    b.push_str("</div>\n");
}

/// The first fenced code block of `t` (a line starting with three
/// backticks, up to the next such line): (text before, code, text after).
fn fence(t: &str) -> Option<(&str, &str, &str)> {
    let open = if t.starts_with("```") {
        0
    } else {
        t.find("\n```")? + 1
    };
    let body = open + t[open..].find('\n')? + 1;
    let close = if t[body..].starts_with("```") {
        body
    } else {
        body + t[body..].find("\n```")? + 1
    };
    let end = t[close..].find('\n').map_or(t.len(), |n| close + n);
    let code = t[body..close].strip_suffix('\n').unwrap_or(&t[body..close]);
    Some((&t[..open], code, &t[end..]))
}

pub(crate) fn pre(b: &mut String, t: &str, class: &str) {
    if class.is_empty() {
        b.push_str("<pre>");
    } else {
        let _ = write!(b, "<pre class=\"{class}\">");
    }
    push_escaped(b, t);
    b.push_str("</pre>\n");
}

/// A line diff of `old` → `new` with three lines of context.
pub(crate) fn diff(b: &mut String, old: &str, new: &str) {
    let d = similar::TextDiff::from_lines(old, new);
    let text = d.unified_diff().context_radius(3).to_string();
    unified(b, &text);
}

/// A unified diff, its lines coloured by their first character (Pi's
/// `details.diff` marks lines `+NN`/`-NN` the same way).
pub(crate) fn unified(b: &mut String, text: &str) {
    b.push_str("<pre class=\"diff\">");
    for line in text.lines() {
        let class = match line.as_bytes().first() {
            Some(b'+') if !line.starts_with("+++") => "add",
            Some(b'-') if !line.starts_with("---") => "del",
            Some(b'@') => "hunk",
            Some(b'\\') => "note",
            _ => "ctx",
        };
        let _ = write!(b, "<span class=\"{class}\">");
        push_escaped(b, line);
        b.push_str("</span>");
    }
    b.push_str("</pre>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fenced_code_becomes_a_code_box_escaped() {
        let mut b = String::new();
        text(&mut b, "Run:\n```sh\necho <hi>\n```\ndone", "text");
        assert_eq!(
            b,
            "<div class=\"text\">Run:<pre class=\"code\">echo &lt;hi&gt;</pre>done</div>\n"
        );
        let mut b = String::new();
        text(&mut b, "open ```\nnot a fence", "text");
        assert_eq!(b, "<div class=\"text\">open ```\nnot a fence</div>\n");
        let mut b = String::new();
        text(&mut b, "```\nunclosed", "text");
        assert_eq!(b, "<div class=\"text\">```\nunclosed</div>\n");
    }
}
