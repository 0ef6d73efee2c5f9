//! The workspace's one audited `unsafe` module for process set-up: the code
//! that runs between `fork` and `exec` (the sandbox's intermediate process,
//! its init and the command), and the raw Landlock and new-mount-API
//! syscalls (`die_with_parent` and the process stamp live in `bh-proc`).
//!
//! Rules for everything reachable from a `pre_exec` closure here: the parent
//! may be multi-threaded, so only async-signal-safe calls — raw syscalls
//! through `libc`, no allocation, no locks, no formatting. Every path, map and
//! flag is prepared by the parent (see `crate::Sandbox::new`) as `CString`s
//! and plain integers before the fork.
//!
//! The init and the command live in `sys/init.rs`, the init's connect check
//! in `sys/supervise.rs`, `sys/decide.rs`, `sys/diag.rs` and `sys/made.rs`: submodules of this one, under
//! the same rules. Over 600 lines on purpose: the workspace rule keeps
//! `unsafe` to this one audited module (and its submodules), and splitting
//! the intermediate's mount steps further would spread it.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use libc::{c_int, c_long, c_uint, c_void};

mod caps;
mod decide;
mod diag;
mod init;
mod made;
pub(crate) mod supervise;

const OPEN_TREE_CLONE: c_uint = 1;
const AT_RECURSIVE: c_uint = 0x8000;
const AT_EMPTY_PATH: c_uint = 0x1000;
const MOVE_MOUNT_F_EMPTY_PATH: c_uint = 4;
const MOUNT_ATTR_RDONLY: u64 = 1;
const LANDLOCK_CREATE_RULESET_VERSION: c_uint = 1;
const LANDLOCK_RULE_PATH_BENEATH: c_int = 1;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// The failing set-up step, written to the step pipe as a negative 4-byte
/// record (the init's pid is the positive one) so that the parent can name
/// it: errno alone cannot say which call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Step {
    DeathSignal = 1,
    Unshare = 2,
    UserMaps = 3,
    MountPrivate = 4,
    CloneTmp = 5,
    MountTmp = 6,
    MoveTmp = 7,
    ReadOnly = 8,
    Fork = 9,
    MountProc = 10,
    Chdir = 11,
    Landlock = 12,
    Session = 13,
    Capabilities = 14,
    Seccomp = 15,
    Hide = 16,
    Overlay = 17,
    Supervise = 18,
    Stdio = 19,
}

impl Step {
    pub(crate) fn from_code(b: i32) -> Option<Step> {
        use Step::*;
        [
            DeathSignal,
            Unshare,
            UserMaps,
            MountPrivate,
            CloneTmp,
            MountTmp,
            MoveTmp,
            ReadOnly,
            Fork,
            MountProc,
            Chdir,
            Landlock,
            Session,
            Capabilities,
            Seccomp,
            Hide,
            Overlay,
            Supervise,
            Stdio,
        ]
        .into_iter()
        .find(|s| *s as i32 == b)
    }
}

/// A path carried over onto a fresh tmpfs: under `/tmp` onto the private
/// `/tmp`, or an allowed socket through a hidden folder's cover.
pub(crate) struct Bind {
    pub path: CString,
    /// Parent directories to create on the fresh tmpfs, outermost first.
    pub mkdirs: Vec<CString>,
    pub is_dir: bool,
    /// Not a writable root: carried over read-only, so that it does not
    /// inherit the private `/tmp`'s write right.
    pub read_only: bool,
    /// Set in the child: the detached clone of the tree.
    pub fd: c_int,
}

pub(crate) struct Landlock {
    pub abi: u32,
    pub handled_fs: u64,
    pub scoped: u64,
    pub read: u64,
    pub dir_write: u64,
    pub file_write: u64,
    pub writable: Vec<(CString, bool)>,
    pub devices: Vec<CString>,
}

/// A hidden path: a folder covered by an empty read-only tmpfs, a file by
/// `/dev/null`.
pub(crate) struct Cover {
    pub path: CString,
    pub is_dir: bool,
    /// Allowed sockets inside the folder, carried through its cover.
    pub holes: Vec<Bind>,
}

