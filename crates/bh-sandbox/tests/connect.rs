//! The init's connect check (`UnixSockets::Checked`), attacked and used
//! from inside: the command's own servers work in every form (another
//! process, a daemon, relative paths, abstract names, seqpacket,
//! non-blocking, TCP and UDP); a host server is refused however it is
//! named (a link, a hard link, a race on the address or on the
//! descriptor); a blocked connect stalls nobody else; no datagram socket
//! can be made or handed in. Each probe is this binary re-run inside the
//! sandbox (`inside`, ignored); each effect on the host is checked here.

#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use std::io::{BufRead, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bh_sandbox::{Policy, Sandbox, UnixSockets};

mod common;
use common::{listen, never_reached, outside, policy, project};

fn errno_name(r: libc::c_int) -> String {
    if r == 0 {
        "ok".into()
    } else {
        std::io::Error::last_os_error().to_string()
    }
}

fn sockaddr(path: &[u8]) -> (libc::sockaddr_un, libc::socklen_t) {
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as u16;
    for (d, s) in a.sun_path.iter_mut().zip(path) {
        *d = *s as libc::c_char;
    }
    (a, (2 + path.len()) as libc::socklen_t)
}

/// connect(2) of a new socket of `kind` (plus `flags`) to `path`: "ok" or
/// the error's words.
fn connect_raw(kind: libc::c_int, path: &[u8]) -> (String, Option<OwnedFd>) {
    let s = unsafe { libc::socket(libc::AF_UNIX, kind | libc::SOCK_CLOEXEC, 0) };
    assert!(s >= 0, "socket: {}", std::io::Error::last_os_error());
    let (a, len) = sockaddr(path);
    let r = unsafe { libc::connect(s, (&a as *const libc::sockaddr_un).cast(), len) };
    let words = errno_name(r);
    let fd = unsafe { OwnedFd::from_raw_fd(s) };
    (words, (r == 0).then_some(fd))
}

/// Inside: what `BH_INSIDE` names, printed line by line.
#[test]
#[ignore]
fn inside() {
    let Ok(what) = std::env::var("BH_INSIDE") else {
        return;
    };
    match what.as_str() {
        "own" => own(),
        "serve" => serve(),
        "daemon" => daemon(),
        "race" => race(),
        "names" => names(),
        "datagrams" => datagrams(),
        "backlog" => backlog(),
        "inet" => inet(),
        "collide" => collide(),
        "paths" => paths(),
        "hold" => hold(),
        "flip" => flip(),
        "restart" => restart(),
        "chroot" => chroot(),
        "abstract" => abstract_names(),
        other => panic!("no probe {other}"),
    }
}

/// A server of the command's own in another process of it: binds
/// `BH_SERVE` (a path, or `@name` for an abstract one) of kind
/// `BH_KIND`, says "ready", answers one connection with "hello".
fn serve() {
    let name = std::env::var("BH_SERVE").unwrap();
    let kind = if std::env::var("BH_KIND").as_deref() == Ok("seqpacket") {
        libc::SOCK_SEQPACKET
    } else {
        libc::SOCK_STREAM
    };
    let bytes: Vec<u8> = match name.strip_prefix('@') {
        Some(n) => [&[0u8][..], n.as_bytes()].concat(),
        None => name.into_bytes(),
    };
    let s = unsafe { libc::socket(libc::AF_UNIX, kind, 0) };
    let (a, len) = sockaddr(&bytes);
    assert_eq!(
        unsafe { libc::bind(s, (&a as *const libc::sockaddr_un).cast(), len) },
        0
    );
    assert_eq!(unsafe { libc::listen(s, 8) }, 0);
    println!("ready");
    std::io::stdout().flush().unwrap();
    let c = unsafe { libc::accept(s, std::ptr::null_mut(), std::ptr::null_mut()) };
    unsafe { libc::write(c, b"hello".as_ptr().cast(), 5) };
    std::thread::sleep(Duration::from_millis(200));
}

/// Starts [`serve`] as another process; returns once it listens.
fn server(name: &str, kind: &str) -> std::process::Child {
    server_of("serve", &[("BH_SERVE", name), ("BH_KIND", kind)])
}

