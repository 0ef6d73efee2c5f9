//! What the init's connect check costs a command: N new Unix sockets
//! (made by the init) connected to a listener of the command's own and
//! closed, blocking and non-blocking, and N TCP connects to a loopback
//! listener, timed inside the command — bare and sandboxed, in the same
//! run, alternating rounds; medians of the rounds.
//!
//! `cargo bench -p bh-sandbox --bench connect -- --connects 2000 --rounds 5`

#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::process::{Command, Stdio};
use std::time::Instant;

use bh_sandbox::{Policy, Sandbox, UnixSockets};

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// Inside (bare or sandboxed): `n` connects of `kind`, microseconds each.
fn inside(kind: &str, n: usize, port: u16) -> f64 {
    let path = std::env::current_dir()
        .unwrap()
        .join(format!("{kind}.sock"));
    let _ = fs_err::remove_file(&path);
    let l = UnixListener::bind(&path).unwrap();
    // SAFETY: listen(2) on our listener: room for every connect (never
    // accepted: closing each client is enough).
    unsafe { libc::listen(l.as_raw_fd(), 4096) };
    l.set_nonblocking(true).unwrap();
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as u16;
    for (d, s) in a.sun_path.iter_mut().zip(path.to_str().unwrap().bytes()) {
        *d = s as libc::c_char;
    }
    let t = Instant::now();
    for _ in 0..n {
        match kind {
            "tcp" => drop(std::net::TcpStream::connect(("127.0.0.1", port)).unwrap()),
            _ => {
                let flags = if kind == "nonblocking" {
                    libc::SOCK_NONBLOCK
                } else {
                    0
                };
                // SAFETY: a socket we connect and close.
                unsafe {
                    let s = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | flags, 0);
                    let r = libc::connect(
                        s,
                        (&a as *const libc::sockaddr_un).cast(),
                        std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
                    );
                    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
                    libc::close(s);
                }
                while l.accept().is_ok() {}
            }
        }
    }
    t.elapsed().as_secs_f64() * 1e6 / n as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--inside") {
        let n = arg(&args, "--connects", 2000);
        let port = arg(&args, "--port", 0) as u16;
        println!("{}", inside(&args[i + 1], n, port));
        return;
    }
    let n = arg(&args, "--connects", 2000);
    let rounds = arg(&args, "--rounds", 5);
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    fs_err::create_dir_all(project.join(".git")).unwrap();
    let policy = Policy {
        writable: vec![project.clone()],
        read_only: vec![project.join(".git")],
        private_tmp: true,
        network: true,
        ..Policy::default()
    };
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    // SAFETY: listen(2) again on our listener: a backlog deep enough that
    // the bare loop's handshakes never overflow it (1 s retries).
    unsafe { libc::listen(tcp.as_raw_fd(), 4096) };
    let port = tcp.local_addr().unwrap().port();
    std::thread::spawn(move || for _ in tcp.incoming() {});
    let run = |kind: &str, sandboxed: bool| -> f64 {
        let mut c = Command::new(std::env::current_exe().unwrap());
        c.args(["--inside", kind, "--connects", &n.to_string()])
            .args(["--port", &port.to_string()])
            .current_dir(&project)
            .stdout(Stdio::piped());
        let out = if sandboxed {
            let sb = Sandbox::new(&policy, &project).unwrap();
            assert_eq!(sb.report().unix_sockets, UnixSockets::Checked);
            let mut child = sb.spawn(c).unwrap();
            let mut s = String::new();
            std::io::Read::read_to_string(&mut child.child_mut().stdout.take().unwrap(), &mut s)
                .unwrap();
            assert!(child.wait().unwrap().success());
            s
        } else {
            String::from_utf8(c.output().unwrap().stdout).unwrap()
        };
        out.trim().parse().unwrap()
    };
    println!("| connect ({n} per round, median of {rounds} rounds) | bare | sandboxed | added |");
    println!("|---|---:|---:|---:|");
    for (kind, what) in [
        (
            "blocking",
            "Unix: a new socket, its connect, close; blocking socket",
        ),
        ("nonblocking", "Unix: the same, non-blocking socket"),
        ("tcp", "TCP to a loopback listener"),
    ] {
        let (mut bare, mut boxed) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            bare.push(run(kind, false));
            boxed.push(run(kind, true));
        }
        let (b, s) = (median(bare), median(boxed));
        println!("| {what} | {b:.1} µs | {s:.1} µs | {:.1} µs |", s - b);
    }
}
