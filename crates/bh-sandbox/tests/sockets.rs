//! The host's Unix sockets inside the sandbox (issue 21): a server's socket
//! anywhere the command can see — inside its writable project too, bound
//! before the start or after — is refused unless the policy allows it; the
//! command's own sockets work; an allowed socket inside a hidden folder is
//! carried through the cover. (`connect.rs` attacks the check itself.)
//! Each probe is this test binary re-run inside the sandbox (`probe`,
//! ignored); each effect is checked on the host (the listener never saw a
//! connection).

#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::{Command, Stdio};

use bh_sandbox::{Policy, Sandbox, UnixSockets};

mod common;
use common::{listen, never_reached, outside, policy, project};

/// Inside: connects to each path of `BH_PROBE` (one per line) and says
/// `reached P` or `blocked P (error)`; then binds a socket of its own in
/// `BH_PROBE_OWN` and connects to it.
#[test]
#[ignore]
fn probe() {
    let Ok(paths) = std::env::var("BH_PROBE") else {
        return;
    };
    if let Ok(go) = std::env::var("BH_PROBE_WAIT") {
        // The host binds its server after the start, then says go.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !Path::new(&go).exists() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    for p in paths.lines() {
        match UnixStream::connect(p) {
            Ok(_) => println!("reached {p}"),
            Err(e) => println!("blocked {p} ({e})"),
        }
    }
    if let Ok(own) = std::env::var("BH_PROBE_OWN") {
        let ok = UnixListener::bind(&own)
            .is_ok_and(|l| UnixStream::connect(&own).is_ok() && l.accept().is_ok());
        println!("own socket {}", if ok { "works" } else { "fails" });
        let pair = UnixStream::pair().is_ok();
        println!("socketpair {}", if pair { "works" } else { "fails" });
        // An io_uring ring would make and connect sockets past the filter.
        let mut params = [0u8; 120]; // struct io_uring_params
        // SAFETY: io_uring_setup(2) with a zeroed params struct of its size.
        let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1u32, params.as_mut_ptr()) };
        if fd >= 0 {
            println!("io_uring works");
        } else {
            println!("io_uring fails ({})", std::io::Error::last_os_error());
        }
    }
    if let Ok(w) = std::env::var("BH_PROBE_WRITE") {
        match fs_err::write(&w, "x") {
            Ok(()) => println!("wrote {w}"),
            Err(e) => println!("cannot write {w} ({})", e.kind()),
        }
    }
}

fn probe_in(policy: &Policy, dir: &Path, env: &[(&str, String)]) -> String {
    finish(spawn_probe(policy, dir, env))
}

/// The probe started (its sandbox made, the host's sockets listed).
fn spawn_probe(policy: &Policy, dir: &Path, env: &[(&str, String)]) -> bh_sandbox::Confined {
    let sb = Sandbox::new(policy, dir).unwrap();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", "probe", "--nocapture", "-q"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    sb.spawn(cmd).unwrap()
}

/// The probe's stdout and stderr, once it has ended.
fn finish(mut c: bh_sandbox::Confined) -> String {
    let out = common::output(&mut c);
    c.wait().unwrap();
    out
}

/// The tests above again as `nobody` (CI runs as root): the unprivileged
/// path is the one most users take.
#[test]
fn the_same_holds_for_a_non_root_user() {
    let names = [
        "host_sockets_are_refused_unless_allowed",
        "a_server_bound_after_the_start_is_out_of_reach",
        "an_allowed_socket_inside_a_hidden_folder_is_carried_through_its_cover",
        "an_allowed_socket_under_tmp_is_carried_onto_the_private_tmp",
    ];
    common::rerun_as_nobody(&names, names.len());
}

