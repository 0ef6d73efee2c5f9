//! What every sandbox of `bh` covers (`bh_sandbox::Policy::hidden`): the
//! harness's own keys and servers, well-known credential stores, and the
//! places where the user's servers keep their Unix sockets.
//!
//! A connect to a Unix socket is stopped neither by read-only mounts nor by
//! `--no-network`, and Landlock on this kernel (ABI 7) cannot scope
//! pathname sockets: through a socket a confined command asks an
//! unconfined server (docker, an ssh or gpg agent, the session bus, git's
//! credential cache, an editor) to act for it. So the folders and files
//! those servers listen in are covered: the user's runtime folder
//! (`$XDG_RUNTIME_DIR`, `/run/user/<uid>`: the session bus, gpg-agent,
//! podman, systemd's user instance, editors), docker's, containerd's and
//! podman's system sockets, the system bus, `$SSH_AUTH_SOCK`, tmux's and
//! git-credential-cache's folders. A socket elsewhere is not found by name
//! (the limit, said in the README). A candidate that holds the working
//! folder or the state folder is left visible (covering it would hide the
//! project).

use std::path::{Path, PathBuf};

use crate::context::Ctx;

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
