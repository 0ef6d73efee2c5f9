//! Parsers for git's NUL-separated (`-z`) output. Paths are returned as bytes.

/// Splits `-z` output into records, dropping the empty tail after the last NUL.
pub fn split_z(out: &[u8]) -> impl Iterator<Item = &[u8]> {
    let body = out.strip_suffix(b"\0").unwrap_or(out);
    let empty = body.is_empty();
    body.split(|b| *b == 0).filter(move |_| !empty)
}

/// One record of `git status --porcelain=v2 -z` (renames disabled).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusEntry {
    /// `1 XY …`: a tracked path changed in the index (`x`) and/or work tree (`y`).
    Changed { x: u8, y: u8, path: Vec<u8> },
    /// `2 XY …`: a rename or copy (only when renames are enabled).
    Renamed {
        x: u8,
        y: u8,
        path: Vec<u8>,
        orig: Vec<u8>,
    },
    /// `u XY …`: an unmerged path.
    Unmerged { path: Vec<u8> },
    /// `? path`: untracked; a trailing `/` marks a directory git did not enter
    /// (a nested repository).
    Untracked { path: Vec<u8> },
    /// `! path`: ignored (only with `--ignored`).
    Ignored { path: Vec<u8> },
}

/// Parses `git status --porcelain=v2 -z` output.
pub fn status_v2(out: &[u8]) -> Result<Vec<StatusEntry>, String> {
    let mut entries = Vec::new();
    let mut records = split_z(out);
    while let Some(rec) = records.next() {
        let kind = rec.first().copied().ok_or("empty status record")?;
        match kind {
            b'#' => continue,
            b'1' => {
                let (fields, path) = fields_then_path(rec, 8)?;
                let xy = fields[1];
                entries.push(StatusEntry::Changed {
                    x: xy_at(xy, 0)?,
                    y: xy_at(xy, 1)?,
                    path: path.to_vec(),
                });
            }
            b'2' => {
                let (fields, path) = fields_then_path(rec, 9)?;
                let xy = fields[1];
                let orig = records.next().ok_or("rename record without its origin")?;
                entries.push(StatusEntry::Renamed {
                    x: xy_at(xy, 0)?,
                    y: xy_at(xy, 1)?,
                    path: path.to_vec(),
                    orig: orig.to_vec(),
                });
            }
            b'u' => {
                let (_, path) = fields_then_path(rec, 10)?;
                entries.push(StatusEntry::Unmerged {
                    path: path.to_vec(),
                });
            }
            b'?' => entries.push(StatusEntry::Untracked {
                path: rec.get(2..).ok_or("short untracked record")?.to_vec(),
            }),
            b'!' => entries.push(StatusEntry::Ignored {
                path: rec.get(2..).ok_or("short ignored record")?.to_vec(),
            }),
            other => return Err(format!("unknown status record kind {:?}", other as char)),
        }
    }
    Ok(entries)
}

fn xy_at(xy: &[u8], i: usize) -> Result<u8, String> {
    xy.get(i)
        .copied()
        .ok_or_else(|| "short XY field".to_owned())
}

/// Splits `rec` into `n` space-separated fields followed by a path that may
/// itself contain spaces.
fn fields_then_path(rec: &[u8], n: usize) -> Result<(Vec<&[u8]>, &[u8]), String> {
    let mut fields = Vec::with_capacity(n);
    let mut rest = rec;
    for _ in 0..n {
        let sp = rest
            .iter()
            .position(|b| *b == b' ')
            .ok_or_else(|| format!("expected {n} fields in status record"))?;
        fields.push(&rest[..sp]);
        rest = &rest[sp + 1..];
    }
    Ok((fields, rest))
}

/// One record of `git ls-tree -z` / `ls-tree -r -z`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    pub mode: u32,
    pub kind: String,
    pub oid: String,
    pub path: Vec<u8>,
}

/// Parses `git ls-tree -z [-r]` (without `--long`).
pub fn ls_tree(out: &[u8]) -> Result<Vec<TreeEntry>, String> {
    split_z(out)
        .map(|rec| {
            let tab = rec
                .iter()
                .position(|b| *b == b'\t')
                .ok_or("ls-tree record without a tab")?;
            let meta = std::str::from_utf8(&rec[..tab]).map_err(|_| "non-UTF-8 ls-tree meta")?;
            let mut parts = meta.split(' ');
            let (Some(mode), Some(kind), Some(oid)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(format!("bad ls-tree record {meta:?}"));
            };
            Ok(TreeEntry {
                mode: u32::from_str_radix(mode, 8).map_err(|_| format!("bad mode {mode:?}"))?,
                kind: kind.to_owned(),
                oid: oid.to_owned(),
                path: rec[tab + 1..].to_vec(),
            })
        })
        .collect()
}

/// One record of `git diff-tree -r -z --name-status --no-renames`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameStatus {
    /// `A`, `M`, `D`, `T` …
    pub status: u8,
    pub path: Vec<u8>,
}

/// Parses `--name-status -z` output of `diff`/`diff-tree` run without renames.
pub fn name_status(out: &[u8]) -> Result<Vec<NameStatus>, String> {
    let mut recs = split_z(out);
    let mut result = Vec::new();
    while let Some(status) = recs.next() {
        let code = *status.first().ok_or("empty status field")?;
        if code == b'R' || code == b'C' {
            return Err("rename records are not expected (run with --no-renames)".into());
        }
        let path = recs.next().ok_or("status without a path")?;
        result.push(NameStatus {
            status: code,
            path: path.to_vec(),
        });
    }
    Ok(result)
}

