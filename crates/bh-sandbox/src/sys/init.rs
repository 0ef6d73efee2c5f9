//! The sandbox's init (PID 1 of its namespace) and the command it forks.
//!
//! The init mounts the namespace's `/proc`, restricts itself with Landlock
//! (the command inherits that very domain), forks the command, takes the
//! seccomp listener the command hands over (`UnixSockets::Checked`), keeps
//! only `CAP_SYS_PTRACE`, then reaps every orphan and answers connects
//! (`super::supervise`) until the command ends, and exits with its status —
//! which makes the kernel kill everything left in the namespace.
//!
//! The command takes a session of its own, marks every inherited
//! descriptor above 2 close-on-exec, enters its folder, drops every
//! capability and installs its seccomp filter; `std` execs next. Raw
//! syscalls and stack buffers only (see the parent module's rules).

use std::io;
use std::os::fd::AsRawFd;

use libc::{c_int, c_uint, c_void};

use super::caps::{CAP_NET_ADMIN, CAP_SYS_PTRACE, drop_capabilities};
use super::{LANDLOCK_RULE_PATH_BENEATH, Plan, Step, close_all_but, cptr, errno, fail, supervise};
use crate::UnixSockets;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

const CLOSE_RANGE_CLOEXEC: c_uint = 1 << 2;
/// `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV` (Linux 5.19).
const WAIT_KILLABLE_RECV: libc::c_ulong = 1 << 5;

/// PID 1 of the new namespace (see the module docs). Returns only in the
/// command, which `std` then execs.
pub(super) fn init_process(
    plan: &mut Plan,
    life: [c_int; 2],
    status: [c_int; 2],
) -> io::Result<()> {
    let step = plan.step_wr.as_raw_fd();
    // SAFETY: raw syscalls on our own fds and stack buffers.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        libc::close(life[1]);
        // The intermediate may have died before the death signal was armed:
        // then the write end is gone and the pipe reports a hang-up.
        let mut pfd = libc::pollfd {
            fd: life[0],
            events: libc::POLLIN,
            revents: 0,
        };
        if libc::poll(&mut pfd, 1, 0) > 0 && pfd.revents & libc::POLLHUP != 0 {
            libc::_exit(137);
        }
        libc::close(status[0]);
    }
    if let Err(s) = mount_proc_and_restrict(plan) {
        give_up(step, s, 0);
    }
    // A socket pair to hand the seccomp listener over on.
    let mut pass: [c_int; 2] = [-1, -1];
    // SAFETY: socketpair(2) into a stack array.
    if plan.check.is_some()
        && unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                pass.as_mut_ptr(),
            )
        } != 0
    {
        give_up(step, Step::Supervise, 0);
    }
    // SAFETY: fork(2) of this single-threaded process.
    let cmd = unsafe { libc::fork() };
    if cmd < 0 {
        give_up(step, Step::Fork, 0);
    }
    if cmd == 0 {
        // SAFETY: closing the init's ends of our own pipes.
        unsafe {
            libc::close(status[1]);
            libc::close(life[0]);
            if pass[0] >= 0 {
                libc::close(pass[0]);
            }
        }
        return command(plan, pass[1]);
    }
    let listener = if pass[0] >= 0 {
        // SAFETY: closing the command's end; receiving on ours.
        unsafe { libc::close(pass[1]) };
        // None when the command failed before handing it over: its own
        // error reaches the parent through `std`.
        let l = receive_fd(pass[0]);
        // SAFETY: closing our own end.
        unsafe { libc::close(pass[0]) };
        l
    } else {
        -1
    };
    // With the check: a socket table of the command's network namespace,
    // then a network namespace of the init's own, where it makes every
    // Unix socket of the command (`made.rs`), and whose `CAP_NET_ADMIN`
    // stays permitted (not effective) for the check's `SIOCUNIXFILE` and
    // `SIOCGSKNS`.
    let (outside, own_ns) = if plan.check.is_some() {
        match leave_network() {
            Some(t) => t,
            None => give_up(step, Step::Supervise, cmd),
        }
    } else {
        (-1, 0)
    };
    let permitted = if plan.check.is_some() {
        1 << CAP_SYS_PTRACE | 1 << CAP_NET_ADMIN
    } else {
        1 << CAP_SYS_PTRACE
    };
    // SAFETY: chdir(2) of a static path; prctl/capset with integer
    // arguments and stack structs. The init's folder was the harness's,
    // under the covers mounted since: out of it, so that no path the
    // check resolves (`/proc/1/cwd/..`) starts below them.
    if unsafe { libc::chdir(c"/".as_ptr()) } != 0
        || !unsafe { drop_capabilities(1 << CAP_SYS_PTRACE, permitted) }
    {
        give_up(step, Step::Capabilities, cmd);
    }
    // SAFETY: prctl(2) with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    let Some(sfd) = child_signals() else {
        give_up(step, Step::Supervise, cmd);
    };
    let keep = status[1];
    // SAFETY: closing every other descriptor (the parent's step and spawn
    // pipes among them: the parent learns the set-up is done).
    unsafe { close_all_but(&[keep, listener, sfd, outside]) };
    // SIGTERM from the harness (`Confined::terminate`) goes to every
    // process of the namespace: the command has a session of its own.
    // SIGALRM, the connect check's timer (`supervise::bounded`), only
    // interrupts: no `SA_RESTART`.
    // SAFETY: installing async-signal-safe handlers; dup2/open of
    // /dev/null onto 0-2, so that no descriptor the check opens is one of
    // them (a stray result of an ioctl could not alias one).
    unsafe {
        libc::signal(
            libc::SIGTERM,
            forward_term as *const () as libc::sighandler_t,
        );
        let mut alarm: libc::sigaction = std::mem::zeroed();
        alarm.sa_sigaction = on_alarm as *const () as libc::sighandler_t;
        libc::sigaction(libc::SIGALRM, &alarm, std::ptr::null_mut());
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        for fd in 0..3 {
            if null >= 0 && null != fd {
                libc::dup2(null, fd);
            }
        }
        if null > 2 {
            libc::close(null);
        }
    }
    let serve = plan.check.as_ref().map(|check| supervise::Serve {
        listener,
        check,
        memo: supervise::Memo::new(),
        outside,
        own_ns,
        close_in_worker: [keep, sfd, outside],
    });
    wait_and_serve(cmd, keep, listener, sfd, serve)
}