fn read_hello(fd: &OwnedFd) -> bool {
    let mut b = [0u8; 5];
    let n = unsafe { libc::read(fd.as_raw_fd(), b.as_mut_ptr().cast(), 5) };
    n == 5 && &b == b"hello"
}

fn own() {
    // Another process's listener, by a relative path.
    let mut c = server("srv.sock", "stream");
    let (r, fd) = connect_raw(libc::SOCK_STREAM, b"srv.sock");
    let ok = fd.as_ref().is_some_and(read_hello);
    println!("relative path in another process: {r} {ok}");
    c.wait().unwrap();
    // An abstract seqpacket one.
    let name = format!("bh-connect-{}", std::process::id());
    let mut c = server(&format!("@{name}"), "seqpacket");
    let (r, fd) = connect_raw(
        libc::SOCK_SEQPACKET,
        &[&[0u8][..], name.as_bytes()].concat(),
    );
    let ok = fd.as_ref().is_some_and(read_hello);
    println!("abstract seqpacket: {r} {ok}");
    c.wait().unwrap();
    // A daemon: forked twice, reparented to the init.
    let ready = Path::new("daemon.ready");
    Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "inside", "--nocapture", "-q"])
        .env("BH_INSIDE", "daemon")
        .status()
        .unwrap();
    while !ready.exists() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let (r, fd) = connect_raw(libc::SOCK_STREAM, b"daemon.sock");
    let ok = fd.as_ref().is_some_and(read_hello);
    println!("daemon: {r} {ok}");
    // This process's own, from a thread, and without blocking.
    let here = std::env::current_dir().unwrap().join("here.sock");
    let l = UnixListener::bind(&here).unwrap();
    let p = here.clone();
    let t = std::thread::spawn(move || UnixStream::connect(p).map(|_| ()));
    println!(
        "from a thread: {:?}",
        t.join().unwrap().map_err(|e| e.to_string())
    );
    let (r, _fd) = connect_raw(
        libc::SOCK_STREAM | libc::SOCK_NONBLOCK,
        here.to_str().unwrap().as_bytes(),
    );
    println!("non-blocking: {r}");
    drop(l);
    // What is not a listening socket: the kernel's own answers.
    let bound = UnixListener::bind("bound.sock").unwrap();
    drop(bound);
    let (r, _) = connect_raw(libc::SOCK_STREAM, b"bound.sock");
    println!("closed socket: {r}");
    let (r, _) = connect_raw(libc::SOCK_STREAM, b"a.txt");
    println!("regular file: {r}");
    let (r, _) = connect_raw(libc::SOCK_STREAM, b"missing.sock");
    println!("missing: {r}");
}

/// The double-forked server of [`own`].
fn daemon() {
    let pid = unsafe { libc::fork() };
    if pid != 0 {
        return;
    }
    unsafe {
        libc::setsid();
        let s = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
        let (a, len) = sockaddr(b"daemon.sock");
        libc::bind(s, (&a as *const libc::sockaddr_un).cast(), len);
        libc::listen(s, 8);
        let fd = libc::open(
            c"daemon.ready".as_ptr(),
            libc::O_CREAT | libc::O_WRONLY,
            0o600,
        );
        libc::close(fd);
        let c = libc::accept(s, std::ptr::null_mut(), std::ptr::null_mut());
        libc::write(c, b"hello".as_ptr().cast(), 5);
        libc::sleep(1);
        libc::_exit(0);
    }
}

/// A host socket by a symbolic link and by a hard link to it.
fn names() {
    for p in ["link.sock", "hard.sock"] {
        let (r, _) = connect_raw(libc::SOCK_STREAM, p.as_bytes());
        println!("{p}: {r}");
    }
}

