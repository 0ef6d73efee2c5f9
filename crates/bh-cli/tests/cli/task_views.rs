//! `bh task list|ls`, `bh task show ID|DIR`, and `bh task run` showing the
//! worker's output live (escaped, `--quiet` to silence, never on stdout
//! with `--json`) while its logs stay bounded.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::path::PathBuf;
use std::process::Output;

use bh_test_support::TestRepo;
use serde_json::Value;

struct Env {
    t: TestRepo,
    w: bh_test_support::cli::World,
    state: PathBuf,
}

impl Env {
    fn new() -> Env {
        let t = TestRepo::new();
        t.write("src/lib.rs", "pub fn a() {}\n");
        t.commit_all("base");
        // HOME is the root here (not the repository's `home`).
        let w = crate::world_at(&t.root).with_home(&t.root);
        Env {
            state: w.state.clone(),
            w,
            t,
        }
    }

    fn bh(&self, args: &[&str]) -> Output {
        self.w.bh(&self.t.dir).args(args).output().unwrap()
    }

    /// `bh [--json] task run --module src [flags] -- sh -c SCRIPT`.
    fn run(&self, json: bool, flags: &[&str], script: &str) -> Output {
        let mut args = Vec::new();
        if json {
            args.push("--json");
        }
        args.extend(["task", "run", "--module", "src"]);
        args.extend(flags);
        args.extend(["--", "sh", "-c", script]);
        self.bh(&args)
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {}{}", stdout(o), stderr(o)))
}

const NOISY: &str = "echo from-stdout; printf 'esc \\033]0;title\\007 here\\n'; echo from-stderr >&2; \
                     i=0; while [ $i -lt 100000 ]; do echo l$i; i=$((i+1)); done; printf tail-no-newline";

#[test]
fn run_streams_the_worker_output_live_and_keeps_bounded_logs() {
    let env = Env::new();
    let o = env.run(false, &[], NOISY);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    // The worker's stdout on stdout, in order, before the report.
    let first = out.find("from-stdout\n").unwrap();
    let last = out.find("l99999\n").unwrap();
    let report = out.find("task ").unwrap();
    assert!(
        first < last && last < report,
        "{}",
        &out[..200.min(out.len())]
    );
    assert!(
        out.contains("tail-no-newline\n"),
        "the unfinished last line is shown"
    );
    assert_eq!(out.matches("\nl").count(), 100000);
    // Control characters are shown, not obeyed.
    assert!(out.contains("esc \\e]0;title\\x07 here"), "{}", &out[..200]);
    assert!(!out.contains('\u{1b}'));
    assert!(stderr(&o).contains("from-stderr"));
    assert!(!out.contains("from-stderr"));
    // The logs stay bounded.
    let list = json(&env.bh(&["--json", "task", "list"]));
    let dir = PathBuf::from(list["tasks"][0]["dir"].as_str().unwrap());
    let log = fs::read_to_string(dir.join("stdout.log")).unwrap();
    assert!(log.contains("bytes omitted") && log.len() < 600 * 1024);
}

#[test]
fn quiet_and_json_never_put_the_worker_on_stdout() {
    let env = Env::new();
    let o = env.run(false, &["--quiet"], NOISY);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stdout(&o).contains("from-stdout") && !stderr(&o).contains("from-stderr"));
    assert!(stdout(&o).starts_with("task "));

    let o = env.run(true, &[], NOISY);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc = json(&o);
    assert_eq!(doc["outcome"], "succeeded");
    let err = stderr(&o);
    assert!(err.contains("from-stdout\n") && err.contains("from-stderr\n"));

    let o = env.run(true, &["-q"], NOISY);
    assert_eq!(json(&o)["outcome"], "succeeded");
    assert!(!stderr(&o).contains("from-stdout"));
}

