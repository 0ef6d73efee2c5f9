//! Pi's output truncation ([P73] `dist/core/tools/truncate.js`): two limits,
//! lines and bytes, whichever is hit first.

use serde::Serialize;

pub const DEFAULT_MAX_LINES: usize = 2000;
pub const DEFAULT_MAX_BYTES: usize = 50 * 1024;
pub const GREP_MAX_LINE_LENGTH: usize = 500;

/// Pi's `TruncationResult` (0.73.1 adds `maxLines`/`maxBytes`), in Pi's key order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Truncation {
    pub content: String,
    pub truncated: bool,
    pub truncated_by: Option<&'static str>,
    pub total_lines: usize,
    pub total_bytes: usize,
    pub output_lines: usize,
    pub output_bytes: usize,
    pub last_line_partial: bool,
    pub first_line_exceeds_limit: bool,
    pub max_lines: usize,
    pub max_bytes: usize,
}

impl Truncation {
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// `formatSize`.
pub fn format_size(bytes: usize) -> String {
    if bytes < 1024 {
        format!("{bytes}B")
    } else if bytes < 1024 * 1024 {
        format!("{:.1}KB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1}MB", bytes as f64 / (1024.0 * 1024.0))
    }
}

/// `truncateHead`: keep the first lines; never a partial line.
pub fn truncate_head(content: &str, max_lines: usize, max_bytes: usize) -> Truncation {
    let total_bytes = content.len();
    let lines: Vec<&str> = content.split('\n').collect();
    let total_lines = lines.len();
    let base = |content: String, truncated, by, ol, ob, first| Truncation {
        content,
        truncated,
        truncated_by: by,
        total_lines,
        total_bytes,
        output_lines: ol,
        output_bytes: ob,
        last_line_partial: false,
        first_line_exceeds_limit: first,
        max_lines,
        max_bytes,
    };
    if total_lines <= max_lines && total_bytes <= max_bytes {
        return base(
            content.to_string(),
            false,
            None,
            total_lines,
            total_bytes,
            false,
        );
    }
    if lines[0].len() > max_bytes {
        return base(String::new(), true, Some("bytes"), 0, 0, true);
    }
    let mut out: Vec<&str> = Vec::new();
    let mut bytes = 0usize;
    let mut by = "lines";
    for (i, line) in lines.iter().enumerate() {
        if i >= max_lines {
            break;
        }
        let lb = line.len() + usize::from(i > 0);
        if bytes + lb > max_bytes {
            by = "bytes";
            break;
        }
        out.push(line);
        bytes += lb;
    }
    if out.len() >= max_lines && bytes <= max_bytes {
        by = "lines";
    }
    let text = out.join("\n");
    let ob = text.len();
    base(text, true, Some(by), out.len(), ob, false)
}

/// `truncateTail` on raw bytes: keep the last lines; the last line may be cut
/// (from its start) when it alone exceeds the byte limit. `total_lines` and
/// `total_bytes` describe the whole output when `content` is only its tail.
pub fn truncate_tail_bytes(
    content: &[u8],
    total_lines: usize,
    total_bytes: usize,
    max_lines: usize,
    max_bytes: usize,
) -> Truncation {
    let lines: Vec<&[u8]> = content.split(|b| *b == b'\n').collect();
    let mk = |text: String, truncated, by, ol, ob, partial| Truncation {
        content: text,
        truncated,
        truncated_by: by,
        total_lines,
        total_bytes,
        output_lines: ol,
        output_bytes: ob,
        last_line_partial: partial,
        first_line_exceeds_limit: false,
        max_lines,
        max_bytes,
    };
    if total_lines <= max_lines && total_bytes <= max_bytes {
        let text = String::from_utf8_lossy(content).into_owned();
        return mk(text, false, None, total_lines, total_bytes, false);
    }
    let mut out: Vec<&[u8]> = Vec::new();
    let mut bytes = 0usize;
    let mut by = "lines";
    let mut partial = false;
    for line in lines.iter().rev() {
        if out.len() >= max_lines {
            break;
        }
        let lb = line.len() + usize::from(!out.is_empty());
        if bytes + lb > max_bytes {
            by = "bytes";
            if out.is_empty() {
                let mut start = line.len() - max_bytes;
                while start < line.len() && (line[start] & 0xc0) == 0x80 {
                    start += 1;
                }
                let cut = &line[start..];
                out.push(cut);
                bytes = cut.len();
                partial = true;
            }
            break;
        }
        out.push(line);
        bytes += lb;
    }
    if out.len() >= max_lines && bytes <= max_bytes {
        by = "lines";
    }
    out.reverse();
    let joined = out.join(&b'\n');
    let ob = joined.len();
    let text = String::from_utf8_lossy(&joined).into_owned();
    mk(text, true, Some(by), out.len(), ob, partial)
}

/// `truncateLine` (grep): at most `max` characters, then `... [truncated]`.
pub fn truncate_line(line: &str, max: usize) -> (String, bool) {
    // JS counts UTF-16 units; count chars, close enough and never splits a char.
    if line.chars().count() <= max {
        return (line.to_string(), false);
    }
    let cut: String = line.chars().take(max).collect();
    (format!("{cut}... [truncated]"), true)
}