#[test]
fn host_sockets_are_refused_unless_allowed() {
    let (_t, p) = project();
    let out_dir = outside();
    let in_project = p.join("dev-server.sock");
    let elsewhere = out_dir.path().join("editor.sock");
    let (a, b) = (listen(&in_project), listen(&elsewhere));
    let probe = format!("{}\n{}", in_project.display(), elsewhere.display());
    let env = [
        ("BH_PROBE", probe.clone()),
        ("BH_PROBE_OWN", p.join("own.sock").display().to_string()),
    ];
    // The probe works at all: outside the sandbox it reaches both.
    for s in [&in_project, &elsewhere] {
        UnixStream::connect(s).unwrap();
    }
    a.accept().unwrap();
    b.accept().unwrap();

    for network in [true, false] {
        let pol = Policy {
            network,
            ..policy(&p)
        };
        let _ = fs_err::remove_file(p.join("own.sock"));
        let out = probe_in(&pol, &p, &env);
        // With a network namespace of its own the host's listeners are
        // not in the command's socket table: refused as "nobody there".
        let why = if network {
            "Permission denied"
        } else {
            "Connection refused"
        };
        for s in [&in_project, &elsewhere] {
            assert!(
                out.contains(&format!("blocked {} ({why}", s.display())),
                "network {network}: {out}"
            );
        }
        assert!(out.contains("own socket works"), "network {network}: {out}");
    }
    never_reached(&a, "the project's socket");
    never_reached(&b, "the socket elsewhere");
    let report = Sandbox::new(&policy(&p), &p).unwrap().report().clone();
    assert_eq!(report.unix_sockets, UnixSockets::Checked, "{report:?}");
    assert_eq!(
        report.sockets_covered, 0,
        "checked, not covered: {report:?}"
    );
    assert!(report.sockets_allowed.is_empty());

    // One allowed: that one is reached, the other still covered.
    let allowed = Policy {
        allow_sockets: vec![elsewhere.clone()],
        ..policy(&p)
    };
    fs_err::remove_file(p.join("own.sock")).unwrap();
    let out = probe_in(&allowed, &p, &env);
    assert!(
        out.contains(&format!("reached {}", elsewhere.display())),
        "{out}"
    );
    assert!(
        out.contains(&format!("blocked {}", in_project.display())),
        "{out}"
    );
    b.accept().unwrap();
    never_reached(&a, "the project's socket");
    let report = Sandbox::new(&allowed, &p).unwrap().report().clone();
    assert_eq!(
        report.sockets_allowed,
        [fs_err::canonicalize(&elsewhere).unwrap()]
    );
}

#[test]
fn an_allowed_socket_inside_a_hidden_folder_is_carried_through_its_cover() {
    let (_t, p) = project();
    let out_dir = outside();
    let runtime = out_dir.path().join("runtime");
    fs_err::create_dir_all(runtime.join("app")).unwrap();
    fs_err::write(runtime.join("secret"), "TOP-SECRET\n").unwrap();
    let bus = runtime.join("app/bus");
    let other = runtime.join("other.sock");
    let (bus_l, other_l) = (listen(&bus), listen(&other));
    let pol = Policy {
        hidden: vec![runtime.clone()],
        allow_sockets: vec![bus.clone()],
        ..policy(&p)
    };
    let out = probe_in(
        &pol,
        &p,
        &[
            (
                "BH_PROBE",
                format!("{}\n{}", bus.display(), other.display()),
            ),
            (
                "BH_PROBE_WRITE",
                runtime.join("planted").display().to_string(),
            ),
        ],
    );
    assert!(out.contains(&format!("reached {}", bus.display())), "{out}");
    assert!(
        out.contains(&format!("blocked {}", other.display())),
        "{out}"
    );
    assert!(
        out.contains("cannot write"),
        "the cover takes no writes: {out}"
    );
    bus_l.accept().unwrap();
    never_reached(&other_l, "the hidden folder's other socket");
    assert!(!runtime.join("planted").exists());
    // The rest of the folder stays hidden: the secret is not there inside.
    let run = common::run(
        &pol,
        &p,
        &format!(
            "cat {} 2>&1; ls -A {}",
            runtime.join("secret").display(),
            runtime.display()
        ),
    );
    assert!(!run.out.contains("TOP-SECRET"), "{}", run.out);
    assert!(!run.out.contains("secret\n"), "{}", run.out);
}

