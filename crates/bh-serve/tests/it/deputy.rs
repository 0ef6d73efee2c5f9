//! The server as a confused deputy (issue 22): what the socket will do for a
//! peer, who that peer may be, and framing that no peer can bend.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::Duration;

use bh_serve::{Client, Listener, Paths, Service};
use serde_json::{Value, json};

use super::{repo, service};

/// Serves `listener` on a thread until idle for `idle`; `work` runs meanwhile.
/// `idle` is generous: on a loaded machine a peer may take seconds to start,
/// and a server idle that long before it connects would be gone.
fn serving<T: Send>(
    svc: &Service,
    listener: &Listener,
    idle: Duration,
    deadline: Duration,
    work: impl FnOnce() -> T + Send,
) -> T {
    std::thread::scope(|s| {
        let server = s.spawn(|| listener.serve_with(svc, idle, deadline));
        let out = work();
        server.join().unwrap().unwrap();
        out
    })
}

fn raw(paths: &Paths, lines: &[&str]) -> Vec<Value> {
    let mut s = connect(paths);
    for l in lines {
        s.write_all(l.as_bytes()).unwrap();
        s.write_all(b"\n").unwrap();
    }
    s.shutdown(std::net::Shutdown::Write).unwrap();
    BufReader::new(s)
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect()
}

fn connect(paths: &Paths) -> UnixStream {
    let mut c = Client::connect(paths, Duration::from_secs(30)).unwrap();
    // A raw stream of the same connection: the client checked the socket.
    let _ = c.request(json!({"op": "ping"})).unwrap();
    UnixStream::connect(&paths.socket).unwrap()
}

fn checkpoints(svc: &Service) -> usize {
    let (answer, _) = svc.handle(json!({"op": "list"}).to_string().as_bytes());
    let v: Value = serde_json::from_str(&answer).unwrap();
    v["ok"]["checkpoints"].as_array().unwrap().len()
}

#[test]
fn destructive_ops_are_not_served_over_the_socket() {
    let repo = repo();
    let (svc, paths) = service(&repo, 1 << 20);
    let listener = Listener::bind(&paths).unwrap();
    repo.write("a.txt", "first\n");
    let answers = serving(
        &svc,
        &listener,
        Duration::from_secs(5),
        Duration::from_secs(30),
        || {
            let first = raw(
                &paths,
                &[&json!({"id": 1, "op": "snapshot", "tool": "t"}).to_string()],
            );
            repo.write("a.txt", "uncommitted work\n");
            let mut lines = vec![first[0].clone()];
            lines.extend(raw(
            &paths,
            &[
                &json!({"id": 2, "op": "restore", "checkpoint": "latest", "exact": true}).to_string(),
                &json!({"id": 3, "op": "restore_to_entry", "session": "S", "entry": "e", "branch": ["e"]}).to_string(),
                &json!({"id": 4, "op": "prune", "keep": 0}).to_string(),
                &json!({"id": 5, "op": "shutdown"}).to_string(),
                &json!({"id": 6, "op": "list"}).to_string(),
                &json!({"id": 7, "op": "diff", "checkpoint": "latest"}).to_string(),
                &json!({"id": 8, "op": "ping"}).to_string(),
            ],
        ));
            lines
        },
    );
    assert_eq!(
        answers[0]["ok"]["snapshot"]["created"], true,
        "{:#}",
        answers[0]
    );
    for a in &answers[1..7] {
        assert_eq!(a["error"]["kind"], "refused", "{a:#}");
    }
    assert_eq!(answers[7]["ok"]["protocol"], 1);
    assert_eq!(repo.read("a.txt"), "uncommitted work\n", "nothing restored");
    assert_eq!(checkpoints(&svc), 1, "nothing pruned");
    assert!(!svc.shutdown_requested());
}

#[test]
fn an_over_long_line_is_answered_once_and_its_tail_never_runs() {
    let repo = repo();
    let (svc, paths) = service(&repo, 1 << 20);
    let listener = Listener::bind(&paths).unwrap();
    // 4 MiB of padding, then what would be a request of its own if the
    // line were split at the cap.
    let tail = json!({"id": "tail", "op": "snapshot", "tool": "t"}).to_string();
    let long = format!("{}{tail}", " ".repeat(4 << 20));
    let answers = serving(
        &svc,
        &listener,
        Duration::from_secs(5),
        Duration::from_secs(60),
        || {
            raw(
                &paths,
                &[&long, &json!({"id": 2, "op": "ping"}).to_string()],
            )
        },
    );
    assert_eq!(answers.len(), 2, "{answers:#?}");
    assert_eq!(answers[0]["error"]["kind"], "usage");
    assert_eq!(answers[0]["id"], Value::Null);
    assert_eq!(answers[1]["id"], 2);
    assert_eq!(checkpoints(&svc), 0, "the tail took no snapshot");
}

