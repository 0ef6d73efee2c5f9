//! The connect check (`UnixSockets::Checked`), run by the sandbox's init.
//!
//! The command's seccomp filter sends every `connect(2)` to the init
//! (`SECCOMP_RET_USER_NOTIF`; the listener descriptor is handed over once,
//! before exec). The init makes the connect itself, never letting the
//! kernel go on with the caller's own arguments (`…_FLAG_CONTINUE` would
//! re-read the address and the descriptor after the check: another thread
//! could swap either). It takes a duplicate of the caller's socket
//! (`pidfd_getfd`) and a copy of the address (`process_vm_readv`), both
//! once, then:
//! - a socket that is not `AF_UNIX`: connected as asked;
//! - a path: resolved once from the caller's folder to an `O_PATH`
//!   descriptor; connected through `/proc/self/fd/<n>` (that very inode)
//!   only if it is an allowed host socket, or a socket of the command's
//!   own listens on it (`decide.rs`: every Unix socket of the command is
//!   made by the init in a network namespace of its own, `made.rs`, whose
//!   table then lists the command's and no host server's; a match must be
//!   bound to that very file); else `EACCES` (a host server listens
//!   there) or `ECONNREFUSED` (nobody the command can see does);
//! - an abstract name: one the command's own socket listens on, in that
//!   same namespace.
//!
//! The init is in the command's Landlock domain and has no capability but
//! `CAP_SYS_PTRACE` (which `pidfd_getfd` and the `/proc` reads need, and
//! which also keeps the command from reading the init's memory or
//! descriptors) — and `CAP_NET_ADMIN` over its own network namespace,
//! permitted but effective only around one `SIOCUNIXFILE` or `SIOCGSKNS`. A connect it makes is one the command could make, to a
//! socket the check allows. The init tries it without blocking; one that
//! would block (a full backlog, a TCP handshake under way) is finished by
//! a forked worker, so that the init keeps reaping and serving.
//! Raw syscalls and stack buffers only (see the parent module's rules).

use libc::{c_int, c_void};

use super::diag::{self, Key};
use super::errno;

/// What the init needs to check connects, prepared by the parent.
pub(crate) struct Check {
    /// `(st_dev, st_ino)` of each allowed host socket (the parent holds
    /// each open while the command runs: no other file can take its
    /// number meanwhile).
    pub allowed: Vec<(u64, u64)>,
    /// The kernel has `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV` (5.19,
    /// [`wait_killable`]).
    pub wait_killable: bool,
}

/// What the init keeps to answer the command's calls.
pub(crate) struct Serve<'a> {
    pub listener: c_int,
    pub check: &'a Check,
    pub memo: Memo,
    /// A socket table of the command's own network namespace, opened
    /// before the init left it: only to tell a host server there
    /// (`EACCES`) from nobody (`ECONNREFUSED`).
    pub outside: c_int,
    /// The inode of the init's network namespace, where it makes the
    /// command's Unix sockets.
    pub own_ns: u64,
    /// The init's own descriptors, closed by a worker.
    pub close_in_worker: [c_int; 3],
}

/// The init's memory of who held a listener last time (its inode and a
/// pid): that process is asked first, so that a client connecting again
/// and again to its server costs one process's descriptors, not every
/// process's. A hint only: the holder is checked each time.
pub(crate) struct Memo {
    seen: [(u32, libc::pid_t); 16],
    next: usize,
}

impl Memo {
    pub(crate) fn new() -> Memo {
        Memo {
            seen: [(0, 0); 16],
            next: 0,
        }
    }

    pub(super) fn hint(&self, ino: u32) -> Option<libc::pid_t> {
        self.seen.iter().find(|(i, _)| *i == ino).map(|(_, p)| *p)
    }

    pub(super) fn remember(&mut self, ino: u32, pid: libc::pid_t) {
        if let Some(slot) = self.seen.iter_mut().find(|(i, _)| *i == ino) {
            slot.1 = pid;
            return;
        }
        self.seen[self.next] = (ino, pid);
        self.next = (self.next + 1) % self.seen.len();
    }
}

