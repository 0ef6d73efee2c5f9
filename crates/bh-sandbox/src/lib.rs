//! `bh-sandbox`: spawn one command under a kernel-enforced policy.
//!
//! The spawned child (the *intermediate*, the [`std::process::Child`] the
//! caller holds) arms `PR_SET_PDEATHSIG`, unshares a mount and a PID namespace
//! (a user namespace first when not root, a network namespace for
//! `network: false`), makes mounts private, replaces `/tmp` with a fresh
//! tmpfs (carrying over only the policy's own paths under `/tmp`), and
//! re-binds every read-only path onto itself read-only — the holes that
//! Landlock cannot make inside a writable root. It then forks the namespace's
//! PID 1, a tiny init that forks the command, reaps every orphan while it
//! runs and exits with the command's status; the kernel then kills whatever
//! is left in the namespace. The command mounts the namespace's own `/proc`,
//! re-enters its folder through the new mount table, and restricts itself
//! with Landlock: read and execute everywhere, write only under the writable
//! roots (and the private `/tmp`, and a few devices such as `/dev/null`).
//!
//! Killing the intermediate (or the harness: death signal) kills the init,
//! and with it every process of the command, whatever it forked or
//! `setsid`ed. [`Confined::kill`] kills the init directly, so that when
//! [`Confined::wait`] returns, no process of the command is left.
//!
//! The library reads no environment and no `$HOME`: every path comes from
//! the caller's [`Policy`].

// Libraries never print: what they have to say is a value (an error, an
// event, a report) that the CLI shows. A guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::collections::BTreeSet;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::Serialize;

mod seccomp;
mod sys;

pub use sys::{die_with_parent, terminate_with_parent};

/// What a sandboxed command may do.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Folders (or files) the command may create, write and delete under.
    pub writable: Vec<PathBuf>,
    /// Paths that stay read-only even inside a writable root (the git dir,
    /// the common dir, `~/.gitconfig`, the harness's state folder …).
    /// Missing ones are skipped and named in the [`Report`].
    pub read_only: Vec<PathBuf>,
    /// Paths under `/tmp` the command must still see (read-only unless also
    /// writable) when `/tmp` is private; paths elsewhere are always visible.
    pub visible: Vec<PathBuf>,
    /// A fresh, empty `/tmp` for this command.
    pub private_tmp: bool,
    /// `false`: a network namespace of its own (no interface but a downed
    /// loopback).
    pub network: bool,
    /// Paths the command must not read at all (keys, credential stores, the
    /// checkpoint servers' sockets): inside its mount namespace an existing
    /// folder is covered by an empty read-only tmpfs, an existing file by
    /// `/dev/null`. Missing ones are skipped (nothing to read).
    pub hidden: Vec<PathBuf>,
    /// Folders the command sees writable while the real one stays untouched:
    /// an overlay mount (the real folder its read-only lower layer, writes
    /// into `upper`), mounted first, so binds of the paths around it carry
    /// it. A target also listed in [`Policy::read_only`] is overlaid, not
    /// bound read-only: the overlay is what keeps it unwritten. The caller
    /// reads `upper` after the command and decides what, if anything, to
    /// take from it (bash's git broker).
    pub overlays: Vec<Overlay>,
}

/// One overlay of [`Policy::overlays`].
#[derive(Debug, Clone)]
pub struct Overlay {
    /// The folder overlaid (its own lower layer).
    pub target: PathBuf,
    /// An empty folder that receives every write (never visible inside).
    pub upper: PathBuf,
    /// An empty folder on the same file system as `upper`, for the kernel.
    pub work: PathBuf,
}

