//! `read`, `write`, `edit` and `ls` ([P73] `dist/core/tools/{read,write,edit,ls}.js`).

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::args::{Args, to_count};
use crate::confine::ConfineError;
use crate::edit_apply::{
    Edit, apply_edits, detect_line_ending, normalize_to_lf, restore_line_endings,
};
use crate::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head};
use crate::workspace::{FsError, Node, Workspace};
use crate::{ContentBlock, ToolResult};

pub use crate::workspace::MAX_READ_BYTES;

/// A number as JavaScript prints it (integers without `.0`).
pub fn js_num(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// Sniffs the image types Pi 0.73.1 sends as image blocks.
pub fn image_mime(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

pub fn read(root: &dyn Workspace, args: &Value) -> Result<ToolResult, String> {
    let mut a = Args::new("read", args);
    let path = a.str_req("path");
    let offset = a.num_opt("offset");
    let limit = a.num_opt("limit");
    a.finish()?;

    let rel = root.resolve(&path).map_err(|e| e.to_string())?;
    let bytes = match root.read(&rel).map_err(|e| e.to_string())? {
        Node::File(bytes) => bytes,
        Node::Dir => return Err("EISDIR: illegal operation on a directory, read".into()),
    };

    if let Some(mime) = image_mime(&bytes) {
        let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
        return Ok(ToolResult {
            content: vec![
                ContentBlock::Text {
                    text: format!("Read image file [{mime}]"),
                },
                ContentBlock::Image {
                    data,
                    mime_type: mime.to_string(),
                },
            ],
            details: None,
            is_error: false,
        });
    }

    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.split('\n').collect();
    let total = all.len();
    let start = match offset {
        Some(o) if o != 0.0 && !o.is_nan() => to_count(o - 1.0),
        _ => 0,
    };
    let start_display = start + 1;
    if start >= total {
        let shown = offset.map(js_num).unwrap_or_else(|| "undefined".into());
        return Err(format!(
            "Offset {shown} is beyond end of file ({total} lines total)"
        ));
    }
    let (selected, user_limited) = match limit {
        Some(l) => {
            let end = (start + to_count(l)).min(total);
            (all[start..end].join("\n"), Some(end - start))
        }
        None => (all[start..].join("\n"), None),
    };
    let tr = truncate_head(&selected, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES);
    if tr.first_line_exceeds_limit {
        let size = format_size(all[start].len());
        let out = format!(
            "[Line {start_display} is {size}, exceeds {} limit. Use bash: sed -n '{start_display}p' {path} | head -c {DEFAULT_MAX_BYTES}]",
            format_size(DEFAULT_MAX_BYTES)
        );
        return Ok(ToolResult::text_with(
            out,
            json!({ "truncation": tr.to_value() }),
        ));
    }
    if tr.truncated {
        let end_display = start_display + tr.output_lines - 1;
        let next = end_display + 1;
        let mut out = tr.content.clone();
        if tr.truncated_by == Some("lines") {
            out.push_str(&format!(
                "\n\n[Showing lines {start_display}-{end_display} of {total}. Use offset={next} to continue.]"
            ));
        } else {
            out.push_str(&format!(
                "\n\n[Showing lines {start_display}-{end_display} of {total} ({} limit). Use offset={next} to continue.]",
                format_size(DEFAULT_MAX_BYTES)
            ));
        }
        return Ok(ToolResult::text_with(
            out,
            json!({ "truncation": tr.to_value() }),
        ));
    }
    if let Some(n) = user_limited
        && start + n < total
    {
        let remaining = total - (start + n);
        let next = start + n + 1;
        return Ok(ToolResult::text(format!(
            "{}\n\n[{remaining} more lines in file. Use offset={next} to continue.]",
            tr.content
        )));
    }
    Ok(ToolResult::text(tr.content))
}

/// JavaScript's `string.length` (UTF-16 code units), which Pi reports as "bytes".
fn js_len(s: &str) -> usize {
    s.encode_utf16().count()
}

pub fn write(root: &dyn Workspace, args: &Value) -> Result<ToolResult, String> {
    let mut a = Args::new("write", args);
    let path = a.str_req("path");
    let content = a.str_req("content");
    a.finish()?;

    let rel = root.resolve(&path).map_err(|e| e.to_string())?;
    root.write(&rel, content.as_bytes())
        .map_err(|e| e.to_string())?;
    Ok(ToolResult::text(format!(
        "Successfully wrote {} bytes to {path}",
        js_len(&content)
    )))
}

/// Pi's `prepareEditArguments`: `edits` sent as a JSON string, and the legacy
/// top-level `oldText`/`newText`, become `edits[]`.
pub fn prepare_edit_arguments(args: &Value) -> Value {
    let Some(obj) = args.as_object() else {
        return args.clone();
    };
    let mut obj: Map<String, Value> = obj.clone();
    if let Some(Value::String(s)) = obj.get("edits")
        && let Ok(parsed @ Value::Array(_)) = serde_json::from_str::<Value>(s)
    {
        obj.insert("edits".into(), parsed);
    }
    if let (Some(Value::String(o)), Some(Value::String(n))) =
        (obj.get("oldText"), obj.get("newText"))
    {
        let legacy = json!({ "oldText": o, "newText": n });
        let mut edits = match obj.get("edits") {
            Some(Value::Array(a)) => a.clone(),
            _ => Vec::new(),
        };
        edits.push(legacy);
        obj.remove("oldText");
        obj.remove("newText");
        obj.insert("edits".into(), Value::Array(edits));
    }
    Value::Object(obj)
}

pub fn edit(root: &dyn Workspace, args: &Value) -> Result<ToolResult, String> {
    let prepared = prepare_edit_arguments(args);
    let mut a = Args::new("edit", &prepared);
    let path = a.str_req("path");
    let mut edits = Vec::new();
    match prepared.get("edits") {
        None | Some(Value::Null) => {
            if prepared.is_object() {
                a.push_error("  - edits: must have required property 'edits'".into());
            }
        }
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let old = item.get("oldText").and_then(Value::as_str);
                let new = item.get("newText").and_then(Value::as_str);
                match (old, new) {
                    (Some(o), Some(n)) => edits.push(Edit {
                        old_text: o.to_string(),
                        new_text: n.to_string(),
                    }),
                    _ => {
                        if !item.is_object() {
                            a.push_error(format!("  - edits/{i}: must be object"));
                        }
                        if old.is_none() {
                            a.push_error(format!(
                                "  - edits/{i}: must have required property 'oldText'"
                            ));
                        }
                        if new.is_none() {
                            a.push_error(format!(
                                "  - edits/{i}: must have required property 'newText'"
                            ));
                        }
                    }
                }
            }
        }
        Some(_) => a.push_error("  - edits: must be array".into()),
    }
    a.finish()?;
    if edits.is_empty() {
        return Err(
            "Edit tool input is invalid. edits must contain at least one replacement.".into(),
        );
    }

    let rel = root.resolve(&path).map_err(|e| e.to_string())?;
    // What the edit did, for the result (set by the change once it applied).
    let mut applied: Option<(String, String)> = None;
    let mut change = |bytes: Vec<u8>| -> Result<Vec<u8>, String> {
        let raw = String::from_utf8(bytes)
            .map_err(|_| format!("Could not edit file: {path}. The file is not valid UTF-8."))?;
        let (bom, content) = match raw.strip_prefix('\u{FEFF}') {
            Some(rest) => ("\u{FEFF}", rest),
            None => ("", raw.as_str()),
        };
        let ending = detect_line_ending(content);
        let normalized = normalize_to_lf(content);
        let (base, new) = apply_edits(&normalized, &edits, &path)?;
        let final_content = format!("{bom}{}", restore_line_endings(&new, ending));
        applied = Some((base, new));
        Ok(final_content.into_bytes())
    };
    root.update(&rel, &mut change).map_err(|e| match e {
        FsError::Confine(ConfineError::NotFound(_)) => {
            format!("Could not edit file: {path}. Error code: ENOENT.")
        }
        other => other.to_string(),
    })?;
    let (base, new) = applied.ok_or("edit: the change was not applied")?;
    let (diff, first) = crate::diff::generate_diff_string(&base, &new, 4);
    let mut details = Map::new();
    details.insert("diff".into(), Value::String(diff));
    if let Some(f) = first {
        details.insert("firstChangedLine".into(), json!(f));
    }
    Ok(ToolResult::text_with(
        format!("Successfully replaced {} block(s) in {path}.", edits.len()),
        Value::Object(details),
    ))
}