/// Everything the child needs, prepared by the parent.
pub(crate) struct Plan {
    pub unshare: c_int,
    /// `(uid_map, gid_map)` contents when a user namespace is created.
    pub maps: Option<(Vec<u8>, Vec<u8>)>,
    pub private_tmp: bool,
    /// The private `/tmp`'s tmpfs options (`mode=1777,size=…`).
    pub tmp_options: CString,
    pub tmp_binds: Vec<Bind>,
    /// The outermost folders made on the private `/tmp` to reach the
    /// carried paths (`/tmp/a` for `/tmp/a/b/project`), made read-only
    /// once everything is carried: a write there, which would vanish with
    /// the tmpfs while looking like the host's folder, fails instead.
    pub tmp_skeleton: Vec<CString>,
    pub read_only: Vec<CString>,
    /// Writable roots inside a read-only path: cloned (writable) before the
    /// read-only binds, mounted back over them after.
    pub rw_over: Vec<Bind>,
    /// Read-only paths inside those writable roots, bound again after them.
    pub ro_after: Vec<CString>,
    /// Paths covered last (see [`Cover`]).
    pub hidden: Vec<Cover>,
    /// Protected paths that are symbolic links: each link bound onto
    /// itself, so that it can be neither removed nor replaced (its target
    /// is in `read_only`).
    pub links: Vec<CString>,
    /// Host sockets covered after them, each by a read-only `/dev/null`
    /// (see `crate::sockets`); one the covers already hid is skipped.
    pub sockets: Vec<CString>,
    /// `(target, options)`: overlay mounts made first (see
    /// `crate::Policy::overlays`).
    pub overlays: Vec<(CString, CString)>,
    pub cwd: CString,
    pub landlock: Option<Landlock>,
    /// The seccomp program (see `crate::seccomp`), installed last.
    pub seccomp: Vec<libc::sock_filter>,
    /// How the command's Unix sockets are kept from the host's servers.
    pub unix: crate::UnixSockets,
    /// The init's connect check (`UnixSockets::Checked`).
    pub check: Option<supervise::Check>,
    pub parent: libc::pid_t,
    pub step_wr: OwnedFd,
}

pub(crate) const SETGROUPS: &[u8] = b"/proc/self/setgroups\0";
pub(crate) const UID_MAP: &[u8] = b"/proc/self/uid_map\0";
pub(crate) const GID_MAP: &[u8] = b"/proc/self/gid_map\0";

fn errno() -> c_int {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Reports `step` to the parent and returns the current errno as the error
/// that `std` hands back from `spawn`.
fn fail(step_wr: c_int, step: Step) -> io::Error {
    let e = errno();
    let b = (-(step as i32)).to_ne_bytes();
    // SAFETY: write(2) of a 4-byte stack buffer (atomic on a pipe) to an fd
    // we own.
    unsafe { libc::write(step_wr, b.as_ptr().cast(), b.len()) };
    io::Error::from_raw_os_error(e)
}

fn cptr(s: &[u8]) -> *const libc::c_char {
    s.as_ptr().cast()
}

fn write_file(path: &[u8], data: &[u8]) -> bool {
    // SAFETY: `path` is NUL-terminated static or parent-prepared bytes; the fd
    // is closed before returning.
    unsafe {
        let fd = libc::open(cptr(path), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        libc::close(fd);
        n == data.len() as isize
    }
}

/// Clones the mount tree at `path` (detached, recursive). Returns the fd.
fn clone_tree(path: &std::ffi::CStr) -> c_int {
    // SAFETY: raw open_tree(2) on a NUL-terminated path.
    unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            (OPEN_TREE_CLONE | AT_RECURSIVE) as c_long | libc::O_CLOEXEC as c_long,
        ) as c_int
    }
}

fn move_tree(fd: c_int, to: &CString) -> bool {
    // SAFETY: raw move_mount(2) of a detached tree fd onto a NUL-terminated path.
    unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            fd,
            c"".as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        ) == 0
    }
}

