//! Agent runtime benchmark (issue 4, "Speed"): `bh agent` and the real Pi
//! (the current 1.6 on its Node 22, and 0.73.1) side by side, served the same tool-call script by one local mock
//! OpenAI-compatible server on 127.0.0.1.
//!
//! ```text
//! cargo bench -p bh-cli --bench agent -- --rounds 5
//! ```
//!
//! Options: `--rounds N` (5), `--calls N` (200 tool calls per run),
//! `--long-turns N` (1000; 0 skips the memory run), `--long-pi` (also run Pi
//! for the long run), `--no-pi`, `--previous BH` (an earlier build of bh run
//! side by side with this one, both ways, with a this/previous ratio table:
//! how a refactor proves it made nothing slower).
//!
//! The script: turn `i` makes one tool call, cycling `write` (a new
//! `work/gK.txt`), `read` (it), `edit` (`value 0` → `value 1` in it), `ls src`;
//! the turn after the last call answers with plain text. The server picks the
//! turn from the request itself (assistant messages after the last user
//! message), streams it as SSE in the OpenAI Chat Completions format, and keeps
//! connections alive. Each run gets a fresh copy of a small Git repository.
//!
//! Every run is its own process under a `measure` wrapper (this binary again)
//! that reports wall time and `getrusage(RUSAGE_CHILDREN)` peak RSS. Variants:
//! `bh` (checkpoints on, as shipped), `bh --no-checkpoints` (what Pi does),
//! `pi 1.6.0` and `pi 0.73.1`. The harness overhead per tool call is `run_end.overhead` of bh's
//! JSON stream (the loop's own time per call, excluding model stream, tool and
//! checkpoint). The long run drives `bh` through `--long-turns` tool calls and
//! the server reads the client's `VmRSS` from `/proc` when turns 100 and N
//! are requested.
//!
//! Over 600 lines: one benchmark binary (mock server, both agents, report) kept whole so a run is read top to bottom.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("measure") => measure(&args[1..]),
        _ => orchestrate(&args),
    }
}

/// `measure OUT -- CMD ARGS…`: run with stdout to OUT, print `{"wall_ms","maxrss_kib"}`.
fn measure(args: &[String]) -> Result<()> {
    let out = args.first().context("measure: no output file")?;
    let cmd: Vec<&String> = args.iter().skip_while(|a| *a != "--").skip(1).collect();
    let (prog, rest) = cmd.split_first().context("measure: no command")?;
    let file = fs_err::File::create(out)?;
    let start = Instant::now();
    let res = Command::new(prog)
        .args(rest)
        .stdin(Stdio::null())
        .stdout(file.into_file())
        .stderr(Stdio::piped())
        .output()?;
    let wall = start.elapsed().as_secs_f64() * 1000.0;
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)?;
    if !res.status.success() {
        bail!("{prog} failed: {}", String::from_utf8_lossy(&res.stderr));
    }
    println!(
        "{}",
        json!({ "wall_ms": wall, "maxrss_kib": usage.max_rss() })
    );
    Ok(())
}

// ----- the mock server ----------------------------------------------------------

#[derive(Default)]
struct ServerState {
    /// Tool calls in the script (the turn after the last answers with text).
    calls: usize,
    /// Pid whose VmRSS is sampled when the given turns are requested.
    watch: Option<u32>,
    sample_at: Vec<usize>,
    samples: BTreeMap<usize, u64>,
    requests: usize,
}

type Shared = Arc<Mutex<ServerState>>;

fn serve() -> Result<(String, Shared)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let base = format!("http://{}/v1", listener.local_addr()?);
    let state: Shared = Arc::default();
    let st = state.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let st = st.clone();
            std::thread::spawn(move || {
                let _ = connection(conn, &st);
            });
        }
    });
    Ok((base, state))
}

fn vm_rss_kib(pid: u32) -> Option<u64> {
    let s = fs_err::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// One keep-alive connection: requests until EOF.
fn connection(conn: TcpStream, state: &Shared) -> Result<()> {
    conn.set_nodelay(true)?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut conn = conn;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line)? == 0 {
            return Ok(());
        }
        let mut len = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let lower = l.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = v.trim().parse()?;
            }
        }
        let mut body = vec![0; len];
        reader.read_exact(&mut body)?;
        if !request_line.contains("/chat/completions") {
            let msg = b"{\"error\":{\"message\":\"not found\"}}";
            write!(
                conn,
                "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                msg.len()
            )?;
            conn.write_all(msg)?;
            continue;
        }
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let step = step_of(&request);
        let calls = {
            let mut st = state.lock().unwrap();
            st.requests += 1;
            if st.sample_at.contains(&step)
                && let Some(rss) = st.watch.and_then(vm_rss_kib)
            {
                st.samples.insert(step, rss);
            }
            st.calls
        };
        let sse = turn_sse(step, calls);
        write!(
            conn,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ncontent-length: {}\r\n\r\n",
            sse.len()
        )?;
        conn.write_all(sse.as_bytes())?;
        conn.flush()?;
    }
}