/// One record of `git diff-tree -r -z --raw --no-renames`: both modes, both
/// object ids, the status letter and the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawChange {
    pub old_mode: u32,
    pub new_mode: u32,
    pub old_oid: String,
    pub new_oid: String,
    pub status: u8,
    pub path: Vec<u8>,
}

/// Parses `--raw -z` output run without renames (`:M M O O S\0path\0`…);
/// a leading commit id line (`diff-tree` without `--no-commit-id`) is skipped.
pub fn raw_diff(out: &[u8]) -> Result<Vec<RawChange>, String> {
    let mut recs = split_z(out);
    let mut result = Vec::new();
    while let Some(meta) = recs.next() {
        let Some(meta) = meta.strip_prefix(b":") else {
            // a commit id printed by diff-tree before its changes
            continue;
        };
        let meta = std::str::from_utf8(meta).map_err(|_| "non-UTF-8 raw diff record")?;
        let fields: Vec<&str> = meta.split(' ').collect();
        let [old_mode, new_mode, old_oid, new_oid, status] = fields.as_slice() else {
            return Err(format!("bad raw diff record {meta:?}"));
        };
        let status = *status.as_bytes().first().ok_or("empty status")?;
        if status == b'R' || status == b'C' {
            return Err("rename records are not expected (run with --no-renames)".into());
        }
        let mode = |m: &str| u32::from_str_radix(m, 8).map_err(|_| format!("bad mode {m:?}"));
        let path = recs.next().ok_or("raw diff record without a path")?;
        result.push(RawChange {
            old_mode: mode(old_mode)?,
            new_mode: mode(new_mode)?,
            old_oid: (*old_oid).to_owned(),
            new_oid: (*new_oid).to_owned(),
            status,
            path: path.to_vec(),
        });
    }
    Ok(result)
}

/// One record of `git diff --numstat -z` (no renames): added/deleted lines,
/// `None` for binary files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumStat {
    pub added: Option<u64>,
    pub deleted: Option<u64>,
    pub path: Vec<u8>,
}

/// Parses `--numstat -z` output run without renames.
pub fn numstat(out: &[u8]) -> Result<Vec<NumStat>, String> {
    split_z(out)
        .map(|rec| {
            let mut parts = rec.splitn(3, |b| *b == b'\t');
            let (Some(a), Some(d), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
                return Err("bad numstat record".to_owned());
            };
            let num = |f: &[u8]| -> Option<u64> { std::str::from_utf8(f).ok()?.parse().ok() };
            Ok(NumStat {
                added: num(a),
                deleted: num(d),
                path: path.to_vec(),
            })
        })
        .collect()
}

/// A repository-relative path as a person or a tool may name one: not empty,
/// not absolute, no NUL, and no empty, `.`, `..` or `.git` (any case)
/// component.
pub fn is_plain_relative(path: &[u8]) -> bool {
    !(path.is_empty()
        || path.starts_with(b"/")
        || path.contains(&0)
        || path
            .split(|b| *b == b'/')
            .any(|c| c.is_empty() || c == b"." || c == b".." || c.eq_ignore_ascii_case(b".git")))
}

/// Quotes a path for a person the way git does with `core.quotePath=false`:
/// printable UTF-8 as is; anything else C-quoted inside double quotes.
pub fn display_path(path: &[u8]) -> String {
    match std::str::from_utf8(path) {
        Ok(s) if !s.chars().any(|c| c.is_control() || c == '"' || c == '\\') => s.to_owned(),
        _ => {
            let mut out = String::from("\"");
            for chunk in path.utf8_chunks() {
                for c in chunk.valid().chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        '\n' => out.push_str("\\n"),
                        '\t' => out.push_str("\\t"),
                        '\r' => out.push_str("\\r"),
                        c if c.is_control() => {
                            let mut buf = [0u8; 4];
                            for b in c.encode_utf8(&mut buf).bytes() {
                                out.push_str(&format!("\\{b:03o}"));
                            }
                        }
                        c => out.push(c),
                    }
                }
                for b in chunk.invalid() {
                    out.push_str(&format!("\\{b:03o}"));
                }
            }
            out.push('"');
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_z_handles_empty_and_trailing_nul() {
        assert_eq!(split_z(b"").count(), 0);
        assert_eq!(split_z(b"a\0b\0").collect::<Vec<_>>(), vec![b"a", b"b"]);
    }

    #[test]
    fn status_paths_keep_spaces_and_bytes() {
        let out = b"1 .M N... 100644 100644 100644 abc abc a b\xff\0? new dir/\0";
        let entries = status_v2(out).unwrap();
        assert_eq!(
            entries,
            vec![
                StatusEntry::Changed {
                    x: b'.',
                    y: b'M',
                    path: b"a b\xff".to_vec()
                },
                StatusEntry::Untracked {
                    path: b"new dir/".to_vec()
                }
            ]
        );
    }

    #[test]
    fn display_path_quotes_like_git() {
        assert_eq!(display_path(b"plain/file.txt"), "plain/file.txt");
        assert_eq!(display_path(b"caf\xc3\xa9"), "café");
        assert_eq!(display_path(b"a\nb"), "\"a\\nb\"");
        assert_eq!(display_path(b"x\xff"), "\"x\\377\"");
    }
}