/// A socket table of the current network namespace, then a new one for
/// the init (the command keeps the one it has); the table and the new
/// namespace's inode.
fn leave_network() -> Option<(c_int, u64)> {
    let outside = super::diag::table().ok()?;
    // SAFETY: unshare/stat with integer arguments and a stack struct.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNET) != 0 {
            return None;
        }
        let mut st: libc::stat = std::mem::zeroed();
        if libc::stat(c"/proc/self/ns/net".as_ptr(), &mut st) != 0 {
            return None;
        }
        Some((outside, st.st_ino))
    }
}

/// Reports `step` to the parent, kills the command if there is one, and
/// exits.
fn give_up(step_wr: c_int, step: Step, cmd: libc::pid_t) -> ! {
    let _ = fail(step_wr, step);
    // SAFETY: kill/_exit with integer arguments.
    unsafe {
        if cmd > 0 {
            libc::kill(cmd, libc::SIGKILL);
        }
        libc::_exit(127)
    }
}

/// SIGCHLD blocked and read through a signalfd, so that one `poll` waits
/// for a child's end and a connect to answer alike.
fn child_signals() -> Option<c_int> {
    // SAFETY: sigset and signalfd(2) calls on a stack set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        if libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return None;
        }
        let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        (fd >= 0).then_some(fd)
    }
}

