//! Who is on the other end of the socket, and a socket address that fits
//! `sun_path` however deep the state folder is.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};

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
    None
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
