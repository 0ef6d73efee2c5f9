//! Whether a connect of the command may be made, and to what
//! (`UnixSockets::Checked`; the notification's handling is in
//! `supervise.rs`). Runs in the sandbox's init: raw syscalls and stack
//! buffers only (see the parent module's rules).

use libc::{c_int, c_void};

use super::diag::{self, Key};
use super::errno;
use super::supervise::{Memo, Request, Serve, Target, Verdict, proc_path};

/// `SIOCUNIXFILE` (linux/un.h): an `O_PATH` descriptor of the file a Unix
/// socket is bound to.
const SIOCUNIXFILE: libc::Ioctl = 0x89E0;
/// `SIOCGSKNS` (linux/sockios.h): a descriptor of a socket's network
/// namespace.
const SIOCGSKNS: libc::Ioctl = 0x894C;

/// Whether the connect may be made, and to what.
pub(super) fn decide(req: &Request, sv: &mut Serve) -> Verdict {
    let Some(domain) = int_opt(req.sock, libc::SO_DOMAIN) else {
        return Verdict::Refuse(errno()); // ENOTSOCK, as connect(2) says
    };
    let addr = &req.addr[..req.len];
    // Another family; or too short to name anything, or not an `AF_UNIX`
    // address: the kernel's own answer.
    if domain != libc::AF_UNIX
        || addr.len() <= 2
        || u16::from_ne_bytes([addr[0], addr[1]]) != libc::AF_UNIX as u16
    {
        return Verdict::Connect(Target::Asked);
    }
    let name = &addr[2..];
    if name[0] == 0 {
        // The kernel looks an abstract name up in the caller's socket's
        // network namespace: one the init made, whose names are the
        // command's. A socket from elsewhere (handed over an allowed one)
        // would look it up in the host's.
        if socket_namespace(req.sock) != Some(sv.own_ns) {
            return Verdict::Refuse(libc::EACCES);
        }
        return match owner(&Key::Abstract(name), None, &mut sv.memo) {
            true => Verdict::Connect(Target::Asked),
            false => Verdict::Refuse(libc::ECONNREFUSED),
        };
    }
    pathname(req, name, sv)
}

/// The inode of the network namespace socket `sock` was made in
/// (`SIOCGSKNS`, which needs `CAP_NET_ADMIN` over that namespace: only
/// the init's own answers).
fn socket_namespace(sock: c_int) -> Option<u64> {
    // SAFETY: ioctl/fstat/close on descriptors this function owns.
    unsafe {
        if !super::caps::net_admin(true) {
            return None;
        }
        let ns = libc::ioctl(sock, SIOCGSKNS, 0);
        if !super::caps::net_admin(false) {
            libc::_exit(127);
        }
        if ns < 0 {
            return None;
        }
        let mut st: libc::stat = std::mem::zeroed();
        let ok = libc::fstat(ns, &mut st) == 0;
        libc::close(ns);
        ok.then_some(st.st_ino)
    }
}

/// `path` as the caller means it, written to `out`: `/proc/self` and
/// `/proc/thread-self` are the caller's (the init resolves the path, and
/// would take them for its own); the length, or `None` if it does not fit.
fn as_caller(path: &[u8], tid: libc::pid_t, out: &mut [u8]) -> Option<usize> {
    let rest = [&b"/proc/self/"[..], b"/proc/thread-self/"]
        .iter()
        .find_map(|p| path.strip_prefix(*p));
    let mut at = 0;
    let tail = match rest {
        Some(rest) => {
            at = proc_path(tid, out);
            *out.get_mut(at)? = b'/';
            at += 1;
            rest
        }
        None => path,
    };
    out.get_mut(at..at + tail.len())?.copy_from_slice(tail);
    // Room for the NUL the caller writes.
    (at + tail.len() < out.len()).then_some(at + tail.len())
}