/// What is in force, and what the kernel could not enforce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Report {
    pub landlock_abi: u32,
    pub user_namespace: bool,
    pub private_tmp: bool,
    pub network: bool,
    pub writable: Vec<PathBuf>,
    pub read_only: Vec<PathBuf>,
    /// The paths covered over ([`Policy::hidden`] that exist).
    #[serde(default)]
    pub hidden: Vec<PathBuf>,
    /// The overlaid folders ([`Policy::overlays`]).
    #[serde(default)]
    pub overlays: Vec<PathBuf>,
    pub not_enforced: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "the sandbox needs Landlock, which this kernel does not offer ({why}); pass --no-sandbox to run without a sandbox"
    )]
    NoLandlock { why: String },
    #[error(
        "the sandbox could not {step}: {source}; {hint}; pass --no-sandbox to run without a sandbox"
    )]
    Setup {
        step: &'static str,
        hint: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("{role} {path}: {source}")]
    Path {
        role: &'static str,
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot grant writes to {path}: it {why}")]
    Grant { path: String, why: String },
    #[error("cannot overlay {path}: {why}")]
    Overlay { path: String, why: String },
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
    #[error("the sandbox's init did not start for {program}")]
    NoInit { program: String },
    #[error("sandbox set-up pipe: {0}")]
    Pipe(#[source] nix::Error),
}

// Landlock filesystem rights (uapi/linux/landlock.h).
const EXECUTE: u64 = 1 << 0;
const WRITE_FILE: u64 = 1 << 1;
const READ_FILE: u64 = 1 << 2;
const READ_DIR: u64 = 1 << 3;
const ABI1_ALL: u64 = (1 << 13) - 1;
const REFER: u64 = 1 << 13;
const TRUNCATE: u64 = 1 << 14;
const IOCTL_DEV: u64 = 1 << 15;
const MAKE_CHAR: u64 = 1 << 6;
const MAKE_BLOCK: u64 = 1 << 11;
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

/// Devices any command may read and write.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// The Landlock ABI this kernel offers, or why none.
pub fn landlock_abi() -> Result<u32, SandboxError> {
    sys::landlock_abi().map_err(|e| SandboxError::NoLandlock {
        why: match e {
            libc::ENOSYS => {
                "landlock_create_ruleset: ENOSYS, the kernel is built without it".into()
            }
            libc::EOPNOTSUPP => {
                "landlock_create_ruleset: EOPNOTSUPP, not enabled in the boot's lsm= list".into()
            }
            e => format!(
                "landlock_create_ruleset: {}",
                io::Error::from_raw_os_error(e)
            ),
        },
    })
}

/// A policy made ready to spawn one command.
pub struct Sandbox {
    plan: sys::Plan,
    step_rd: OwnedFd,
    report: Report,
}

fn c(path: &Path) -> CString {
    // Canonical paths from the kernel never hold NUL bytes.
    CString::new(path.as_os_str().as_bytes()).unwrap_or_default()
}

/// The private `/tmp`'s size limit in bytes: a quarter of the memory, at
/// most 4 GiB (a tmpfs takes memory only for what is written; without a
/// limit it may take half of it, and a command filling it then starves the
/// machine instead of getting ENOSPC).
fn tmp_size() -> u64 {
    const CAP: u64 = 4 << 30;
    let pages = nix::unistd::sysconf(nix::unistd::SysconfVar::_PHYS_PAGES)
        .ok()
        .flatten();
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten();
    match (pages, page) {
        (Some(n), Some(p)) if n > 0 && p > 0 => (n as u64 * p as u64 / 4).min(CAP),
        _ => 1 << 30,
    }
}

/// Each overlay's canonical target and its mount options
/// (`lowerdir=T,upperdir=U,workdir=W,userxattr`: the user namespace's
/// overlay keeps its metadata in `user.` attributes).
fn overlays(policy: &Policy) -> Result<Vec<(PathBuf, CString)>, SandboxError> {
    let mut out = Vec::new();
    for o in &policy.overlays {
        let bad = |why: &str| SandboxError::Overlay {
            path: o.target.display().to_string(),
            why: why.to_owned(),
        };
        let real = |p: &Path, what: &str| -> Result<PathBuf, SandboxError> {
            let r = fs_err::canonicalize(p).map_err(|e| bad(&format!("{what}: {e}")))?;
            if !r.is_dir() {
                return Err(bad(&format!("{what} {} is not a folder", r.display())));
            }
            // The options string separates with ',' and layers with ':'.
            if r.as_os_str()
                .as_bytes()
                .iter()
                .any(|b| matches!(b, b',' | b':' | b'\\'))
            {
                return Err(bad(&format!(
                    "{what} {} holds ',', ':' or '\\', which overlay options cannot carry",
                    r.display()
                )));
            }
            Ok(r)
        };
        let target = real(&o.target, "the folder")?;
        let upper = real(&o.upper, "the upper folder")?;
        let work = real(&o.work, "the work folder")?;
        let mut opts = b"lowerdir=".to_vec();
        opts.extend_from_slice(target.as_os_str().as_bytes());
        opts.extend_from_slice(b",upperdir=");
        opts.extend_from_slice(upper.as_os_str().as_bytes());
        opts.extend_from_slice(b",workdir=");
        opts.extend_from_slice(work.as_os_str().as_bytes());
        opts.extend_from_slice(b",userxattr");
        out.push((target, CString::new(opts).unwrap_or_default()));
    }
    Ok(out)
}

impl Sandbox {
    /// Resolves the policy's paths and prepares everything the child needs.
    /// `cwd` is where the command starts (re-entered inside the sandbox).
    #[allow(
        clippy::too_many_lines,
        reason = "a phase orchestrator not yet split into named steps (issue 26)"
    )]
    pub fn new(policy: &Policy, cwd: &Path) -> Result<Sandbox, SandboxError> {
        let abi = landlock_abi()?;
        let resolve = |role: &'static str, p: &Path| {
            fs_err::canonicalize(p).map_err(|source| SandboxError::Path {
                role,
                path: p.display().to_string(),
                source,
            })
        };
        let mut not_enforced = Vec::new();
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
        let mut read_only = Vec::new();
        for p in &policy.read_only {
            match fs_err::canonicalize(p) {
                Ok(r) => read_only.push(r),
                Err(_) if writable.iter().any(|w| p.starts_with(w)) => not_enforced.push(format!(
                    "{} does not exist, so it cannot be kept read-only inside a writable root",
                    p.display()
                )),
                Err(_) => {}
            }
        }
        let overlays = overlays(policy)?;
        read_only.retain(|r| !overlays.iter().any(|(t, _)| t == r));
        read_only.sort();
        read_only.dedup();
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
        let tmp = fs_err::canonicalize("/tmp").unwrap_or_else(|_| PathBuf::from("/tmp"));

        let mut tmp_binds = Vec::new();
        if policy.private_tmp {
            // Each carried separately, parents first: a writable root inside
            // a read-only one is mounted over it, writable.
            let mut under: BTreeSet<PathBuf> = BTreeSet::new();
            let visible = policy
                .visible
                .iter()
                .filter_map(|p| fs_err::canonicalize(p).ok());
            for p in writable
                .iter()
                .chain(read_only.iter())
                .cloned()
                .chain(visible)
                .chain([cwd.clone()])
            {
                if p.starts_with(&tmp) && p != tmp {
                    under.insert(p);
                }
            }
            for p in under {
                let mkdirs = p
                    .ancestors()
                    .skip(1)
                    .take_while(|a| a.starts_with(&tmp) && *a != tmp)
                    .map(c)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                tmp_binds.push(sys::Bind {
                    is_dir: p.is_dir(),
                    read_only: !writable.contains(&p),
                    path: c(&p),
                    mkdirs,
                    fd: -1,
                });
            }
        }

        let mut handled = ABI1_ALL;
        if abi >= 2 {
            handled |= REFER;
        }
        if abi >= 3 {
            handled |= TRUNCATE;
        } else {
            not_enforced
                .push("truncate(2) outside the writable roots (Landlock ABI < 3)".to_owned());
        }
        if abi >= 5 {
            handled |= IOCTL_DEV;
        } else {
            not_enforced.push("ioctl(2) on devices (Landlock ABI < 5)".to_owned());
        }
        let read = (EXECUTE | READ_FILE | READ_DIR | IOCTL_DEV) & handled;
        let file_write = (EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV) & handled;
        let mut ll_writable: Vec<(CString, bool)> =
            writable.iter().map(|p| (c(p), p.is_dir())).collect();
        if policy.private_tmp {
            ll_writable.push((c(&tmp), true));
        }
        let mut scoped = 0;
        if abi >= 6 {
            scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL;
        } else {
            not_enforced.push(
                "signal and abstract-socket scoping (Landlock ABI < 6; the PID namespace and the command's own session still apply)".to_owned(),
            );
        }
        // Always a user namespace, root included: capabilities then count
        // only inside it (no CAP_MKNOD, CAP_DAC_READ_SEARCH or CAP_SYS_ADMIN
        // over the host), and the command drops even those before exec.
        // Each maps its own uid and gid onto itself (root: 0 -> 0); a map
        // of more ids would need the parent namespace to write it.
        let euid = nix::unistd::geteuid();
        let user_ns = true;
        let mut unshare = libc::CLONE_NEWUSER
            | libc::CLONE_NEWNS
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUTS;
        if !policy.network {
            unshare |= libc::CLONE_NEWNET;
        }
        let maps = {
            let gid = nix::unistd::getegid();
            Some((
                format!("{euid} {euid} 1").into_bytes(),
                format!("{gid} {gid} 1").into_bytes(),
            ))
        };
        // Hidden paths by their real path (a link is hidden where it leads).
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
        let (step_rd, step_wr) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(SandboxError::Pipe)?;
        nix::fcntl::fcntl(
            step_rd.as_fd(),
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .map_err(SandboxError::Pipe)?;
        let report = Report {
            landlock_abi: abi,
            user_namespace: user_ns,
            private_tmp: policy.private_tmp,
            network: policy.network,
            writable: writable.clone(),
            read_only: read_only.clone(),
            hidden: hidden.iter().map(|(p, _)| p.clone()).collect(),
            overlays: overlays.iter().map(|(t, _)| t.clone()).collect(),
            not_enforced,
        };
        let inside = |p: &PathBuf, q: &PathBuf| p != q && p.starts_with(q);
        let rw_over: Vec<PathBuf> = writable
            .iter()
            .filter(|w| read_only.iter().any(|r| inside(w, r)))
            .cloned()
            .collect();
        let ro_after: Vec<CString> = read_only
            .iter()
            .filter(|r| rw_over.iter().any(|w| inside(r, w)))
            .map(|p| c(p))
            .collect();
        let plan = sys::Plan {
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
            tmp_binds,
            read_only: read_only.iter().map(|p| c(p)).collect(),
            hidden: hidden.iter().map(|(p, is_dir)| (c(p), *is_dir)).collect(),
            overlays: overlays.iter().map(|(t, o)| (c(t), o.clone())).collect(),
            cwd: c(&cwd),
            landlock: Some(sys::Landlock {
                abi,
                handled_fs: handled,
                scoped,
                read,
                // No device nodes on writable roots (nodev, Landlock's way).
                dir_write: handled & !(MAKE_CHAR | MAKE_BLOCK),
                file_write,
                writable: ll_writable,
                devices: DEVICES.iter().map(|d| c(Path::new(d))).collect(),
            }),
            seccomp: seccomp::program(),
            parent: nix::unistd::getpid().as_raw(),
            step_wr,
        };
        Ok(Sandbox {
            plan,
            step_rd,
            report,
        })
    }

    pub fn report(&self) -> &Report {
        &self.report
    }

    /// Spawns `cmd` inside the sandbox (in a process group of its own).
    pub fn spawn(self, mut cmd: Command) -> Result<Confined, SandboxError> {
        let Sandbox { plan, step_rd, .. } = self;
        let program = cmd.get_program().to_string_lossy().into_owned();
        cmd.process_group(0);
        cmd.env("GIT_TERMINAL_PROMPT", "0");
        sys::install(&mut cmd, plan);
        let spawned = cmd.spawn();
        drop(cmd); // closes the parent's copy of the step pipe's write end
        let mut buf = [0u8; 16];
        let n = nix::unistd::read(step_rd.as_fd(), &mut buf).unwrap_or(0);
        let records = buf[..n - n % 4]
            .chunks(4)
            .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]));
        let (mut init, mut step) = (None, None);
        for r in records {
            if r > 0 {
                init = Some(r);
            } else {
                step = step.or(sys::Step::from_code(-r));
            }
        }
        match spawned {
            Err(source) => Err(match step {
                Some(step) => {
                    let (step, hint) = describe(step);
                    SandboxError::Setup { step, hint, source }
                }
                None => SandboxError::Spawn { program, source },
            }),
            Ok(mut child) => {
                let Some(init) = init else {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(SandboxError::NoInit { program });
                };
                Ok(Confined {
                    child,
                    init: Pid::from_raw(init),
                    done: false,
                })
            }
        }
    }
}