#[test]
fn a_trickling_peer_is_dropped_and_stalls_no_one() {
    let repo = repo();
    let (svc, paths) = service(&repo, 1 << 20);
    let listener = Listener::bind(&paths).unwrap();
    let (dropped, other) = serving(
        &svc,
        &listener,
        Duration::from_secs(3),
        Duration::from_secs(2),
        || {
            let mut slow = connect(&paths);
            slow.write_all(b"{\"op\":").unwrap();
            // While the slow one holds its connection, another is answered.
            let other = raw(
                &paths,
                &[&json!({"id": 1, "op": "snapshot", "tool": "t"}).to_string()],
            );
            // The slow one keeps trickling; the server drops it at its
            // whole-request deadline (the read ends, no answer).
            let mut rest = Vec::new();
            for _ in 0..100 {
                if slow.write_all(b" ").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            slow.set_read_timeout(Some(Duration::from_secs(30)))
                .unwrap();
            let _ = slow.read_to_end(&mut rest);
            (rest, other)
        },
    );
    assert_eq!(other[0]["ok"]["snapshot"]["created"], true, "{other:#?}");
    assert!(dropped.is_empty(), "no answer to a request never finished");
}

#[test]
fn a_deep_state_folder_still_gets_a_working_server() {
    let repo = repo();
    let deep = repo.root.join("d".repeat(60)).join("e".repeat(60));
    let mut options = bh_checkpoint::StoreOptions::new(&deep);
    options.max_file_size = 1 << 20;
    let store = std::sync::Arc::new(
        bh_checkpoint::Store::open(&repo.runner(), &repo.dir, &options).unwrap(),
    );
    let paths = Paths::new(&deep, store.project()).unwrap();
    assert!(paths.socket.as_os_str().len() > 108);
    paths.ensure_dir().unwrap();
    let svc = Service::new(
        bh_checkpoint::LiveStore::new(store),
        1 << 20,
        paths.journal.clone(),
    );
    let listener = Listener::bind(&paths).unwrap();
    let answer = serving(
        &svc,
        &listener,
        Duration::from_secs(5),
        Duration::from_secs(30),
        || {
            let mut c = Client::connect(&paths, Duration::from_secs(30)).unwrap();
            c.request(json!({"op": "snapshot", "tool": "t"})).unwrap()
        },
    );
    assert_eq!(answer["ok"]["snapshot"]["created"], true, "{answer:#}");
    assert!(paths.socket.exists());
}

/// A peer run through `wrap` (another namespace, no_new_privs) asks for a
/// snapshot with a small python client.
fn wrapped_peer(paths: &Paths, wrap: &[&str]) -> Value {
    let script = "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\ntry:\n    s.sendall(b'{\"id\":1,\"op\":\"snapshot\",\"tool\":\"t\"}\\n')\nexcept OSError:\n    pass\nprint(s.makefile().readline(),end='')";
    let python = String::from_utf8(
        Command::new("python3")
            .args(["-c", "import sys;print(sys.executable,end='')"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let out = Command::new(wrap[0])
        .args(&wrap[1..])
        .arg(python)
        .args(["-c", script])
        .arg(&paths.socket)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

#[test]
fn a_peer_in_another_namespace_or_with_no_new_privs_is_refused() {
    if Command::new("unshare")
        .args(["-Urm", "true"])
        .status()
        .map(|s| !s.success())
        .unwrap_or(true)
    {
        eprintln!("skipped: no user namespaces here");
        return;
    }
    let repo = repo();
    let (svc, paths) = service(&repo, 1 << 20);
    let listener = Listener::bind(&paths).unwrap();
    let (mnt, pid, nnp, plain) = serving(
        &svc,
        &listener,
        Duration::from_secs(10),
        Duration::from_secs(30),
        || {
            (
                wrapped_peer(&paths, &["unshare", "-Urm"]),
                wrapped_peer(&paths, &["unshare", "-Urpf"]),
                wrapped_peer(&paths, &["setpriv", "--no-new-privs"]),
                wrapped_peer(&paths, &["env"]),
            )
        },
    );
    assert!(
        mnt["error"]["message"]
            .as_str()
            .unwrap()
            .contains("mnt namespace"),
        "{mnt}"
    );
    assert_eq!(pid["error"]["kind"], "refused", "{pid}");
    assert!(
        nnp["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no_new_privs"),
        "{nnp}"
    );
    assert_eq!(plain["ok"]["snapshot"]["created"], true, "{plain}");
    assert_eq!(checkpoints(&svc), 1, "only the plain peer's snapshot");
}
