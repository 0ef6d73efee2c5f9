//! `bh checkpoint serve` and the Claude Code hook's use of it, on real
//! repositories with real git: the hook through a warm server gives exactly
//! the checkpoints an ordinary snapshot gives, and every way the server can
//! be unusable (overflowed watch, killed, stale or foreign socket, another
//! uid) falls back to an ordinary snapshot or refuses.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use bh_serve::Paths;
use bh_test_support::TestRepo;
use serde_json::{Value, json};

struct Env {
    repo: TestRepo,
    w: bh_test_support::cli::World,
    /// State of the server-backed hook.
    state: PathBuf,
    /// State of the independent ordinary store (the reference).
    reference: PathBuf,
    servers: Vec<Child>,
    /// Whether the served hook may start a server itself.
    autostart: std::cell::Cell<bool>,
}

impl Drop for Env {
    fn drop(&mut self) {
        for c in &mut self.servers {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Servers the hook started (`shutdown` is not served over the
        // socket): stop the one whose pid it tells.
        if let Ok(paths) = self.paths()
            && let Ok(mut s) = std::os::unix::net::UnixStream::connect(&paths.socket)
        {
            let _ = writeln!(s, "{}", json!({"id": 0, "op": "ping"}));
            let mut line = String::new();
            let _ = BufReader::new(s).read_line(&mut line);
            if let Some(pid) = serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|v| v["ok"]["pid"].as_i64())
            {
                let _ = Command::new("kill").arg(pid.to_string()).status();
            }
        }
    }
}

impl Env {
    fn new() -> Env {
        let repo = TestRepo::new();
        repo.write("src/lib.rs", "pub fn a() {}\n");
        repo.write("README.md", "# readme\n");
        repo.write("docs/guide.md", "guide\n");
        repo.write(".gitignore", "target/\n");
        repo.commit_all("initial");
        let state = repo.root.join("s");
        let reference = repo.root.join("r");
        Env {
            w: crate::world_at(&repo.root),
            repo,
            state,
            reference,
            servers: Vec::new(),
            autostart: std::cell::Cell::new(false),
        }
    }

    fn paths(&self) -> bh_serve::Result<Paths> {
        Paths::new(&self.state, &self.repo.dir)
    }

    fn bh(&self, state: &Path) -> Command {
        let mut cmd = self.w.bh(&self.repo.dir);
        cmd.arg("--state-dir").arg(state);
        cmd
    }

    /// Starts `bh checkpoint serve --socket` and waits (on its stdout) until
    /// it listens.
    fn start_server(&mut self, idle: &str) -> Value {
        let mut child = self
            .bh(&self.state.clone())
            .args(["--json", "checkpoint", "serve", "--socket", "--idle", idle])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        self.servers.push(child);
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("server said {line:?}: {e}"))
    }

