//! Ids given by people: the whole id, or a unique prefix of at least four
//! hex digits of an execution or task id (`x<ms hex>-<8 hex>`, the leading
//! letter may be left out) or of its random part after the `-` (the time
//! part is shared by every id made around the same time, so `bh exec show
//! c8fc` is the short form). An ambiguous prefix names the candidates; an
//! unknown one is a not-found error.

use crate::error::{CliError, ErrorKind};

/// Hex digits a prefix needs at least.
pub(crate) const MIN_HEX: usize = 4;

/// The one id of `ids` that `query` names. `what` is the kind of thing
/// ("execution", "task") and `list` the command that shows them.
pub(crate) fn resolve<'a>(
    what: &str,
    list: &str,
    query: &str,
    ids: impl IntoIterator<Item = &'a str>,
) -> Result<&'a str, CliError> {
    let ids: Vec<&str> = ids.into_iter().collect();
    if let Some(exact) = ids.iter().find(|id| **id == query) {
        return Ok(exact);
    }
    let body = query
        .strip_prefix(|c: char| c.is_ascii_alphabetic() && !c.is_ascii_hexdigit())
        .unwrap_or(query);
    let hex = body.chars().filter(char::is_ascii_hexdigit).count();
    if body.is_empty() || !body.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return Err(CliError::usage(format!(
            "{query:?} is not {} {what} id (a unique prefix of at least {MIN_HEX} hex digits; `{list}` shows them)",
            article(what)
        )));
    }
    if hex < MIN_HEX {
        return Err(CliError::usage(format!(
            "{what} id prefix {query:?} is too short: give at least {MIN_HEX} hex digits"
        )));
    }
    let query = query.to_ascii_lowercase();
    let matches: Vec<&str> = ids
        .iter()
        .copied()
        .filter(|id| {
            id.starts_with(&query)
                || id.get(1..).is_some_and(|b| b.starts_with(&query))
                || id
                    .rsplit_once('-')
                    .is_some_and(|(_, random)| random.starts_with(&query))
        })
        .collect();
    match matches.as_slice() {
        [one] => Ok(one),
        [] => Err(CliError::new(
            ErrorKind::NotFound,
            format!("no {what} matches {query:?} (`{list}` shows them)"),
        )),
        many => Err(CliError::new(
            ErrorKind::Ambiguous,
            format!(
                "{what} id prefix {query:?} is ambiguous; candidates: {}",
                many.join(", ")
            ),
        )),
    }
}

/// "an execution", "a task".
fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const IDS: [&str; 3] = [
        "x19a0b1c2d3e-0badf00d",
        "x19a0b1c2d3f-12345678",
        "t19a0-aaaa",
    ];

    #[test]
    fn prefixes_with_or_without_the_letter() {
        assert_eq!(
            resolve("execution", "bh exec list", "x19a0b1c2d3e", IDS).unwrap(),
            IDS[0]
        );
        assert_eq!(
            resolve("execution", "bh exec list", "19a0b1c2d3f", IDS).unwrap(),
            IDS[1]
        );
        assert_eq!(
            resolve("execution", "bh exec list", "t19a0-aaaa", IDS).unwrap(),
            IDS[2]
        );
        // The random part after the `-`.
        assert_eq!(
            resolve("execution", "bh exec list", "0bad", IDS).unwrap(),
            IDS[0]
        );
        assert_eq!(
            resolve("execution", "bh exec list", "1234", IDS).unwrap(),
            IDS[1]
        );
    }

    #[test]
    fn ambiguous_short_unknown_and_malformed() {
        let e = resolve("execution", "bh exec list", "19a0b", IDS).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Ambiguous);
        assert!(e.message.contains(IDS[0]) && e.message.contains(IDS[1]));
        let e = resolve("execution", "bh exec list", "x19a", IDS).unwrap_err();
        assert!(e.message.contains("too short"), "{}", e.message);
        let e = resolve("execution", "bh exec list", "ffff", IDS).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound);
        let e = resolve("execution", "bh exec list", "../etc", IDS).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Usage);
        assert!(
            e.message.contains("is not an execution id"),
            "{}",
            e.message
        );
        let e = resolve("task", "bh task list", "zz", IDS).unwrap_err();
        assert!(e.message.contains("is not a task id"), "{}", e.message);
    }
}