/// `sizeof(struct sockaddr_storage)`: the kernel refuses a longer address.
const ADDR_MAX: usize = 128;
/// Room for the kernel's `struct seccomp_notif` (80 bytes today; checked
/// against `SECCOMP_GET_NOTIF_SIZES` by [`available`]).
const NOTIF_ROOM: usize = 256;
const RESP_ROOM: usize = 64;
/// `PIDFD_THREAD` (Linux 6.9): a pidfd for a thread that does not lead
/// its group.
const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

/// One connect to answer.
pub(super) struct Request {
    pub(super) id: u64,
    pub(super) tid: libc::pid_t,
    /// The caller's socket, duplicated into the init.
    pub(super) sock: c_int,
    pub(super) addr: [u8; ADDR_MAX],
    pub(super) len: usize,
    pub(super) nonblocking: bool,
}

/// Why the check cannot run on this kernel (the sandbox then covers the
/// host's sockets instead and says what that leaves open), probed once.
pub(crate) fn available() -> Result<(), &'static str> {
    static PROBE: std::sync::OnceLock<Result<(), &'static str>> = std::sync::OnceLock::new();
    *PROBE.get_or_init(probe)
}

fn probe() -> Result<(), &'static str> {
    let mut sizes = libc::seccomp_notif_sizes {
        seccomp_notif: 0,
        seccomp_notif_resp: 0,
        seccomp_data: 0,
    };
    // SAFETY: seccomp(2) filling a stack struct of the kernel's layout.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_NOTIF_SIZES,
            0,
            &mut sizes as *mut libc::seccomp_notif_sizes,
        )
    };
    if r != 0
        || usize::from(sizes.seccomp_notif) > NOTIF_ROOM
        || usize::from(sizes.seccomp_notif_resp) > RESP_ROOM
    {
        return Err("no seccomp user notification (Linux 5.0+)");
    }
    // SAFETY: pidfd_getfd(2) on an invalid pidfd: only its errno matters.
    if unsafe { libc::syscall(libc::SYS_pidfd_getfd, -1, 0, 0) } < 0 && errno() == libc::ENOSYS {
        return Err("no pidfd_getfd (Linux 5.6+)");
    }
    if fs_err::read("/proc/sys/kernel/yama/ptrace_scope").is_ok_and(|s| s.starts_with(b"3")) {
        return Err("Yama's ptrace_scope 3 forbids taking a descriptor of the command");
    }
    if diag::listeners(&Key::Abstract(b"\0bh-sandbox-probe"), &mut [0u32; 1]).is_err() {
        return Err("no UNIX_DIAG socket table (CONFIG_UNIX_DIAG)");
    }
    if kernel_below(5, 14) {
        return Err("no SECCOMP_ADDFD_FLAG_SEND (Linux 5.14+)");
    }
    Ok(())
}

/// Whether the kernel has `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`
/// (Linux 5.19), asked once per process like [`available`].
pub(crate) fn wait_killable() -> bool {
    static PROBE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PROBE.get_or_init(|| !kernel_below(5, 19))
}

/// Whether the running kernel's release is below `major.minor`.
fn kernel_below(major: u32, minor: u32) -> bool {
    let Ok(release) = fs_err::read_to_string("/proc/sys/kernel/osrelease") else {
        return true;
    };
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let mut next = || parts.next().and_then(|p| p.parse::<u32>().ok());
    match (next(), next()) {
        (Some(a), Some(b)) => (a, b) < (major, minor),
        _ => true,
    }
}

