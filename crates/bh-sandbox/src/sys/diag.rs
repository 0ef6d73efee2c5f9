//! Who listens on a Unix socket, for the connect check (`super::supervise`):
//! the kernel's socket table (`NETLINK_SOCK_DIAG`, `UNIX_DIAG`) names the
//! listening socket bound to a path's inode or to an abstract name, and
//! the sandbox's own `/proc` says whether a process of the sandbox holds
//! it. Runs in the sandbox's init and its workers: raw syscalls and stack
//! buffers only (see the parent module's rules).

use libc::{c_int, c_void};

use super::errno;

/// What a connect names.
pub(crate) enum Key<'a> {
    /// A path, by the number of the inode it resolves to as the kernel
    /// keeps it (`i_ino`: what `/proc/self/fdinfo` says, [`fd_ino`]; `stat`
    /// may say another for btrfs subvolumes and overlayfs). The table
    /// gives its low 32 bits and the device the kernel keeps; only those
    /// bits are compared, so sockets on other file systems can match too:
    /// the caller decides about every match.
    Vfs { ino: u64 },
    /// An abstract name, its leading NUL included.
    Abstract(&'a [u8]),
}

// linux/netlink.h, linux/sock_diag.h, linux/unix_diag.h
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const UDIAG_SHOW_NAME: u32 = 1;
const UDIAG_SHOW_VFS: u32 = 2;
const UNIX_DIAG_NAME: u16 = 0;
const UNIX_DIAG_VFS: u16 = 1;
const TCP_LISTEN: u32 = 10;
/// `struct nlmsghdr` and `struct unix_diag_msg`.
const NLMSG_HDR: usize = 16;
const DIAG_MSG: usize = 16;

#[repr(C)]
struct Request {
    len: u32,
    kind: u16,
    flags: u16,
    seq: u32,
    pid: u32,
    // struct unix_diag_req
    family: u8,
    protocol: u8,
    pad: u16,
    states: u32,
    ino: u32,
    show: u32,
    cookie: [u32; 2],
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// A socket on this network namespace's table (`NETLINK_SOCK_DIAG`); it
/// stays on that namespace's table wherever its holder goes.
pub(crate) fn table() -> Result<c_int, c_int> {
    // SAFETY: socket(2) with integer arguments; the caller owns the result.
    let s = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if s < 0 { Err(errno()) } else { Ok(s) }
}

/// The inode numbers of the sockets listening on `key` in this network
/// namespace's table, written to `out`; how many matched (more than
/// `out` holds is counted, not written). Errors are errnos.
pub(crate) fn listeners(key: &Key, out: &mut [u32]) -> Result<usize, c_int> {
    let s = table()?;
    let r = listeners_in(s, key, out);
    // SAFETY: closing our own socket.
    unsafe { libc::close(s) };
    r
}

/// [`listeners`] on the table `s` ([`table`]) reads, which may be another
/// namespace's: what an earlier dump left unread is drained, and only the
/// answers to this one (its sequence number) are read.
pub(crate) fn listeners_in(s: c_int, key: &Key, out: &mut [u32]) -> Result<usize, c_int> {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut scrap = [0u8; 512];
    // SAFETY: recv(2) into a stack buffer, not waiting.
    while unsafe {
        libc::recv(
            s,
            scrap.as_mut_ptr().cast(),
            scrap.len(),
            libc::MSG_DONTWAIT,
        )
    } > 0
    {}
    let req = Request {
        len: std::mem::size_of::<Request>() as u32,
        kind: SOCK_DIAG_BY_FAMILY,
        flags: NLM_F_REQUEST | NLM_F_DUMP,
        seq,
        pid: 0,
        family: libc::AF_UNIX as u8,
        protocol: 0,
        pad: 0,
        states: 1 << TCP_LISTEN,
        ino: 0,
        show: match key {
            Key::Vfs { .. } => UDIAG_SHOW_VFS,
            Key::Abstract(_) => UDIAG_SHOW_NAME,
        },
        cookie: [0; 2],
    };
    // SAFETY: send(2) of a stack struct of the size given, to the kernel
    // (an unconnected netlink socket sends to pid 0).
    let n = unsafe {
        libc::send(
            s,
            (&req as *const Request).cast::<c_void>(),
            std::mem::size_of::<Request>(),
            0,
        )
    };
    if n < 0 {
        return Err(errno());
    }
    // A dump message is at most 32 KiB (the kernel sizes it to the largest
    // buffer a reader offered, capped there).
    let mut buf = [0u8; 32 * 1024];
    let mut found = 0usize;
    loop {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast::<c_void>(),
            iov_len: buf.len(),
        };
        // SAFETY: an all-zero msghdr is valid; we set its one iovec.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        // SAFETY: recvmsg(2) into our stack buffer through `msg`.
        let n = unsafe { libc::recvmsg(s, &mut msg, 0) };
        if n < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            return Err(errno());
        }
        if msg.msg_flags & libc::MSG_TRUNC != 0 {
            return Err(libc::EMSGSIZE);
        }
        match messages(&buf[..n as usize], seq, key, out, &mut found) {
            Walk::More => {}
            Walk::Done => return Ok(found),
            Walk::Failed(e) => return Err(e),
        }
    }
}