/// Covers `path`: a folder with an empty, read-only tmpfs (nothing below it
/// can be read or listed, nothing written), a file with a read-only bind of
/// `/dev/null` (it reads as empty). Mounted last, so no later bind uncovers
/// it; the command's locked mounts (user namespace) cannot be undone from
/// inside. A folder's holes (cloned by the caller before any cover) are
/// bound onto empty files in its tmpfs, which is then made read-only.
fn hide(path: &CString, is_dir: bool, holes: &[Bind]) -> bool {
    // Not there in this mount namespace (under the private /tmp, say, or
    // under a folder covered before): nothing to read, nothing to cover.
    // SAFETY: access(2) on a NUL-terminated path.
    if unsafe { libc::access(path.as_ptr(), libc::F_OK) } != 0 {
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOENT);
    }
    if !is_dir {
        let fd = clone_tree(c"/dev/null");
        if fd < 0 {
            return false;
        }
        let ok = set_read_only(fd) && move_tree(fd, path);
        // SAFETY: closing our own fd.
        unsafe { libc::close(fd) };
        return ok;
    }
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    let read_only = if holes.is_empty() { libc::MS_RDONLY } else { 0 };
    // SAFETY: mount(2) with NUL-terminated strings.
    if unsafe {
        libc::mount(
            cptr(b"tmpfs\0"),
            path.as_ptr(),
            cptr(b"tmpfs\0"),
            flags | read_only,
            cptr(b"size=4k,mode=0500\0").cast::<c_void>(),
        )
    } != 0
    {
        return false;
    }
    if holes.is_empty() {
        return true;
    }
    for h in holes {
        // SAFETY: mkdir/open/close on parent-prepared NUL-terminated paths
        // in the tmpfs just mounted (ours: the user namespace's root).
        unsafe {
            for d in &h.mkdirs {
                libc::mkdir(d.as_ptr(), 0o500);
            }
            let fd = libc::open(
                h.path.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
                0o600,
            );
            if fd < 0 {
                return false;
            }
            libc::close(fd);
        }
        if h.fd < 0 || !set_read_only(h.fd) || !move_tree(h.fd, &h.path) {
            return false;
        }
    }
    make_read_only(path)
}

/// Covers a host socket (a file cover). A socket that went away since the
/// parent listed it, or that this namespace cannot reach at all (a folder
/// on the way it may not search), has nothing to cover: skipped, since a
/// busy host makes and removes sockets all the time.
fn cover_socket(path: &CString) -> bool {
    hide(path, false, &[])
        || matches!(
            errno(),
            libc::ENOENT | libc::EACCES | libc::ENOTDIR | libc::ELOOP
        )
}

/// Bind-mounts `path` onto itself, read-only, recursively.
fn make_read_only(path: &CString) -> bool {
    let fd = clone_tree(path);
    if fd < 0 {
        return false;
    }
    let ok = set_read_only(fd) && move_tree(fd, path);
    // SAFETY: closing our own fd.
    unsafe { libc::close(fd) };
    ok
}

/// Binds the symbolic link at `path` onto itself (neither end followed):
/// a mount point cannot be removed or renamed over (EBUSY), and a link's
/// text cannot be written. A link not there in this mount namespace (under
/// the private `/tmp`) is skipped.
fn pin_link(path: &CString) -> bool {
    // SAFETY: raw open_tree(2) on a NUL-terminated path, not following it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            (OPEN_TREE_CLONE | libc::AT_SYMLINK_NOFOLLOW as c_uint) as c_long
                | libc::O_CLOEXEC as c_long,
        ) as c_int
    };
    if fd < 0 {
        return errno() == libc::ENOENT;
    }
    // move_mount(2) follows no symlink of the target without
    // MOVE_MOUNT_T_SYMLINKS: the mount lands on the link itself.
    let ok = move_tree(fd, path);
    // SAFETY: closing our own fd.
    unsafe { libc::close(fd) };
    ok
}

/// Makes a detached tree read-only, recursively.
fn set_read_only(fd: c_int) -> bool {
    set_attr_read_only(fd, true)
}

/// Makes a detached tree's top mount read-only, and with `recursive` every
/// mount below it too.
fn set_attr_read_only(fd: c_int, recursive: bool) -> bool {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: raw mount_setattr(2) on our detached tree with a stack struct of
    // the size passed.
    unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd,
            c"".as_ptr(),
            if recursive {
                AT_EMPTY_PATH | AT_RECURSIVE
            } else {
                AT_EMPTY_PATH
            },
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        ) == 0
    }
}