/// Takes one notification from `listener` and answers it. The decision
/// and a first try that cannot block are made here; a connect that would
/// block (a full backlog, a TCP handshake under way) is finished by a
/// forked worker (which first closes `close_in_worker`, the init's own
/// descriptors), so that the init keeps reaping and serving.
pub(crate) fn serve_one(sv: &mut Serve) {
    let mut raw = [0u64; NOTIF_ROOM / 8];
    // SAFETY: the kernel writes its `struct seccomp_notif` (no larger than
    // the zeroed buffer, see `available`).
    if unsafe {
        libc::ioctl(
            sv.listener,
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            raw.as_mut_ptr(),
        )
    } != 0
    {
        return; // ENOENT: the caller went away (a signal, its death)
    }
    // SAFETY: the buffer now starts with a `struct seccomp_notif`; it is
    // 8-byte aligned and large enough.
    let n: libc::seccomp_notif = unsafe { std::ptr::read(raw.as_ptr().cast()) };
    match i64::from(n.data.nr) {
        libc::SYS_connect => {}
        libc::SYS_socket => return super::made::socket(sv.listener, &n),
        libc::SYS_socketpair => return super::made::pair(sv.listener, &n),
        _ => return reply(sv.listener, n.id, libc::ENOSYS),
    }
    let req = match gather(sv.listener, &n) {
        Ok(req) => req,
        Err(e) => {
            reply(sv.listener, n.id, e);
            return;
        }
    };
    match super::decide::decide(&req, sv) {
        Verdict::Refuse(e) => reply(sv.listener, req.id, e),
        Verdict::Connect(target) => {
            match first_try(&req, &target) {
                Try::Done(e) => reply(sv.listener, req.id, e),
                Try::WouldBlock => {
                    finish_in_worker(sv.listener, &req, &target, &sv.close_in_worker)
                }
            }
            if let Target::Through(fd) = target {
                // SAFETY: closing the O_PATH descriptor `decide` opened.
                unsafe { libc::close(fd) };
            }
        }
    }
    // SAFETY: closing the duplicate taken by `gather`.
    unsafe { libc::close(req.sock) };
}

/// Where a connect the check allows goes.
pub(super) enum Target {
    /// The caller's own address (copied): another family, an abstract
    /// name, or what names nothing (the kernel's own error).
    Asked,
    /// The inode an `O_PATH` descriptor holds (`/proc/self/fd/<n>`).
    Through(c_int),
}

pub(super) enum Verdict {
    Connect(Target),
    /// The caller's errno.
    Refuse(c_int),
}

enum Try {
    /// 0 or the caller's errno.
    Done(c_int),
    WouldBlock,
}

fn make(req: &Request, target: &Target) -> c_int {
    match target {
        Target::Asked => connect(req.sock, &req.addr[..req.len]),
        Target::Through(fd) => connect_through(req.sock, *fd),
    }
}

/// The connect as the caller asked for a non-blocking socket; a blocking
/// one is made non-blocking for the try (its flags restored after), and
/// whether it would have blocked is said.
fn first_try(req: &Request, target: &Target) -> Try {
    // SAFETY: fcntl(2) on our duplicate of the caller's socket (its flags
    // are the caller's: another thread of it may change them any time, so
    // they are a hint, and the timer below the bound).
    let set = !req.nonblocking
        && unsafe {
            let flags = libc::fcntl(req.sock, libc::F_GETFL);
            flags >= 0 && libc::fcntl(req.sock, libc::F_SETFL, flags | libc::O_NONBLOCK) == 0
        };
    let r = bounded(|| make(req, target));
    if set {
        // SAFETY: as above; only the bit set here is taken back.
        unsafe {
            let flags = libc::fcntl(req.sock, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(req.sock, libc::F_SETFL, flags & !libc::O_NONBLOCK);
            }
        }
    }
    match r {
        // The timer: the caller's flag was cleared under the try, or the
        // connect waits for room; a worker waits instead.
        libc::EINTR => Try::WouldBlock,
        libc::EAGAIN if set => Try::WouldBlock,
        libc::EINPROGRESS if set => {
            // A loopback handshake is often over already.
            let mut p = libc::pollfd {
                fd: req.sock,
                events: libc::POLLOUT,
                revents: 0,
            };
            // SAFETY: poll(2) of one stack pollfd, not waiting.
            if unsafe { libc::poll(&mut p, 1, 0) } == 1 {
                Try::Done(socket_error(req.sock))
            } else {
                Try::WouldBlock
            }
        }
        r => Try::Done(r),
    }
}

