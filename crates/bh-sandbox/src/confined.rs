//! A spawned sandboxed command ([`Confined`]) and the words for a set-up
//! step that failed ([`describe`]).

use std::io;
use std::process::{Child, ExitStatus};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::sys;

pub(crate) fn describe(step: sys::Step) -> (&'static str, &'static str) {
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
        Supervise => (
            "set up the check of the command's connects (a seccomp listener handed to its init, a signalfd)",
            "the kernel refused it",
        ),
        Stdio => (
            "give the command its standard input and output",
            "one of them is a Unix datagram socket, which could send to any host socket unchecked; give it a file, a pipe or a stream socket",
        ),
    }
}

/// A running sandboxed command.
pub struct Confined {
    pub(crate) child: Child,
    pub(crate) init: Pid,
    pub(crate) done: bool,
    /// The allowed sockets held open while the command runs (see
    /// `sockets::HostSockets::pins`).
    pub(crate) _pins: Vec<fs_err::File>,
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