#[test]
fn an_allowed_socket_under_tmp_is_carried_onto_the_private_tmp() {
    let (_t, p) = project();
    let t = tempfile::tempdir().unwrap(); // under /tmp
    let agent = t.path().join("agent.sock");
    let l = listen(&agent);
    let probe = [("BH_PROBE", agent.display().to_string())];
    let out = probe_in(&policy(&p), &p, &probe);
    assert!(out.contains("blocked"), "hidden by the private /tmp: {out}");
    never_reached(&l, "the agent under /tmp");
    let pol = Policy {
        allow_sockets: vec![agent.clone()],
        ..policy(&p)
    };
    let out = probe_in(&pol, &p, &probe);
    assert!(
        out.contains(&format!("reached {}", agent.display())),
        "{out}"
    );
    l.accept().unwrap();
}

#[test]
fn allowing_what_is_not_a_socket_is_refused_naming_it() {
    let (_t, p) = project();
    for (path, why) in [
        (p.join("a.txt"), "is not a Unix socket"),
        (p.join("missing.sock"), "cannot be resolved"),
    ] {
        let pol = Policy {
            allow_sockets: vec![path.clone()],
            ..policy(&p)
        };
        let e = Sandbox::new(&pol, &p).err().unwrap().to_string();
        assert!(
            e.contains(&path.display().to_string()) && e.contains(why),
            "{e}"
        );
    }
}

/// X5 of the side-by-side table: a host server that binds its socket after
/// the command started. The init checks the connect when it is made, so it
/// is refused like any other host socket, while the command's own
/// listening socket works. With `deny_unix_sockets` the command cannot make
/// a Unix socket at all (the peers' trade): that server stays out of reach
/// and so does its own.
#[test]
fn a_server_bound_after_the_start_is_out_of_reach() {
    let (_t, p) = project();
    let out_dir = outside();
    let late = out_dir.path().join("late.sock");
    let go = out_dir.path().join("go");
    let env = [
        ("BH_PROBE", late.display().to_string()),
        ("BH_PROBE_WAIT", go.display().to_string()),
        ("BH_PROBE_OWN", p.join("own.sock").display().to_string()),
    ];
    let plain = policy(&p);
    let report = Sandbox::new(&plain, &p).unwrap().report().clone();
    assert_eq!(report.unix_sockets, UnixSockets::Checked, "{report:?}");
    assert!(
        !report
            .not_enforced
            .iter()
            .any(|n| n.contains("binds after the start")),
        "nothing is left open there: {:?}",
        report.not_enforced
    );
    // The late server bound once the probe runs, then the go.
    let attack = |pol: &Policy| {
        let c = spawn_probe(pol, &p, &env);
        let server = listen(&late);
        fs_err::write(&go, "").unwrap();
        let out = finish(c);
        assert!(
            out.contains(&format!("blocked {} (Permission denied", late.display())),
            "{out}"
        );
        never_reached(&server, "a server bound after the start");
        assert!(out.contains("socketpair works"), "{out}");
        assert!(
            out.contains("io_uring fails (Permission denied"),
            "no ring to make or connect sockets past the filter: {out}"
        );
        drop(server);
        fs_err::remove_file(&late).unwrap();
        fs_err::remove_file(&go).unwrap();
        out
    };
    let out = attack(&plain);
    assert!(out.contains("own socket works"), "{out}");
    fs_err::remove_file(p.join("own.sock")).unwrap();

    let denied = Policy {
        deny_unix_sockets: true,
        ..plain.clone()
    };
    let out = attack(&denied);
    assert!(out.contains("own socket fails"), "{out}");
    let report = Sandbox::new(&denied, &p).unwrap().report().clone();
    assert!(report.unix_sockets_denied);
    assert_eq!(report.unix_sockets, UnixSockets::Denied);
}