/// How long the init itself may wait in a connect before a worker takes
/// it over (SIGALRM, whose handler does nothing and restarts nothing: see
/// `init::wait_and_serve`).
const INLINE_LIMIT_US: libc::suseconds_t = 20_000;

/// `f` with the init's timer armed: a call in it that blocks longer than
/// [`INLINE_LIMIT_US`] fails with `EINTR`.
fn bounded(f: impl FnOnce() -> c_int) -> c_int {
    let arm = |us: libc::suseconds_t| {
        let t = libc::itimerval {
            it_interval: libc::timeval {
                tv_sec: 0,
                tv_usec: 0,
            },
            it_value: libc::timeval {
                tv_sec: 0,
                tv_usec: us,
            },
        };
        // SAFETY: setitimer(2) with a stack struct.
        unsafe { libc::setitimer(libc::ITIMER_REAL, &t, std::ptr::null_mut()) };
    };
    arm(INLINE_LIMIT_US);
    let r = f();
    arm(0);
    r
}

/// `SO_ERROR`: how a connect under way ended.
fn socket_error(sock: c_int) -> c_int {
    let mut e: c_int = 0;
    let mut size = std::mem::size_of::<c_int>() as libc::socklen_t;
    // SAFETY: getsockopt(2) into a stack int of the size given.
    let r = unsafe {
        libc::getsockopt(
            sock,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut e as *mut c_int).cast::<c_void>(),
            &mut size,
        )
    };
    if r == 0 { e } else { errno() }
}

/// A blocking connect, made again by a forked worker: a Unix one waits for
/// room in the backlog, a TCP one for its handshake (the kernel waits on
/// the one under way).
fn finish_in_worker(listener: c_int, req: &Request, target: &Target, close: &[c_int]) {
    // SAFETY: fork(2) of this single-threaded init; the worker runs only
    // this module's raw-syscall code and `_exit`s.
    let worker = unsafe { libc::fork() };
    if worker == 0 {
        // SAFETY: raw syscalls on our own descriptors; never returns.
        unsafe {
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            for fd in close {
                libc::close(*fd);
            }
            reply(listener, req.id, make(req, target));
            libc::_exit(0);
        }
    }
    if worker < 0 {
        reply(listener, req.id, libc::EAGAIN);
    }
}

/// The caller's socket and address, each taken once; an errno for the
/// caller when that fails the way its own `connect` would.
fn gather(listener: c_int, n: &libc::seccomp_notif) -> Result<Request, c_int> {
    let tid = n.pid as libc::pid_t;
    let pidfd = pidfd(tid)?;
    // SAFETY: pidfd_getfd(2) on our pidfd; the fd argument is the caller's
    // `int` (the low half of the register).
    let sock =
        unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, n.data.args[0] as c_int, 0) } as c_int;
    let e = errno();
    // SAFETY: closing our own pidfd.
    unsafe { libc::close(pidfd) };
    if sock < 0 {
        return Err(e);
    }
    let mut req = Request {
        id: n.id,
        tid,
        sock,
        addr: [0; ADDR_MAX],
        len: 0,
        nonblocking: false,
    };
    let fail = |req: &Request, e: c_int| -> Result<Request, c_int> {
        // SAFETY: closing the duplicate we took.
        unsafe { libc::close(req.sock) };
        Err(e)
    };
    // `socklen_t` is 32 bits; the kernel refuses a negative or too long one.
    let len = n.data.args[2] as u32 as i32;
    if len < 0 || len as usize > ADDR_MAX {
        return fail(&req, libc::EINVAL);
    }
    req.len = len as usize;
    if req.len > 0 {
        let local = libc::iovec {
            iov_base: req.addr.as_mut_ptr().cast::<c_void>(),
            iov_len: req.len,
        };
        let remote = libc::iovec {
            iov_base: n.data.args[1] as *mut c_void,
            iov_len: req.len,
        };
        // SAFETY: process_vm_readv(2) into our own buffer of `len` bytes.
        let got = unsafe { libc::process_vm_readv(tid, &local, 1, &remote, 1, 0) };
        if got != req.len as isize {
            return fail(&req, libc::EFAULT);
        }
    }
    // The caller is still the one that asked (its tid was not reused while
    // we read it): what we took is its.
    let mut id = n.id;
    // SAFETY: the ioctl reads a u64 from our stack.
    if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &mut id) } != 0 {
        return fail(&req, libc::ESRCH);
    }
    // SAFETY: fcntl(2) on our duplicate (it shares the caller's flags).
    let flags = unsafe { libc::fcntl(req.sock, libc::F_GETFL) };
    req.nonblocking = flags >= 0 && flags & libc::O_NONBLOCK != 0;
    Ok(req)
}

