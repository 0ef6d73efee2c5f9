//! The worker's own repository: a new object store with the user's objects
//! as a read-only alternate, its own config, hooks and refs, checked out at
//! the frozen base. After the worker is gone, its work (committed or not) is
//! snapshotted *inside the same sandbox* (the repository's config is the
//! worker's: its filters may run, but only there), then fetched into the
//! user's repository with `transfer.fsckObjects` — Git's path for untrusted
//! remotes.

use fs_err as fs;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bh_git::{GitRunner, Repo, Scope};

use crate::error::PreflightError;

/// The ref, in the worker's repository, that the snapshot writes.
pub const SNAPSHOT_REF: &str = "refs/better-harness/snapshot";

fn io(context: String) -> impl FnOnce(std::io::Error) -> PreflightError {
    move |source| PreflightError::Io { context, source }
}

/// Creates the worker's repository at `dir`, checked out (detached) at
/// `base`, borrowing objects from `user_objects`.
pub fn create(
    runner: &GitRunner,
    dir: &Path,
    user_objects: &Path,
    base: &str,
) -> Result<Repo, PreflightError> {
    fs::create_dir_all(dir).map_err(PreflightError::Fs)?;
    let repo = runner.repo(dir, Scope::Isolated);
    repo.run(["init", "-q", "--template=", "."])?;
    let alternates = dir.join(".git/objects/info/alternates");
    fs::create_dir_all(dir.join(".git/objects/info")).map_err(PreflightError::Fs)?;
    let mut line = user_objects.as_os_str().as_encoded_bytes().to_vec();
    line.push(b'\n');
    fs::write(&alternates, line).map_err(PreflightError::Fs)?;
    repo.run(["checkout", "-q", "--detach", base])?;
    Ok(repo)
}

/// The user's commit identity (`user.name`, `user.email`) as their Git
/// configuration gives it, read through the hardened runner; `None` when
/// either is unset.
pub fn user_identity(repo: &Repo) -> Option<Identity> {
    let get = |key: &str| {
        repo.cmd(["config", "--get", key])
            .ok_codes(&[0, 1])
            .run()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .filter(|v| !v.is_empty() && !v.contains(['\n', '\0']))
    };
    Some(Identity {
        name: get("user.name")?,
        email: get("user.email")?,
    })
}

/// Who a commit made by the harness is by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub email: String,
}

impl Identity {
    /// The harness's own, when the user has none.
    pub fn harness() -> Identity {
        Identity {
            name: "bh task".into(),
            email: "bh-task@localhost".into(),
        }
    }
}

/// A private home for the worker, with the user's commit identity only.
pub(crate) fn private_home(home: &Path, identity: Option<&Identity>) -> Result<(), PreflightError> {
    bh_fs::create_dir_all_mode(home, 0o700)
        .map_err(io(format!("cannot create {}", home.display())))?;
    let mut cfg = String::new();
    if let Some(id) = identity
        && ![&id.name, &id.email]
            .iter()
            .any(|v| v.contains(['"', '\\']))
    {
        cfg = format!(
            "[user]\n\tname = \"{}\"\n\temail = \"{}\"\n",
            id.name, id.email
        );
    }
    let path = home.join(".gitconfig");
    fs::write(&path, cfg).map_err(PreflightError::Fs)
}

/// What the snapshot found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The worker's `HEAD` (what it committed).
    pub head: String,
    /// `head`, or a commit on top of it holding every uncommitted change
    /// (tracked and untracked, whatever the worker's ignore rules).
    pub work: String,
}

/// The snapshot script, run with `sh -c` in the worker's repository. It
/// starts from a copy of the worker's own index (its stat data spares
/// re-hashing every file; a forged entry could only hide the worker's own
/// work from the candidate, never add to it), with every assume-unchanged
/// and skip-worktree bit cleared so nothing is hidden by accident.
/// It stages through its own index by hand, not `bh_git::TempIndex`: it
/// runs as the worker, inside the worker's sandbox, not through bh-git's
/// host-side runner.
const SCRIPT: &str = r#"set -e
head=$(git rev-parse --verify HEAD^{commit})
own=$(git rev-parse --git-path index)
export GIT_INDEX_FILE="$BH_SNAPSHOT_INDEX"
rm -f "$GIT_INDEX_FILE"
if [ -f "$own" ]; then cp "$own" "$GIT_INDEX_FILE"; else git read-tree "$head"; fi
if git ls-files -v | grep -q '^[a-zS] '; then
  git ls-files -z | xargs -0 -r git update-index -q --no-assume-unchanged --no-skip-worktree --
