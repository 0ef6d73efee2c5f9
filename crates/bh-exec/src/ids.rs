//! The character sets of the values that reach a commit message, a ref name
//! or a file name: session id, entry id, execution id and model string. They
//! are checked when a plan is made and again when it is verified, so no
//! trailer value can ever hold a newline, a space or a control character.

use crate::error::ExecError;

/// Longest id or model string accepted.
pub const MAX_ID_LEN: usize = 128;

/// What an id names (for the error message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    Session,
    Entry,
    Execution,
    Model,
}

impl IdKind {
    pub fn as_str(self) -> &'static str {
        match self {
            IdKind::Session => "session id",
            IdKind::Entry => "entry id",
            IdKind::Execution => "execution id",
            IdKind::Model => "model",
        }
    }

    /// The characters allowed besides ASCII letters and digits.
    fn extra(self) -> &'static [u8] {
        match self {
            IdKind::Session | IdKind::Entry | IdKind::Execution => b"._:-",
            // PROVIDER/MODEL; model names use `:` (tags), `@` and `+`
            // (versions) and more `/` (routers).
            IdKind::Model => b"._:/@+-",
        }
    }

    pub fn rule(self) -> &'static str {
        match self {
            IdKind::Session | IdKind::Entry | IdKind::Execution => {
                "1 to 128 of A-Z a-z 0-9 . _ : -, starting with a letter or digit"
            }
            IdKind::Model => {
                "PROVIDER/MODEL, 1 to 128 of A-Z a-z 0-9 . _ : / @ + -, starting with a letter or digit"
            }
        }
    }
}

/// Checks `value` against the character set of `kind`.
pub fn check_id(kind: IdKind, value: &str) -> Result<(), ExecError> {
    let b = value.as_bytes();
    let charset = b
        .iter()
        .all(|c| c.is_ascii_alphanumeric() || kind.extra().contains(c));
    let shaped = match kind {
        IdKind::Model => value
            .split_once('/')
            .is_some_and(|(p, m)| !p.is_empty() && !m.is_empty()),
        _ => true,
    };
    if b.is_empty() || b.len() > MAX_ID_LEN || !b[0].is_ascii_alphanumeric() || !charset || !shaped
    {
        return Err(ExecError::InvalidId {
            what: kind.as_str(),
            value: value.to_owned(),
            rule: kind.rule(),
        });
    }
    Ok(())
}
