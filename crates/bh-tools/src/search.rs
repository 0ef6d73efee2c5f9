//! `grep` and `find` in Rust ([P73] `dist/core/tools/{grep,find}.js` run
//! `rg`/`fd`; here the `ignore` walker honours `.gitignore` the same way).
//!
//! Walks start at the root (so the root's `.gitignore` applies to a
//! sub-directory search, and no ignore file above the root is ever read),
//! prune everything not on the way to or below the search path, never follow
//! symlinks, skip `.git` in any case, and open every file they read through
//! [`Root`] like the other tools.

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkBuilder;
use serde_json::{Map, Value, json};

use crate::ToolResult;
use crate::args::{Args, to_count};
use crate::confine::{ConfineError, Opened, RelPath, Root, is_git_name};
use crate::file_tools::MAX_READ_BYTES;
use crate::truncate::{
    DEFAULT_MAX_BYTES, GREP_MAX_LINE_LENGTH, format_size, truncate_head, truncate_line,
};

enum Target {
    Dir(RelPath),
    File(RelPath),
}

fn resolve_target(root: &Root, path: Option<&str>) -> Result<Target, String> {
    let path = match path {
        None | Some("") => ".",
        Some(p) => p,
    };
    let rel = root.resolve(path).map_err(|e| e.to_string())?;
    let abs = root.abs(&rel).display().to_string();
    match root.open_read(&rel) {
        Ok(Opened::Dir(_)) => Ok(Target::Dir(rel)),
        Ok(Opened::File(..)) => Ok(Target::File(rel)),
        Err(ConfineError::NotFound(_)) => Err(format!("Path not found: {abs}")),
        Err(e) => Err(e.to_string()),
    }
}

/// Every non-symlink entry at or below `base` (relative to the root), in
/// file-name order, honouring ignore files. Yields `(path relative to root, is_dir)`.
fn walk(root: &Root, base: &RelPath, mut visit: impl FnMut(PathBuf, bool) -> bool) {
    let base_path = if base.is_root() {
        PathBuf::new()
    } else {
        base.to_path()
    };
    let root_path = root.path().to_path_buf();
    let base_for_filter = base_path.clone();
    let root_for_filter = root_path.clone();
    let walker = WalkBuilder::new(&root_path)
        .hidden(false)
        .parents(false)
        .ignore(true)
        .git_ignore(true)
        .git_global(false)
        .git_exclude(true)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a: &OsStr, b: &OsStr| a.cmp(b))
        .filter_entry(move |e| {
            if is_git_name(e.file_name()) && e.depth() > 0 {
                return false;
            }
            if e.path_is_symlink() {
                return false;
            }
            let Ok(rel) = e.path().strip_prefix(&root_for_filter) else {
                return false;
            };
            // On the way to the base, or at/below it.
            base_for_filter.starts_with(rel) || rel.starts_with(&base_for_filter)
        })
        .build();
    for entry in walker.flatten() {
        let Ok(rel) = entry.path().strip_prefix(&root_path) else {
            continue;
        };
        if !rel.starts_with(&base_path) || rel == base_path {
            continue;
        }
        let Some(ft) = entry.file_type() else {
            continue;
        };
        if ft.is_symlink() {
            continue;
        }
        if !visit(rel.to_path_buf(), ft.is_dir()) {
            break;
        }
    }
}

/// Reads a file found by a walk, through the confined open. `None` for
/// anything that is not a readable regular file.
fn read_confined(root: &Root, rel: &Path) -> Option<Vec<u8>> {
    let rel = root.resolve_os(rel.as_os_str()).ok()?;
    match root.open_read(&rel).ok()? {
        Opened::File(f, st) => {
            if st.st_size > MAX_READ_BYTES {
                return None;
            }
            let mut buf = Vec::new();
            f.take(MAX_READ_BYTES as u64).read_to_end(&mut buf).ok()?;
            Some(buf)
        }
        Opened::Dir(_) => None,
    }
}

fn reachable(root: &Root, rel: &Path) -> bool {
    root.resolve_os(rel.as_os_str())
        .is_ok_and(|r| root.open_read(&r).is_ok())
}

fn glob_matcher(glob: &str) -> Result<GlobMatcher, String> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| e.to_string())
}

/// A glob without `/` matches the file name; otherwise the path relative to the search dir.
fn glob_matches(m: &GlobMatcher, glob: &str, rel_to_search: &Path) -> bool {
    if glob.contains('/') {
        m.is_match(rel_to_search)
    } else {
        rel_to_search.file_name().is_some_and(|n| m.is_match(n))
    }
}