enum Walk {
    More,
    Done,
    Failed(c_int),
}

/// One datagram of the dump: every socket whose attribute matches `key` is
/// counted (and its inode written while `out` has room).
fn messages(mut b: &[u8], seq: u32, key: &Key, out: &mut [u32], found: &mut usize) -> Walk {
    while b.len() >= NLMSG_HDR {
        let len = u32_at(b, 0) as usize;
        if len < NLMSG_HDR || len > b.len() {
            return Walk::Failed(libc::EPROTO);
        }
        let kind = if u32_at(b, 8) == seq { u16_at(b, 4) } else { 0 };
        match kind {
            NLMSG_DONE => return Walk::Done,
            NLMSG_ERROR => {
                let e = if len >= NLMSG_HDR + 4 {
                    -(u32_at(b, NLMSG_HDR) as i32)
                } else {
                    libc::EPROTO
                };
                return Walk::Failed(if e > 0 { e } else { libc::EPROTO });
            }
            SOCK_DIAG_BY_FAMILY if len >= NLMSG_HDR + DIAG_MSG => {
                let m = &b[NLMSG_HDR..len];
                if matches(&m[DIAG_MSG..], key) {
                    if let Some(slot) = out.get_mut(*found) {
                        *slot = u32_at(m, 4);
                    }
                    *found += 1;
                }
            }
            _ => {}
        }
        // Messages are 4-byte aligned.
        let next = (len + 3) & !3;
        b = b.get(next..).unwrap_or(&[]);
    }
    Walk::More
}

/// Whether the attributes of one socket name `key`.
fn matches(mut attrs: &[u8], key: &Key) -> bool {
    while attrs.len() >= 4 {
        let len = u16_at(attrs, 0) as usize;
        if len < 4 || len > attrs.len() {
            return false;
        }
        let payload = &attrs[4..len];
        match (u16_at(attrs, 2), key) {
            (UNIX_DIAG_VFS, Key::Vfs { ino }) if payload.len() >= 4 => {
                // struct unix_diag_vfs { __u32 ino; __u32 dev; }: the inode
                // number is cut to 32 bits, so two sockets can share it;
                // the caller decides about every one that matches.
                return u32_at(payload, 0) == *ino as u32;
            }
            (UNIX_DIAG_NAME, Key::Abstract(name)) => return payload == *name,
            _ => {}
        }
        attrs = attrs.get((len + 3) & !3..).unwrap_or(&[]);
    }
    false
}