/// Runs in the forked child (the intermediate). Returns `Ok` only in the
/// grandchild's child — the command — which `std` then execs; the
/// intermediate and the init never return.
/// Runs in the forked child (the intermediate). Returns `Ok` only in the
/// grandchild's child — the command — which `std` then execs; the
/// intermediate and the init never return. Its steps ([`set_up`]):
/// namespaces, overlays, the private `/tmp`, the read-only binds, the
/// covers; then the init is forked and the intermediate waits for it.
fn intermediate(plan: &mut Plan) -> io::Result<()> {
    let step = plan.step_wr.as_raw_fd();
    // `fail` reads errno: nothing runs between the failed call and it.
    set_up(plan).map_err(|s| fail(step, s))?;
    let mut life = [0 as c_int; 2];
    let mut status = [0 as c_int; 2];
    // SAFETY: pipe2/fork are async-signal-safe syscalls on stack arrays.
    let init = unsafe {
        if libc::pipe2(life.as_mut_ptr(), libc::O_CLOEXEC) != 0
            || libc::pipe2(status.as_mut_ptr(), libc::O_CLOEXEC) != 0
        {
            return Err(fail(step, Step::Fork));
        }
        libc::fork()
    };
    if init < 0 {
        return Err(fail(step, Step::Fork));
    }
    if init == 0 {
        return init::init_process(plan, life, status);
    }
    // The intermediate: tell the parent the init's pid, then wait for it and
    // end the way it ended.
    // SAFETY: only raw syscalls on our own fds and stack buffers; never returns.
    unsafe {
        let pid = init.to_ne_bytes();
        libc::write(step, pid.as_ptr().cast(), pid.len());
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_IGN);
        }
        let keep = status[0];
        close_all_but(&[keep, life[1]]);
        let mut raw = [0u8; 4];
        let mut got = 0usize;
        while got < 4 {
            let n = libc::read(keep, raw[got..].as_mut_ptr().cast(), 4 - got);
            if n <= 0 {
                if n < 0 && errno() == libc::EINTR {
                    continue;
                }
                break;
            }
            got += n as usize;
        }
        let mut init_status: c_int = 0;
        while libc::waitpid(init, &mut init_status, 0) < 0 && errno() == libc::EINTR {}
        let st = if got == 4 {
            c_int::from_ne_bytes(raw)
        } else {
            init_status
        };
        mirror(st)
    }
}

/// The steps before the init is forked, in order; the first that fails.
fn set_up(plan: &mut Plan) -> Result<(), Step> {
    enter_namespaces(plan)?;
    mount_overlays(plan)?;
    if plan.private_tmp {
        private_tmp(plan)?;
    }
    read_only_binds(plan)?;
    hide_all(plan)
}

/// Death signal armed, the namespaces unshared, the user maps written,
/// mounts made private.
fn enter_namespaces(plan: &Plan) -> Result<(), Step> {
    // SAFETY: prctl/getppid/unshare are raw syscalls with integer arguments.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
            return Err(Step::DeathSignal);
        }
        if libc::getppid() != plan.parent {
            // The harness died before the death signal was armed.
            libc::_exit(137);
        }
        if libc::unshare(plan.unshare) != 0 {
            return Err(Step::Unshare);
        }
    }
    if let Some((uid_map, gid_map)) = &plan.maps
        && !(write_file(SETGROUPS, b"deny")
            && write_file(UID_MAP, uid_map)
            && write_file(GID_MAP, gid_map))
    {
        return Err(Step::UserMaps);
    }
    // SAFETY: mount(2) with static NUL-terminated strings.
    unsafe {
        if libc::mount(
            std::ptr::null(),
            cptr(b"/\0"),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(Step::MountPrivate);
        }
    }
    Ok(())
}

/// Overlays first, in the host's view of the paths: the clones of the
/// private `/tmp`'s binds are recursive and carry them.
fn mount_overlays(plan: &Plan) -> Result<(), Step> {
    for (target, opts) in &plan.overlays {
        // SAFETY: mount(2) with parent-prepared NUL-terminated strings.
        let ok = unsafe {
            libc::mount(
                cptr(b"overlay\0"),
                target.as_ptr(),
                cptr(b"overlay\0"),
                libc::MS_NOSUID | libc::MS_NODEV,
                opts.as_ptr().cast::<c_void>(),
            ) == 0
        };
        if !ok {
            return Err(Step::Overlay);
        }
    }
    Ok(())
}

/// A fresh tmpfs on `/tmp`, carrying the policy's paths under it (cloned
/// before the tmpfs hides them) and read-only skeleton folders to reach them.
fn private_tmp(plan: &mut Plan) -> Result<(), Step> {
    for b in plan.tmp_binds.iter_mut() {
        b.fd = clone_tree(&b.path);
        if b.fd < 0 || (b.read_only && !set_read_only(b.fd)) {
            return Err(Step::CloneTmp);
        }
    }
    // SAFETY: mount(2) with static NUL-terminated strings.
    unsafe {
        if libc::mount(
            cptr(b"tmpfs\0"),
            cptr(b"/tmp\0"),
            cptr(b"tmpfs\0"),
            libc::MS_NOSUID | libc::MS_NODEV,
            plan.tmp_options.as_ptr().cast::<c_void>(),
        ) != 0
        {
            return Err(Step::MountTmp);
        }
    }
    for b in plan.tmp_binds.iter() {
        // SAFETY: mkdir/open/close on parent-prepared NUL-terminated paths.
        unsafe {
            for d in &b.mkdirs {
                libc::mkdir(d.as_ptr(), 0o755);
            }
            if b.is_dir {
                libc::mkdir(b.path.as_ptr(), 0o755);
            } else {
                let fd = libc::open(
                    b.path.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
                    0o600,
                );
                if fd >= 0 {
                    libc::close(fd);
                }
            }
        }
        if !move_tree(b.fd, &b.path) {
            return Err(Step::MoveTmp);
        }
        // SAFETY: closing the clone fd we opened above.
        unsafe { libc::close(b.fd) };
    }
    for dir in &plan.tmp_skeleton {
        // The folder alone: what is carried below keeps its own rights.
        let fd = clone_tree(dir);
        let ok = fd >= 0 && set_attr_read_only(fd, false) && move_tree(fd, dir);
        // SAFETY: closing our own fd (or -1, harmless).
        unsafe { libc::close(fd) };
        if !ok {
            return Err(Step::MoveTmp);
        }
    }
    Ok(())
}