/// An approximation of `a.toLowerCase().localeCompare(b.toLowerCase())` (ICU
/// root collation) for the usual file names: punctuation, then digits, then letters.
pub fn ls_sort_key(name: &str) -> Vec<(u8, char)> {
    name.to_lowercase()
        .chars()
        .map(|c| {
            let class = if c.is_alphabetic() {
                2
            } else if c.is_numeric() {
                1
            } else {
                0
            };
            (class, c)
        })
        .collect()
}

pub fn ls(root: &dyn Workspace, args: &Value) -> Result<ToolResult, String> {
    let mut a = Args::new("ls", args);
    let path = a.str_opt("path");
    let limit = a.num_opt("limit");
    a.finish()?;
    let path = match path.as_deref() {
        None | Some("") => ".".to_string(),
        Some(p) => p.to_string(),
    };
    let limit = limit.map(to_count).unwrap_or(500);

    let rel = root.resolve(&path).map_err(|e| e.to_string())?;
    let abs = root.abs(&rel).display().to_string();
    let names = match root.list(&rel) {
        Ok(names) => names,
        Err(FsError::Confine(ConfineError::NotRegular(_))) => {
            return Err(format!("Not a directory: {abs}"));
        }
        Err(FsError::Confine(ConfineError::NotFound(_))) => {
            return Err(format!("Path not found: {abs}"));
        }
        Err(e) => return Err(e.to_string()),
    };
    let mut entries: Vec<(String, bool)> = names
        .into_iter()
        .map(|(n, is_dir)| (String::from_utf8_lossy(&n).into_owned(), is_dir))
        .collect();
    entries.sort_by(|x, y| {
        ls_sort_key(&x.0)
            .cmp(&ls_sort_key(&y.0))
            .then(x.0.cmp(&y.0))
    });

    let mut results: Vec<String> = Vec::new();
    let mut limit_reached = false;
    for (display, is_dir) in &entries {
        if results.len() >= limit {
            limit_reached = true;
            break;
        }
        let suffix = if *is_dir { "/" } else { "" };
        results.push(format!("{display}{suffix}"));
    }
    if results.is_empty() {
        return Ok(ToolResult::text("(empty directory)"));
    }
    let limit_notice = limit_reached.then(|| {
        (
            format!(
                "{limit} entries limit reached. Use limit={} for more",
                limit * 2
            ),
            "entryLimitReached",
            limit,
        )
    });
    Ok(listing_result(&results, limit_notice))
}

/// The result of a listing tool (`ls`, `find`): the lines cut at 50 KB, and
/// Pi's notices for a hit result limit (`(notice, details key, limit)`) and
/// for the byte cut, with the matching `details`.
pub(crate) fn listing_result(
    results: &[String],
    limit_notice: Option<(String, &'static str, usize)>,
) -> ToolResult {
    let tr = truncate_head(&results.join("\n"), usize::MAX, DEFAULT_MAX_BYTES);
    let mut out = tr.content.clone();
    let mut details = Map::new();
    let mut notices = Vec::new();
    if let Some((notice, key, limit)) = limit_notice {
        notices.push(notice);
        details.insert(key.into(), json!(limit));
    }
    if tr.truncated {
        notices.push(format!("{} limit reached", format_size(DEFAULT_MAX_BYTES)));
        details.insert("truncation".into(), tr.to_value());
    }
    if !notices.is_empty() {
        out.push_str(&format!("\n\n[{}]", notices.join(". ")));
    }
    if details.is_empty() {
        ToolResult::text(out)
    } else {
        ToolResult::text_with(out, Value::Object(details))
    }
}
