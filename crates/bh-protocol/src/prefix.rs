//! The one rule by which people name things by id (issue 26): the whole id,
//! or a unique, case-insensitive prefix of at least [`MIN_HEX`] hex digits.
//! Checkpoints, session entries, executions and tasks all resolve here, so
//! the same bad prefix fails the same way in every command: not hex, too
//! short, not found, or ambiguous (naming the candidates) — one
//! [`PrefixFault`] each, which the CLI maps to one exit code each.

use std::fmt;

/// Hex digits a prefix needs at least.
pub const MIN_HEX: usize = 4;

/// What kind of thing an id names (for messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    Checkpoint,
    Entry,
    Execution,
    Task,
}

impl fmt::Display for Named {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Named::Checkpoint => "checkpoint",
            Named::Entry => "entry",
            Named::Execution => "execution",
            Named::Task => "task",
        })
    }
}

/// Why a query names nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefixFault {
    /// Holds something other than hex digits (and the id's own separators).
    NotHex,
    /// Fewer than [`MIN_HEX`] hex digits.
    TooShort,
    /// Well-formed, but no id starts with it.
    NotFound,
    /// Several ids start with it.
    Ambiguous,
}

/// A query that names no single thing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    #[error(
        "{query:?} is not {} {what} id (its id or a unique prefix of at least {MIN_HEX} hex digits)",
        article(*.what)
    )]
    NotHex { what: Named, query: String },
    #[error("{what} id prefix {query:?} is too short: give at least {MIN_HEX} hex digits")]
    TooShort { what: Named, query: String },
    #[error("no {what} matches {query:?}")]
    NotFound { what: Named, query: String },
    #[error("{what} id prefix {query:?} is ambiguous; candidates: {}", .candidates.join(", "))]
    Ambiguous {
        what: Named,
        query: String,
        candidates: Vec<String>,
    },
}

impl PrefixError {
    /// Which of the four faults this is.
    pub fn fault(&self) -> PrefixFault {
        match self {
            PrefixError::NotHex { .. } => PrefixFault::NotHex,
            PrefixError::TooShort { .. } => PrefixFault::TooShort,
            PrefixError::NotFound { .. } => PrefixFault::NotFound,
            PrefixError::Ambiguous { .. } => PrefixFault::Ambiguous,
        }
    }

    /// What was asked for.
    pub fn query(&self) -> &str {
        match self {
            PrefixError::NotHex { query, .. }
            | PrefixError::TooShort { query, .. }
            | PrefixError::NotFound { query, .. }
            | PrefixError::Ambiguous { query, .. } => query,
        }
    }
}

fn article(what: Named) -> &'static str {
    match what {
        Named::Entry | Named::Execution => "an",
        Named::Checkpoint | Named::Task => "a",
    }
}

/// How an id is spelled beyond hex digits, and what a prefix may match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Hex only (checkpoint commits, Pi's entry ids): a prefix of the id.
    Hex,
    /// `<letter><hex>-<hex>` (execution and task ids, random part first): a
    /// query may hold the letter and `-`; it matches the id, the id without
    /// its letter, or the part after the `-` (the random part of ids made
    /// before their random part came first).
    Stamped,
}

impl Shape {
    /// Whether `query` is spelled like an id of this shape (the letter
    /// only first).
    fn spells(self, query: &str) -> bool {
        let body = match self {
            Shape::Hex => query,
            Shape::Stamped => query
                .strip_prefix(|c: char| c.is_ascii_alphabetic())
                .unwrap_or(query),
        };
        !body.is_empty()
            && body
                .chars()
                .all(|c| c.is_ascii_hexdigit() || (self == Shape::Stamped && c == '-'))
    }

    fn matches(self, id: &str, query: &str) -> bool {
        let id = id.to_ascii_lowercase();
        match self {
            Shape::Hex => id.starts_with(query),
            Shape::Stamped => {
                id.starts_with(query)
                    || id.get(1..).is_some_and(|rest| rest.starts_with(query))
                    || id
                        .rsplit_once('-')
                        .is_some_and(|(_, random)| random.starts_with(query))
            }
        }
    }
}