fn describe(step: sys::Step) -> (&'static str, &'static str) {
    use sys::Step::*;
    let ns = "namespaces may be disabled here (user.max_user_namespaces, kernel.unprivileged_userns_clone, or a container's seccomp profile)";
    match step {
        DeathSignal => (
            "arm the death signal (prctl PR_SET_PDEATHSIG)",
            "prctl is refused",
        ),
        Unshare => ("create its user/mount/PID/network namespaces (unshare)", ns),
        UserMaps => ("write the user namespace's uid/gid maps", ns),
        MountPrivate => ("make its mounts private", ns),
        CloneTmp | MoveTmp => (
            "carry a path over onto the private /tmp (open_tree/move_mount)",
            "the kernel needs the new mount API (Linux 5.2+)",
        ),
        MountTmp => ("mount a private tmpfs on /tmp", ns),
        Overlay => (
            "mount a writable overlay over the git dir (overlayfs in a user namespace)",
            "the kernel needs unprivileged overlayfs (Linux 5.11+) and user xattrs on the upper folder's file system",
        ),
        Hide => (
            "cover a hidden path (an empty tmpfs or /dev/null bound over it)",
            "the kernel refused the mount",
        ),
        ReadOnly => (
            "bind a protected path read-only (open_tree/mount_setattr/move_mount)",
            "the kernel needs mount_setattr (Linux 5.12+)",
        ),
        Fork => ("fork its init", "the process table may be full"),
        MountProc => ("mount /proc for its PID namespace", ns),
        Chdir => ("enter the working folder", "it may have been removed"),
        Landlock => (
            "restrict the command with Landlock",
            "Landlock refused the ruleset",
        ),
        Session => (
            "give the command a session of its own (setsid/close_range)",
            "the kernel needs close_range (Linux 5.11+)",
        ),
        Capabilities => (
            "drop every capability and the bounding set (prctl/capset)",
            "the user namespace refused it",
        ),
        Seccomp => (
            "install its seccomp filter",
            "the kernel may be built without seccomp",
        ),
    }
}

