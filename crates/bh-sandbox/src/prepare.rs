//! What [`crate::Sandbox::new`] prepares, one step each: the grants resolved
//! and checked ([`Roots::resolve`]), the paths the private `/tmp` carries
//! ([`tmp_binds`]), the Landlock rules ([`landlock`]), the namespaces
//! ([`namespaces`]), what is in force ([`report`]) and the plan the child
//! follows ([`plan`]).

use std::collections::BTreeSet;
use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::layout::{c, overlays, parents_below, tmp_size, tmp_skeleton};
use crate::sockets::{self, HostSockets};
use crate::{
    ABI1_ALL, DEVICES, EXECUTE, IOCTL_DEV, MAKE_BLOCK, MAKE_CHAR, Policy, READ_DIR, READ_FILE,
    REFER, Report, SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL, SandboxError, TRUNCATE, UnixSockets,
    WRITE_FILE, protect, seccomp, sys,
};

/// How the host's Unix sockets are kept out of reach: refused on request,
/// else checked by the init where the kernel allows it, else covered (and
/// `not_enforced` says what that leaves open).
pub(crate) fn unix_sockets(policy: &Policy, not_enforced: &mut Vec<String>) -> UnixSockets {
    if policy.deny_unix_sockets {
        return UnixSockets::Denied;
    }
    match sys::supervise::available() {
        Ok(()) => UnixSockets::Checked,
        Err(why) => {
            not_enforced.push(format!(
                "pathname Unix sockets a host server binds after the start ({why}; those bound at the start are covered)"
            ));
            UnixSockets::Covered
        }
    }
}

/// The policy's paths, canonical and checked against each other.
pub(crate) struct Roots {
    /// Writable roots, the overlaid folders among them.
    pub writable: Vec<PathBuf>,
    /// Protected paths that exist (a link's target), minus the overlaid ones.
    pub read_only: Vec<PathBuf>,
    /// Protected paths that are links, pinned in place.
    pub links: Vec<PathBuf>,
    /// Overlaid folders and their mount options.
    pub overlays: Vec<(PathBuf, CString)>,
    /// Where the command starts.
    pub cwd: PathBuf,
    /// Host sockets to cover, and the allowed ones.
    pub sockets: HostSockets,
    /// Hidden paths by their real path, and whether each is a folder.
    pub hidden: Vec<(PathBuf, bool)>,
}

impl Roots {
    /// Resolves every path of `policy` (and `cwd`), refusing a grant through
    /// a link, a grant of a protected path, and a protected path the command
    /// could create unprotected.
    pub(crate) fn resolve(
        policy: &Policy,
        cwd: &Path,
        unix: UnixSockets,
    ) -> Result<Roots, SandboxError> {
        let resolve = |role: &'static str, p: &Path| {
            fs_err::canonicalize(p).map_err(|source| SandboxError::Path {
                role,
                path: p.display().to_string(),
                source,
            })
        };
        let mut writable = Vec::new();
        for p in &policy.writable {
            // A grant through a link names one folder and grants another
            // (`build-cache -> .git/hooks`): refused, not followed.
            if fs_err::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(SandboxError::Grant {
                    path: p.display().to_string(),
                    why: "is a symbolic link; grant the folder it leads to by its own path".into(),
                });
            }
            writable.push(resolve("writable path", p)?);
        }
        let protected = protect::resolve(&policy.read_only);
        let mut read_only = protected.existing;
        let overlays = overlays(policy)?;
        read_only.retain(|r| !overlays.iter().any(|(t, _)| t == r));
        read_only.sort();
        read_only.dedup();
        protect::refuse_unprotectable(&protected.missing, &writable, &read_only)?;
        if let Some(w) = writable.iter().find(|w| read_only.contains(w)) {
            return Err(SandboxError::Grant {
                path: w.display().to_string(),
                why: "is a protected path (it stays read-only)".into(),
            });
        }
        // An overlaid folder is writable inside (its writes go to upper):
        // Landlock grants it and the private /tmp carries it like any
        // writable root, wherever it lies (a linked worktree's common dir).
        for (t, _) in &overlays {
            if !writable.contains(t) {
                writable.push(t.clone());
            }
        }
        let cwd = resolve("working folder", cwd)?;
        let sockets = sockets::host_sockets(&policy.allow_sockets, unix == UnixSockets::Covered)?;
        let hidden = hidden(policy, &sockets);
        Ok(Roots {
            writable,
            read_only,
            links: protected.links,
            overlays,
            cwd,
            sockets,
            hidden,
        })
    }
}