/// The time-of-check attacks: one thread connects over and over while
/// another flips the address between an own socket and the host's, then
/// while another swaps the descriptor between a TCP and a Unix socket.
fn race() {
    let host = std::env::var("BH_HOST").unwrap();
    let own = std::env::current_dir().unwrap().join("own.sock");
    let l = UnixListener::bind(&own).unwrap();
    l.set_nonblocking(true).unwrap();
    let stop = &*Box::leak(Box::new(AtomicBool::new(false)));
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let _ = l.accept();
        }
    });
    let pad = |p: &str| {
        let mut b = p.as_bytes().to_vec();
        b.resize(100, 0);
        b
    };
    let (own_b, host_b) = (pad(own.to_str().unwrap()), pad(&host));
    // The address the connecting thread passes, flipped under it.
    let addr: &'static mut libc::sockaddr_un = Box::leak(Box::new(sockaddr(&own_b).0));
    let addr_ptr = addr as *mut libc::sockaddr_un as usize;
    let flipper = std::thread::spawn(move || {
        let a = addr_ptr as *mut libc::sockaddr_un;
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let src = if i.is_multiple_of(2) { &host_b } else { &own_b };
            for (k, b) in src.iter().enumerate() {
                unsafe {
                    std::ptr::write_volatile((*a).sun_path.as_mut_ptr().add(k), *b as libc::c_char)
                };
            }
            i += 1;
        }
    });
    let (mut ok, mut refused, mut other) = (0, 0, 0);
    for _ in 0..3000 {
        let s = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) };
        let r = unsafe {
            libc::connect(
                s,
                addr_ptr as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            )
        };
        match (r, std::io::Error::last_os_error().raw_os_error()) {
            (0, _) => ok += 1,
            (_, Some(libc::EACCES)) => refused += 1,
            _ => other += 1,
        }
        unsafe { libc::close(s) };
    }
    println!("address race: ok={ok} refused={refused} other={other}");

    // The descriptor: fd N is a TCP socket at the check and a Unix one
    // right after, or the other way round; the address is the host's.
    let n = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    let (host_addr, host_len) = sockaddr(host.as_bytes());
    let host_addr: &'static libc::sockaddr_un = Box::leak(Box::new(host_addr));
    // Both kinds made once; the swapper only moves them onto `n`, and
    // holds each there a moment (a connect through the check is slow).
    let (u, t) = unsafe {
        (
            libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0),
            libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0),
        )
    };
    let swapper = std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            for fd in [u, t] {
                unsafe { libc::dup2(fd, n) };
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    });
    let (mut ok, mut refused, mut other) = (0, 0, 0);
    for _ in 0..3000 {
        let r =
            unsafe { libc::connect(n, (host_addr as *const libc::sockaddr_un).cast(), host_len) };
        match (r, std::io::Error::last_os_error().raw_os_error()) {
            (0, _) => ok += 1,
            (_, Some(libc::EACCES)) => refused += 1,
            _ => other += 1,
        }
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    swapper.join().unwrap();
    println!("descriptor race: ok={ok} refused={refused} other={other}");
}

/// No Unix datagram socket can be made: one could `sendto` any path.
fn datagrams() {
    for (what, kind) in [("dgram", libc::SOCK_DGRAM), ("raw", libc::SOCK_RAW)] {
        let s = unsafe { libc::socket(libc::AF_UNIX, kind, 0) };
        println!("socket {what}: {}", errno_name(s.min(0)));
        let mut sv = [0; 2];
        let r = unsafe { libc::socketpair(libc::AF_UNIX, kind, 0, sv.as_mut_ptr()) };
        println!("socketpair {what}: {}", errno_name(r));
    }
    let host = std::env::var("BH_HOST").unwrap();
    match UnixDatagram::unbound() {
        Ok(d) => println!("sent: {:?}", d.send_to(b"x", host).is_ok()),
        Err(e) => println!("std unbound: {e}"),
    }
}

/// A connect that blocks (a listener of its own that never accepts, its
/// backlog full) stalls no other connect.
fn backlog() {
    let full = UnixListener::bind("full.sock").unwrap();
    unsafe { libc::listen(full.as_raw_fd(), 0) };
    std::thread::spawn(|| {
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(UnixStream::connect("full.sock"));
        }
        println!("the blocked connects returned");
    });
    std::thread::sleep(Duration::from_millis(300));
    let free = UnixListener::bind("free.sock").unwrap();
    let r = UnixStream::connect("free.sock").map(|_| ());
    println!("beside a blocked connect: {r:?}");
    drop(free);
    drop(full);
}

