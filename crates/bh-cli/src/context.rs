//! What the CLI learns from its environment, once, and hands to the libraries.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::error::{CliError, ErrorKind};

/// Environment variables passed to every `git` child. Everything else, and in
/// particular every `GIT_*` variable, is dropped by the hardened runner.
const GIT_ENV_ALLOW: &[&str] = &[
    "PATH",
    "HOME",
    "XDG_CONFIG_HOME",
    "TMPDIR",
    "USER",
    "LOGNAME",
    "TZ",
];

pub struct Ctx {
    pub json: bool,
    pub state_dir: PathBuf,
    pub cwd: PathBuf,
    /// Environment handed to the git runner (allow-listed, never `GIT_*`).
    pub git_env: Vec<(OsString, OsString)>,
    /// `$HOME`, for defaults such as Pi's agent dir.
    pub home: Option<PathBuf>,
}

impl Ctx {
    pub fn from_env(state_dir: Option<PathBuf>, json: bool) -> Result<Ctx, CliError> {
        let cwd = std::env::current_dir()
            .map_err(|e| CliError::internal(format!("cannot read the current directory: {e}")))?;
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        let state_dir = match state_dir {
            Some(dir) if dir.is_absolute() => dir,
            Some(dir) => cwd.join(dir),
            None => default_state_dir(home.as_deref())?,
        };
        let git_env = std::env::vars_os()
            .filter(|(k, _)| GIT_ENV_ALLOW.iter().any(|a| k.as_os_str() == *a))
            .collect();
        Ok(Ctx {
            json,
            state_dir,
            cwd,
            git_env,
            home,
        })
    }

    /// The hardened git runner every library call goes through.
    pub fn git(&self) -> bh_git::GitRunner {
        bh_git::GitRunner::new("git", self.git_env.clone())
    }

    /// `p` resolved against the current directory.
    pub fn abs(&self, p: &std::path::Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.cwd.join(p)
        }
    }

    /// A directory option (`--repo`, `--project`): `given` resolved against
    /// the current directory (the current directory itself when absent),
    /// which must exist (not found, exit 4) and be a directory (usage).
    pub fn dir_arg(
        &self,
        given: Option<&std::path::Path>,
        flag: &str,
    ) -> Result<PathBuf, CliError> {
        let Some(given) = given else {
            return Ok(self.cwd.clone());
        };
        let dir = self.abs(given);
        match fs_err::metadata(&dir) {
            Ok(m) if m.is_dir() => Ok(dir),
            Ok(_) => Err(CliError::usage(format!(
                "{flag} {}: not a directory",
                given.display()
            ))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(CliError::new(
                ErrorKind::NotFound,
                format!("{flag} {}: no such directory", given.display()),
            )),
            Err(e) => Err(CliError::new(ErrorKind::Refused, e.to_string())),
        }
    }

    /// Pi's agent dir: `PI_CODING_AGENT_DIR`, else `~/.pi/agent` ([P73]
    /// `dist/config.js` `getAgentDir`).
    pub fn pi_agent_dir(&self) -> Result<PathBuf, CliError> {
        if let Some(dir) = std::env::var_os("PI_CODING_AGENT_DIR").filter(|d| !d.is_empty()) {
            return Ok(self.abs(std::path::Path::new(&dir)));
        }
        match &self.home {
            Some(home) => Ok(home.join(".pi").join("agent")),
            None => Err(CliError::usage(
                "cannot find Pi's agent dir: set PI_CODING_AGENT_DIR or HOME",
            )),
        }
    }
}

/// `-C DIR…`: change the process's directory first, as `git -C` does, each
/// DIR relative to the one before (an empty DIR is no change). Everything
/// after — `Ctx::cwd`, relative options, children — sees the new directory.
pub fn change_dir(dirs: &[PathBuf]) -> Result<(), CliError> {
    for dir in dirs.iter().filter(|d| !d.as_os_str().is_empty()) {
        std::env::set_current_dir(dir).map_err(|e| {
            let kind = match e.kind() {
                std::io::ErrorKind::NotFound => ErrorKind::NotFound,
                std::io::ErrorKind::NotADirectory => ErrorKind::Usage,
                _ => ErrorKind::Refused,
            };
            CliError::new(
                kind,
                format!("-C {}: cannot change to it: {e}", dir.display()),
            )
        })?;
    }
    Ok(())
}

/// The `-C` directories in command-line order. clap keeps only the
/// subcommand's values of a global option given on both sides of it
/// (`bh -C a checkpoint list -C b` parses as `[b]`), so the ones before the
/// subcommand are read from `args` (the top-level options up to the first
/// word that is not one) and put first.
pub fn chdirs_in_order(
    args: impl IntoIterator<Item = std::ffi::OsString>,
    parsed: Vec<PathBuf>,
) -> Vec<PathBuf> {
    let mut before: Vec<PathBuf> = Vec::new();
    let mut args = args.into_iter().skip(1);
    while let Some(arg) = args.next() {
        let bytes = arg.as_encoded_bytes();
        match bytes {
            b"-C" => match args.next() {
                Some(dir) => before.push(dir.into()),
                None => break,
            },
            b"--state-dir" => {
                args.next();
            }
            _ if bytes.starts_with(b"-C") => {
                let rest = &bytes[2..];
                let rest = rest.strip_prefix(b"=").unwrap_or(rest);
                before.push(
                    <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(rest).into(),
                );
            }
            _ if bytes.starts_with(b"--state-dir=") || bytes == b"--json" => {}
            _ => break,
        }
    }
    if before.is_empty() || parsed.starts_with(&before) {
        return parsed;
    }
    before.extend(parsed);
    before
}

/// `$XDG_STATE_HOME/better-harness`, else `~/.local/state/better-harness`.
fn default_state_dir(home: Option<&std::path::Path>) -> Result<PathBuf, CliError> {
    if let Some(xdg) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        let xdg = PathBuf::from(xdg);
        if xdg.is_absolute() {
            return Ok(xdg.join("better-harness"));
        }
    }
    match home {
        Some(home) => Ok(home.join(".local/state/better-harness")),
        None => Err(CliError::usage(
            "cannot find a state directory: set --state-dir, BH_STATE_DIR or HOME",
        )),
    }
}