/// The one item of `items` whose id (`id_of`) `query` names: the id itself,
/// else a unique prefix as `shape` says. Candidates are listed in `items`'
/// order, each id once.
pub fn resolve<T>(
    what: Named,
    shape: Shape,
    query: &str,
    items: impl IntoIterator<Item = T>,
    id_of: impl Fn(&T) -> &str,
) -> Result<T, PrefixError> {
    let mut items: Vec<T> = items.into_iter().collect();
    let owned = || query.to_owned();
    // A whole id is taken as it is, however it is spelled.
    if let Some(at) = items.iter().position(|i| id_of(i) == query) {
        return Ok(items.swap_remove(at));
    }
    if !shape.spells(query) {
        return Err(PrefixError::NotHex {
            what,
            query: owned(),
        });
    }
    if query.chars().filter(char::is_ascii_hexdigit).count() < MIN_HEX {
        return Err(PrefixError::TooShort {
            what,
            query: owned(),
        });
    }
    let lower = query.to_ascii_lowercase();
    let mut hits: Vec<T> = items
        .into_iter()
        .filter(|i| !id_of(i).is_empty() && shape.matches(id_of(i), &lower))
        .collect();
    let mut candidates: Vec<String> = Vec::new();
    for hit in &hits {
        let id = id_of(hit).to_owned();
        if !candidates.contains(&id) {
            candidates.push(id);
        }
    }
    match candidates.len() {
        0 => Err(PrefixError::NotFound {
            what,
            query: owned(),
        }),
        1 => Ok(hits.swap_remove(0)),
        _ => Err(PrefixError::Ambiguous {
            what,
            query: owned(),
            candidates,
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const STAMPED: [&str; 3] = [
        "x19a0b1c2d3e-0badf00d",
        "x19a0b1c2d3f-12345678",
        "t19a0-aaaa",
    ];

    fn hex(query: &str) -> Result<&'static str, PrefixFault> {
        let ids = ["abcd1234", "abcd5678", "ef012345"];
        resolve(Named::Entry, Shape::Hex, query, ids, |s| s).map_err(|e| e.fault())
    }

    fn stamped(query: &str) -> Result<&'static str, PrefixFault> {
        resolve(Named::Execution, Shape::Stamped, query, STAMPED, |s| s).map_err(|e| e.fault())
    }

    #[test]
    fn the_four_faults_and_the_hits() {
        assert_eq!(hex("abcd5"), Ok("abcd5678"));
        assert_eq!(hex("ABCD12"), Ok("abcd1234"));
        assert_eq!(hex("ef012345"), Ok("ef012345"));
        assert_eq!(hex("abcd"), Err(PrefixFault::Ambiguous));
        assert_eq!(hex("9999"), Err(PrefixFault::NotFound));
        assert_eq!(hex("ab"), Err(PrefixFault::TooShort));
        assert_eq!(hex("zz12"), Err(PrefixFault::NotHex));
        assert_eq!(hex("abcd-1"), Err(PrefixFault::NotHex));
        assert_eq!(hex(""), Err(PrefixFault::NotHex));
        // A whole id, however spelled (an older session's entry ids).
        let odd = ["msg-1", "abcd1234"];
        assert_eq!(
            resolve(Named::Entry, Shape::Hex, "msg-1", odd, |s| s),
            Ok("msg-1")
        );
    }

    #[test]
    fn stamped_ids_by_letter_body_or_random_part() {
        assert_eq!(stamped("x19a0b1c2d3e"), Ok(STAMPED[0]));
        assert_eq!(stamped("19a0b1c2d3f"), Ok(STAMPED[1]));
        assert_eq!(stamped("0bad"), Ok(STAMPED[0]));
        assert_eq!(stamped("t19a0-aaaa"), Ok(STAMPED[2]));
        assert_eq!(stamped("19a0"), Err(PrefixFault::Ambiguous));
        assert_eq!(stamped("x19"), Err(PrefixFault::TooShort));
        assert_eq!(stamped("ffffffff"), Err(PrefixFault::NotFound));
        assert_eq!(stamped("x19a0/../"), Err(PrefixFault::NotHex));
        assert_eq!(stamped("zzzz"), Err(PrefixFault::NotHex));
    }

    #[test]
    fn candidates_are_named_once_each() {
        let err = resolve(
            Named::Checkpoint,
            Shape::Hex,
            "abcd",
            ["abcd1", "abcd1", "abcd2"],
            |s| s,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "checkpoint id prefix \"abcd\" is ambiguous; candidates: abcd1, abcd2"
        );
    }
}