/// The init's loop: reap every child (the command's end ends it), answer
/// each connect, drain the signalfd.
fn wait_and_serve(
    cmd: libc::pid_t,
    status_wr: c_int,
    mut listener: c_int,
    sfd: c_int,
    mut serve: Option<supervise::Serve>,
) -> ! {
    // SAFETY: raw syscalls on our own fds and stack buffers; never returns.
    unsafe {
        loop {
            loop {
                let mut st: c_int = 0;
                let r = libc::waitpid(-1, &mut st, libc::WNOHANG);
                if r == cmd {
                    let b = st.to_ne_bytes();
                    libc::write(status_wr, b.as_ptr().cast(), b.len());
                    libc::_exit(if libc::WIFEXITED(st) {
                        libc::WEXITSTATUS(st)
                    } else {
                        128 + libc::WTERMSIG(st)
                    });
                }
                if r > 0 || (r < 0 && errno() == libc::EINTR) {
                    continue;
                }
                if r < 0 {
                    libc::_exit(127);
                }
                break;
            }
            let mut fds = [
                libc::pollfd {
                    fd: sfd,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: listener,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            if libc::poll(fds.as_mut_ptr(), 2, -1) < 0 {
                continue; // EINTR (SIGTERM forwarded)
            }
            if fds[0].revents != 0 {
                let mut buf = [0u8; 128 * 4];
                while libc::read(sfd, buf.as_mut_ptr().cast(), buf.len()) > 0 {}
            }
            if listener >= 0 && fds[1].revents != 0 {
                match serve.as_mut() {
                    Some(sv) if fds[1].revents & libc::POLLIN != 0 => supervise::serve_one(sv),
                    // No process is left under the filter.
                    _ => {
                        libc::close(listener);
                        listener = -1;
                    }
                }
            }
        }
    }
}

extern "C" fn on_alarm(_: c_int) {}

extern "C" fn forward_term(_: c_int) {
    // SAFETY: kill(2) is async-signal-safe; -1 from the namespace's init
    // reaches every other process of the namespace.
    unsafe { libc::kill(-1, libc::SIGTERM) };
}

/// The namespace's own `/proc`, then Landlock (which forbids mounting):
/// the command and the init's workers share this domain.
fn mount_proc_and_restrict(plan: &Plan) -> Result<(), Step> {
    // SAFETY: mount(2) with static NUL-terminated strings.
    if plan.unshare & libc::CLONE_NEWPID != 0
        && unsafe {
            libc::mount(
                cptr(b"proc\0"),
                cptr(b"/proc\0"),
                cptr(b"proc\0"),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            )
        } != 0
    {
        return Err(Step::MountProc);
    }
    let Some(ll) = &plan.landlock else {
        return Ok(());
    };
    let attr = RulesetAttr {
        handled_access_fs: ll.handled_fs,
        handled_access_net: 0,
        scoped: ll.scoped,
    };
    let size: usize = if ll.abi >= 6 {
        24
    } else if ll.abi >= 4 {
        16
    } else {
        8
    };
    // SAFETY: Landlock syscalls with a stack struct of the size given and
    // parent-prepared NUL-terminated paths.
    unsafe {
        let rfd = libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            size,
            0,
        ) as c_int;
        if rfd < 0 {
            return Err(Step::Landlock);
        }
        let mut ok = add_rule(rfd, c"/".as_ptr(), ll.read);
        for (p, is_dir) in &ll.writable {
            ok = ok
                && add_rule(
                    rfd,
                    p.as_ptr(),
                    if *is_dir { ll.dir_write } else { ll.file_write },
                );
        }
        for d in &ll.devices {
            ok = ok && add_rule(rfd, d.as_ptr(), ll.file_write);
        }
        let ok = ok
            && libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
            && libc::syscall(libc::SYS_landlock_restrict_self, rfd, 0) == 0;
        libc::close(rfd);
        if ok { Ok(()) } else { Err(Step::Landlock) }
    }
}

/// Adds a path-beneath rule; a path that does not exist is skipped.
unsafe fn add_rule(rfd: c_int, path: *const libc::c_char, access: u64) -> bool {
    // SAFETY: open/syscall/close on a NUL-terminated path and a stack struct.
    unsafe {
        let fd = libc::open(path, libc::O_PATH | libc::O_CLOEXEC);
        if fd < 0 {
            return errno() == libc::ENOENT;
        }
        let attr = PathBeneathAttr {
            allowed_access: access,
            parent_fd: fd,
        };
        let r = libc::syscall(
            libc::SYS_landlock_add_rule,
            rfd,
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0,
        );
        libc::close(fd);
        r == 0
    }
}

/// PID 2 (see the module docs); `pass` is the socket the seccomp
/// listener goes out on (`UnixSockets::Checked`), else -1.
fn command(plan: &mut Plan, pass: c_int) -> io::Result<()> {
    let step = plan.step_wr.as_raw_fd();
    // SAFETY: raw syscalls with parent-prepared NUL-terminated strings and
    // stack structs.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
        // A session of its own: no controlling terminal (TIOCSTI and
        // /dev/tty need one), and `kill 0` reaches only the command's group.
        if libc::setsid() < 0 {
            return Err(fail(step, Step::Session));
        }
        // Every descriptor above 2 inherited from bh's caller is closed at
        // exec (before any code of the command runs); marking rather than
        // closing keeps the set-up pipes reporting until then.
        if libc::syscall(
            libc::SYS_close_range,
            3 as c_uint,
            c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        ) != 0
        {
            return Err(fail(step, Step::Session));
        }
        if libc::chdir(plan.cwd.as_ptr()) != 0 {
            return Err(fail(step, Step::Chdir));
        }
        // A datagram socket sends to any path without a connect to check.
        if plan.unix != UnixSockets::Covered && (0..3).any(is_unix_datagram) {
            libc::close(pass);
            return Err(io::Error::from_raw_os_error(fail_with(
                step,
                Step::Stdio,
                libc::EACCES,
            )));
        }
        if !drop_capabilities(0, 0) {
            return Err(fail(step, Step::Capabilities));
        }
        let prog = libc::sock_fprog {
            len: plan.seccomp.len() as u16,
            filter: plan.seccomp.as_mut_ptr(),
        };
        // Once the init has taken a call, only a fatal signal interrupts
        // the caller (else a handled one would make it restart a connect
        // the init made meanwhile: EISCONN).
        let flags = match &plan.check {
            Some(c) if pass >= 0 && c.wait_killable => {
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | WAIT_KILLABLE_RECV
            }
            _ if pass >= 0 => libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            _ => 0,
        };
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(fail(step, Step::Seccomp));
        }
        let listener = libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &prog as *const libc::sock_fprog,
        ) as c_int;
        if listener < 0 {
            return Err(fail(step, Step::Seccomp));
        }
        if pass >= 0 {
            // The listener answers for every connect of the command: it
            // must not stay with the command past exec.
            let sent = send_fd(pass, listener);
            libc::close(listener);
            libc::close(pass);
            if !sent {
                return Err(fail(step, Step::Supervise));
            }
        }
    }
    Ok(())
}