fn slash(p: &Path) -> String {
    p.to_string_lossy().replace('\\', "/")
}

/// The `grep` tool: the arguments checked, the matchers built, the files
/// walked, each searched line by line, and the matches formatted with notices.
pub fn grep(root: &Root, args: &Value) -> Result<ToolResult, String> {
    let req = GrepRequest::parse(args)?;
    let re = line_regex(&req)?;
    let glob = req.glob.as_deref().map(FileGlob::new).transpose()?;
    let target = resolve_target(root, req.path.as_deref())?;
    let files = files_to_search(root, &target, glob.as_ref());
    let found = search_files(root, &files, &re, req.context, req.limit);
    Ok(grep_result(found, req.limit))
}

/// A `grep` call's arguments, checked.
struct GrepRequest {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
    ignore_case: bool,
    literal: bool,
    /// Lines shown either side of a match.
    context: usize,
    /// Matches reported at most (at least 1).
    limit: usize,
}

impl GrepRequest {
    /// The request read from the tool call's arguments; a missing, mistyped or
    /// unknown argument is an error.
    fn parse(args: &Value) -> Result<GrepRequest, String> {
        let mut a = Args::new("grep", args);
        let pattern = a.str_req("pattern");
        let path = a.str_opt("path");
        let glob = a.str_opt("glob");
        let ignore_case = a.bool_opt("ignoreCase").unwrap_or(false);
        let literal = a.bool_opt("literal").unwrap_or(false);
        let context = a.num_opt("context").map(to_count).unwrap_or(0);
        let limit = a.num_opt("limit");
        a.finish()?;
        Ok(GrepRequest {
            pattern,
            path,
            glob,
            ignore_case,
            literal,
            context,
            limit: limit.map(to_count).unwrap_or(100).max(1),
        })
    }
}

/// The regex a line must match: the pattern (escaped when literal), with the
/// request's case rule.
fn line_regex(req: &GrepRequest) -> Result<regex::Regex, String> {
    let escaped;
    let source = if req.literal {
        escaped = regex::escape(&req.pattern);
        &escaped
    } else {
        &req.pattern
    };
    regex::RegexBuilder::new(source)
        .case_insensitive(req.ignore_case)
        .size_limit(1 << 24)
        .build()
        .map_err(|e| e.to_string())
}

/// The glob a file found by a directory search must match.
struct FileGlob<'a> {
    matcher: GlobMatcher,
    glob: &'a str,
}

impl<'a> FileGlob<'a> {
    /// The glob compiled; a bad one is an error.
    fn new(glob: &'a str) -> Result<FileGlob<'a>, String> {
        Ok(FileGlob {
            matcher: glob_matcher(glob)?,
            glob,
        })
    }
}

/// The files to search, each as (path relative to the root, name shown): the
/// target file itself, or every file below the target directory that the
/// glob admits, in walk order.
fn files_to_search(
    root: &Root,
    target: &Target,
    glob: Option<&FileGlob<'_>>,
) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    match target {
        Target::File(rel) => {
            let p = rel.to_path();
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            files.push((p, name));
        }
        Target::Dir(base) => {
            let base_path = if base.is_root() {
                PathBuf::new()
            } else {
                base.to_path()
            };
            walk(root, base, |rel, is_dir| {
                if is_dir {
                    return true;
                }
                let below = rel.strip_prefix(&base_path).unwrap_or(&rel).to_path_buf();
                if let Some(g) = glob
                    && !glob_matches(&g.matcher, g.glob, &below)
                {
                    return true;
                }
                files.push((rel, slash(&below)));
                true
            });
        }
    }
    files
}

/// The matches found so far, as the output lines that show them.
#[derive(Default)]
struct Matches {
    out_lines: Vec<String>,
    count: usize,
    limit_reached: bool,
    lines_truncated: bool,
}

/// The files searched in order, skipping unreadable and binary ones, until
/// `limit` matches are found.
fn search_files(
    root: &Root,
    files: &[(PathBuf, String)],
    re: &regex::Regex,
    context: usize,
    limit: usize,
) -> Matches {
    let mut found = Matches::default();
    for (rel, display) in files {
        let Some(bytes) = read_confined(root, rel) else {
            continue;
        };
        if bytes.contains(&0) {
            continue; // binary, as rg skips it
        }
        found.search_file(display, &bytes, re, context, limit);
        if found.limit_reached {
            break;
        }
    }
    found
}