/// Writes `n` in decimal at the start of `out`; how many bytes.
pub(crate) fn decimal(mut n: u64, out: &mut [u8]) -> usize {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let d = &digits[i..];
    out[..d.len()].copy_from_slice(d);
    d.len()
}

/// Which process of this PID namespace (the sandbox's `/proc`) holds the
/// socket with inode `ino` (some `/proc/<pid>/fd/<n>` reads
/// `socket:[<ino>]`): `hint` first (the one that held it last time), then
/// every one. A process whose descriptors cannot be read counts as not
/// holding it (the check then refuses: it fails closed).
pub(crate) fn holder(ino: u32, hint: Option<libc::pid_t>) -> Option<(libc::pid_t, c_int)> {
    let mut want = [0u8; 32];
    want[..8].copy_from_slice(b"socket:[");
    let n = 8 + decimal(u64::from(ino), &mut want[8..]);
    want[n] = b']';
    let want = &want[..n + 1];
    // SAFETY: open(2) of a static NUL-terminated path; closed below.
    let proc = unsafe {
        libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if proc < 0 {
        return None;
    }
    let mut found = None;
    if let Some(pid) = hint {
        let mut name = [0u8; 20];
        let k = decimal(pid as u64, &mut name);
        found = holds(proc, &name[..k], want).map(|fd| (pid, fd));
    }
    if found.is_none() {
        each_entry(proc, &mut |pid| {
            if found.is_some() || !pid.iter().all(u8::is_ascii_digit) {
                return;
            }
            if let Some(fd) = holds(proc, pid, want) {
                found = parse(pid).map(|p| (p as libc::pid_t, fd));
            }
        });
    }
    // SAFETY: closing our own descriptor.
    unsafe { libc::close(proc) };
    found
}

/// A decimal number (no allocation: `str::parse` would do, but this is
/// plainly safe here).
fn parse(digits: &[u8]) -> Option<u64> {
    let mut v: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    (!digits.is_empty()).then_some(v)
}

/// The inode number the kernel keeps for what descriptor `fd` of this
/// process holds (`/proc/self/fdinfo/<fd>`'s `ino:`).
pub(crate) fn fd_ino(fd: c_int) -> Option<u64> {
    let mut path = [0u8; 48];
    let prefix = b"/proc/self/fdinfo/";
    path[..prefix.len()].copy_from_slice(prefix);
    let k = decimal(fd as u64, &mut path[prefix.len()..]);
    path[prefix.len() + k] = 0;
    proc_number(&path, b"\nino:\t")
}

/// The number after `key` in the small `/proc` file at `path` (NUL
/// terminated): `Tgid:` of a status, `ino:` of an fdinfo.
pub(crate) fn proc_number(path: &[u8], key: &[u8]) -> Option<u64> {
    let mut buf = [0u8; 4096];
    // SAFETY: open/read/close on a NUL-terminated stack path and buffer.
    let n = unsafe {
        let f = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if f < 0 {
            return None;
        }
        let n = libc::read(f, buf.as_mut_ptr().cast(), buf.len());
        libc::close(f);
        n
    };
    let text = buf.get(..usize::try_from(n).ok()?)?;
    let start = text.windows(key.len()).position(|w| w == key)? + key.len();
    let end = text[start..]
        .iter()
        .position(|b| !b.is_ascii_digit())
        .map_or(text.len(), |e| e + start);
    parse(&text[start..end])
}

/// The descriptor of `/proc/<pid>/fd` (under the open `proc`) whose link
/// reads `want`.
fn holds(proc: c_int, pid: &[u8], want: &[u8]) -> Option<c_int> {
    if pid.is_empty() || pid.len() > 20 {
        return None;
    }
    let mut path = [0u8; 32];
    path[..pid.len()].copy_from_slice(pid);
    path[pid.len()..pid.len() + 4].copy_from_slice(b"/fd\0");
    // SAFETY: openat(2) of a NUL-terminated stack path under `proc`.
    let fds = unsafe {
        libc::openat(
            proc,
            path.as_ptr().cast(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fds < 0 {
        return None;
    }
    let mut held = None;
    each_entry(fds, &mut |fd| {
        if held.is_some() || !fd.iter().all(u8::is_ascii_digit) {
            return;
        }
        let mut name = [0u8; 24];
        name[..fd.len()].copy_from_slice(fd);
        let mut link = [0u8; 64];
        // SAFETY: readlinkat(2) of a NUL-terminated stack name into a
        // stack buffer of the size given.
        let got = unsafe {
            libc::readlinkat(
                fds,
                name.as_ptr().cast(),
                link.as_mut_ptr().cast(),
                link.len(),
            )
        };
        if got > 0 && link[..got as usize] == *want {
            held = parse(fd).map(|n| n as c_int);
        }
    });
    // SAFETY: closing our own descriptor.
    unsafe { libc::close(fds) };
    held
}

/// Calls `f` with each entry name of the open folder `dir` (short names
/// only: longer ones are none of `/proc`'s numbers).
fn each_entry(dir: c_int, f: &mut dyn FnMut(&[u8])) {
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: getdents64(2) into our stack buffer of the size given.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir,
                buf.as_mut_ptr().cast::<c_void>(),
                buf.len(),
            )
        };
        if n <= 0 {
            return;
        }
        let mut at = 0usize;
        // struct linux_dirent64 { u64 ino; i64 off; u16 reclen; u8 type; char name[]; }
        while at + 19 < n as usize {
            let reclen = u16_at(&buf, at + 16) as usize;
            if reclen == 0 || at + reclen > n as usize {
                return;
            }
            let name = &buf[at + 19..at + reclen];
            let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            if end <= 20 {
                f(&name[..end]);
            }
            at += reclen;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::net::UnixListener;

    #[test]
    fn a_listener_is_found_by_its_inode_and_by_its_abstract_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.sock");
        let l = UnixListener::bind(&path).unwrap();
        let meta = fs_err::metadata(&path).unwrap();
        let mut out = [0u32; 4];
        let key = Key::Vfs { ino: meta.ino() };
        assert_eq!(listeners(&key, &mut out), Ok(1));
        // The socket's own inode, as its descriptor's link names it.
        let link = fs_err::read_link(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&l)
        ))
        .unwrap();
        assert_eq!(link.to_str().unwrap(), format!("socket:[{}]", out[0]));
        let me = std::process::id() as libc::pid_t;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&l);
        assert_eq!(
            holder(out[0], None),
            Some((me, fd)),
            "this process holds it"
        );
        assert_eq!(
            holder(out[0], Some(1)),
            Some((me, fd)),
            "a wrong hint is no answer"
        );
        assert_eq!(holder(out[0] + 1_000_000, Some(me)), None);
        // What fdinfo says is the inode's number (a plain file here).
        let o = fs_err::File::open("/dev/null").unwrap();
        let null = fs_err::metadata("/dev/null").unwrap().ino();
        assert_eq!(fd_ino(std::os::fd::AsRawFd::as_raw_fd(&o)), Some(null));
        drop(l);
        assert_eq!(listeners(&key, &mut out), Ok(0), "closed: none");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("bh-diag-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
        let _a = UnixListener::bind_addr(&addr).unwrap();
        let mut key = vec![0u8];
        key.extend_from_slice(name.as_bytes());
        assert_eq!(listeners(&Key::Abstract(&key), &mut out), Ok(1));
        key.push(b'x');
        assert_eq!(listeners(&Key::Abstract(&key), &mut out), Ok(0));
    }

    #[test]
    fn decimals() {
        let mut b = [0u8; 20];
        for n in [0u64, 7, 10, 4_294_967_295, u64::MAX] {
            let k = decimal(n, &mut b);
            assert_eq!(&b[..k], n.to_string().as_bytes());
        }
    }
}
