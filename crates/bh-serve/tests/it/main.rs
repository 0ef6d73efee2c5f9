//! bh-serve through its public API, on real repositories with real git.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use bh_checkpoint::{LiveStore, Store, StoreOptions};
use bh_serve::{Client, Listener, Paths, ServeError, Service, guess_project, serve_stdio};
use bh_test_support::TestRepo;
use serde_json::{Value, json};

mod deputy;

fn service(repo: &TestRepo, max: u64) -> (Service, Paths) {
    let state = repo.root.join("state");
    let mut options = StoreOptions::new(&state);
    options.max_file_size = max;
    let store = Arc::new(Store::open(&repo.runner(), &repo.dir, &options).unwrap());
    let paths = Paths::new(&state, store.project()).unwrap();
    paths.ensure_dir().unwrap();
    let svc = Service::new(LiveStore::new(store), max, paths.journal.clone());
    (svc, paths)
}

fn repo() -> TestRepo {
    let repo = TestRepo::new();
    repo.write("a.txt", "a\n");
    repo.commit_all("init");
    repo
}

fn ask(svc: &Service, req: Value) -> Value {
    serde_json::from_str(&svc.handle(req.to_string().as_bytes()).0).unwrap()
}

#[test]
fn every_request_gets_one_answer_and_bad_ones_an_error() {
    let repo = repo();
    let (svc, _) = service(&repo, 1 << 20);
    let input = [
        json!({"id": 1, "op": "ping"}).to_string(),
        "not json".into(),
        json!({"id": "x", "op": "snapshot", "tool": "t", "bogus": 1}).to_string(),
        json!({"id": 3, "op": "diff"}).to_string(),
        json!({"id": 4, "op": "restore", "checkpoint": "ffff"}).to_string(),
        json!({"id": 5, "op": "prune"}).to_string(),
        json!({"id": 6, "op": "snapshot", "project": "/"}).to_string(),
        json!({"id": 7, "op": "snapshot", "max_file_size": 5}).to_string(),
        json!({"id": 8, "op": "restore", "checkpoint": "latest", "paths": ["../outside"]})
            .to_string(),
        "".into(),
        json!({"id": 9, "op": "shutdown"}).to_string(),
        json!({"id": 10, "op": "ping"}).to_string(),
    ]
    .join("\n");
    let mut out = Vec::new();
    serve_stdio(&svc, input.as_bytes(), &mut out).unwrap();
    let lines: Vec<Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Blank lines are skipped; nothing is answered after shutdown.
    assert_eq!(lines.len(), 10);
    assert_eq!(lines[0]["ok"]["project"], json!(repo.dir));
    let kinds: Vec<&str> = lines[1..9]
        .iter()
        .map(|l| l["error"]["kind"].as_str().unwrap_or("ok"))
        .collect();
    assert_eq!(
        kinds,
        [
            "usage",
            "usage",
            "usage",
            "not_found",
            "usage",
            "refused",
            "refused",
            "refused"
        ]
    );
    assert_eq!(lines[1]["id"], Value::Null);
    assert_eq!(lines[2]["id"], "x");
    assert_eq!(lines[9]["ok"]["shutdown"], true);
    assert!(svc.shutdown_requested());
}

#[test]
fn one_server_per_project_and_only_sockets_are_replaced() {
    let repo = repo();
    let (svc, paths) = service(&repo, 1 << 20);
    let first = Listener::bind(&paths).unwrap();
    assert!(matches!(
        Listener::bind(&paths),
        Err(ServeError::AlreadyRunning { .. })
    ));
    let mode = fs::symlink_metadata(&paths.socket)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    drop(first);
    assert!(!paths.socket.exists(), "socket removed on drop");
    // A stale socket is replaced.
    drop(std::os::unix::net::UnixListener::bind(&paths.socket).unwrap());
    let again = Listener::bind(&paths).unwrap();
    drop(again);
    // Anything else is refused and kept.
    fs::write(&paths.socket, "keep").unwrap();
    assert!(matches!(
        Listener::bind(&paths),
        Err(ServeError::WrongType { .. })
    ));
    assert_eq!(fs::read_to_string(&paths.socket).unwrap(), "keep");
    drop(svc);
}