impl Matches {
    /// One file's lines searched (any line ending), each match added with its
    /// context, until `limit` matches are found in all.
    fn search_file(
        &mut self,
        display: &str,
        bytes: &[u8],
        re: &regex::Regex,
        context: usize,
        limit: usize,
    ) {
        let text = String::from_utf8_lossy(bytes);
        let norm = text.replace("\r\n", "\n").replace('\r', "\n");
        let lines: Vec<&str> = norm.split('\n').collect();
        // A trailing newline does not make an extra searchable line.
        let searchable = if norm.ends_with('\n') {
            lines.len() - 1
        } else {
            lines.len()
        };
        for (i, line) in lines.iter().take(searchable).enumerate() {
            if !re.is_match(line) {
                continue;
            }
            self.count += 1;
            self.push_match(display, &lines, i + 1, context);
            if self.count >= limit {
                self.limit_reached = true;
                return;
            }
        }
    }

    /// The output lines of the match on line `n` (1-based): `name:n: text`,
    /// with `context` lines either side as `name-k- text`, each cut to length.
    fn push_match(&mut self, display: &str, lines: &[&str], n: usize, context: usize) {
        let start = if context > 0 {
            n.saturating_sub(context).max(1)
        } else {
            n
        };
        let end = if context > 0 {
            (n + context).min(lines.len())
        } else {
            n
        };
        for cur in start..=end {
            let t = lines.get(cur - 1).copied().unwrap_or("");
            let (t, cut) = truncate_line(t, GREP_MAX_LINE_LENGTH);
            self.lines_truncated |= cut;
            if cur == n {
                self.out_lines.push(format!("{display}:{cur}: {t}"));
            } else {
                self.out_lines.push(format!("{display}-{cur}- {t}"));
            }
        }
    }
}

/// The tool's result: the match lines cut to the byte limit, then a notice
/// (and a detail) for each limit reached.
fn grep_result(found: Matches, limit: usize) -> ToolResult {
    if found.count == 0 {
        return ToolResult::text("No matches found");
    }
    let tr = truncate_head(&found.out_lines.join("\n"), usize::MAX, DEFAULT_MAX_BYTES);
    let mut out = tr.content.clone();
    let mut details = Map::new();
    let mut notices = Vec::new();
    if found.limit_reached {
        notices.push(format!(
            "{limit} matches limit reached. Use limit={} for more, or refine pattern",
            limit * 2
        ));
        details.insert("matchLimitReached".into(), json!(limit));
    }
    if tr.truncated {
        notices.push(format!("{} limit reached", format_size(DEFAULT_MAX_BYTES)));
        details.insert("truncation".into(), tr.to_value());
    }
    if found.lines_truncated {
        notices.push(format!(
            "Some lines truncated to {GREP_MAX_LINE_LENGTH} chars. Use read tool to see full lines"
        ));
        details.insert("linesTruncated".into(), json!(true));
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

pub fn find(root: &Root, args: &Value) -> Result<ToolResult, String> {
    let mut a = Args::new("find", args);
    let pattern = a.str_req("pattern");
    let path = a.str_opt("path");
    let limit = a.num_opt("limit");
    a.finish()?;
    let limit = limit.map(to_count).unwrap_or(1000);
    let m = glob_matcher(&pattern)?;

    let base = match resolve_target(root, path.as_deref())? {
        Target::Dir(rel) => rel,
        Target::File(rel) => {
            return Err(format!("Not a directory: {}", root.abs(&rel).display()));
        }
    };
    let base_path = if base.is_root() {
        PathBuf::new()
    } else {
        base.to_path()
    };
    let mut results: Vec<String> = Vec::new();
    if limit > 0 {
        walk(root, &base, |rel, is_dir| {
            let below = rel.strip_prefix(&base_path).unwrap_or(&rel).to_path_buf();
            // Listed only if it is reachable beneath the root right now (a
            // directory swapped for a symlink mid-walk is not reported).
            if glob_matches(&m, &pattern, &below) && reachable(root, &rel) {
                let mut s = slash(&below);
                if is_dir {
                    s.push('/');
                }
                results.push(s);
            }
            results.len() < limit
        });
    }
    if results.is_empty() {
        return Ok(ToolResult::text("No files found matching pattern"));
    }
    let limit_notice = (results.len() >= limit).then(|| {
        (
            format!(
                "{limit} results limit reached. Use limit={} for more, or refine pattern",
                limit * 2
            ),
            "resultLimitReached",
            limit,
        )
    });
    Ok(crate::file_tools::listing_result(&results, limit_notice))
}