/// Assistant messages after the last user message = turns already made.
fn step_of(request: &Value) -> usize {
    let msgs = request["messages"].as_array().map_or(&[][..], |v| v);
    let last_user = msgs.iter().rposition(|m| m["role"] == "user").unwrap_or(0);
    msgs[last_user..]
        .iter()
        .filter(|m| m["role"] == "assistant")
        .count()
}

/// The tool call of turn `i`.
fn tool_call(i: usize) -> (&'static str, Value) {
    let g = i / 4;
    let file = format!("work/g{g}.txt");
    match i % 4 {
        0 => {
            let mut content = format!("group {g}\nvalue 0\n");
            for l in 0..20 {
                content.push_str(&format!(
                    "line {l} of group {g}: lorem ipsum dolor sit amet\n"
                ));
            }
            ("write", json!({"path": file, "content": content}))
        }
        1 => ("read", json!({"path": file})),
        2 => (
            "edit",
            json!({"path": file, "edits": [{"oldText": "value 0", "newText": "value 1"}]}),
        ),
        _ => ("ls", json!({"path": "src"})),
    }
}

fn chunk(out: &mut String, delta: Value, finish: Option<&str>) {
    let v = json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1,
        "model": "mock", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    out.push_str(&format!("data: {v}\n\n"));
}

fn turn_sse(step: usize, calls: usize) -> String {
    let mut out = String::new();
    chunk(&mut out, json!({"role": "assistant", "content": ""}), None);
    let finish = if step < calls {
        let (name, args) = tool_call(step);
        let args = args.to_string();
        let (a, b) = args.split_at(args.len() / 2);
        chunk(
            &mut out,
            json!({"tool_calls": [{"index": 0, "id": format!("call_{step}"), "type": "function",
                "function": {"name": name, "arguments": a}}]}),
            None,
        );
        chunk(
            &mut out,
            json!({"tool_calls": [{"index": 0, "function": {"arguments": b}}]}),
            None,
        );
        "tool_calls"
    } else {
        chunk(&mut out, json!({"content": "Done: "}), None);
        chunk(
            &mut out,
            json!({"content": format!("{calls} tool calls made.")}),
            None,
        );
        "stop"
    };
    chunk(&mut out, json!({}), Some(finish));
    let usage = json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1,
        "model": "mock", "choices": [],
        "usage": {"prompt_tokens": 1000 + step * 100, "completion_tokens": 30, "total_tokens": 1030 + step * 100}});
    out.push_str(&format!("data: {usage}\n\ndata: [DONE]\n\n"));
    out
}

// ----- the orchestrator -------------------------------------------------------

struct Opts {
    rounds: usize,
    calls: usize,
    long_turns: usize,
    long_pi: bool,
    no_pi: bool,
    previous: Option<PathBuf>,
}

fn parse_opts(args: &[String]) -> Result<Opts> {
    let mut o = Opts {
        rounds: 5,
        calls: 200,
        long_turns: 1000,
        long_pi: false,
        no_pi: false,
        previous: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = |name: &str| -> Result<usize> {
            it.next()
                .with_context(|| format!("{name} needs a value"))?
                .parse()
                .with_context(|| format!("{name}: not a number"))
        };
        match a.as_str() {
            "--rounds" => o.rounds = num("--rounds")?,
            "--calls" => o.calls = num("--calls")?,
            "--long-turns" => o.long_turns = num("--long-turns")?,
            "--long-pi" => o.long_pi = true,
            "--no-pi" => o.no_pi = true,
            "--previous" => {
                let p = it.next().context("--previous needs a bh binary")?;
                o.previous = Some(fs_err::canonicalize(p)?);
            }
            "--bench" => {}
            other => bail!("unknown option {other}"),
        }
    }
    Ok(o)
}

