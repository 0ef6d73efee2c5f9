//! `bh-sandbox`: spawn one command under a kernel-enforced policy.
//!
//! The spawned child (the *intermediate*, the [`std::process::Child`] the
//! caller holds) arms `PR_SET_PDEATHSIG`, unshares a user, mount, PID, IPC
//! and UTS namespace (a network namespace too for `network: false`), makes
//! mounts private, replaces `/tmp` with a fresh tmpfs (carrying over only
//! the policy's own paths under `/tmp`), re-binds every read-only path onto
//! itself read-only — the holes that Landlock cannot make inside a writable
//! root — and covers the hidden ones. It then forks the namespace's PID 1,
//! a tiny init that mounts the namespace's own `/proc`, restricts itself
//! with Landlock (read and execute everywhere, write only under the
//! writable roots, the private `/tmp` and a few devices such as
//! `/dev/null`) and forks the command, which inherits that domain. The
//! command takes a session of its own, enters its folder, drops every
//! capability and installs a seccomp filter; the init reaps every orphan
//! while it runs, answers the command's connects ([`UnixSockets::Checked`])
//! and exits with the command's status; the kernel then kills whatever is
//! left in the namespace.
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

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::unistd::Pid;
use serde::Serialize;

mod confined;
mod layout;
mod prepare;
mod protect;
mod seccomp;
mod sockets;
mod sys;

pub use confined::Confined;
use confined::describe;

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
    /// Host Unix sockets the command may still connect to: a connect to any
    /// other host socket is refused (see [`UnixSockets`]). Each must exist
    /// and be a socket; one inside a hidden folder is carried through its
    /// cover.
    pub allow_sockets: Vec<PathBuf>,
    /// No Unix socket at all: `socket(AF_UNIX, …)` fails with `EACCES`
    /// (seccomp; `socketpair` still works), so no host server is reached.
    /// The command's own Unix sockets fail too: the peers' trade, on
    /// request ([`UnixSockets::Denied`]).
    pub deny_unix_sockets: bool,
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

/// How the command is kept from the host's Unix socket servers (a server
/// reached by `connect(2)` acts for the command with the server's own
/// authority: docker, an ssh agent, a credential helper, an editor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnixSockets {
    /// Every `connect(2)` is checked by the sandbox's init (seccomp user
    /// notification) and made only to a socket a process of the sandbox
    /// listens on, or an allowed one; any other fails with `EACCES`, those a
    /// host server binds after the start included. Unix datagram sockets
    /// (which reach a path by `sendto` without a connect) and `io_uring`
    /// (which connects past the filter) are refused. The default.
    Checked,
    /// The fallback where the check cannot run (an old kernel): host
    /// sockets bound at the start are covered by mounts; one bound later
    /// is reachable (said in `not_enforced`).
    Covered,
    /// No Unix socket at all ([`Policy::deny_unix_sockets`]).
    Denied,
}

/// Reports written before the check existed had the covers only.
fn covered() -> UnixSockets {
    UnixSockets::Covered
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
    /// Protected paths that are symbolic links, pinned in place (the
    /// target is in `read_only`).
    #[serde(default)]
    pub links_pinned: Vec<PathBuf>,
    /// How many host Unix sockets were covered (bound when the command
    /// started, not allowed).
    #[serde(default)]
    pub sockets_covered: usize,
    /// The host sockets allowed ([`Policy::allow_sockets`], canonical).
    #[serde(default)]
    pub sockets_allowed: Vec<PathBuf>,
    /// Every Unix socket refused ([`Policy::deny_unix_sockets`]): the same
    /// as `unix_sockets` being `denied`, kept for readers of older reports.
    #[serde(default)]
    pub unix_sockets_denied: bool,
    /// How the host's Unix socket servers are kept out of reach.
    #[serde(default = "covered")]
    pub unix_sockets: UnixSockets,
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
    #[error(
        "cannot keep {path} read-only inside the writable {root}: it {why}, and the command could create it there; create it first, or grant a narrower folder"
    )]
    Unprotectable {
        path: String,
        root: String,
        why: &'static str,
    },
    #[error("cannot allow the Unix socket {path}: it {why}")]
    Socket { path: String, why: String },
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

/// How the host's Unix sockets would be kept out of reach on this kernel:
/// [`UnixSockets::Denied`] on request, else [`UnixSockets::Checked`] where
/// the init can check connects, else [`UnixSockets::Covered`]. What
/// [`Report::unix_sockets`] will say, known before a sandbox is made.
pub fn unix_sockets(deny: bool) -> UnixSockets {
    prepare::unix_sockets(
        &Policy {
            deny_unix_sockets: deny,
            ..Policy::default()
        },
        &mut Vec::new(),
    )
}

/// A policy made ready to spawn one command.
pub struct Sandbox {
    plan: sys::Plan,
    step_rd: OwnedFd,
    report: Report,
    /// The allowed sockets held open while the command runs.
    pins: Vec<fs_err::File>,
}

impl Sandbox {
    /// Resolves the policy's paths and prepares everything the child needs
    /// (the steps are in the `prepare` module). `cwd` is where the command
    /// starts (re-entered inside the sandbox).
    pub fn new(policy: &Policy, cwd: &Path) -> Result<Sandbox, SandboxError> {
        let abi = landlock_abi()?;
        let mut not_enforced = Vec::new();
        let unix = prepare::unix_sockets(policy, &mut not_enforced);
        let mut roots = prepare::Roots::resolve(policy, cwd, unix)?;
        let pins = std::mem::take(&mut roots.sockets.pins);
        let tmp = fs_err::canonicalize("/tmp").unwrap_or_else(|_| PathBuf::from("/tmp"));
        let tmp_binds = prepare::tmp_binds(policy, &roots, &tmp);
        let landlock = prepare::landlock(abi, policy, &roots, &tmp, &mut not_enforced);
        let (step_rd, step_wr) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(SandboxError::Pipe)?;
        nix::fcntl::fcntl(
            step_rd.as_fd(),
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .map_err(SandboxError::Pipe)?;
        let report = prepare::report(abi, policy, &roots, unix, not_enforced);
        let plan = prepare::plan(policy, &roots, unix, tmp_binds, landlock, step_wr);
        Ok(Sandbox {
            plan,
            step_rd,
            report,
            pins,
        })
    }

    pub fn report(&self) -> &Report {
        &self.report
    }

    /// Spawns `cmd` inside the sandbox (in a process group of its own).
    pub fn spawn(self, mut cmd: Command) -> Result<Confined, SandboxError> {
        let Sandbox {
            plan,
            step_rd,
            pins,
            ..
        } = self;
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
                // The init's own steps (after the command was forked) are
                // reported only through the step pipe.
                if let Some(step) = step {
                    if let Some(init) = init {
                        let _ = nix::sys::signal::kill(
                            Pid::from_raw(init),
                            nix::sys::signal::Signal::SIGKILL,
                        );
                    }
                    let _ = child.kill();
                    let _ = child.wait();
                    let (step, hint) = describe(step);
                    return Err(SandboxError::Setup {
                        step,
                        hint,
                        source: io::Error::other("the sandbox's init gave up"),
                    });
                }
                let Some(init) = init else {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(SandboxError::NoInit { program });
                };
                Ok(Confined {
                    child,
                    init: Pid::from_raw(init),
                    done: false,
                    _pins: pins,
                })
            }
        }
    }
}