/// The protected paths re-bound read-only, writable roots inside them bound
/// back over, the protected paths inside those again, links pinned.
fn read_only_binds(plan: &mut Plan) -> Result<(), Step> {
    for b in plan.rw_over.iter_mut() {
        b.fd = clone_tree(&b.path);
        if b.fd < 0 {
            return Err(Step::ReadOnly);
        }
    }
    for p in &plan.read_only {
        if !make_read_only(p) {
            return Err(Step::ReadOnly);
        }
    }
    for b in plan.rw_over.iter() {
        if !move_tree(b.fd, &b.path) {
            return Err(Step::ReadOnly);
        }
        // SAFETY: closing the clone fd we opened above.
        unsafe { libc::close(b.fd) };
    }
    for p in &plan.ro_after {
        if !make_read_only(p) {
            return Err(Step::ReadOnly);
        }
    }
    for l in &plan.links {
        if !pin_link(l) {
            return Err(Step::ReadOnly);
        }
    }
    Ok(())
}

/// Hidden paths covered (their allowed sockets carried through as holes)
/// and host sockets covered.
fn hide_all(plan: &mut Plan) -> Result<(), Step> {
    // Holes first: once a folder is covered, what it held is out of reach.
    for h in plan.hidden.iter_mut().flat_map(|c| c.holes.iter_mut()) {
        h.fd = clone_tree(&h.path);
    }
    for cover in &plan.hidden {
        if !hide(&cover.path, cover.is_dir, &cover.holes) {
            return Err(Step::Hide);
        }
        for h in &cover.holes {
            // SAFETY: closing the clone fds opened above.
            unsafe { libc::close(h.fd) };
        }
    }
    for p in &plan.sockets {
        if !cover_socket(p) {
            return Err(Step::Hide);
        }
    }
    Ok(())
}

/// Closes every descriptor but those in `keep` (at most four; negative
/// ones are none).
unsafe fn close_all_but(keep: &[c_int]) {
    let mut k = [c_int::MAX; 4];
    for (slot, fd) in k.iter_mut().zip(keep.iter().filter(|fd| **fd >= 0)) {
        *slot = *fd;
    }
    k.sort_unstable();
    let mut from: c_uint = 0;
    for fd in k.into_iter().take_while(|fd| *fd != c_int::MAX) {
        let fd = fd as c_uint;
        // SAFETY: close_range(2) on descriptor ranges of this process.
        unsafe {
            if fd > from {
                libc::syscall(libc::SYS_close_range, from, fd - 1, 0);
            }
        }
        from = from.max(fd + 1);
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, from, c_uint::MAX, 0) };
}

/// Exits the way a process with wait status `st` ended.
fn mirror(st: c_int) -> ! {
    // SAFETY: raw syscalls; `_exit` never returns.
    unsafe {
        if libc::WIFSIGNALED(st) {
            let sig = libc::WTERMSIG(st);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
        libc::_exit(if libc::WIFEXITED(st) {
            libc::WEXITSTATUS(st)
        } else {
            127
        })
    }
}

/// Installs the sandbox on `cmd`: the child becomes the intermediate
/// described in the crate docs.
pub(crate) fn install(cmd: &mut Command, mut plan: Plan) {
    // SAFETY: the closure only runs async-signal-safe code (see module docs);
    // every allocation it touches was made by the parent before the fork.
    unsafe {
        cmd.pre_exec(move || intermediate(&mut plan));
    }
}

/// The Landlock ABI version the kernel offers, or the errno that says why
/// none (ENOSYS: not built in; EOPNOTSUPP: not enabled at boot).
pub(crate) fn landlock_abi() -> Result<u32, c_int> {
    // SAFETY: the documented version query: NULL attr, size 0.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if r < 0 {
        Err(errno())
    } else {
        Ok(u32::try_from(r).unwrap_or(0))
    }
}