/// Writes `step` to the parent; `e` is the error `std` hands back.
fn fail_with(step_wr: c_int, step: Step, e: c_int) -> c_int {
    let b = (-(step as i32)).to_ne_bytes();
    // SAFETY: write(2) of a 4-byte stack buffer (atomic on a pipe).
    unsafe { libc::write(step_wr, b.as_ptr().cast(), b.len()) };
    e
}

/// Whether `fd` is an `AF_UNIX` datagram socket.
fn is_unix_datagram(fd: c_int) -> bool {
    let opt = |name: c_int| {
        let mut v: c_int = -1;
        let mut size = std::mem::size_of::<c_int>() as libc::socklen_t;
        // SAFETY: getsockopt(2) into a stack int of the size given.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                name,
                (&mut v as *mut c_int).cast::<c_void>(),
                &mut size,
            )
        };
        (r == 0).then_some(v)
    };
    opt(libc::SO_DOMAIN) == Some(libc::AF_UNIX) && opt(libc::SO_TYPE) == Some(libc::SOCK_DGRAM)
}

/// Control-message room for one descriptor (`CMSG_SPACE(sizeof(int))`).
const CMSG_ROOM: usize = 24;

/// A message of one byte (`byte`) with room for one descriptor in
/// `control`.
fn one_byte(iov: &mut libc::iovec, control: &mut [u64; CMSG_ROOM / 8]) -> libc::msghdr {
    // SAFETY: an all-zero msghdr is valid; its pointers are set below to
    // buffers the caller keeps alive across the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = CMSG_ROOM;
    msg
}

/// Sends `fd` over the socket `s` (`SCM_RIGHTS`, one byte of data).
fn send_fd(s: c_int, fd: c_int) -> bool {
    let mut byte = [0u8; 1];
    let mut control = [0u64; CMSG_ROOM / 8];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut msg = one_byte(&mut iov, &mut control);
    // SAFETY: the CMSG macros write inside `control`, whose size `msg`
    // gives them.
    unsafe {
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<c_int>() as u32) as usize;
        let c = libc::CMSG_FIRSTHDR(&msg);
        if c.is_null() {
            return false;
        }
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<c_int>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<c_int>(), fd);
        libc::sendmsg(s, &msg, 0) == 1
    }
}

/// Receives one descriptor sent by [`send_fd`]; -1 on end of file.
fn receive_fd(s: c_int) -> c_int {
    let mut byte = [0u8; 1];
    let mut control = [0u64; CMSG_ROOM / 8];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut msg = one_byte(&mut iov, &mut control);
    // SAFETY: recvmsg(2) into `msg`'s buffers; the descriptor read is one
    // the kernel installed for us (close-on-exec).
    unsafe {
        loop {
            let n = libc::recvmsg(s, &mut msg, libc::MSG_CMSG_CLOEXEC);
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                return -1;
            }
            break;
        }
        let c = libc::CMSG_FIRSTHDR(&msg);
        if c.is_null() || (*c).cmsg_level != libc::SOL_SOCKET || (*c).cmsg_type != libc::SCM_RIGHTS
        {
            return -1;
        }
        std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<c_int>())
    }
}
