//! Filter drivers in the execution's worktree. By default none runs: every
//! driver the repository's configuration defines (system, global, local,
//! included files: `git config --get-regexp '^filter\.'` as the run's git
//! sees it, in the main checkout and again in the worktree made empty, whose
//! git may read more: `includeIf "gitdir:**/worktrees/**"`) is switched off on the git commands that check out or stage
//! the worktree, with `-c filter.<name>.smudge= -c …clean= -c
//! …process= -c …required=false` (an empty command is no command to git;
//! `required=false` keeps a missing filter from failing the checkout). The
//! partial patch is a tree-to-tree diff (`--no-textconv`), which runs none.
//! Attributes in the tree may name any driver; only configured ones can run,
//! and those are exactly the ones switched off. `--allow-filters` (recorded
//! in the plan, so the MAC covers it) leaves them on, e.g. for Git LFS.

use bh_git::Repo;

use crate::error::ExecError;

/// The filter drivers configured for `repo` (refusing a name `-c` cannot
/// express).
pub(crate) fn configured_drivers(repo: &Repo) -> Result<Vec<String>, ExecError> {
    // Exit 1: no such key.
    let out = repo
        .cmd(["config", "-z", "--get-regexp", r"^filter\."])
        .ok_codes(&[0, 1])
        .run()?;
    let mut names: Vec<String> = Vec::new();
    for record in out.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        // "<key>\n<value>": the key is filter.<name>.<variable>.
        let key = record.split(|b| *b == b'\n').next().unwrap_or_default();
        let Ok(key) = std::str::from_utf8(key) else {
            return Err(ExecError::FilterName {
                name: String::from_utf8_lossy(key).into_owned(),
            });
        };
        let Some(rest) = key.strip_prefix("filter.") else {
            continue;
        };
        let Some((name, _variable)) = rest.rsplit_once('.') else {
            continue;
        };
        if name.contains('=') || name.chars().any(char::is_control) {
            return Err(ExecError::FilterName {
                name: name.to_owned(),
            });
        }
        if !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}

/// `repo` with the drivers `names` switched off.
pub(crate) fn switch_off(repo: &Repo, names: &[String]) -> Repo {
    let mut repo = repo.clone();
    for name in names {
        for (variable, value) in [
            ("smudge", ""),
            ("clean", ""),
            ("process", ""),
            ("required", "false"),
        ] {
            repo = repo.with_config(&format!("filter.{name}.{variable}"), value);
        }
    }
    repo
}
