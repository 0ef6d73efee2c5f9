//! The sandbox policy of `bh`'s confined commands (an agent's `bash`, a
//! task worker), in one file: what they may not write even inside their
//! writable roots ([`protected_paths`]: the state folder, the user's Git
//! and XDG configuration), what they may not see at all ([`hidden_paths`],
//! `bh_sandbox::Policy::hidden`: the harness's own keys and servers,
//! well-known credential stores, and the places where the user's servers
//! keep their Unix sockets), and the Git configuration the task's second
//! line compares before and after ([`git_config_files`]).
//!
//! A connect to a Unix socket is stopped neither by read-only mounts nor by
//! `--no-network`, and Landlock on this kernel (ABI 7) cannot scope
//! pathname sockets: through a socket a confined command asks an
//! unconfined server (docker, an ssh or gpg agent, the session bus, git's
//! credential cache, an editor) to act for it. The sandbox checks every
//! connect when it is made and refuses any host socket
//! (`bh-sandbox/src/sys/decide.rs`, with [`allowed_sockets`] as the way
//! out; on a kernel without the check it covers those bound at the start).
//! Besides, the folders and files those servers listen in are covered: the
//! user's runtime folder (`$XDG_RUNTIME_DIR`, `/run/user/<uid>`: the
//! session bus, gpg-agent, podman, systemd's user instance, editors),
//! docker's, containerd's and podman's system sockets, the system bus,
//! `$SSH_AUTH_SOCK`, tmux's and git-credential-cache's folders.
//! A candidate that holds the working folder or the state folder is left
//! visible (covering it would hide the project).

use std::path::{Path, PathBuf};

use crate::context::Ctx;
use crate::error::CliError;

/// Every path the sandboxes of this `bh` cover.
pub(crate) fn hidden_paths(ctx: &Ctx) -> Vec<PathBuf> {
    let mut out = vec![
        ctx.state_dir.join(bh_exec::PLAN_KEY_FILE),
        ctx.state_dir.join("serve"),
    ];
    if let Some(home) = &ctx.home {
        for p in [
            ".ssh",
            ".aws",
            ".gnupg",
            ".netrc",
            ".git-credentials",
            ".docker/config.json",
            ".kube/config",
            ".config/gh",
            ".config/gcloud",
        ] {
            out.push(home.join(p));
        }
    }
    out.extend(
        socket_places(ctx)
            .into_iter()
            .filter(|p| !ctx.cwd.starts_with(p) && !ctx.state_dir.starts_with(p)),
    );
    out
}

/// Where the user's servers listen (see the module docs).
fn socket_places(ctx: &Ctx) -> Vec<PathBuf> {
    let env_path = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let uid = nix::unistd::getuid().as_raw();
    let mut out: Vec<PathBuf> = [
        "/run/docker.sock",
        "/var/run/docker.sock",
        "/run/containerd",
        "/run/podman",
        "/run/dbus",
        "/var/run/dbus",
        "/run/screen",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    out.push(PathBuf::from(format!("/run/user/{uid}")));
    out.extend(env_path("XDG_RUNTIME_DIR"));
    out.extend(env_path("SSH_AUTH_SOCK"));
    // tmux: $TMUX_TMPDIR/tmux-<uid> (its /tmp default is private already).
    out.extend(env_path("TMUX_TMPDIR").map(|d| d.join(format!("tmux-{uid}"))));
    if let Some(home) = &ctx.home {
        for p in [
            ".cache/git/credential",
            ".git-credential-cache",
            ".docker/run",
        ] {
            out.push(home.join(p));
        }
    }
    out.retain(|p| p != Path::new("/"));
    out
}

/// `--allow-unix-socket` paths, absolute, checked before anything runs:
/// each must be a Unix socket (the sandbox checks again when it covers the
/// others; this check makes a mistyped path a usage error, not a failed
/// bash call the model reads).
pub(crate) fn allowed_sockets(ctx: &Ctx, paths: &[PathBuf]) -> Result<Vec<PathBuf>, CliError> {
    use std::os::unix::fs::FileTypeExt;
    paths
        .iter()
        .map(|p| {
            let abs = ctx.abs(p);
            match fs_err::metadata(&abs) {
                Ok(m) if m.file_type().is_socket() => Ok(abs),
                Ok(_) => Err(CliError::usage(format!(
                    "--allow-unix-socket {}: is not a Unix socket",
                    abs.display()
                ))),
                Err(e) => Err(CliError::usage(format!(
                    "--allow-unix-socket {}: {e}",
                    abs.display()
                ))),
            }
        })
        .collect()
}

/// What a sandboxed worker or bash must not write even inside its writable
/// roots: the state folder, `~/.gitconfig`, the XDG config folder.
pub(crate) fn protected_paths(ctx: &Ctx) -> Vec<PathBuf> {
    let mut out = vec![ctx.state_dir.clone()];
    if let Some(home) = &ctx.home {
        out.push(home.join(".gitconfig"));
    }
    out.extend(xdg_config(ctx));
    out
}

pub(crate) fn xdg_config(ctx: &Ctx) -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| ctx.home.as_ref().map(|h| h.join(".config")))
}

/// The Git configuration and attributes files outside the repository that
/// the second line compares before and after the worker.
pub(crate) fn git_config_files(ctx: &Ctx) -> Vec<PathBuf> {
    let mut out = vec![
        PathBuf::from("/etc/gitconfig"),
        PathBuf::from("/etc/gitattributes"),
    ];
    if let Some(home) = &ctx.home {
        out.push(home.join(".gitconfig"));
    }
    if let Some(xdg) = xdg_config(ctx) {
        out.push(xdg.join("git/config"));
        out.push(xdg.join("git/attributes"));
    }
    out
}