#[test]
fn list_and_show_by_id_prefix_or_folder() {
    let env = Env::new();
    let o = env.bh(&["--json", "task", "ls"]);
    assert!(o.status.success());
    assert_eq!(json(&o)["tasks"], serde_json::json!([]));
    assert!(stdout(&env.bh(&["task", "list"])).contains("no tasks"));

    let ok = json(&env.run(true, &["-q"], "echo fine > src/new.rs; exit 0"));
    let ok = ok.get("task").unwrap_or(&ok);
    let failed = json(&env.run(true, &["-q"], "exit 4"));
    let failed = failed.get("task").unwrap_or(&failed);
    let (a, b) = (ok["id"].as_str().unwrap(), failed["id"].as_str().unwrap());

    let list = json(&env.bh(&["--json", "task", "list"]));
    let tasks = list["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0]["id"], a);
    assert_eq!(tasks[1]["id"], b);
    assert_eq!(tasks[1]["outcome"], "failed");
    assert_eq!(tasks[1]["argv"], serde_json::json!(["sh", "-c", "exit 4"]));
    let human = stdout(&env.bh(&["task", "ls"]));
    assert!(
        human.contains(a) && human.contains("failed") && human.contains("exit 4"),
        "{human}"
    );

    // By id, by a prefix without the letter, and by folder (the old form).
    let o = env.bh(&["--json", "task", "show", b]);
    assert_eq!(json(&o)["outcome"], "failed");
    let o = env.bh(&["task", "show", &b[1..b.len() - 3]]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("exited with code 4"));
    let o = env.bh(&["task", "show", failed["artifacts"].as_str().unwrap()]);
    assert!(stdout(&o).contains("exited with code 4"));

    // Ambiguous (the time parts after the `-` of two tasks made minutes
    // apart share a prefix), unknown, too short, not a path.
    let time = |id: &str| id.split_once('-').unwrap().1.to_owned();
    let common: String = time(a)
        .chars()
        .zip(time(b).chars())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect();
    assert!(common.len() >= 4, "{a} {b}");
    let o = env.bh(&["task", "show", &common]);
    assert_eq!(o.status.code(), Some(10));
    assert!(
        stderr(&o).contains(a) && stderr(&o).contains(b),
        "{}",
        stderr(&o)
    );
    let o = env.bh(&["task", "show", "tffffffffffff"]);
    assert_eq!(o.status.code(), Some(4));
    let o = env.bh(&["--json", "task", "show", "t1"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(json(&o)["error"]["kind"], "usage");
    let o = env.bh(&["task", "show", "./no/such/folder"]);
    assert_eq!(o.status.code(), Some(4));

    // A task folder without a state yet: shown as unfinished.
    let tasks_dir = env.state.join("tasks");
    let pending = tasks_dir.join("t0000aaaa-0000bbbb");
    fs::create_dir_all(&pending).unwrap();
    fs::write(
        pending.join("task.json"),
        r#"{"id":"t0000aaaa-0000bbbb","argv":["make"],"base":"0123456789abcdef"}"#,
    )
    .unwrap();
    let o = env.bh(&["task", "show", "0000aaaa"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("no outcome yet"));
    assert!(stdout(&env.bh(&["task", "list"])).contains("unfinished"));
    // A state that is not one: invalid.
    fs::write(pending.join("state.json"), "{not json").unwrap();
    let o = env.bh(&["task", "show", "0000aaaa"]);
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
}

/// Issue 27.12: outcomes say what to do next — uncommitted work points to
/// `--commit`, a success gives the exact command that takes it (and it
/// works), no change says so.
#[test]
fn outcomes_say_what_to_do_next() {
    let env = Env::new();
    let o = env.run(false, &["-q"], "echo 'pub fn b() {}' >> src/lib.rs");
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("changed without committing them: run the task with --commit")
            && out.contains("kept under refs/better-harness/tasks/"),
        "{out}"
    );
    assert!(stderr(&o).contains("--commit"), "{}", stderr(&o));

    let o = env.run(
        false,
        &["-q"],
        "echo 'pub fn b() {}' >> src/lib.rs && git commit -qam b",
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let start = out
        .find("take the result with `")
        .unwrap_or_else(|| panic!("{out}"))
        + 22;
    let command = &out[start..start + out[start..].find('`').unwrap()];
    assert!(
        command.starts_with("git merge --ff-only refs/better-harness/tasks/t"),
        "{out}"
    );
    assert!(out.contains("or run the task with --promote"), "{out}");
    // The command as printed brings the result onto the branch.
    let ran = env
        .w
        .command("sh")
        .arg("-c")
        .arg(command)
        .current_dir(&env.t.dir)
        .env("HOME", &env.t.home)
        .output()
        .unwrap();
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(env.t.read("src/lib.rs").contains("fn b"));

    let o = env.run(false, &["-q"], "true");
    assert_eq!(o.status.code(), Some(0));
    assert!(
        stdout(&o).contains("the worker changed nothing"),
        "{}",
        stdout(&o)
    );
}

/// Every byte of the worker shown on bh's terminal — reasons quoting its
/// stderr, its file names, the error line, `task show` — is escaped like
/// the live echo: a worker cannot drive the terminal through them.
#[test]
fn the_workers_bytes_are_escaped_wherever_they_are_shown() {
    let env = Env::new();
    let o = env.run(
        false,
        &["-q"],
        r"printf 'boom \033]0;pwned\007 \033[2J\n' >&2; exit 3",
    );
    assert_eq!(o.status.code(), Some(9));
    let (out, err) = (stdout(&o), stderr(&o));
    for text in [&out, &err] {
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text:?}"
        );
    }
    assert!(out.contains(r"boom \e]0;pwned\x07 \e[2J"), "{out}");
    assert!(err.contains(r"boom \e]0;pwned\x07"), "{err}");
    // A file name with a bidirectional override, left uncommitted.
    let o = env.run(
        false,
        &["-q"],
        r"printf x > src/$(printf 'a\342\200\256b').rs",
    );
    assert_eq!(o.status.code(), Some(6));
    let out = stdout(&o);
    assert!(
        !out.contains('\u{202e}') && out.contains(r"a\u{202e}b.rs"),
        "{out}"
    );
    let list = json(&env.bh(&["--json", "task", "list"]));
    for task in list["tasks"].as_array().unwrap() {
        let o = env.bh(&["task", "show", task["id"].as_str().unwrap()]);
        let shown = stdout(&o);
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{7}') && !shown.contains('\u{202e}'),
            "{shown:?}"
        );
        assert!(
            shown.contains(r"\e]0;pwned") || shown.contains(r"\u{202e}"),
            "{shown}"
        );
    }
}
