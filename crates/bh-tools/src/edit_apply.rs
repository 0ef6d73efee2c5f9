//! Pi's multi-edit matching ([P73] `dist/core/tools/edit-diff.js`
//! `applyEditsToNormalizedContent`): every `oldText` is matched against the
//! original content (exactly, else after fuzzy normalisation), must be unique,
//! and edits must not overlap; replacements are applied back to front.

/// One replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub old_text: String,
    pub new_text: String,
}

pub fn detect_line_ending(content: &str) -> &'static str {
    let crlf = content.find("\r\n");
    let lf = content.find('\n');
    match (crlf, lf) {
        (_, None) | (None, _) => "\n",
        (Some(c), Some(l)) => {
            if c < l {
                "\r\n"
            } else {
                "\n"
            }
        }
    }
}

pub fn normalize_to_lf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

pub fn restore_line_endings(text: &str, ending: &str) -> String {
    if ending == "\r\n" {
        text.replace('\n', "\r\n")
    } else {
        text.to_string()
    }
}

/// `normalizeForFuzzyMatch`: trailing whitespace per line, smart quotes,
/// Unicode dashes and special spaces folded to ASCII.
pub fn normalize_for_fuzzy(text: &str) -> String {
    let stripped: Vec<&str> = text.split('\n').map(str::trim_end).collect();
    stripped
        .join("\n")
        .chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect()
}

struct Found {
    index: usize,
    len: usize,
    fuzzy: bool,
}

fn fuzzy_find(content: &str, old: &str) -> Option<Found> {
    if let Some(i) = content.find(old) {
        return Some(Found {
            index: i,
            len: old.len(),
            fuzzy: false,
        });
    }
    let fc = normalize_for_fuzzy(content);
    let fo = normalize_for_fuzzy(old);
    if fo.is_empty() {
        return None;
    }
    fc.find(&fo).map(|i| Found {
        index: i,
        len: fo.len(),
        fuzzy: true,
    })
}

fn count_occurrences(content: &str, old: &str) -> usize {
    let fc = normalize_for_fuzzy(content);
    let fo = normalize_for_fuzzy(old);
    if fo.is_empty() {
        return 0;
    }
    fc.matches(&fo).count()
}

/// Returns `(base_content, new_content)` or Pi's error message.
pub fn apply_edits(content: &str, edits: &[Edit], path: &str) -> Result<(String, String), String> {
    let n = edits.len();
    let edits: Vec<Edit> = edits
        .iter()
        .map(|e| Edit {
            old_text: normalize_to_lf(&e.old_text),
            new_text: normalize_to_lf(&e.new_text),
        })
        .collect();
    for (i, e) in edits.iter().enumerate() {
        if e.old_text.is_empty() {
            return Err(if n == 1 {
                format!("oldText must not be empty in {path}.")
            } else {
                format!("edits[{i}].oldText must not be empty in {path}.")
            });
        }
    }
    let any_fuzzy = edits
        .iter()
        .any(|e| fuzzy_find(content, &e.old_text).is_some_and(|f| f.fuzzy));
    let base = if any_fuzzy {
        normalize_for_fuzzy(content)
    } else {
        content.to_string()
    };
    let mut matched: Vec<(usize, usize, usize)> = Vec::new(); // (edit index, start, len)
    for (i, e) in edits.iter().enumerate() {
        let Some(found) = fuzzy_find(&base, &e.old_text) else {
            return Err(if n == 1 {
                format!(
                    "Could not find the exact text in {path}. The old text must match exactly including all whitespace and newlines."
                )
            } else {
                format!(
                    "Could not find edits[{i}] in {path}. The oldText must match exactly including all whitespace and newlines."
                )
            });
        };
        let occ = count_occurrences(&base, &e.old_text);
        if occ > 1 {
            return Err(if n == 1 {
                format!(
                    "Found {occ} occurrences of the text in {path}. The text must be unique. Please provide more context to make it unique."
                )
            } else {
                format!(
                    "Found {occ} occurrences of edits[{i}] in {path}. Each oldText must be unique. Please provide more context to make it unique."
                )
            });
        }
        matched.push((i, found.index, found.len));
    }
    matched.sort_by_key(|m| m.1);
    for w in matched.windows(2) {
        let (a, b) = (w[0], w[1]);
        if a.1 + a.2 > b.1 {
            return Err(format!(
                "edits[{}] and edits[{}] overlap in {path}. Merge them into one edit or target disjoint regions.",
                a.0, b.0
            ));
        }
    }
    let mut new = base.clone();
    for &(i, start, len) in matched.iter().rev() {
        new.replace_range(start..start + len, &edits[i].new_text);
    }
    if new == base {
        return Err(if n == 1 {
            format!(
                "No changes made to {path}. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected."
            )
        } else {
            format!("No changes made to {path}. The replacements produced identical content.")
        });
    }
    Ok((base, new))
}