fn git(dir: &Path, args: &[&str]) -> Result<()> {
    let st = bh_test_support::git_command()
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .stdout(Stdio::null())
        .status()?;
    if !st.success() {
        bail!("git {args:?} failed");
    }
    Ok(())
}

/// A small repository: README, a few sources, one commit.
fn make_repo(dir: &Path) -> Result<()> {
    fs_err::create_dir_all(dir.join("src"))?;
    fs_err::create_dir_all(dir.join("work"))?;
    fs_err::write(dir.join("README.md"), "# bench\n\nA small repository.\n")?;
    for i in 0..8 {
        fs_err::write(
            dir.join(format!("src/mod{i}.rs")),
            format!("pub fn f{i}() -> u32 {{\n    {i}\n}}\n"),
        )?;
    }
    fs_err::write(dir.join("work/.keep"), "")?;
    git(dir, &["init", "-q", "-b", "main"])?;
    git(dir, &["add", "."])?;
    git(dir, &["commit", "-q", "-m", "init"])?;
    Ok(())
}

/// A real Pi as `(node, dist/cli.js, label)`, installed from npm into the
/// target directory on first use with the Node it needs (Pi 1.6 on a Node
/// 22 from npm when the system's is older); `None` when Node or npm is
/// missing.
fn find_pi(release: PiRelease) -> Option<(PathBuf, PathBuf, String)> {
    let p = bh_test_support::pi::real_pi(release)?;
    let version = Command::new(&p.node)
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    Some((
        p.node,
        p.cli,
        format!("pi {} (Node {version})", release.version()),
    ))
}

use bh_test_support::pi::PiRelease;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Variant {
    Bh,
    BhNoCheckpoints,
    /// The binary given with `--previous` (the same work, side by side).
    BhPrevious,
    BhPreviousNoCheckpoints,
    /// The current Pi (1.6).
    Pi,
    /// Pi 0.73.1.
    PiLegacy,
}

impl Variant {
    fn is_pi(self) -> bool {
        matches!(self, Variant::Pi | Variant::PiLegacy)
    }

    fn is_previous(self) -> bool {
        matches!(self, Variant::BhPrevious | Variant::BhPreviousNoCheckpoints)
    }

    fn checkpoints(self) -> bool {
        !matches!(
            self,
            Variant::BhNoCheckpoints | Variant::BhPreviousNoCheckpoints
        )
    }

    fn release(self) -> Option<PiRelease> {
        match self {
            Variant::Pi => Some(PiRelease::Current),
            Variant::PiLegacy => Some(PiRelease::Legacy),
            _ => None,
        }
    }
}

struct Bench {
    tmp: PathBuf,
    template: PathBuf,
    agent_dir: PathBuf,
    home: PathBuf,
    bh: PathBuf,
    /// `--previous`: an earlier build of bh to compare with.
    previous: Option<PathBuf>,
    /// Each Pi found: (node, cli, label).
    pis: BTreeMap<Variant, (PathBuf, PathBuf, String)>,
    runs: usize,
}

const PROMPT: &str = "Work through the files as the tools direct.";

impl Bench {
    fn label(&self, v: Variant) -> String {
        match v {
            Variant::Bh => "bh agent (checkpoints on)".into(),
            Variant::BhNoCheckpoints => "bh agent --no-checkpoints".into(),
            Variant::BhPrevious => "previous bh (checkpoints on)".into(),
            Variant::BhPreviousNoCheckpoints => "previous bh --no-checkpoints".into(),
            _ => self
                .pis
                .get(&v)
                .map_or_else(|| format!("{v:?}"), |p| p.2.clone()),
        }
    }

    /// A fresh copy of the template repository and a session path.
    fn fresh(&mut self) -> Result<(PathBuf, PathBuf, PathBuf)> {
        self.runs += 1;
        let run = self.tmp.join(format!("run{}", self.runs));
        fs_err::create_dir_all(&run)?;
        let repo = run.join("repo");
        let st = Command::new("cp")
            .arg("-a")
            .arg(&self.template)
            .arg(&repo)
            .status()?;
        if !st.success() {
            bail!("cp failed");
        }
        Ok((repo, run.join("session.jsonl"), run.join("state")))
    }

