//! Pi's edit diff ([P73] `dist/core/tools/edit-diff.js` `generateDiffString`):
//! numbered lines, `+`/`-`/` ` prefixes, 4 lines of context, ` ...` for gaps.

use similar::{Algorithm, ChangeTag, TextDiff};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Equal,
    Added,
    Removed,
}

/// Returns `(diff, firstChangedLine)` exactly as Pi formats them.
pub fn generate_diff_string(old: &str, new: &str, context_lines: usize) -> (String, Option<usize>) {
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .diff_lines(old, new);
    let mut parts: Vec<(Kind, String)> = Vec::new();
    for change in diff.iter_all_changes() {
        let kind = match change.tag() {
            ChangeTag::Equal => Kind::Equal,
            ChangeTag::Insert => Kind::Added,
            ChangeTag::Delete => Kind::Removed,
        };
        match parts.last_mut() {
            Some((k, v)) if *k == kind => v.push_str(change.value()),
            _ => parts.push((kind, change.value().to_string())),
        }
    }
    let max_line = old.split('\n').count().max(new.split('\n').count());
    let width = max_line.to_string().len();
    let pad = |n: usize| format!("{n:>width$}");
    let blank = " ".repeat(width);

    let mut out: Vec<String> = Vec::new();
    let mut old_no = 1usize;
    let mut new_no = 1usize;
    let mut last_was_change = false;
    let mut first_changed: Option<usize> = None;
    for i in 0..parts.len() {
        let (kind, value) = &parts[i];
        let mut raw: Vec<&str> = value.split('\n').collect();
        if raw.last() == Some(&"") {
            raw.pop();
        }
        if *kind != Kind::Equal {
            if first_changed.is_none() {
                first_changed = Some(new_no);
            }
            for line in raw {
                if *kind == Kind::Added {
                    out.push(format!("+{} {line}", pad(new_no)));
                    new_no += 1;
                } else {
                    out.push(format!("-{} {line}", pad(old_no)));
                    old_no += 1;
                }
            }
            last_was_change = true;
        } else {
            let next_is_change = i + 1 < parts.len() && parts[i + 1].0 != Kind::Equal;
            if last_was_change || next_is_change {
                let mut show: &[&str] = &raw;
                let mut skip_start = 0;
                let mut skip_end = 0;
                if !last_was_change {
                    skip_start = raw.len().saturating_sub(context_lines);
                    show = &raw[skip_start..];
                }
                if !next_is_change && show.len() > context_lines {
                    skip_end = show.len() - context_lines;
                    show = &show[..context_lines];
                }
                if skip_start > 0 {
                    out.push(format!(" {blank} ..."));
                    old_no += skip_start;
                    new_no += skip_start;
                }
                for line in show {
                    out.push(format!(" {} {line}", pad(old_no)));
                    old_no += 1;
                    new_no += 1;
                }
                if skip_end > 0 {
                    out.push(format!(" {blank} ..."));
                    old_no += skip_end;
                    new_no += skip_end;
                }
            } else {
                old_no += raw.len();
                new_no += raw.len();
            }
            last_was_change = false;
        }
    }
    (out.join("\n"), first_changed)
}
