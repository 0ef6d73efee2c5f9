//! The command's Unix sockets, made by the init (`UnixSockets::Checked`).
//!
//! `socket(AF_UNIX, …)` and `socketpair(AF_UNIX, …)` of the command reach
//! the init through its seccomp filter; the init makes the socket itself,
//! in its own network namespace, and installs it in the caller
//! (`SECCOMP_IOCTL_NOTIF_ADDFD`). So that namespace's socket table holds
//! the command's Unix sockets and nothing else — what the connect check
//! (`decide::owner`) reads — and the command's abstract names live
//! there too: it neither reaches nor takes a name of the host's. Raw
//! syscalls and stack buffers only (see the parent module's rules).

use libc::{c_int, c_void};

use super::errno;
use super::supervise::reply;

/// `SECCOMP_ADDFD_FLAG_SEND` (Linux 5.14): install and answer at once, the
/// new descriptor's number the call's result.
const ADDFD_FLAG_SEND: u32 = 1 << 1;

/// The caller's `type` and `protocol` (the low halves of its registers),
/// and its `SOCK_CLOEXEC` as the `O_CLOEXEC` of the descriptor installed
/// in it (a descriptor's flag, not the socket's): the type the init makes
/// its own copy with is always close-on-exec.
fn kind(n: &libc::seccomp_notif) -> (c_int, c_int, u32) {
    let ty = n.data.args[1] as c_int;
    let cloexec = if ty & libc::SOCK_CLOEXEC != 0 {
        libc::O_CLOEXEC as u32
    } else {
        0
    };
    (
        (ty & !libc::SOCK_CLOEXEC) | libc::SOCK_CLOEXEC,
        n.data.args[2] as c_int,
        cloexec,
    )
}

/// Installs `fd` in the caller of `n` (and, with `send`, answers with its
/// number): the number, or the errno.
fn install(listener: c_int, n: &libc::seccomp_notif, fd: c_int, flags: u32, send: bool) -> c_int {
    let add = libc::seccomp_notif_addfd {
        id: n.id,
        flags: if send { ADDFD_FLAG_SEND } else { 0 },
        srcfd: fd as u32,
        newfd: 0,
        newfd_flags: flags,
    };
    loop {
        // SAFETY: the ioctl reads a `struct seccomp_notif_addfd` from our
        // stack.
        let r = unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ADDFD, &add) };
        match r {
            r if r >= 0 => return r,
            _ if errno() == libc::EINTR => continue,
            _ => return -errno(),
        }
    }
}

/// `socket(AF_UNIX, type, protocol)` for the caller of `n`.
pub(super) fn socket(listener: c_int, n: &libc::seccomp_notif) {
    let (ty, protocol, cloexec) = kind(n);
    // SAFETY: socket(2) with the caller's integers; closed below once
    // installed in the caller.
    let s = unsafe { libc::socket(libc::AF_UNIX, ty, protocol) };
    if s < 0 {
        return reply(listener, n.id, errno());
    }
    let r = install(listener, n, s, cloexec, true);
    if r < 0 {
        reply(listener, n.id, -r);
    }
    // SAFETY: closing our copy.
    unsafe { libc::close(s) };
}

/// `socketpair(AF_UNIX, type, protocol, sv)` for the caller of `n`: the
/// two numbers are written to its `sv` (checked writable first — what it
/// holds written back unchanged — so that a bad pointer fails before
/// anything is installed).
pub(super) fn pair(listener: c_int, n: &libc::seccomp_notif) {
    let (ty, protocol, cloexec) = kind(n);
    let tid = n.pid as libc::pid_t;
    let sv = n.data.args[3];
    if !read_pair(tid, sv).is_some_and(|was| write_pair(tid, sv, was)) {
        return reply(listener, n.id, libc::EFAULT);
    }
    let mut fds = [-1 as c_int; 2];
    // SAFETY: socketpair(2) into a stack array.
    if unsafe { libc::socketpair(libc::AF_UNIX, ty, protocol, fds.as_mut_ptr()) } != 0 {
        return reply(listener, n.id, errno());
    }
    let a = install(listener, n, fds[0], cloexec, false);
    let b = if a >= 0 {
        install(listener, n, fds[1], cloexec, false)
    } else {
        a
    };
    // SAFETY: closing our copies.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    let mut id = n.id;
    // SAFETY: the ioctl reads a u64 from our stack.
    let live = unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &mut id) } == 0;
    match (a, b) {
        // The caller still waits (its pid not reused): its array gets them.
        (a, b) if a >= 0 && b >= 0 && live && write_pair(tid, sv, [a, b]) => {
            reply(listener, n.id, 0)
        }
        (a, b) if a < 0 || b < 0 => reply(listener, n.id, -a.min(b)),
        _ => reply(listener, n.id, libc::EFAULT),
    }
}

/// The two `int`s at `at` in the memory of `tid`.
fn read_pair(tid: libc::pid_t, at: u64) -> Option<[c_int; 2]> {
    let mut bytes = [0u8; 8];
    if !remote(tid, at, &mut bytes, false) {
        return None;
    }
    let int = |b: &[u8]| c_int::from_ne_bytes([b[0], b[1], b[2], b[3]]);
    Some([int(&bytes[..4]), int(&bytes[4..])])
}

/// Writes two `int`s at `at` in the memory of `tid`.
fn write_pair(tid: libc::pid_t, at: u64, v: [c_int; 2]) -> bool {
    let mut bytes = [0u8; 8];
    bytes[..4].copy_from_slice(&v[0].to_ne_bytes());
    bytes[4..].copy_from_slice(&v[1].to_ne_bytes());
    remote(tid, at, &mut bytes, true)
}

/// Copies the 8 bytes at `at` in the memory of `tid` into `bytes`, or
/// (`write`) `bytes` there; whether all 8 went.
fn remote(tid: libc::pid_t, at: u64, bytes: &mut [u8; 8], write: bool) -> bool {
    let local = libc::iovec {
        iov_base: bytes.as_mut_ptr().cast::<c_void>(),
        iov_len: 8,
    };
    let there = libc::iovec {
        iov_base: at as *mut c_void,
        iov_len: 8,
    };
    // SAFETY: process_vm_readv/writev(2) of our 8-byte buffer.
    let n = unsafe {
        if write {
            libc::process_vm_writev(tid, &local, 1, &there, 1, 0)
        } else {
            libc::process_vm_readv(tid, &local, 1, &there, 1, 0)
        }
    };
    n == 8
}