    /// The command line of a variant (program, args), run in the repo.
    fn command(&self, v: Variant, session: &Path) -> Vec<String> {
        let s = session.display().to_string();
        let tools = "read,ls,edit,write";
        match v {
            Variant::Bh
            | Variant::BhNoCheckpoints
            | Variant::BhPrevious
            | Variant::BhPreviousNoCheckpoints => {
                let bin = match (&self.previous, v.is_previous()) {
                    (Some(p), true) => p,
                    _ => &self.bh,
                };
                let mut c = vec![
                    bin.display().to_string(),
                    "--json".into(),
                    "agent".into(),
                    "--model".into(),
                    "bench/mock".into(),
                    "--tools".into(),
                    tools.into(),
                    "--session".into(),
                    s,
                    "-p".into(),
                    PROMPT.into(),
                ];
                if !v.checkpoints() {
                    c.push("--no-checkpoints".into());
                }
                c
            }
            Variant::Pi | Variant::PiLegacy => {
                let (node, cli, _) = self.pis.get(&v).cloned().expect("pi");
                vec![
                    node.display().to_string(),
                    cli.display().to_string(),
                    "--mode".into(),
                    "json".into(),
                    "--model".into(),
                    "bench/mock".into(),
                    "--thinking".into(),
                    "off".into(),
                    "--tools".into(),
                    tools.into(),
                    "--no-extensions".into(),
                    "--no-skills".into(),
                    "--no-prompt-templates".into(),
                    "--no-themes".into(),
                    "--no-context-files".into(),
                    "--session".into(),
                    s,
                    "-p".into(),
                    PROMPT.into(),
                ]
            }
        }
    }

    fn env(&self, cmd: &mut Command, state: &Path) {
        cmd.env("HOME", &self.home)
            .env("PI_CODING_AGENT_DIR", &self.agent_dir)
            .env("BH_STATE_DIR", state)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("PI_OFFLINE", "1")
            .env("PI_TELEMETRY", "0")
            .env("PI_SKIP_VERSION_CHECK", "1")
            .env("NO_COLOR", "1")
            .env_remove("PI_CODING_AGENT_SESSION_DIR")
            .env_remove("XDG_STATE_HOME")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY");
    }

    /// One measured run: (wall ms, peak RSS KiB, the run's stdout file).
    fn run(&mut self, v: Variant, calls: usize) -> Result<(f64, u64, PathBuf)> {
        let (repo, session, state) = self.fresh()?;
        let out = session.with_extension("stdout");
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.arg("measure")
            .arg(&out)
            .arg("--")
            .args(self.command(v, &session))
            .current_dir(&repo);
        self.env(&mut cmd, &state);
        let res = cmd.output()?;
        if !res.status.success() {
            bail!(
                "{:?} failed: {}",
                v,
                String::from_utf8_lossy(&res.stderr).trim()
            );
        }
        let m: Value = serde_json::from_slice(&res.stdout)?;
        check(&repo, &session, calls).with_context(|| format!("{v:?}"))?;
        Ok((
            m["wall_ms"].as_f64().unwrap_or(0.0),
            m["maxrss_kib"].as_u64().unwrap_or(0),
            out,
        ))
    }
}

/// The run made every call: the session holds `calls` tool results and the
/// repository the last group's edit.
fn check(repo: &Path, session: &Path, calls: usize) -> Result<()> {
    let text = fs_err::read_to_string(session)
        .with_context(|| format!("no session at {}", session.display()))?;
    let mut results = 0;
    let mut errors = 0;
    for line in text.lines() {
        let v: Value = serde_json::from_str(line)?;
        if v["type"] == "message" && v["message"]["role"] == "toolResult" {
            results += 1;
            if v["message"]["isError"] == true {
                errors += 1;
            }
        }
    }
    if results != calls || errors != 0 {
        bail!("{results} tool results ({errors} errors), expected {calls}");
    }
    if calls >= 3 {
        let text = fs_err::read_to_string(repo.join("work/g0.txt"))?;
        if !text.contains("value 1") {
            bail!("the edit did not land");
        }
    }
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return 0.0;
    }
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn overhead_of(stdout: &Path) -> Option<Value> {
    let text = fs_err::read_to_string(stdout).ok()?;
    let last: Value = serde_json::from_str(text.lines().last()?).ok()?;
    (last["type"] == "run_end").then(|| last["overhead"].clone())
}