/// An own listener whose inode number is the host socket's (the kernel's
/// socket table keeps 32 bits of it and no more): files made on the
/// private `/tmp` (a tmpfs numbering its inodes one after the other) until
/// the next number is the target's, then a socket bound there, then a
/// connect to the host's socket.
fn collide() {
    use std::os::unix::fs::MetadataExt;
    let host = std::env::var("BH_HOST").unwrap();
    let target: u64 = std::env::var("BH_TARGET_INO").unwrap().parse().unwrap();
    let mut i = 0u64;
    loop {
        let f = format!("/tmp/f{i}");
        fs_err::write(&f, "").unwrap();
        let ino = fs_err::metadata(&f).unwrap().ino();
        fs_err::remove_file(&f).unwrap();
        if ino + 1 >= target {
            assert_eq!(ino + 1, target, "past the target's number");
            break;
        }
        i += 1;
    }
    let own = UnixListener::bind("/tmp/own.sock").unwrap();
    let ino = fs_err::metadata("/tmp/own.sock").unwrap().ino();
    println!("own listener at inode {ino}, the host's at {target}");
    let (r, _) = connect_raw(libc::SOCK_STREAM, host.as_bytes());
    println!("host socket: {r}");
    drop(own);
}

/// Paths through `/proc`: the init's own folder (`/proc/1/cwd`, the
/// harness's folder before the covers) is no way under the covers, and
/// `/proc/self` is the caller's; the flags of a socket the init makes for
/// the command are the ones asked for.
fn paths() {
    let (r, _) = connect_raw(libc::SOCK_STREAM, b"/proc/1/cwd/../host.sock");
    println!("through the init's folder: {r}");
    let (r, _) = connect_raw(libc::SOCK_STREAM, b"../host.sock");
    println!("directly: {r}");
    let _own = UnixListener::bind("own.sock").unwrap();
    let dir = fs_err::File::open(".").unwrap();
    let via = format!("/proc/self/fd/{}/own.sock", dir.as_raw_fd());
    let (r, _) = connect_raw(libc::SOCK_STREAM, via.as_bytes());
    println!("through /proc/self/fd: {r}");
    let flags = |fd: libc::c_int| unsafe {
        (
            libc::fcntl(fd, libc::F_GETFL) & libc::O_NONBLOCK != 0,
            libc::fcntl(fd, libc::F_GETFD) & libc::FD_CLOEXEC != 0,
        )
    };
    for (what, extra) in [
        ("plain", 0),
        ("flagged", libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC),
    ] {
        let s = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | extra, 0) };
        let mut sv = [0; 2];
        let r = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | extra,
                0,
                sv.as_mut_ptr(),
            )
        };
        assert_eq!(r, 0);
        println!(
            "{what}: socket {:?}, pair {:?} {:?}",
            flags(s),
            flags(sv[0]),
            flags(sv[1])
        );
        let bad =
            unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, 8 as *mut libc::c_int) };
        println!("{what}: pair into a bad pointer: {}", errno_name(bad));
    }
}

/// Abstract names: the host's is not there for the command, and the
/// command's is not there for the host (the host checks while it waits).
fn abstract_names() {
    let host = std::env::var("BH_HOST").unwrap();
    let (r, _) = connect_raw(libc::SOCK_STREAM, &[&[0u8][..], host.as_bytes()].concat());
    println!("host's abstract name: {r}");
    use std::os::linux::net::SocketAddrExt;
    let own = std::env::var("BH_OWN").unwrap();
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(&own).unwrap();
    let l = UnixListener::bind_addr(&addr).unwrap();
    let (r, _) = connect_raw(libc::SOCK_STREAM, &[&[0u8][..], own.as_bytes()].concat());
    println!("own abstract name: {r}");
    fs_err::write("bound", "").unwrap();
    while !Path::new("go").exists() {
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(l);
}

/// A listener whose backlog is full (one connection waiting, never
/// accepted), held by this process for ever: says "ready".
fn hold() {
    let l = UnixListener::bind("full.sock").unwrap();
    unsafe { libc::listen(l.as_raw_fd(), 0) };
    let (_r, _s) = connect_raw(libc::SOCK_STREAM | libc::SOCK_NONBLOCK, b"full.sock");
    println!("ready");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(600));
}

/// Whether a `socket(AF_UNIX)` (made by the init) is answered within `t`.
fn init_answers(t: Duration) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) });
    });
    rx.recv_timeout(t).is_ok()
}