/// `path` (NUL-terminated) opened `O_PATH` as the caller would find it: a
/// relative one from its folder (its thread's, `/proc/<tid>/cwd`), an
/// absolute one from its root — the sandbox's, or one it `chroot`ed into
/// in a user namespace of its own (`openat2`, `RESOLVE_IN_ROOT`).
fn resolve(path: &[u8], tid: libc::pid_t) -> Result<c_int, c_int> {
    let mut proc = [0u8; 40];
    let at = proc_path(tid, &mut proc);
    let tail: &[u8] = if path[0] == b'/' {
        b"/root\0"
    } else {
        b"/cwd\0"
    };
    proc[at..at + tail.len()].copy_from_slice(tail);
    // SAFETY: open/stat/openat/openat2/close on NUL-terminated stack
    // paths and stack structs; the descriptor returned is the caller's
    // to close.
    unsafe {
        let dir = libc::open(
            proc.as_ptr().cast(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if dir < 0 {
            return Err(libc::ESRCH);
        }
        let fd = if path[0] != b'/' || same_root(dir) {
            libc::openat(dir, path.as_ptr().cast(), libc::O_PATH | libc::O_CLOEXEC)
        } else {
            let how = OpenHow {
                flags: (libc::O_PATH | libc::O_CLOEXEC) as u64,
                mode: 0,
                resolve: RESOLVE_IN_ROOT,
            };
            libc::syscall(
                libc::SYS_openat2,
                dir,
                path.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            ) as c_int
        };
        let e = errno();
        libc::close(dir);
        if fd < 0 { Err(e) } else { Ok(fd) }
    }
}

/// `struct open_how` (linux/openat2.h).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

const RESOLVE_IN_ROOT: u64 = 0x10;

/// Whether the folder `dir` is the init's own root (the caller did not
/// `chroot`): then an absolute path is looked up as usual, magic links of
/// `/proc` (`/proc/<tid>/fd/<n>/…`) included.
fn same_root(dir: c_int) -> bool {
    // SAFETY: fstat/stat into stack structs.
    unsafe {
        let (mut a, mut b): (libc::stat, libc::stat) = (std::mem::zeroed(), std::mem::zeroed());
        libc::fstat(dir, &mut a) == 0
            && libc::stat(c"/".as_ptr(), &mut b) == 0
            && (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
    }
}

/// A connect to a path: resolved once as the caller would.
fn pathname(req: &Request, name: &[u8], sv: &mut Serve) -> Verdict {
    if req.len > std::mem::size_of::<libc::sockaddr_un>() {
        return Verdict::Refuse(libc::EINVAL);
    }
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    let mut path = [0u8; 160];
    let Some(len) = as_caller(&name[..end], req.tid, &mut path) else {
        return Verdict::Refuse(libc::ENAMETOOLONG);
    };
    path[len] = 0;
    let fd = match resolve(&path[..=len], req.tid) {
        Ok(fd) => fd,
        Err(e) => return Verdict::Refuse(e), // ENOENT, EACCES, ENOTDIR, ELOOP…
    };
    // SAFETY: fstat/close on the descriptor `resolve` opened: closed, or
    // handed back in the verdict.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 || st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
            libc::close(fd);
            return Verdict::Refuse(libc::ECONNREFUSED);
        }
        let file = (st.st_dev, st.st_ino);
        let ino = diag::fd_ino(fd);
        let allowed = sv.check.allowed.contains(&file)
            || ino.is_some_and(|ino| owner(&Key::Vfs { ino }, Some(file), &mut sv.memo));
        if allowed {
            return Verdict::Connect(Target::Through(fd));
        }
        libc::close(fd);
        // A server of the host's listens there (as far as the command's
        // own network namespace shows; one in yet another namespace is
        // refused the same way, as nobody): say so.
        let mut one = [0u32; 1];
        let host = ino.is_some_and(|ino| {
            diag::listeners_in(sv.outside, &Key::Vfs { ino }, &mut one).is_ok_and(|n| n > 0)
        });
        Verdict::Refuse(if host {
            libc::EACCES
        } else {
            libc::ECONNREFUSED
        })
    }
}

/// Whether a socket of the command's own listens on `key`. The init's
/// network namespace holds the command's Unix sockets and nothing else
/// (the init makes every one there, `made.rs`), so its table lists no
/// host server, in whatever namespace that server runs. An abstract name
/// there is the command's. For a path (its `file` by `stat`), the table
/// keeps 32 bits of the inode number, so a socket on another file system
/// can match too: a match counts only once the file it is bound to
/// (`SIOCUNIXFILE`) is that very `file`.
fn owner(key: &Key, file: Option<(u64, u64)>, memo: &mut Memo) -> bool {
    let mut inos = [0u32; 8];
    let Ok(n) = diag::listeners(key, &mut inos) else {
        return false;
    };
    let Some(file) = file else {
        return n > 0;
    };
    inos[..n.min(inos.len())].iter().any(|ino| {
        let Some((pid, fd)) = diag::holder(*ino, memo.hint(*ino)) else {
            return false; // no process holds it now (being closed)
        };
        memo.remember(*ino, pid);
        bound_file(pid, fd, *ino) == Some(file)
    })
}

/// `(st_dev, st_ino)` of the file the listening socket `fd` of process
/// `pid` is bound to: the socket taken (`pidfd_getfd`), checked to be
/// that listener (its number may hold something else by now: a socket of
/// inode `ino`, of `AF_UNIX`, listening), and asked (`SIOCUNIXFILE`,
/// which needs `CAP_NET_ADMIN` over the socket's network namespace — the
/// init's own, where the command's sockets are: raised for this call
/// only).
fn bound_file(pid: libc::pid_t, fd: c_int, ino: u32) -> Option<(u64, u64)> {
    // SAFETY: pidfd/ioctl/fstat/close on descriptors this function owns.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid, 0) as c_int;
        if pidfd < 0 {
            return None;
        }
        let sock = libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) as c_int;
        libc::close(pidfd);
        if sock < 0 {
            return None;
        }
        let mut st: libc::stat = std::mem::zeroed();
        let that_one = libc::fstat(sock, &mut st) == 0
            && st.st_mode & libc::S_IFMT == libc::S_IFSOCK
            && st.st_ino == u64::from(ino)
            && int_opt(sock, libc::SO_DOMAIN) == Some(libc::AF_UNIX)
            && int_opt(sock, libc::SO_ACCEPTCONN) == Some(1);
        let path = if that_one && super::caps::net_admin(true) {
            let p = libc::ioctl(sock, SIOCUNIXFILE, 0);
            if !super::caps::net_admin(false) {
                // Never make a connect for the command with it effective.
                libc::_exit(127);
            }
            p
        } else {
            -1
        };
        libc::close(sock);
        if path < 0 {
            return None;
        }
        let ok = libc::fstat(path, &mut st) == 0;
        libc::close(path);
        ok.then_some((st.st_dev, st.st_ino))
    }
}

/// An `int` socket option of `sock`.
fn int_opt(sock: c_int, name: c_int) -> Option<c_int> {
    let mut v: c_int = 0;
    let mut size = std::mem::size_of::<c_int>() as libc::socklen_t;
    // SAFETY: getsockopt(2) into a stack int of the size given.
    let r = unsafe {
        libc::getsockopt(
            sock,
            libc::SOL_SOCKET,
            name,
            (&mut v as *mut c_int).cast::<c_void>(),
            &mut size,
        )
    };
    (r == 0).then_some(v)
}
