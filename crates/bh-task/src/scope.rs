//! The scope a caller grants, frozen against the trusted base commit.

use std::os::unix::ffi::OsStrExt;

use bh_git::Repo;
use bh_git::parse::display_path;
use serde::Serialize;

use crate::TaskError;
use crate::policy::protected_reason;

/// What the caller asked for (repository-relative paths, bytes, no globs).
#[derive(Debug, Clone, Default)]
pub struct ScopeSpec {
    pub modules: Vec<Vec<u8>>,
    pub allow_paths: Vec<Vec<u8>>,
    pub allow_new_paths: Vec<Vec<u8>>,
}

/// A scope checked against the base commit; paths are literal.
#[derive(Debug, Clone, Serialize)]
pub struct FrozenScope {
    pub base: String,
    #[serde(skip)]
    modules: Vec<Vec<u8>>,
    #[serde(skip)]
    allow_paths: Vec<Vec<u8>>,
    #[serde(skip)]
    allow_new_paths: Vec<Vec<u8>>,
    #[serde(skip)]
    hooks_path: Option<Vec<u8>>,
    /// The scope as people read it (for `state.json`).
    pub shown: Vec<String>,
}

/// Whether a touched path may be touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    OutOfScope,
    Protected(&'static str),
}

fn check_literal(flag: &'static str, path: &[u8]) -> Result<(), TaskError> {
    if !bh_git::parse::is_plain_relative(path) {
        return Err(TaskError::BadPath {
            flag,
            path: display_path(path),
        });
    }
    Ok(())
}

fn is_under(path: &[u8], prefix: &[u8]) -> bool {
    path == prefix || (path.starts_with(prefix) && path.get(prefix.len()) == Some(&b'/'))
}

impl FrozenScope {
    /// Checks every granted path against `base` (a full commit id): modules
    /// are tracked files or directories, `allow_paths` tracked files,
    /// `allow_new_paths` absent. `hooks_path` is the repository's relative
    /// `core.hooksPath`, protected like the other hook folders.
    pub fn freeze(
        repo: &Repo,
        base: &str,
        spec: &ScopeSpec,
        hooks_path: Option<&[u8]>,
    ) -> Result<FrozenScope, TaskError> {
        if spec.modules.is_empty() {
            return Err(TaskError::NoModule);
        }
        let kind_at_base = |path: &[u8]| -> Result<Option<String>, TaskError> {
            let out = repo
                .cmd(["ls-tree", "-z", "--full-tree", base, "--"])
                .env("GIT_LITERAL_PATHSPECS", "1")
                .arg(std::ffi::OsStr::from_bytes(path))
                .run()?;
            let entries = bh_git::parse::ls_tree(&out.stdout).unwrap_or_default();
            Ok(entries.into_iter().find(|e| e.path == path).map(|e| e.kind))
        };
        let mut shown = Vec::new();
        for m in &spec.modules {
            check_literal("--module", m)?;
            match kind_at_base(m)?.as_deref() {
                Some("blob") | Some("tree") => shown.push(format!("module {}", display_path(m))),
                _ => {
                    return Err(TaskError::ModuleNotTracked {
                        path: display_path(m),
                        base: base.to_owned(),
                    });
                }
            }
        }
        for a in &spec.allow_paths {
            check_literal("--allow-path", a)?;
            if kind_at_base(a)?.as_deref() != Some("blob") {
                return Err(TaskError::AllowPathNotTracked {
                    path: display_path(a),
                    base: base.to_owned(),
                });
            }
            shown.push(format!("allow-path {}", display_path(a)));
        }
        for n in &spec.allow_new_paths {
            check_literal("--allow-new-path", n)?;
            if kind_at_base(n)?.is_some() {
                return Err(TaskError::AllowNewPathExists {
                    path: display_path(n),
                    base: base.to_owned(),
                });
            }
            shown.push(format!("allow-new-path {}", display_path(n)));
        }
        Ok(FrozenScope {
            base: base.to_owned(),
            modules: spec.modules.clone(),
            allow_paths: spec.allow_paths.clone(),
            allow_new_paths: spec.allow_new_paths.clone(),
            hooks_path: hooks_path.map(<[u8]>::to_vec),
            shown,
        })
    }

    /// Protected paths lose whatever the scope says.
    pub fn verdict(&self, path: &[u8]) -> Verdict {
        if let Some(reason) = protected_reason(path, self.hooks_path.as_deref()) {
            return Verdict::Protected(reason);
        }
        let granted = self.modules.iter().any(|m| is_under(path, m))
            || self.allow_paths.iter().any(|a| a == path)
            || self.allow_new_paths.iter().any(|n| n == path);
        if granted {
            Verdict::Allowed
        } else {
            Verdict::OutOfScope
        }
    }
}