/// A non-blocking connect to a full backlog whose flag another thread
/// clears while the init works on it: the init must not wait in it.
fn flip() {
    #[allow(
        clippy::zombie_processes,
        reason = "the holder lives until the command ends; the sandbox's init reaps it"
    )]
    let _holder = server_of("hold", &[]);
    for attempt in 0..20u64 {
        let s = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0) };
        let go = std::sync::Arc::new(AtomicBool::new(false));
        let g = go.clone();
        let delay = Duration::from_micros(attempt * 75);
        let flipper = std::thread::spawn(move || {
            while !g.load(Ordering::Acquire) {}
            let t = std::time::Instant::now();
            while t.elapsed() < delay {}
            unsafe { libc::fcntl(s, libc::F_SETFL, 0) };
        });
        std::thread::spawn(move || {
            let (a, len) = sockaddr(b"full.sock");
            go.store(true, Ordering::Release);
            unsafe { libc::connect(s, (&a as *const libc::sockaddr_un).cast(), len) };
        });
        flipper.join().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        if !init_answers(Duration::from_secs(5)) {
            println!("the init is stuck after {attempt} attempts");
            std::io::stdout().flush().unwrap();
            unsafe { libc::_exit(0) };
        }
    }
    println!("the init kept answering");
    std::io::stdout().flush().unwrap();
    // The blocked connects' threads and the holder end with the command.
    unsafe { libc::_exit(0) };
}

/// Starts the probe `what` as another process of the command (with
/// `env`); returns once it says "ready" (the harness prints its own lines
/// first).
fn server_of(what: &str, env: &[(&str, &str)]) -> std::process::Child {
    let mut c = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "inside", "--nocapture", "-q"])
        .env("BH_INSIDE", what)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(c.stdout.take().unwrap());
    let mut line = String::new();
    while line != "ready\n" {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "{what} ended");
    }
    c
}

extern "C" fn nothing(_: libc::c_int) {}

/// Connects while a handled signal (`SA_RESTART`) keeps arriving: each
/// must end as it would without the sandbox (not `EISCONN`, restarted
/// after the init connected).
fn restart() {
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = nothing as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
    let l = UnixListener::bind("r.sock").unwrap();
    l.set_nonblocking(true).unwrap();
    let stop = &*Box::leak(Box::new(AtomicBool::new(false)));
    let me = unsafe { libc::pthread_self() };
    let k = std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            unsafe { libc::pthread_kill(me, libc::SIGUSR1) };
            std::thread::sleep(Duration::from_micros(50));
        }
    });
    let mut ends = std::collections::BTreeMap::new();
    for _ in 0..1000 {
        let (r, _) = connect_raw(libc::SOCK_STREAM, b"r.sock");
        *ends.entry(r).or_insert(0) += 1;
        while l.accept().is_ok() {}
    }
    stop.store(true, Ordering::Relaxed);
    k.join().unwrap();
    println!("under signals: {ends:?}");
}

/// A `chroot` of the command's own (in a user namespace it makes): an
/// absolute path is the one inside it.
fn chroot() {
    fs_err::create_dir_all("jail").unwrap();
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        unsafe {
            if libc::unshare(libc::CLONE_NEWUSER) != 0
                || libc::chroot(c"jail".as_ptr()) != 0
                || libc::chdir(c"/".as_ptr()) != 0
            {
                println!("no chroot: {}", std::io::Error::last_os_error());
                libc::_exit(3);
            }
            let _l = UnixListener::bind("/c.sock").unwrap();
            let (r, _) = connect_raw(libc::SOCK_STREAM, b"/c.sock");
            println!("in a chroot, absolute: {r}");
            std::io::stdout().flush().unwrap();
            libc::_exit(0);
        }
    }
    let mut st = 0;
    unsafe { libc::waitpid(pid, &mut st, 0) };
}

