//! Git's object format, for the few places that write objects without a
//! porcelain command (a checkpoint built from watched changes): tree and
//! commit encoding, tree parsing, and reading `cat-file --batch` /
//! `hash-object --stdin-paths` answers from a long-lived [`GitProcess`].
//!
//! SHA-1 repositories only (20-byte ids, 40 hex digits), as the harness makes
//! its own stores.

use std::io::{BufRead, Read};

use crate::GitProcess;

/// A tree entry's mode for a sub-tree.
pub const MODE_TREE: u32 = 0o040000;
/// A tree entry's mode for a submodule (a commit id).
pub const MODE_GITLINK: u32 = 0o160000;
/// A tree entry's mode for a symbolic link.
pub const MODE_SYMLINK: u32 = 0o120000;

/// Why an object could not be encoded or read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ObjectError {
    #[error("not a 40-digit object id: {0:?}")]
    BadId(String),
    #[error("tree entry name {0:?} is empty or holds a '/' or NUL")]
    BadName(String),
    #[error("malformed tree object")]
    BadTree,
}

/// One entry of a tree object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: Vec<u8>,
    pub mode: u32,
    /// 40 hex digits.
    pub oid: String,
}

/// A tree object's bytes: entries in git's order (a tree sorts as if its
/// name ended in `/`), each `mode SP name NUL id(20 bytes)`.
pub fn encode_tree<'a>(
    entries: impl IntoIterator<Item = (&'a [u8], u32, &'a str)>,
) -> Result<Vec<u8>, ObjectError> {
    let mut sorted: Vec<(Vec<u8>, &[u8], u32, &str)> = entries
        .into_iter()
        .map(|(name, mode, oid)| {
            let mut key = name.to_vec();
            if mode == MODE_TREE {
                key.push(b'/');
            }
            (key, name, mode, oid)
        })
        .collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = Vec::with_capacity(sorted.len() * 48);
    for (_, name, mode, oid) in sorted {
        if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
            return Err(ObjectError::BadName(String::from_utf8_lossy(name).into()));
        }
        out.extend_from_slice(format!("{mode:o} ").as_bytes());
        out.extend_from_slice(name);
        out.push(0);
        out.extend_from_slice(&raw_id(oid)?);
    }
    Ok(out)
}

/// The entries of a tree object's bytes, in stored order (SHA-1 ids).
pub fn parse_tree(body: &[u8]) -> Result<Vec<Entry>, ObjectError> {
    parse_tree_ids(body, 20)
}

/// [`parse_tree`] for ids of `id_len` bytes (20: SHA-1, 32: SHA-256).
pub fn parse_tree_ids(mut body: &[u8], id_len: usize) -> Result<Vec<Entry>, ObjectError> {
    let mut out = Vec::new();
    while !body.is_empty() {
        let sp = body
            .iter()
            .position(|b| *b == b' ')
            .ok_or(ObjectError::BadTree)?;
        let mode = std::str::from_utf8(&body[..sp])
            .ok()
            .and_then(|m| u32::from_str_radix(m, 8).ok())
            .ok_or(ObjectError::BadTree)?;
        let rest = &body[sp + 1..];
        let nul = rest
            .iter()
            .position(|b| *b == 0)
            .ok_or(ObjectError::BadTree)?;
        let oid = rest
            .get(nul + 1..nul + 1 + id_len)
            .ok_or(ObjectError::BadTree)?;
        out.push(Entry {
            name: rest[..nul].to_vec(),
            mode,
            oid: hex(oid),
        });
        body = &rest[nul + 1 + id_len..];
    }
    Ok(out)
}

/// `Name <email> <seconds> <+hhmm>`, as in a commit's author line. `name`
/// and `email` must not hold `<`, `>` or a newline (they are the harness's).
pub fn ident(name: &str, email: &str, seconds: i64, tz: &str) -> String {
    format!("{name} <{email}> {seconds} {tz}")
}

/// A commit object's bytes, as `git commit-tree` writes them (no encoding
/// header, no signature).
pub fn encode_commit(
    tree: &str,
    parents: &[&str],
    author: &str,
    committer: &str,
    message: &str,
) -> Result<Vec<u8>, ObjectError> {
    raw_id(tree)?;
    let mut out = format!("tree {tree}\n");
    for p in parents {
        raw_id(p)?;
        out.push_str(&format!("parent {p}\n"));
    }
    out.push_str(&format!(
        "author {author}\ncommitter {committer}\n\n{message}"
    ));
    Ok(out.into_bytes())
}

fn raw_id(oid: &str) -> Result<[u8; 20], ObjectError> {
    let bad = || ObjectError::BadId(oid.to_owned());
    if oid.len() != 40 {
        return Err(bad());
    }
    let mut raw = [0u8; 20];
    for (i, pair) in oid.as_bytes().chunks(2).enumerate() {
        let digit = |c: u8| (c as char).to_digit(16).ok_or_else(bad);
        raw[i] = u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).map_err(|_| bad())?;
    }
    Ok(raw)
}

fn hex(raw: &[u8]) -> String {
    raw.iter().map(|b| format!("{b:02x}")).collect()
}

/// One `cat-file --batch` answer: `Some((oid, type, body))`, `None` for
/// `missing`/`ambiguous`.
pub fn read_batch_object(p: &mut GitProcess) -> std::io::Result<Option<(String, String, Vec<u8>)>> {
    let mut header = String::new();
    p.stdout.read_line(&mut header)?;
    let odd = || std::io::Error::other(format!("{} said {header:?}", p.argv()));
    // The name asked for may hold spaces (`<tree>:<path>`).
    let line = header.trim_end_matches('\n');
    if line.ends_with(" missing") || line.ends_with(" ambiguous") {
        return Ok(None);
    }
    let parts: Vec<&str> = line.split(' ').collect();
    match parts.as_slice() {
        [_, "missing"] | [_, "ambiguous"] => Ok(None),
        [oid, kind, size] => {
            let size: usize = size.parse().map_err(|_| odd())?;
            let mut body = vec![0; size + 1];
            p.stdout.read_exact(&mut body)?;
            body.pop();
            Ok(Some(((*oid).to_owned(), (*kind).to_owned(), body)))
        }
        _ => Err(odd()),
    }
}

/// One object id line (`hash-object --stdin-paths`, `mktree`).
pub fn read_oid_line(p: &mut GitProcess) -> std::io::Result<String> {
    let mut line = String::new();
    p.stdout.read_line(&mut line)?;
    let oid = line.trim_end();
    if oid.len() == 40 && oid.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(oid.to_owned())
    } else {
        Err(std::io::Error::other(format!("{} said {line:?}", p.argv())))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn ids_and_names_are_checked() {
        let oid = "a".repeat(40);
        assert!(encode_tree([(&b"x"[..], 0o100644, oid.as_str())]).is_ok());
        assert!(matches!(
            encode_tree([(&b"x"[..], 0o100644, "abc")]),
            Err(ObjectError::BadId(_))
        ));
        assert!(matches!(
            encode_tree([(&b"a/b"[..], 0o100644, oid.as_str())]),
            Err(ObjectError::BadName(_))
        ));
        let zz = "z".repeat(40);
        assert!(encode_tree([(&b"x"[..], 0o100644, zz.as_str())]).is_err());
        assert_eq!(parse_tree(b"100644 x\0short"), Err(ObjectError::BadTree));
    }
}