#[test]
fn client_talks_to_a_live_server_and_refuses_an_open_folder() {
    let repo = repo();
    let (svc, paths) = service(&repo, 1 << 20);
    assert!(matches!(
        Client::connect(&paths, Duration::from_secs(5)),
        Err(ServeError::NoServer { .. })
    ));
    let listener = Listener::bind(&paths).unwrap();
    let p2 = paths.clone();
    let client = std::thread::spawn(move || {
        let mut c = Client::connect(&p2, Duration::from_secs(30)).unwrap();
        let a = c.request(json!({"op": "snapshot", "tool": "x"})).unwrap();
        let b = c.request(json!({"op": "ping"})).unwrap();
        drop(c);
        fs::set_permissions(&p2.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let refused = Client::connect(&p2, Duration::from_secs(30));
        fs::set_permissions(&p2.dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let mut c = Client::connect(&p2, Duration::from_secs(30)).unwrap();
        // Not over the socket: the server stops when idle instead.
        let stop = c.request(json!({"op": "shutdown"})).unwrap();
        assert_eq!(stop["error"]["kind"], "refused", "{stop}");
        (a, b, refused.err().map(|e| e.to_string()))
    });
    listener.serve(&svc, Duration::from_secs(5)).unwrap();
    let (a, b, refused) = client.join().unwrap();
    assert_eq!(a["id"], 1);
    assert_eq!(a["ok"]["snapshot"]["created"], true);
    assert_eq!(b["id"], 2);
    assert!(refused.unwrap().contains("open to group or others"));
}

#[test]
fn the_project_guess_is_the_nearest_folder_with_git() {
    let repo = repo();
    fs::create_dir_all(repo.dir.join("x/y")).unwrap();
    assert_eq!(guess_project(&repo.dir.join("x/y")).unwrap(), repo.dir);
    let plain = repo.root.join("plain");
    fs::create_dir_all(&plain).unwrap();
    assert_eq!(guess_project(&plain).unwrap(), plain);
    assert!(guess_project(&repo.root.join("missing")).is_err());
}

#[test]
fn restore_to_entry_names_a_pruned_checkpoint_instead_of_guessing() {
    let repo = repo();
    let (svc, paths) = service(&repo, 1 << 20);
    let snap = ask(
        &svc,
        json!({"op": "snapshot", "tool": "edit", "session": "S", "entry": "e1"}),
    );
    let first = snap["ok"]["snapshot"]["checkpoint"]["commit"].clone();
    repo.write("a.txt", "changed\n");
    ask(
        &svc,
        json!({"op": "snapshot", "tool": "edit", "session": "S", "entry": "e2"}),
    );
    assert_eq!(
        fs::read_to_string(&paths.journal).unwrap().lines().count(),
        2
    );
    let pruned = ask(&svc, json!({"op": "prune", "keep": 1}));
    assert_eq!(pruned["ok"]["prune"]["removed"][0]["commit"], first);
    let r = ask(
        &svc,
        json!({"op": "restore_to_entry", "session": "S", "entry": "e1", "branch": ["e0", "e1", "e2"]}),
    );
    assert_eq!(r["error"]["kind"], "not_found", "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("pruned"));
    assert_eq!(repo.read("a.txt"), "changed\n", "nothing touched");
}

#[test]
fn the_call_journal_stays_bounded_and_keeps_what_rewinds_need() {
    let repo = repo();
    let (svc, paths) = service(&repo, 1 << 20);
    let svc = svc.with_journal_compaction_at(2_000);
    // Session "old": one call, whose checkpoint is pruned below.
    let snap = |session: &str, entry: &str| {
        ask(
            &svc,
            json!({"op": "snapshot", "tool": "edit", "session": session, "entry": entry}),
        )["ok"]["snapshot"]["checkpoint"]["commit"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    snap("old", "o1");
    repo.write("a.txt", "v1\n");
    // Session "S": entry e0 with one call, then 200 calls of entry e1 (an
    // agent's many calls of one message; debounced, nothing changed).
    let before_e0 = snap("S", "e0");
    repo.write("a.txt", "v2\n");
    let before_e1 = snap("S", "e1");
    for _ in 0..200 {
        snap("S", "e1");
    }
    let lines = fs::read_to_string(&paths.journal).unwrap().lines().count();
    assert!(lines < 30, "journal not compacted: {lines} lines");
    // What rewinds need is still there: the first call of each entry.
    let calls: Vec<Value> = fs::read_to_string(&paths.journal)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let first = |s: &str, e: &str| {
        calls
            .iter()
            .find(|c| c["session"] == s && c["entry"] == e)
            .map(|c| c["commit"].as_str().unwrap().to_owned())
    };
    assert_eq!(first("S", "e0").as_deref(), Some(before_e0.as_str()));
    assert_eq!(first("S", "e1").as_deref(), Some(before_e1.as_str()));
    assert!(first("old", "o1").is_some(), "its checkpoint still lives");
    repo.write("a.txt", "v3\n");
    let r = ask(
        &svc,
        json!({"op": "restore_to_entry", "session": "S", "entry": "e1", "branch": ["e0", "e1"]}),
    );
    assert_eq!(r["ok"]["checkpoint"]["commit"], before_e1.as_str(), "{r}");
    assert_eq!(repo.read("a.txt"), "v2\n");

    // A prune that leaves session "old" no checkpoint drops its calls; "S"
    // keeps its call whose checkpoint went, so rewinding there is refused by
    // name, not answered with a later checkpoint.
    // (keep counts snapshots: e1's stays, with the restore's undo point after it.)
    let pruned = ask(&svc, json!({"op": "prune", "keep": 1}));
    assert!(
        pruned["ok"]["journal"]["calls_after"].as_u64().is_some(),
        "{pruned}"
    );
    let text = fs::read_to_string(&paths.journal).unwrap();
    assert!(!text.contains("\"old\""), "{text}");
    assert!(text.contains("\"e0\""), "{text}");
    let r = ask(
        &svc,
        json!({"op": "restore_to_entry", "session": "S", "entry": "e0", "branch": ["e0", "e1"]}),
    );
    assert_eq!(r["error"]["kind"], "not_found", "{r}");
}