/// A running sandboxed command.
pub struct Confined {
    child: Child,
    init: Pid,
    done: bool,
}

impl Confined {
    /// The intermediate's pid (also the process group of the command).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// SIGTERM to every process of the command: the init forwards it to
    /// the whole namespace (the command runs in a session of its own); what
    /// does not stop dies with the init.
    pub fn terminate(&self) {
        if !self.done {
            let _ = kill(self.init, Signal::SIGTERM);
        }
    }

    /// SIGKILL to the init (the kernel kills every process of the
    /// namespace), then SIGCONT to the intermediate, whatever state it is in
    /// (a stopped one resumes), so that it reaps the init and
    /// [`Confined::wait`] returns once the namespace is empty.
    pub fn kill(&self) {
        if !self.done {
            // The init cannot be reaped (and its pid reused) before the
            // intermediate waited for it, and the intermediate is ours and
            // not yet waited for.
            let _ = kill(self.init, Signal::SIGKILL);
            let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGCONT);
        }
    }

    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        let r = self.child.try_wait()?;
        if r.is_some() {
            self.done = true;
        }
        Ok(r)
    }

    /// Waits for the command; when this returns, no process of it is left.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        let r = self.child.wait()?;
        self.done = true;
        Ok(r)
    }
}

impl Drop for Confined {
    fn drop(&mut self) {
        if !self.done {
            self.kill();
            let _ = self.child.wait();
        }
    }
}

/// Start time of a process (field 22 of `/proc/<pid>/stat`, clock ticks
/// since boot): with the pid, a stamp that a reused pid does not match.
/// `None` when no such process runs. The one `/proc` process stamp.
pub fn process_start_time(pid: u32) -> Option<u64> {
    stat_field(pid, 19)?.parse().ok()
}

/// State of a process (field 3 of `/proc/<pid>/stat`, e.g. `'Z'`), `None`
/// when it does not exist.
pub fn process_state(pid: u32) -> Option<char> {
    stat_field(pid, 0)?.chars().next()
}

/// Parent pid of a process (field 4 of `/proc/<pid>/stat`).
pub fn process_parent(pid: u32) -> Option<i32> {
    stat_field(pid, 1)?.parse().ok()
}

/// Field `3 + n` of `/proc/<pid>/stat` (after `pid (comm)`, whose comm may
/// hold spaces and parentheses).
fn stat_field(pid: u32, n: usize) -> Option<String> {
    let stat = fs_err::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(n).map(str::to_owned)
}