/// Hidden paths by their real path (a link is hidden where it leads), but
/// not an allowed socket itself (`$SSH_AUTH_SOCK` allowed).
fn hidden(policy: &Policy, sockets: &HostSockets) -> Vec<(PathBuf, bool)> {
    let mut hidden: Vec<(PathBuf, bool)> = policy
        .hidden
        .iter()
        .filter_map(|p| {
            let real = fs_err::canonicalize(p).ok()?;
            let is_dir = fs_err::metadata(&real).ok()?.is_dir();
            Some((real, is_dir))
        })
        .collect();
    hidden.sort();
    hidden.dedup();
    hidden.retain(|(p, _)| !sockets.allowed.contains(p));
    hidden
}

/// The paths under `tmp` the private `/tmp` carries, each separately,
/// parents first: a writable root inside a read-only one is mounted over it,
/// writable. None without a private `/tmp`.
pub(crate) fn tmp_binds(policy: &Policy, roots: &Roots, tmp: &Path) -> Vec<sys::Bind> {
    if !policy.private_tmp {
        return Vec::new();
    }
    let mut under: BTreeSet<PathBuf> = BTreeSet::new();
    let visible = policy
        .visible
        .iter()
        .filter_map(|p| fs_err::canonicalize(p).ok())
        .chain(roots.sockets.allowed.iter().cloned());
    for p in roots
        .writable
        .iter()
        .chain(roots.read_only.iter())
        .cloned()
        .chain(visible)
        .chain([roots.cwd.clone()])
    {
        if p.starts_with(tmp) && p != tmp {
            under.insert(p);
        }
    }
    under
        .into_iter()
        .map(|p| sys::Bind {
            is_dir: p.is_dir(),
            read_only: !roots.writable.contains(&p),
            mkdirs: parents_below(&p, tmp),
            path: c(&p),
            fd: -1,
        })
        .collect()
}

/// The Landlock rules for `abi`: read and execute everywhere, write under
/// the writable roots (and the private `/tmp`), no device nodes there; what
/// the ABI cannot enforce is added to `not_enforced`.
pub(crate) fn landlock(
    abi: u32,
    policy: &Policy,
    roots: &Roots,
    tmp: &Path,
    not_enforced: &mut Vec<String>,
) -> sys::Landlock {
    let mut handled = ABI1_ALL;
    if abi >= 2 {
        handled |= REFER;
    }
    if abi >= 3 {
        handled |= TRUNCATE;
    } else {
        not_enforced.push("truncate(2) outside the writable roots (Landlock ABI < 3)".to_owned());
    }
    if abi >= 5 {
        handled |= IOCTL_DEV;
    } else {
        not_enforced.push("ioctl(2) on devices (Landlock ABI < 5)".to_owned());
    }
    let read = (EXECUTE | READ_FILE | READ_DIR | IOCTL_DEV) & handled;
    let file_write = (EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV) & handled;
    let mut writable: Vec<(CString, bool)> =
        roots.writable.iter().map(|p| (c(p), p.is_dir())).collect();
    if policy.private_tmp {
        writable.push((c(tmp), true));
    }
    let mut scoped = 0;
    if abi >= 6 {
        scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL;
    } else {
        not_enforced.push(
            "signal and abstract-socket scoping (Landlock ABI < 6; the PID namespace and the command's own session still apply)".to_owned(),
        );
    }
    sys::Landlock {
        abi,
        handled_fs: handled,
        scoped,
        read,
        // No device nodes on writable roots (nodev, Landlock's way).
        dir_write: handled & !(MAKE_CHAR | MAKE_BLOCK),
        file_write,
        writable,
        devices: DEVICES.iter().map(|d| c(Path::new(d))).collect(),
    }
}

/// A user namespace's `uid_map` and `gid_map` contents.
type Maps = (Vec<u8>, Vec<u8>);