fi
git add -A
tree=$(git write-tree)
if [ "$tree" = "$(git rev-parse "$head^{tree}")" ]; then
  work=$head
else
  work=$(git commit-tree -p "$head" -m "$BH_SNAPSHOT_MESSAGE" "$tree")
fi
git update-ref "$BH_SNAPSHOT_REF" "$work"
rm -f "$GIT_INDEX_FILE"
echo "$head $work"
"#;

/// Takes the snapshot in `dir`, inside `sandbox` when given. `env` is the
/// worker's environment (for `PATH`); `scratch` a folder for the index;
/// `identity` the author and committer of the commit of uncommitted work.
pub fn snapshot(
    dir: &Path,
    sandbox: Option<bh_sandbox::Sandbox>,
    env: &[(OsString, OsString)],
    scratch: &Path,
    identity: &Identity,
    message: &str,
) -> Result<Snapshot, String> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(SCRIPT)
        .current_dir(dir)
        .env_clear()
        .envs(
            env.iter()
                .filter(|(k, _)| k == "PATH" || k == "HOME" || k == "LANG")
                .map(|(k, v)| (k, v)),
        )
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_ATTR_NOSYSTEM", "1")
        .env("GIT_CONFIG_COUNT", "2")
        .env("GIT_CONFIG_KEY_0", "core.hooksPath")
        .env("GIT_CONFIG_VALUE_0", "/dev/null")
        .env("GIT_CONFIG_KEY_1", "core.fsmonitor")
        .env("GIT_CONFIG_VALUE_1", "false")
        .env("GIT_AUTHOR_NAME", &identity.name)
        .env("GIT_AUTHOR_EMAIL", &identity.email)
        .env("GIT_COMMITTER_NAME", &identity.name)
        .env("GIT_COMMITTER_EMAIL", &identity.email)
        .env("BH_SNAPSHOT_INDEX", scratch.join("snapshot.index"))
        .env("BH_SNAPSHOT_REF", SNAPSHOT_REF)
        .env("BH_SNAPSHOT_MESSAGE", message)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (mut out, mut err) = (String::new(), String::new());
    let status = match sandbox {
        Some(sb) => {
            let mut c = sb.spawn(cmd).map_err(|e| e.to_string())?;
            if let Some(mut s) = c.child_mut().stdout.take() {
                let _ = s.read_to_string(&mut out);
            }
            if let Some(mut s) = c.child_mut().stderr.take() {
                let _ = s.read_to_string(&mut err);
            }
            c.wait().map_err(|e| e.to_string())?
        }
        None => {
            bh_proc::die_with_parent(&mut cmd);
            let o = cmd.output().map_err(|e| e.to_string())?;
            out = String::from_utf8_lossy(&o.stdout).into_owned();
            err = String::from_utf8_lossy(&o.stderr).into_owned();
            o.status
        }
    };
    let mut words = out.split_whitespace();
    match (status.success(), words.next(), words.next()) {
        (true, Some(head), Some(work)) => Ok(Snapshot {
            head: head.to_owned(),
            work: work.to_owned(),
        }),
        _ => Err(tail(err.as_bytes(), 5)),
    }
}

/// Fetches the snapshot into `user_ref` of the user's repository (isolated
/// configuration, `transfer.fsckObjects`, no tags, no submodules).
pub fn fetch(user: &Repo, dir: &Path, user_ref: &str) -> Result<(), String> {
    let mut src = dir.as_os_str().to_owned();
    src.push("/.git");
    let refspec = format!("+{SNAPSHOT_REF}:{user_ref}");
    user.cmd([
        "-c",
        "transfer.fsckObjects=true",
        "-c",
        "fetch.fsckObjects=true",
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        "--no-recurse-submodules",
        "--no-auto-gc",
        "--no-auto-maintenance",
    ])
    .arg(&src)
    .arg(&refspec)
    .optional_locks(true)
    .run()
    .map(|_| ())
    .map_err(|e| tail(e.stderr().as_bytes(), 5))
}

/// The last `lines` non-empty lines of `bytes`, joined with ` / `.
pub fn tail(bytes: &[u8], lines: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let all: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let start = all.len().saturating_sub(lines);
    let mut s = all[start..].join(" / ");
    if s.len() > 600 {
        let mut cut = s.len() - 600;
        while !s.is_char_boundary(cut) {
            cut += 1;
        }
        s = format!("…{}", &s[cut..]);
    }
    s
}

/// The last lines of a log file (empty when unreadable).
pub fn log_tail(path: &PathBuf, lines: usize) -> String {
    fs::read(path).map(|b| tail(&b, lines)).unwrap_or_default()
}