    fn hook_with(&self, state: &Path, extra: &[&str], tool: &str, entry: &str) -> Value {
        let event = json!({
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "session_id": "sess-1",
            "tool_use_id": entry,
            "cwd": self.repo.dir,
        });
        let mut child = self
            .bh(state)
            .args(["--json", "checkpoint", "hook", "claude-code"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(event.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "hook failed: {out:?}");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "hook output {:?} ({e}); stderr {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// The hook through the server state, and the same call in the
    /// reference state with no server; asserts both recorded the same.
    fn both(&self, tool: &str, entry: &str) -> (Value, Value) {
        let extra: &[&str] = if self.autostart.get() {
            &[]
        } else {
            &["--server-idle", "0s"]
        };
        let served = self.hook_with(&self.state.clone(), extra, tool, entry);
        let plain = self.hook_with(&self.reference.clone(), &["--no-server"], tool, entry);
        assert_eq!(plain["server"], false);
        same_result(&served, &plain);
        (served, plain)
    }

    /// One request on the socket, as a raw peer would send it.
    fn raw(&self, request: Value) -> Value {
        let paths = self.paths().unwrap();
        let mut s = std::os::unix::net::UnixStream::connect(&paths.socket).unwrap();
        writeln!(s, "{request}").unwrap();
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    /// Waits until a server answers on the socket (the hook starts it
    /// detached); bounded by attempts, not by a timing assertion.
    fn wait_for_server(&self) -> Value {
        let paths = self.paths().unwrap();
        for _ in 0..600 {
            if let Ok(mut s) = std::os::unix::net::UnixStream::connect(&paths.socket) {
                writeln!(s, "{}", json!({"id": 1, "op": "ping"})).unwrap();
                let mut line = String::new();
                if BufReader::new(s).read_line(&mut line).is_ok() && !line.is_empty() {
                    return serde_json::from_str(&line).unwrap();
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("no server came up on {}", paths.socket.display());
    }
}

fn changed_set(v: &Value) -> BTreeSet<(String, String)> {
    v["snapshot"]["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["status"].as_str().unwrap().to_owned(),
                c["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn same_result(served: &Value, plain: &Value) {
    assert_eq!(
        served["snapshot"]["checkpoint"]["tree"], plain["snapshot"]["checkpoint"]["tree"],
        "tree differs: {served:#} vs {plain:#}"
    );
    assert_eq!(served["snapshot"]["created"], plain["snapshot"]["created"]);
    assert_eq!(changed_set(served), changed_set(plain));
    assert_eq!(served["project"], plain["project"]);
    if served["snapshot"]["created"] == true {
        for key in ["tool", "session", "entry"] {
            assert_eq!(
                served["snapshot"]["checkpoint"][key],
                plain["snapshot"]["checkpoint"][key]
            );
        }
    }
}

/// A small deterministic generator (no extra dependency).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn hook_through_a_warm_server_records_what_an_ordinary_snapshot_records() {
    let mut env = Env::new();
    // Both stores start from the same first checkpoint.
    env.both("Edit", "t0");
    let hello = env.start_server("120s");
    assert_eq!(hello["project"], json!(env.repo.dir));
    let mut rng = Lcg(7);
    let names = [
        "src/lib.rs",
        "README.md",
        "docs/guide.md",
        "a.txt",
        "src/new.rs",
        "target/x.o",
    ];
    for round in 0..40 {
        match rng.next(5) {
            0 | 1 => {
                let f = names[rng.next(names.len() as u64) as usize];
                env.repo.write(f, format!("round {round}\n"));
            }
            2 => {
                let f = names[rng.next(names.len() as u64) as usize];
                let _ = fs::remove_file(env.repo.dir.join(f));
            }
            3 => {
                env.repo
                    .write(format!("d{}/f{round}.txt", rng.next(3)), "new\n");
            }
            _ => {} // nothing changed: both reuse the last checkpoint
        }
        let tool = if round % 2 == 0 { "Edit" } else { "Bash" };
        let (served, _) = env.both(tool, &format!("t{}", round + 1));
        assert_eq!(served["server"], true, "round {round}: {served:#}");
    }
    let ping = env.raw(json!({"id": 9, "op": "ping"}));
    assert!(
        ping["ok"]["live"]["fast"].as_u64().unwrap() > 10,
        "the fast path was hardly used: {ping}"
    );
}

#[test]
fn hook_starts_a_server_on_first_use_which_exits_when_idle() {
    let env = Env::new();
    env.autostart.set(true);
    let paths = env.paths().unwrap();
    let first = env.hook_with(&env.state.clone(), &["--server-idle", "2s"], "Edit", "t1");
    assert_eq!(first["server"], false);
    let ping = env.wait_for_server();
    assert_eq!(ping["ok"]["project"], json!(env.repo.dir));
    env.repo.write("src/lib.rs", "pub fn b() {}\n");
    let second = env.hook_with(&env.state.clone(), &[], "Edit", "t2");
    assert_eq!(second["server"], true);
    assert_eq!(second["snapshot"]["created"], true);
    assert_eq!(
        changed_set(&second),
        BTreeSet::from([("M".to_owned(), "src/lib.rs".to_owned())])
    );
    // Idle: it removes its socket and exits (bounded wait on the socket).
    for _ in 0..600 {
        if !paths.socket.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!paths.socket.exists(), "idle server did not go away");
    let mode = fs::metadata(&paths.dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[test]
fn inotify_queue_overflow_falls_back_to_an_ordinary_snapshot() {
    let mut env = Env::new();
    env.both("Edit", "t0");
    env.start_server("120s");
    env.repo.write("src/lib.rs", "pub fn c() {}\n");
    env.both("Edit", "t1");
    let before = env.raw(json!({"id": 1, "op": "ping"}));
    // More events than the kernel queues (max_queued_events, 16384 by default).
    let limit: usize = fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16384);
    let dir = env.repo.dir.join("docs");
    for i in 0..(limit / 2 + 500) {
        fs::write(dir.join(format!("n{i}.txt")), format!("{i}\n")).unwrap();
    }
    let (served, _) = env.both("Bash", "t2");
    assert_eq!(served["server"], true);
    assert!(served["snapshot"]["changed"].as_array().unwrap().len() > limit / 2);
    let after = env.raw(json!({"id": 2, "op": "ping"}));
    assert!(
        after["ok"]["live"]["full"].as_u64() > before["ok"]["live"]["full"].as_u64(),
        "no fallback after the overflow: {before} -> {after}"
    );
    // And the watch is re-armed: the next small change is fast again.
    env.repo.write("README.md", "changed\n");
    env.both("Edit", "t3");
    env.repo.write("README.md", "changed again\n");
    env.both("Edit", "t4");
    let last = env.raw(json!({"id": 3, "op": "ping"}));
    assert!(last["ok"]["live"]["fast"].as_u64() > after["ok"]["live"]["fast"].as_u64());
}

#[test]
fn killed_server_and_its_stale_socket_fall_back_then_get_replaced() {
    let mut env = Env::new();
    env.both("Edit", "t0");
    let hello = env.start_server("120s");
    env.repo.write("a.txt", "1\n");
    let (served, _) = env.both("Edit", "t1");
    assert_eq!(served["server"], true);
    // SIGKILL: no cleanup, the socket stays behind.
    let pid = hello["pid"].as_i64().unwrap();
    let mut child = env.servers.pop().unwrap();
    assert_eq!(i64::from(child.id()), pid);
    child.kill().unwrap();
    child.wait().unwrap();
    let paths = env.paths().unwrap();
    assert!(paths.socket.exists(), "stale socket expected");
    env.autostart.set(true);
    env.repo.write("a.txt", "2\n");
    env.repo.write("b/c.txt", "3\n");
    let (fallback, _) = env.both("Edit", "t2");
    assert_eq!(fallback["server"], false);
    // The fallback started a new server, which replaced the stale socket.
    let ping = env.wait_for_server();
    assert_ne!(ping["ok"]["pid"].as_i64().unwrap(), pid);
    env.repo.write("a.txt", "3\n");
    let (again, _) = env.both("Bash", "t3");
    assert_eq!(again["server"], true);
}

#[test]
fn a_socket_left_by_someone_else_or_an_unsafe_folder_is_not_used() {
    let env = Env::new();
    env.autostart.set(true);
    let paths = env.paths().unwrap();
    fs::create_dir_all(&paths.dir).unwrap();
    fs::set_permissions(&paths.dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    // A stale socket nobody listens on (bound, then the listener dropped).
    drop(std::os::unix::net::UnixListener::bind(&paths.socket).unwrap());
    assert!(paths.socket.exists());
    env.repo.write("a.txt", "1\n");
    let (first, _) = env.both("Edit", "t1");
    assert_eq!(first["server"], false);
    env.wait_for_server();
    env.repo.write("a.txt", "2\n");
    assert_eq!(env.both("Edit", "t2").0["server"], true);

    // A folder opened to others: the hook refuses to talk through it.
    fs::set_permissions(&paths.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    env.repo.write("a.txt", "3\n");
    let (open, _) = env.both("Edit", "t3");
    assert_eq!(open["server"], false);
    fs::set_permissions(&paths.dir, std::fs::Permissions::from_mode(0o700)).unwrap();

    // A caller meaning another size cap is refused by the server, and falls back.
    env.repo.write("a.txt", "4\n");
    let capped = env.hook_with(
        &env.state.clone(),
        &["--max-file-size", "1MiB"],
        "Edit",
        "t4",
    );
    assert_eq!(capped["server"], false);
}

#[test]
fn something_else_at_the_socket_path_is_never_removed() {
    let env = Env::new();
    let paths = env.paths().unwrap();
    fs::create_dir_all(&paths.dir).unwrap();
    fs::set_permissions(&paths.dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(&paths.socket, "precious").unwrap();
    let out = env
        .bh(&env.state.clone())
        .args(["--json", "checkpoint", "serve", "--socket", "--idle", "5s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let err: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["kind"], "refused");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a socket")
    );
    assert_eq!(fs::read_to_string(&paths.socket).unwrap(), "precious");
    // The hook still checkpoints.
    let (hook, _) = env.both("Edit", "t1");
    assert_eq!(hook["server"], false);
    assert_eq!(fs::read_to_string(&paths.socket).unwrap(), "precious");
}

#[test]
fn a_peer_of_another_uid_is_refused() {
    if !nix::unistd::getuid().is_root() {
        eprintln!("skipped: needs root to run a peer as uid 65534");
        return;
    }
    let (Ok(setpriv), Ok(node)) = (which("setpriv"), which("node")) else {
        eprintln!("skipped: needs setpriv and node to run a foreign peer");
        return;
    };
    let mut env = Env::new();
    env.start_server("120s");
    let paths = env.paths().unwrap();
    let peer = |socket: &Path| {
        Command::new(&setpriv)
            .args([
                "--reuid",
                "65534",
                "--regid",
                "65534",
                "--clear-groups",
                "--",
            ])
            .arg(&node)
            .arg("-e")
            .arg(
                "const s=require('net').connect(process.argv[1]);let b='',err='';\
                 s.on('error',e=>{err=e.code});\
                 s.on('data',d=>{b+=d});\
                 s.on('close',()=>{console.log(b.trim()||('ERR '+err))})",
            )
            .arg(socket)
            .current_dir("/")
            .output()
            .unwrap()
    };
    // As deployed: the 0700 folder keeps the other uid from reaching the socket.
    let out = peer(&paths.socket);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ERR EACCES",
        "{out:?}"
    );
    // Even with the folder and socket opened up, SO_PEERCRED refuses it.
    fs::set_permissions(&env.repo.root, std::fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&env.state, std::fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&paths.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&paths.socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = peer(&paths.socket);
    let line: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(line["error"]["kind"], "refused", "{line}");
    // The server is still there for its owner.
    let ping = env.raw(json!({"id": 1, "op": "ping"}));
    assert_eq!(ping["ok"]["protocol"], 1);
}

fn which(name: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or(())
}

/// Drives `bh checkpoint serve` on stdio with `requests`, one answer each.
fn stdio(env: &Env, requests: &[Value]) -> Vec<Value> {
    let mut child = env
        .bh(&env.state.clone())
        .args(["checkpoint", "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut answers = Vec::new();
    for r in requests {
        writeln!(stdin, "{r}").unwrap();
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["id"], r["id"]);
        answers.push(v);
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    answers
}

#[test]
fn restore_to_entry_goes_back_to_before_the_first_call_after_it_even_when_debounced() {
    let env = Env::new();
    let snap = |id: u64, entry: &str| json!({"id": id, "op": "snapshot", "tool": "edit", "session": "S", "entry": entry});
    let a = stdio(&env, &[snap(1, "e2")]);
    assert_eq!(a[0]["ok"]["snapshot"]["created"], true);
    env.repo.write("a.txt", "after e2\n");
    // e4's call: something changed, a new checkpoint.
    let b = stdio(&env, &[snap(2, "e4")]);
    assert_eq!(b[0]["ok"]["snapshot"]["created"], true);
    // e6's call: e4's call changed nothing, so this reuses e4's checkpoint.
    let c = stdio(&env, &[snap(3, "e6")]);
    assert_eq!(c[0]["ok"]["snapshot"]["created"], false);
    env.repo.write("a.txt", "after e6\n");
    env.repo.write("new.txt", "made by e6\n");
    let branch = json!(["e1", "e2", "e3", "e4", "e5", "e6", "e7"]);
    let answers = stdio(
        &env,
        &[
            json!({"id": 4, "op": "restore_to_entry", "session": "S", "entry": "e5", "branch": branch}),
            json!({"id": 5, "op": "restore_to_entry", "session": "S", "entry": "e9", "branch": branch}),
            json!({"id": 6, "op": "restore_to_entry", "session": "other", "entry": "e5", "branch": branch}),
            json!({"id": 7, "op": "bogus"}),
        ],
    );
    // Back to what e6's call found: e4's checkpoint (debounced into).
    let r = &answers[0]["ok"];
    assert_eq!(
        r["checkpoint"]["commit"], b[0]["ok"]["snapshot"]["checkpoint"]["commit"],
        "{r:#}"
    );
    assert_eq!(env.repo.read("a.txt"), "after e2\n");
    assert!(
        !env.repo.dir.join("new.txt").exists(),
        "exact restore keeps no later file"
    );
    assert_eq!(answers[1]["error"]["kind"], "not_found");
    assert_eq!(answers[2]["ok"]["restore"], Value::Null);
    assert_eq!(answers[3]["error"]["kind"], "usage");
    // The restore is undoable: its safety checkpoint holds the later state.
    let safety = r["restore"]["safety"]["id"].as_str().unwrap().to_owned();
    let undo = stdio(
        &env,
        &[json!({"id": 8, "op": "restore", "checkpoint": safety, "exact": true})],
    );
    assert!(undo[0].get("ok").is_some(), "{:#}", undo[0]);
    assert_eq!(env.repo.read("a.txt"), "after e6\n");
    assert_eq!(env.repo.read("new.txt"), "made by e6\n");
}

#[test]
fn a_store_opened_up_after_the_server_started_is_refused_by_it_too() {
    let mut env = Env::new();
    let hello = env.start_server("120s");
    let ping = env.raw(json!({"id": 1, "op": "ping"}));
    let store = PathBuf::from(ping["ok"]["store"].as_str().unwrap());
    fs::set_permissions(&store, std::fs::Permissions::from_mode(0o777)).unwrap();
    let refused = env.raw(json!({"id": 2, "op": "snapshot", "tool": "x"}));
    assert_eq!(refused["error"]["kind"], "refused", "{refused}");
    // The hook falls back, and the ordinary path reports the unsafe store.
    let out = env
        .bh(&env.state.clone())
        .args(["checkpoint", "hook", "claude-code", "--server-idle", "0s"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            let event =
                json!({"hook_event_name": "PreToolUse", "tool_name": "Edit", "cwd": env.repo.dir});
            c.stdin
                .take()
                .unwrap()
                .write_all(event.to_string().as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("open to group or others"), "{stderr}");
    assert!(hello["pid"].as_u64().is_some());
}