/// A pidfd for the calling thread (its own descriptor table: a thread may
/// have unshared it); before Linux 6.9, for its thread group.
fn pidfd(tid: libc::pid_t) -> Result<c_int, c_int> {
    // SAFETY: pidfd_open(2) with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid, PIDFD_THREAD) } as c_int;
    if fd >= 0 {
        return Ok(fd);
    }
    if errno() != libc::EINVAL {
        return Err(errno());
    }
    let tgid = tgid(tid).ok_or(libc::ESRCH)?;
    // SAFETY: pidfd_open(2) with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tgid, 0) } as c_int;
    if fd >= 0 { Ok(fd) } else { Err(errno()) }
}

/// The thread group of `tid`, from `/proc/<tid>/status`.
fn tgid(tid: libc::pid_t) -> Option<libc::pid_t> {
    let mut path = [0u8; 40];
    let at = proc_path(tid, &mut path);
    path[at..at + 8].copy_from_slice(b"/status\0");
    let v = diag::proc_number(&path, b"\nTgid:\t")?;
    libc::pid_t::try_from(v).ok().filter(|v| *v > 0)
}

/// Writes `/proc/<tid>` at the start of `out`; its length.
pub(super) fn proc_path(tid: libc::pid_t, out: &mut [u8]) -> usize {
    out[..6].copy_from_slice(b"/proc/");
    6 + diag::decimal(tid as u64, &mut out[6..])
}

/// Connects `sock` to the socket inode `fd` holds (`/proc/self/fd/<fd>`:
/// no path is looked up again).
fn connect_through(sock: c_int, fd: c_int) -> c_int {
    let mut a = [0u8; std::mem::size_of::<libc::sockaddr_un>()];
    a[..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
    let prefix = b"/proc/self/fd/";
    a[2..2 + prefix.len()].copy_from_slice(prefix);
    let n = diag::decimal(fd as u64, &mut a[2 + prefix.len()..]);
    connect(sock, &a[..2 + prefix.len() + n + 1])
}

/// connect(2): 0 or its errno (once: a connect interrupted is not
/// restarted by its caller either, who sees `EINTR`).
fn connect(sock: c_int, addr: &[u8]) -> c_int {
    // SAFETY: connect(2) with our own buffer of the length given.
    let r = unsafe {
        libc::connect(
            sock,
            addr.as_ptr().cast::<libc::sockaddr>(),
            addr.len() as libc::socklen_t,
        )
    };
    if r == 0 { 0 } else { errno() }
}

/// Answers notification `id`: success, or `err` as the caller's errno.
pub(super) fn reply(listener: c_int, id: u64, err: c_int) {
    let mut raw = [0u64; RESP_ROOM / 8];
    let resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: -err,
        flags: 0,
    };
    // SAFETY: the response written at the start of the zeroed, aligned
    // buffer; the kernel reads its own `struct seccomp_notif_resp` from it.
    // A signal to the init (its timer's, a SIGTERM) can interrupt the
    // ioctl before it answers: then again, or the caller waits for ever.
    unsafe {
        std::ptr::write(raw.as_mut_ptr().cast::<libc::seccomp_notif_resp>(), resp);
        while libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, raw.as_mut_ptr()) != 0
            && errno() == libc::EINTR
        {}
    }
}
