//! Who is on the other end of the socket, and a socket address that fits
//! `sun_path` however deep the state folder is.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use nix::sys::socket::{
    getsockopt,
    sockopt::{PeerCredentials, PeerPidfd},
};

use crate::error::{Result, ServeError};

/// The longest path `sun_path` holds (108 bytes with its NUL).
const SUN_PATH_MAX: usize = 107;

/// Why the peer of `stream` is not served, or `None` when it is. A peer
/// is served only when it runs as the current user **and** in this
/// server's own PID and mount namespaces **and** without `no_new_privs` or a
/// seccomp filter that this server does not have itself: a bh sandbox
/// (Landlock needs `no_new_privs`; it unshares a mount and a PID namespace)
/// fails every one of these, so a confined command cannot make the server
/// act for it (the server's second line; PROTOCOL.md).
pub(crate) fn refusal(stream: &UnixStream) -> Option<String> {
    let me = nix::unistd::getuid().as_raw();
    let cred = match getsockopt(stream, PeerCredentials) {
        Ok(c) => c,
        Err(e) => return Some(format!("cannot tell who the peer is ({e})")),
    };
    if cred.uid() != me {
        return Some(format!(
            "this checkpoint server serves uid {me} only, not uid {}",
            cred.uid()
        ));
    }
    let pid = cred.pid();
    // The facts below are read from `/proc/<pid>` after the pid: a peer that
    // exits and whose pid is reused in between would lend them another
    // process's. Its pidfd (SO_PEERPIDFD, Linux 6.5) pins the process: once
    // they are read, it must still be alive under that pid.
    // A kernel without it (before 6.5) answers ENOPROTOOPT: then unpinned,
    // as before. Any other failure (ESRCH: the peer is gone already) is a
    // refusal, or the race it closes would pass through this door.
    let pinned = match getsockopt(stream, PeerPidfd) {
        Ok(fd) => Some(fd),
        Err(nix::errno::Errno::ENOPROTOOPT) => None,
        Err(e) => {
            return Some(format!(
                "cannot pin the peer (pid {pid}) by its pidfd ({e}); it may have exited"
            ));
        }
    };
    if pid <= 0 {
        return Some(
            "the peer's process is not visible to this server (another PID namespace)".into(),
        );
    }
    for ns in ["pid", "mnt"] {
        let mine = fs_err::read_link(format!("/proc/self/ns/{ns}"));
        let theirs = fs_err::read_link(format!("/proc/{pid}/ns/{ns}"));
        match (mine, theirs) {
            (Ok(a), Ok(b)) if a == b => {}
            (Ok(_), Ok(_)) => {
                return Some(format!(
                    "the peer (pid {pid}) runs in another {ns} namespace than this server (a sandbox?); use `bh checkpoint` there instead"
                ));
            }
            (Err(e), _) | (_, Err(e)) => {
                return Some(format!(
                    "cannot compare the {ns} namespace of the peer (pid {pid}) with this server's ({e})"
                ));
            }
        }
    }
    let (mine, theirs) = match (confinement("self"), confinement(&pid.to_string())) {
        (Some(a), Some(b)) => (a, b),
        _ => {
            return Some(format!(
                "cannot read the confinement of the peer (pid {pid}) or of this server"
            ));
        }
    };
    if theirs.no_new_privs && !mine.no_new_privs {
        return Some(format!(
            "the peer (pid {pid}) runs with no_new_privs (as a Landlock sandbox does) and this server does not"
        ));
    }
    if theirs.seccomp && !mine.seccomp {
        return Some(format!(
            "the peer (pid {pid}) runs under a seccomp filter and this server does not"
        ));
    }
    if let Some(pidfd) = &pinned
        && pidfd_pid(pidfd) != Some(pid)
    {
        return Some(format!(
            "the peer (pid {pid}) exited while it was checked; its pid may be another process's now"
        ));
    }
    None
}

/// The pid a pidfd names now (`Pid:` of its fdinfo): `None` once the
/// process is gone (the kernel shows -1) or when it cannot be read.
pub(crate) fn pidfd_pid(pidfd: &OwnedFd) -> Option<i32> {
    let info = fs_err::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd())).ok()?;
    let pid: i32 = info
        .lines()
        .find_map(|l| l.strip_prefix("Pid:"))?
        .trim()
        .parse()
        .ok()?;
    (pid > 0).then_some(pid)
}

#[derive(Debug, Clone, Copy)]
struct Confinement {
    no_new_privs: bool,
    seccomp: bool,
}

/// `NoNewPrivs` and `Seccomp` of `/proc/<who>/status` (what the kernel lets
/// another process tell of a Landlock domain: it needs `no_new_privs`).
fn confinement(who: &str) -> Option<Confinement> {
    let status = fs_err::read_to_string(format!("/proc/{who}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().trim_start_matches(':').trim().to_owned())
    };
    Some(Confinement {
        no_new_privs: field("NoNewPrivs")? != "0",
        seccomp: field("Seccomp")? != "0",
    })
}

/// An address for `path` that fits `sun_path`: `path` itself when short
/// enough, else `/proc/self/fd/<dir>/<name>` through a descriptor of its
/// folder, held while the address is used.
pub(crate) struct Address {
    pub(crate) path: PathBuf,
    _dir: Option<OwnedFd>,
}

pub(crate) fn address(path: &Path) -> Result<Address> {
    let too_long = || ServeError::PathTooLong {
        path: path.to_path_buf(),
        len: path.as_os_str().len(),
    };
    if path.as_os_str().len() <= SUN_PATH_MAX {
        return Ok(Address {
            path: path.to_path_buf(),
            _dir: None,
        });
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(too_long());
    };
    use nix::fcntl::{OFlag, open};
    let fd = open(
        dir,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| ServeError::io("cannot open", dir, std::io::Error::from(e)))?;
    let short = Path::new("/proc/self/fd")
        .join(fd.as_raw_fd().to_string())
        .join(name);
    if short.as_os_str().len() > SUN_PATH_MAX {
        return Err(too_long());
    }
    Ok(Address {
        path: short,
        _dir: Some(fd),
    })
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::unix::net::UnixListener;
    use std::process::{Command, Stdio};

    use super::*;

    #[test]
    fn a_peer_on_this_side_is_served_and_its_pidfd_names_it() {
        let (a, _b) = UnixStream::pair().unwrap();
        assert_eq!(refusal(&a), None);
        let pidfd = getsockopt(&a, PeerPidfd).unwrap();
        assert_eq!(pidfd_pid(&pidfd), Some(std::process::id() as i32));
    }

    #[test]
    fn a_pinned_peer_that_exited_no_longer_names_its_pid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let listener = UnixListener::bind(&path).unwrap();
        // A peer that connects, says so, and waits to be killed.
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(
                "import socket,sys,time\n\
                 s=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\n\
                 s.send(b'x')\ntime.sleep(60)",
            )
            .arg(&path)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let (mut stream, _) = listener.accept().unwrap();
        let mut byte = [0u8; 1];
        stream.read_exact(&mut byte).unwrap();
        let pidfd = getsockopt(&stream, PeerPidfd).unwrap();
        let pid = child.id() as i32;
        assert_eq!(pidfd_pid(&pidfd), Some(pid));
        child.kill().unwrap();
        child.wait().unwrap();
        // Reaped: the pid is free for reuse, and the pidfd says so.
        assert_eq!(pidfd_pid(&pidfd), None);
        // And a peer gone before it is pinned is refused, whatever its pid
        // may name by now.
        let why = refusal(&stream).expect("a gone peer is refused");
        assert!(why.contains(&format!("pid {pid}")), "{why}");
    }
}