/// TCP and UDP connects are made as asked.
fn inet() {
    let port: u16 = std::env::var("BH_PORT").unwrap().parse().unwrap();
    let r = std::net::TcpStream::connect(("127.0.0.1", port)).map(|mut s| {
        let mut b = [0u8; 5];
        s.read_exact(&mut b).map(|()| b)
    });
    println!(
        "tcp: {:?}",
        r.map(|r| r.map(|b| String::from_utf8_lossy(&b).into_owned()))
            .map_err(|e| e.to_string())
    );
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0) };
    let a = libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    };
    let r = unsafe {
        libc::connect(
            s,
            (&a as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    println!("tcp non-blocking: {}", errno_name(r));
    let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    println!(
        "udp connect: {:?}",
        u.connect(("127.0.0.1", port)).map_err(|e| e.to_string())
    );
    let bad = unsafe { libc::connect(s, 8 as *const libc::sockaddr, 16) };
    println!("bad address: {}", errno_name(bad));
}

/// Runs the probe `what` under `policy` in `dir`; everything it printed.
fn run_inside(policy: &Policy, dir: &Path, what: &str, env: &[(&str, String)]) -> String {
    let sb = Sandbox::new(policy, dir).unwrap();
    assert_eq!(
        sb.report().unix_sockets,
        UnixSockets::Checked,
        "{:?}",
        sb.report()
    );
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", "inside", "--nocapture", "-q"])
        .env("BH_INSIDE", what)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut c = sb.spawn(cmd).unwrap();
    let out = common::output(&mut c);
    c.wait().unwrap();
    out
}

#[test]
fn the_commands_own_servers_work_in_every_form() {
    for network in [true, false] {
        let (_t, p) = project();
        let pol = Policy {
            network,
            ..policy(&p)
        };
        let out = run_inside(&pol, &p, "own", &[]);
        for line in [
            "relative path in another process: ok true",
            "abstract seqpacket: ok true",
            "daemon: ok true",
            "from a thread: Ok(())",
            "non-blocking: ok",
            "closed socket: Connection refused",
            "regular file: Connection refused",
            "missing: No such file or directory",
        ] {
            assert!(out.contains(line), "network {network}: {line:?} in\n{out}");
        }
    }
}

#[test]
fn a_host_socket_by_a_link_or_a_hard_link_is_refused() {
    let (_t, p) = project();
    // The host's server, bound in the project before the start: a hard
    // link made inside names the same inode.
    let host = p.join("host.sock");
    let l = listen(&host);
    fs_err::os::unix::fs::symlink(&host, p.join("link.sock")).unwrap();
    let out = run_inside(&policy(&p), &p, "names", &[]);
    assert!(out.contains("link.sock: Permission denied"), "{out}");
    // A hard link made from inside the sandbox.
    let pol = policy(&p);
    let r = common::run(&pol, &p, "ln host.sock hard.sock && echo linked");
    assert!(r.out.contains("linked"), "{}", r.out);
    let out = run_inside(&pol, &p, "names", &[]);
    assert!(out.contains("hard.sock: Permission denied"), "{out}");
    never_reached(&l, "the host's socket");
}

#[test]
fn a_race_on_the_address_or_the_descriptor_never_reaches_the_host() {
    let (_t, p) = project();
    let dir = outside();
    let host = dir.path().join("host.sock");
    let l = listen(&host);
    let out = run_inside(
        &policy(&p),
        &p,
        "race",
        &[("BH_HOST", host.display().to_string())],
    );
    eprintln!("{out}");
    never_reached(&l, "the host's socket (a race won)");
    let counts = |what: &str| -> (u32, u32) {
        let line = out
            .lines()
            .find(|l| l.starts_with(what))
            .unwrap_or_else(|| panic!("{out}"));
        let n = |k: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(k))
                .unwrap()
                .parse::<u32>()
                .unwrap()
        };
        (n("ok="), n("refused="))
    };
    let (ok, refused) = counts("address race");
    // Both addresses were seen: the flip raced the connects for real.
    assert!(ok > 0 && refused > 0, "{out}");
    let (ok, refused) = counts("descriptor race");
    assert_eq!(ok, 0, "{out}");
    assert!(refused > 0, "{out}");
}

#[test]
fn no_datagram_socket_can_be_made_or_handed_in() {
    let (_t, p) = project();
    let dir = outside();
    let host = dir.path().join("log.sock");
    let d = UnixDatagram::bind(&host).unwrap();
    d.set_nonblocking(true).unwrap();
    let out = run_inside(
        &policy(&p),
        &p,
        "datagrams",
        &[("BH_HOST", host.display().to_string())],
    );
    for line in [
        "socket dgram: Permission denied",
        "socketpair dgram: Permission denied",
        "socket raw: Permission denied",
        "socketpair raw: Permission denied",
        "std unbound: Permission denied",
    ] {
        assert!(out.contains(line), "{line:?} in\n{out}");
    }
    assert!(
        d.recv(&mut [0u8; 8]).is_err(),
        "a datagram reached the host"
    );
    // A datagram socket as the command's input is refused up front.
    let (a, _b) = UnixDatagram::pair().unwrap();
    let sb = Sandbox::new(&policy(&p), &p).unwrap();
    let mut cmd = Command::new("true");
    cmd.stdin(Stdio::from(OwnedFd::from(a)));
    let e = sb.spawn(cmd).err().unwrap().to_string();
    assert!(e.contains("Unix datagram socket"), "{e}");
}

