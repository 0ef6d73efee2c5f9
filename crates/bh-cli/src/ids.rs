//! Ids given by people: the whole id, or a unique prefix of at least four
//! hex digits of an execution or task id (`x<8 hex>-<ms hex>`: random
//! digits first, so ids made around the same time differ from their first
//! characters and `bh exec show c8fc` names one; the leading letter may be
//! left out) or of the part after the `-` (which, in ids made before issue
//! 26, is the random part) — `bh_protocol::prefix`'s one rule, with the
//! command that lists them named in the error.

use bh_protocol::prefix::{self, Named, Shape};

use crate::error::{CliError, ErrorKind};

/// The one id of `ids` that `query` names. `what` is the kind of thing
/// (an execution, a task) and `list` the command that shows them.
pub(crate) fn resolve<'a>(
    what: Named,
    list: &str,
    query: &str,
    ids: impl IntoIterator<Item = &'a str>,
) -> Result<&'a str, CliError> {
    prefix::resolve(what, Shape::Stamped, query, ids, |id| id).map_err(|e| {
        CliError::new(
            ErrorKind::of_prefix(e.fault()),
            format!("{e} (`{list}` shows them)"),
        )
    })
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
            resolve(Named::Execution, "bh exec list", "x19a0b1c2d3e", IDS).unwrap(),
            IDS[0]
        );
        assert_eq!(
            resolve(Named::Execution, "bh exec list", "19a0b1c2d3f", IDS).unwrap(),
            IDS[1]
        );
        assert_eq!(
            resolve(Named::Execution, "bh exec list", "t19a0-aaaa", IDS).unwrap(),
            IDS[2]
        );
        // The random part after the `-`.
        assert_eq!(
            resolve(Named::Execution, "bh exec list", "0bad", IDS).unwrap(),
            IDS[0]
        );
        assert_eq!(
            resolve(Named::Execution, "bh exec list", "1234", IDS).unwrap(),
            IDS[1]
        );
    }

    #[test]
    fn ambiguous_short_unknown_and_malformed() {
        let e = resolve(Named::Execution, "bh exec list", "19a0b", IDS).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Ambiguous);
        assert!(e.message.contains(IDS[0]) && e.message.contains(IDS[1]));
        let e = resolve(Named::Execution, "bh exec list", "x19a", IDS).unwrap_err();
        assert!(e.message.contains("too short"), "{}", e.message);
        let e = resolve(Named::Execution, "bh exec list", "ffff", IDS).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound);
        let e = resolve(Named::Execution, "bh exec list", "../etc", IDS).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Usage);
        assert!(
            e.message.contains("is not an execution id"),
            "{}",
            e.message
        );
        let e = resolve(Named::Task, "bh task list", "zz", IDS).unwrap_err();
        assert!(e.message.contains("is not a task id"), "{}", e.message);
    }
}