#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario, read top to bottom"
)]
fn orchestrate(args: &[String]) -> Result<()> {
    let o = parse_opts(args)?;
    let tmp = tempfile::tempdir()?;
    let root = fs_err::canonicalize(tmp.path())?;
    let (base, state) = serve()?;
    let agent_dir = root.join("agent");
    fs_err::create_dir_all(&agent_dir)?;
    fs_err::create_dir_all(root.join("home"))?;
    fs_err::write(
        agent_dir.join("models.json"),
        serde_json::to_string_pretty(&json!({"providers": {"bench": {
            "baseUrl": base, "api": "openai-completions", "apiKey": "bench-key",
            "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
            "models": [{"id": "mock", "reasoning": false, "input": ["text"],
                "contextWindow": 1000000, "maxTokens": 4096,
                "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}}]}}}))?,
    )?;
    let template = root.join("template");
    make_repo(&template)?;
    let mut pis = BTreeMap::new();
    if !o.no_pi {
        for v in [Variant::Pi, Variant::PiLegacy] {
            if let Some(p) = v.release().and_then(find_pi) {
                pis.insert(v, p);
            }
        }
        if pis.is_empty() {
            println!("note: Node or npm not found, so no real Pi: bh only");
        }
    }
    let mut b = Bench {
        tmp: root.clone(),
        template,
        agent_dir,
        home: root.join("home"),
        bh: PathBuf::from(env!("CARGO_BIN_EXE_bh")),
        previous: o.previous.clone(),
        pis,
        runs: 0,
    };
    let mut variants = vec![Variant::Bh, Variant::BhNoCheckpoints];
    if b.previous.is_some() {
        variants.extend([Variant::BhPrevious, Variant::BhPreviousNoCheckpoints]);
    }
    variants.extend(b.pis.keys().copied());

    // Side by side: each round runs every variant once.
    state.lock().unwrap().calls = o.calls;
    let mut walls: BTreeMap<Variant, Vec<f64>> = BTreeMap::new();
    let mut rss: BTreeMap<Variant, Vec<f64>> = BTreeMap::new();
    let mut overheads: BTreeMap<Variant, Vec<Value>> = BTreeMap::new();
    // One warm-up round (page cache, Node's compile cache), not counted.
    for &v in variants.iter().filter(|_| o.rounds > 0) {
        b.run(v, o.calls)?;
    }
    for round in 0..o.rounds {
        for &v in &variants {
            let (wall, kib, out) = b.run(v, o.calls)?;
            println!(
                "round {round}: {:<28} {wall:>9.0} ms {:>8.1} MiB",
                b.label(v),
                kib as f64 / 1024.0
            );
            walls.entry(v).or_default().push(wall);
            rss.entry(v).or_default().push(kib as f64 / 1024.0);
            if !v.is_pi()
                && let Some(oh) = overhead_of(&out)
            {
                overheads.entry(v).or_default().push(oh);
            }
        }
    }

    println!(
        "\n{} tool calls + 1 text turn per run, {} rounds (medians):\n",
        o.calls, o.rounds
    );
    println!(
        "| run | wall time | per tool call | peak RSS | harness overhead / call (median, p90; of which session appends) |"
    );
    println!("|---|---:|---:|---:|---:|");
    let mut results = json!({"calls": o.calls, "rounds": o.rounds, "runs": {}});
    let mut med = BTreeMap::new();
    for &v in &variants {
        let Some(w) = walls.get_mut(&v).map(|w| median(w)) else {
            continue;
        };
        let m = median(rss.get_mut(&v).unwrap());
        med.insert(v, (w, m));
        let oh = overheads.get(&v).map(|list| {
            let mut m50: Vec<f64> = list.iter().filter_map(|o| o["medianUs"].as_f64()).collect();
            let mut p90: Vec<f64> = list.iter().filter_map(|o| o["p90Us"].as_f64()).collect();
            let mut pers: Vec<f64> = list
                .iter()
                .filter_map(|o| o["persistMedianUs"].as_f64())
                .collect();
            (median(&mut m50), median(&mut p90), median(&mut pers))
        });
        println!(
            "| {} | {w:.0} ms | {:.2} ms | {m:.1} MiB | {} |",
            b.label(v),
            w / o.calls as f64,
            oh.map_or("—".to_owned(), |(a, p, f)| format!(
                "{a:.0} µs, {p:.0} µs (session appends: {f:.0} µs)"
            ))
        );
        results["runs"][format!("{v:?}")] = json!({"wall_ms": w, "peak_rss_mib": m,
            "overhead_median_us": oh.map(|x| x.0), "overhead_p90_us": oh.map(|x| x.1),
            "persist_median_us": oh.map(|x| x.2),
            "walls_ms": walls[&v], "rss_mib": rss[&v]});
    }
    if b.previous.is_some() {
        println!("\n| this build / previous build | wall time | peak RSS |\n|---|---:|---:|");
        for (v, p) in [
            (Variant::Bh, Variant::BhPrevious),
            (Variant::BhNoCheckpoints, Variant::BhPreviousNoCheckpoints),
        ] {
            let ((w, m), (pw, pm)) = (med[&v], med[&p]);
            println!("| {} | {:.2}× | {:.2}× |", b.label(v), w / pw, m / pm);
            results["previous"][format!("{v:?}")] =
                json!({"time_ratio": w / pw, "rss_ratio": m / pm});
        }
    }
    let pis: Vec<Variant> = variants.iter().copied().filter(|v| v.is_pi()).collect();
    if !pis.is_empty() {
        println!("\n| target | measured | limit |\n|---|---:|---:|");
    }
    for p in pis {
        let (pw, pm) = med[&p];
        for v in [Variant::Bh, Variant::BhNoCheckpoints] {
            let (w, m) = med[&v];
            println!(
                "| {}: {} time / bh time | {:.1}× | ≥ 3× |",
                b.label(v),
                b.label(p),
                pw / w
            );
            println!(
                "| {}: {} peak RSS / bh peak RSS | {:.1}× | ≥ 5× |",
                b.label(v),
                b.label(p),
                pm / m
            );
            results["targets"][format!("{p:?}/{v:?}")] =
                json!({"time_ratio": pw / w, "rss_ratio": pm / m});
        }
    }

    // Memory over a long run: VmRSS of the client when turns 100 and N are requested.
    if o.long_turns > 100 {
        let mut long = vec![Variant::Bh, Variant::BhNoCheckpoints];
        if b.previous.is_some() {
            long.extend([Variant::BhPrevious, Variant::BhPreviousNoCheckpoints]);
        }
        if o.long_pi {
            long.extend(b.pis.keys().copied());
        }
        println!(
            "\nMemory over {} turns (VmRSS when the model is asked for turn 100 and turn {}):\n",
            o.long_turns, o.long_turns
        );
        println!(
            "| run | RSS at turn 100 | RSS at turn {} | growth | wall time |",
            o.long_turns
        );
        println!("|---|---:|---:|---:|---:|");
        for v in long {
            let (repo, session, st) = b.fresh()?;
            let cmdline = b.command(v, &session);
            let mut cmd = Command::new(&cmdline[0]);
            cmd.args(&cmdline[1..])
                .current_dir(&repo)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            b.env(&mut cmd, &st);
            let started = Instant::now();
            let mut child = {
                let mut s = state.lock().unwrap();
                s.calls = o.long_turns;
                s.sample_at = (1..=10).map(|k| o.long_turns * k / 10).collect();
                s.sample_at.push(100);
                s.samples.clear();
                let child = cmd.spawn()?;
                s.watch = Some(child.id());
                child
            };
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                e.read_to_string(&mut err)?;
            }
            let status = child.wait()?;
            let wall = started.elapsed().as_secs_f64();
            if !status.success() {
                bail!("long {v:?} run failed: {err}");
            }
            check(&repo, &session, o.long_turns).with_context(|| format!("long {v:?}"))?;
            let s = state.lock().unwrap();
            let session_kib = fs_err::metadata(&session).map_or(0, |m| m.len()) / 1024;
            let curve: Vec<String> = s
                .samples
                .iter()
                .map(|(t, k)| format!("{t}: {:.1}", *k as f64 / 1024.0))
                .collect();
            println!(
                "(VmRSS MiB by turn: {}; session file {session_kib} KiB)",
                curve.join(", ")
            );
            let a = s.samples.get(&100).copied().unwrap_or(0) as f64 / 1024.0;
            let z = s.samples.get(&o.long_turns).copied().unwrap_or(0) as f64 / 1024.0;
            println!(
                "| {} | {a:.1} MiB | {z:.1} MiB | {:+.1} MiB ({:.2}×) | {wall:.1} s |",
                b.label(v),
                z - a,
                z / a.max(0.001)
            );
            results["long"][format!("{v:?}")] = json!({"turns": o.long_turns,
                "rss_100_mib": a, "rss_end_mib": z, "wall_s": wall, "session_kib": session_kib,
                "rss_by_turn_kib": s.samples});
        }
    }

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-results");
    fs_err::create_dir_all(&dir)?;
    fs_err::write(
        dir.join("agent.json"),
        serde_json::to_string_pretty(&results)?,
    )?;
    Ok(())
}