#[test]
fn a_blocked_connect_stalls_no_other() {
    let (_t, p) = project();
    let (tx, rx) = std::sync::mpsc::channel();
    let pp = p.clone();
    std::thread::spawn(move || {
        let _ = tx.send(run_inside(&policy(&pp), &pp, "backlog", &[]));
    });
    // Without the worker the init would sit in the blocked connect, and the
    // second connect (and the command's end) would wait for ever.
    let out = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the probe hung");
    assert!(out.contains("beside a blocked connect: Ok(())"), "{out}");
}

#[test]
fn tcp_and_udp_connects_are_made_as_asked() {
    let (_t, p) = project();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let mut s = s;
            let _ = s.write_all(b"hello");
        }
    });
    let out = run_inside(&policy(&p), &p, "inet", &[("BH_PORT", port.to_string())]);
    for line in [
        "tcp: Ok(Ok(\"hello\"))",
        "tcp non-blocking: Operation now in progress",
        "udp connect: Ok(())",
        "bad address: Bad address",
    ] {
        assert!(out.contains(line), "{line:?} in\n{out}");
    }
}

/// With a network namespace of its own the command's socket table holds
/// its sockets only; a listener of its own whose (32-bit) inode number is
/// the host socket's must not pass for the host's: the match is checked
/// against the file it is bound to (`SIOCUNIXFILE`).
#[test]
fn an_own_listener_with_the_host_sockets_inode_number_is_no_way_round() {
    // The host's listener in the host's network namespace (EACCES: the
    // command's shows it, with network) or in another one (a container's
    // server in a shared folder: no table the command has shows it). Each
    // with the command's network on and off.
    let other_net = nix::unistd::geteuid().is_root();
    if !other_net {
        eprintln!("the other-namespace case needs root (unshare CLONE_NEWNET): left out");
    }
    let cases = [
        (false, false, "Connection refused"),
        (true, false, "Permission denied"),
        (false, true, "Connection refused"),
        (true, true, "Connection refused"),
    ];
    for (network, elsewhere, why) in cases {
        if elsewhere && !other_net {
            continue;
        }
        let (_t, p) = project();
        // A folder on /dev/shm (a tmpfs: small inode numbers the private
        // /tmp, another tmpfs, can reach), its numbers moved past the
        // private /tmp's.
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        for i in 0..300 {
            let f = dir.path().join(format!("f{i}"));
            fs_err::write(&f, "").unwrap();
            fs_err::remove_file(&f).unwrap();
        }
        let host = dir.path().join("host.sock");
        let h = host.clone();
        let l = std::thread::spawn(move || {
            if elsewhere {
                assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
            }
            listen(&h)
        })
        .join()
        .unwrap();
        let target = std::os::unix::fs::MetadataExt::ino(&fs_err::metadata(&host).unwrap());
        let pol = Policy {
            network,
            ..policy(&p)
        };
        let out = run_inside(
            &pol,
            &p,
            "collide",
            &[
                ("BH_HOST", host.display().to_string()),
                ("BH_TARGET_INO", target.to_string()),
            ],
        );
        assert!(
            out.contains(&format!(
                "own listener at inode {target}, the host's at {target}"
            )),
            "the collision was not set up: {out}"
        );
        let case = format!("network {network}, listener elsewhere {elsewhere}");
        assert!(
            out.contains(&format!("host socket: {why}")),
            "{case}: {out}"
        );
        never_reached(&l, "the host's socket through a colliding inode number");
    }
}