/// The namespaces to unshare and the uid and gid maps of the user namespace.
///
/// Always a user namespace, root included: capabilities then count only
/// inside it (no CAP_MKNOD, CAP_DAC_READ_SEARCH or CAP_SYS_ADMIN over the
/// host), and the command drops even those before exec. Each maps its own
/// uid and gid onto itself (root: 0 -> 0); a map of more ids would need the
/// parent namespace to write it.
pub(crate) fn namespaces(policy: &Policy) -> (libc::c_int, Option<Maps>) {
    let mut unshare = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS;
    if !policy.network {
        unshare |= libc::CLONE_NEWNET;
    }
    let (uid, gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
    let maps = Some((
        format!("{uid} {uid} 1").into_bytes(),
        format!("{gid} {gid} 1").into_bytes(),
    ));
    (unshare, maps)
}

/// What is in force, and what is not.
pub(crate) fn report(
    abi: u32,
    policy: &Policy,
    roots: &Roots,
    unix: UnixSockets,
    not_enforced: Vec<String>,
) -> Report {
    Report {
        landlock_abi: abi,
        user_namespace: true,
        private_tmp: policy.private_tmp,
        network: policy.network,
        writable: roots.writable.clone(),
        read_only: roots.read_only.clone(),
        hidden: roots.hidden.iter().map(|(p, _)| p.clone()).collect(),
        overlays: roots.overlays.iter().map(|(t, _)| t.clone()).collect(),
        links_pinned: roots.links.clone(),
        sockets_covered: roots.sockets.covered.len(),
        sockets_allowed: roots.sockets.allowed.clone(),
        unix_sockets_denied: unix == UnixSockets::Denied,
        unix_sockets: unix,
        not_enforced,
    }
}

/// The plan the child follows, from the prepared parts.
pub(crate) fn plan(
    policy: &Policy,
    roots: &Roots,
    unix: UnixSockets,
    tmp_binds: Vec<sys::Bind>,
    landlock: sys::Landlock,
    step_wr: OwnedFd,
) -> sys::Plan {
    let (unshare, maps) = namespaces(policy);
    let (writable, read_only) = (&roots.writable, &roots.read_only);
    let inside = |p: &PathBuf, q: &PathBuf| p != q && p.starts_with(q);
    // Writable roots inside read-only ones are bound over them, and the
    // read-only paths inside those bound again after.
    let rw_over: Vec<&PathBuf> = writable
        .iter()
        .filter(|w| read_only.iter().any(|r| inside(w, r)))
        .collect();
    let ro_after: Vec<CString> = read_only
        .iter()
        .filter(|r| rw_over.iter().any(|w| inside(r, w)))
        .map(|p| c(p))
        .collect();
    sys::Plan {
        rw_over: rw_over
            .iter()
            .map(|p| sys::Bind {
                path: c(p),
                mkdirs: Vec::new(),
                is_dir: p.is_dir(),
                read_only: false,
                fd: -1,
            })
            .collect(),
        ro_after,
        unshare,
        maps,
        private_tmp: policy.private_tmp,
        tmp_options: CString::new(format!("mode=1777,size={}", tmp_size())).unwrap_or_default(),
        tmp_skeleton: tmp_skeleton(&tmp_binds),
        tmp_binds,
        read_only: read_only.iter().map(|p| c(p)).collect(),
        hidden: covers(roots),
        sockets: roots.sockets.covered.iter().map(|p| c(p)).collect(),
        links: roots.links.iter().map(|p| c(p)).collect(),
        overlays: roots
            .overlays
            .iter()
            .map(|(t, o)| (c(t), o.clone()))
            .collect(),
        cwd: c(&roots.cwd),
        landlock: Some(landlock),
        seccomp: seccomp::program(unix),
        unix,
        check: (unix == UnixSockets::Checked).then(|| sys::supervise::Check {
            allowed: roots.sockets.allowed_ids.clone(),
            wait_killable: sys::supervise::wait_killable(),
        }),
        parent: nix::unistd::getpid().as_raw(),
        step_wr,
    }
}

/// A cover for each hidden path, with a hole for each allowed socket in it.
fn covers(roots: &Roots) -> Vec<sys::Cover> {
    roots
        .hidden
        .iter()
        .map(|(p, is_dir)| sys::Cover {
            path: c(p),
            is_dir: *is_dir,
            holes: sockets::inside(&roots.sockets.allowed, p)
                .into_iter()
                .map(|s| sys::Bind {
                    path: c(s),
                    mkdirs: parents_below(s, p),
                    is_dir: false,
                    read_only: true,
                    fd: -1,
                })
                .collect(),
        })
        .collect()
}