#[test]
fn paths_through_proc_and_the_flags_asked_for() {
    let (t, p) = project();
    // Beside the project: under the private /tmp, not there inside.
    let l = listen(&t.path().join("host.sock"));
    let out = run_inside(&policy(&p), &p, "paths", &[]);
    for line in [
        "through the init's folder: No such file or directory",
        "directly: No such file or directory",
        "through /proc/self/fd: ok",
        "plain: socket (false, false), pair (false, false) (false, false)",
        "flagged: socket (true, true), pair (true, true) (true, true)",
        "plain: pair into a bad pointer: Bad address",
    ] {
        assert!(out.contains(line), "{line:?} in\n{out}");
    }
    never_reached(&l, "the host's socket beside the project");
}

#[test]
fn abstract_names_are_the_commands_own() {
    use std::os::linux::net::SocketAddrExt;
    let (_t, p) = project();
    let host = format!("bh-host-{}", std::process::id());
    let own = format!("bh-own-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(&host).unwrap();
    let l = UnixListener::bind_addr(&addr).unwrap();
    l.set_nonblocking(true).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let (pp, h, o) = (p.clone(), host.clone(), own.clone());
    std::thread::spawn(move || {
        let env = [("BH_HOST", h), ("BH_OWN", o)];
        let _ = tx.send(run_inside(&policy(&pp), &pp, "abstract", &env));
    });
    while !p.join("bound").exists() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let own_addr = std::os::unix::net::SocketAddr::from_abstract_name(&own).unwrap();
    let from_host = UnixStream::connect_addr(&own_addr).map(|_| ());
    fs_err::write(p.join("go"), "").unwrap();
    let out = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    assert!(
        out.contains("host's abstract name: Connection refused"),
        "{out}"
    );
    assert!(out.contains("own abstract name: ok"), "{out}");
    assert!(
        from_host.is_err(),
        "the host reached the command's abstract name: {out}"
    );
    assert!(l.accept().is_err(), "the command reached the host's");
}

#[test]
fn a_flag_cleared_under_a_connect_never_holds_the_init() {
    let (_t, p) = project();
    let sb = Sandbox::new(&policy(&p), &p).unwrap();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", "inside", "--nocapture", "-q"])
        .env("BH_INSIDE", "flip")
        .current_dir(&p)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut c = sb.spawn(cmd).unwrap();
    let mut out = String::new();
    c.child_mut()
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    // The command has ended: the sandbox ends with it (a stuck init would
    // keep it, the holder and the blocked threads, until killed).
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while c.try_wait().unwrap().is_none() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let ended = c.try_wait().unwrap().is_some();
    c.kill();
    c.wait().unwrap();
    assert!(out.contains("the init kept answering"), "{out}");
    assert!(ended, "the sandbox outlived its command: {out}");
}

#[test]
fn a_handled_signal_during_a_connect_changes_nothing() {
    let (_t, p) = project();
    let out = run_inside(&policy(&p), &p, "restart", &[]);
    assert!(out.contains("under signals: {\"ok\": 1000}"), "{out}");
}

#[test]
fn an_absolute_path_in_a_chroot_of_the_commands_own_is_the_one_inside() {
    let (_t, p) = project();
    let out = run_inside(&policy(&p), &p, "chroot", &[]);
    if out.contains("no chroot") {
        eprintln!("skipped: this kernel lets no user namespace be made inside the sandbox: {out}");
        return;
    }
    assert!(out.contains("in a chroot, absolute: ok"), "{out}");
}

/// The tests above again as `nobody` (CI runs as root).
#[test]
fn the_same_holds_for_a_non_root_user() {
    let names = [
        "the_commands_own_servers_work_in_every_form",
        "a_host_socket_by_a_link_or_a_hard_link_is_refused",
        "a_race_on_the_address_or_the_descriptor_never_reaches_the_host",
        "no_datagram_socket_can_be_made_or_handed_in",
        "a_blocked_connect_stalls_no_other",
        "tcp_and_udp_connects_are_made_as_asked",
        "an_own_listener_with_the_host_sockets_inode_number_is_no_way_round",
        "paths_through_proc_and_the_flags_asked_for",
        "abstract_names_are_the_commands_own",
        "a_flag_cleared_under_a_connect_never_holds_the_init",
        "a_handled_signal_during_a_connect_changes_nothing",
        "an_absolute_path_in_a_chroot_of_the_commands_own_is_the_one_inside",
    ];
    let mut args = names.to_vec();
    args.extend(["--exact", "--test-threads=2"]);
    common::rerun_as_nobody(&args, names.len());
}
