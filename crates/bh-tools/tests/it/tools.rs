//! Happy paths and Pi's messages, tool by tool.

use std::time::Duration;

use bh_tools::{CancelToken, ContentBlock, Profile};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::common::{Sandbox, call};

#[test]
fn read_offset_limit_and_truncation() {
    let sb = Sandbox::new();
    let tb = sb.toolbox(Profile::Executor);
    let many: String = (1..=2500).map(|i| format!("{i}\n")).collect();
    sb.write("many.txt", &many);
    let r = call(&tb, "read", json!({"path": "many.txt"}));
    let t = r.text_content();
    assert!(
        t.ends_with("2000\n\n[Showing lines 1-2000 of 2501. Use offset=2001 to continue.]"),
        "{}",
        &t[t.len() - 100..]
    );
    assert_eq!(
        r.details.as_ref().unwrap()["truncation"]["truncatedBy"],
        "lines"
    );
    let r = call(&tb, "read", json!({"path": "many.txt", "offset": 2001}));
    assert!(r.text_content().starts_with("2001\n"));
    assert!(r.details.is_none());
    let r = call(&tb, "read", json!({"path": "many.txt", "offset": 9999}));
    assert!(r.is_error);
    assert_eq!(
        r.text_content(),
        "Offset 9999 is beyond end of file (2501 lines total)"
    );
    let r = call(
        &tb,
        "read",
        json!({"path": "many.txt", "offset": 3, "limit": 2}),
    );
    assert_eq!(
        r.text_content(),
        "3\n4\n\n[2497 more lines in file. Use offset=5 to continue.]"
    );

    // Byte limit.
    let wide: String = (0..100)
        .map(|_| format!("{}\n", "x".repeat(1000)))
        .collect();
    sb.write("wide.txt", &wide);
    let r = call(&tb, "read", json!({"path": "wide.txt"}));
    assert!(
        r.text_content()
            .ends_with("[Showing lines 1-51 of 101 (50.0KB limit). Use offset=52 to continue.]")
    );
    // First line too long.
    sb.write("line.txt", "y".repeat(60 * 1024));
    let r = call(&tb, "read", json!({"path": "line.txt"}));
    assert_eq!(
        r.text_content(),
        "[Line 1 is 60.0KB, exceeds 50.0KB limit. Use bash: sed -n '1p' line.txt | head -c 51200]"
    );
    assert!(!r.is_error);
}

#[test]
fn read_image_and_errors() {
    let sb = Sandbox::new();
    let tb = sb.toolbox(Profile::Executor);
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01";
    sb.write("img/p.png", png);
    let r = call(&tb, "read", json!({"path": "img/p.png"}));
    assert_eq!(r.content.len(), 2);
    assert_eq!(r.text_content(), "Read image file [image/png]");
    match &r.content[1] {
        ContentBlock::Image { data, mime_type } => {
            assert_eq!(mime_type, "image/png");
            use base64::Engine;
            assert_eq!(
                base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap(),
                png
            );
        }
        other => panic!("{other:?}"),
    }
    let r = call(&tb, "read", json!({"path": "img"}));
    assert!(r.is_error);
    assert_eq!(
        r.text_content(),
        "EISDIR: illegal operation on a directory, read"
    );
    let r = call(&tb, "read", json!({}));
    assert!(r.is_error);
    assert_eq!(
        r.text_content(),
        "Validation failed for tool \"read\":\n  - path: must have required property 'path'\n\nReceived arguments:\n{}"
    );
}

#[test]
fn write_creates_parents_and_counts_like_pi() {
    let sb = Sandbox::new();
    let tb = sb.toolbox(Profile::Executor);
    let r = call(
        &tb,
        "write",
        json!({"path": "a/b/c.txt", "content": "héllo 😀"}),
    );
    // JavaScript string length: é is 1, the emoji 2.
    assert_eq!(r.text_content(), "Successfully wrote 8 bytes to a/b/c.txt");
    assert_eq!(sb.read("a/b/c.txt"), "héllo 😀");
    let r = call(&tb, "write", json!({"path": "a/b/c.txt", "content": "x"}));
    assert!(!r.is_error);
    assert_eq!(sb.read("a/b/c.txt"), "x");
    let abs = sb.root.join("abs.txt");
    let r = call(&tb, "write", json!({"path": abs, "content": "ok"}));
    assert!(!r.is_error, "{r:?}");
    assert_eq!(sb.read("abs.txt"), "ok");
}

#[test]
fn edit_multi_crlf_bom_and_errors() {
    let sb = Sandbox::new();
    let tb = sb.toolbox(Profile::Executor);
    sb.write("f.txt", "\u{FEFF}one\r\ntwo\r\nthree\r\nfour\r\n");
    let r = call(
        &tb,
        "edit",
        json!({"path": "f.txt", "edits": [{"oldText": "four", "newText": "FOUR"}, {"oldText": "one\ntwo", "newText": "ONE\nTWO"}]}),
    );
    assert_eq!(
        r.text_content(),
        "Successfully replaced 2 block(s) in f.txt."
    );
    assert_eq!(sb.read("f.txt"), "\u{FEFF}ONE\r\nTWO\r\nthree\r\nFOUR\r\n");
    assert_eq!(
        r.details,
        Some(
            json!({"diff": "-1 one\n-2 two\n+1 ONE\n+2 TWO\n 3 three\n-4 four\n+4 FOUR", "firstChangedLine": 1})
        )
    );

    // edits as a JSON string (some models do this).
    let r = call(
        &tb,
        "edit",
        json!({"path": "f.txt", "edits": "[{\"oldText\":\"three\",\"newText\":\"3\"}]"}),
    );
    assert!(!r.is_error, "{r:?}");

    sb.write("d.txt", "x\nx\ny\n");
    let r = call(
        &tb,
        "edit",
        json!({"path": "d.txt", "edits": [{"oldText": "x", "newText": "z"}]}),
    );
    assert_eq!(
        r.text_content(),
        "Found 2 occurrences of the text in d.txt. The text must be unique. Please provide more context to make it unique."
    );
    let r = call(
        &tb,
        "edit",
        json!({"path": "d.txt", "edits": [{"oldText": "x\ny", "newText": "1"}, {"oldText": "y\n", "newText": "2"}]}),
    );
    assert_eq!(
        r.text_content(),
        "edits[0] and edits[1] overlap in d.txt. Merge them into one edit or target disjoint regions."
    );
    let r = call(&tb, "edit", json!({"path": "d.txt", "edits": []}));
    assert_eq!(
        r.text_content(),
        "Edit tool input is invalid. edits must contain at least one replacement."
    );
    let r = call(
        &tb,
        "edit",
        json!({"path": "nope.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
    );
    assert_eq!(
        r.text_content(),
        "Could not edit file: nope.txt. Error code: ENOENT."
    );
    assert_eq!(sb.read("d.txt"), "x\nx\ny\n");
}

#[test]
fn edit_diff_context_like_pi() {
    let sb = Sandbox::new();
    let tb = sb.toolbox(Profile::Executor);
    let text: String = (1..=20).map(|i| format!("l{i}\n")).collect();
    sb.write("c.txt", &text);
    let r = call(
        &tb,
        "edit",
        json!({"path": "c.txt", "edits": [{"oldText": "l10\n", "newText": "TEN\n"}]}),
    );
    assert_eq!(
        r.details.unwrap()["diff"],
        "    ...\n  6 l6\n  7 l7\n  8 l8\n  9 l9\n-10 l10\n+10 TEN\n 11 l11\n 12 l12\n 13 l13\n 14 l14\n    ..."
    );
}

#[test]
fn ls_sorted_with_dirs_and_dotfiles() {
    let sb = Sandbox::new();
    let tb = sb.toolbox(Profile::Executor);
    sb.write("b.txt", "");
    sb.write("A.md", "");
    sb.write(".env", "");
    sb.write("sub/x", "");
    sb.write("sub/.GIT/config", "");
    fs_err::create_dir_all(sb.root.join("empty")).unwrap();
    let r = call(&tb, "ls", json!({}));
    assert_eq!(r.text_content(), ".env\nA.md\nb.txt\nempty/\nsub/");
    assert_eq!(
        call(&tb, "ls", json!({"path": "empty"})).text_content(),
        "(empty directory)"
    );
    assert_eq!(call(&tb, "ls", json!({"path": "sub"})).text_content(), "x");
    let r = call(&tb, "ls", json!({"limit": 2}));
    assert_eq!(
        r.text_content(),
        ".env\nA.md\n\n[2 entries limit reached. Use limit=4 for more]"
    );
    assert_eq!(r.details, Some(json!({"entryLimitReached": 2})));
    let r = call(&tb, "ls", json!({"path": "nope"}));
    assert_eq!(
        r.text_content(),
        format!("Path not found: {}", sb.root.join("nope").display())
    );
    let r = call(&tb, "ls", json!({"path": "b.txt"}));
    assert_eq!(
        r.text_content(),
        format!("Not a directory: {}", sb.root.join("b.txt").display())
    );
}

#[test]
fn grep_formats_context_glob_and_gitignore() {
    let sb = Sandbox::new();
    let tb = sb.toolbox(Profile::Interactive);
    sb.write(".gitignore", "ignored/\n*.log\n");
    sb.write("src/a.rs", "fn a() {}\n// TODO one\nfn b() {}\n");
    sb.write("src/b.txt", "todo two\n");
    sb.write("ignored/c.rs", "TODO hidden\n");
    sb.write("x.log", "TODO log\n");
    sb.write("bin.dat", b"TODO\0binary");
    let r = call(&tb, "grep", json!({"pattern": "TODO"}));
    assert_eq!(r.text_content(), "src/a.rs:2: // TODO one");
    let r = call(
        &tb,
        "grep",
        json!({"pattern": "todo", "ignoreCase": true, "context": 1}),
    );
    assert_eq!(
        r.text_content(),
        // As Pi: the context may include the empty "line" after a final newline.
        "src/a.rs-1- fn a() {}\nsrc/a.rs:2: // TODO one\nsrc/a.rs-3- fn b() {}\nsrc/b.txt:1: todo two\nsrc/b.txt-2- "
    );
    let r = call(
        &tb,
        "grep",
        json!({"pattern": "todo", "ignoreCase": true, "glob": "*.txt"}),
    );
    assert_eq!(r.text_content(), "src/b.txt:1: todo two");
    let r = call(
        &tb,
        "grep",
        json!({"pattern": "fn a()", "literal": true, "path": "src"}),
    );
    assert_eq!(r.text_content(), "a.rs:1: fn a() {}");
    let r = call(
        &tb,
        "grep",
        json!({"pattern": "fn", "path": "src/a.rs", "limit": 1}),
    );
    assert_eq!(
        r.text_content(),
        "a.rs:1: fn a() {}\n\n[1 matches limit reached. Use limit=2 for more, or refine pattern]"
    );
    assert_eq!(r.details, Some(json!({"matchLimitReached": 1})));
    assert_eq!(
        call(&tb, "grep", json!({"pattern": "zzz"})).text_content(),
        "No matches found"
    );
    sb.write("long.txt", format!("{}\n", "k".repeat(600)));
    let r = call(&tb, "grep", json!({"pattern": "k+", "path": "long.txt"}));
    assert_eq!(
        r.text_content(),
        format!(
            "long.txt:1: {}... [truncated]\n\n[Some lines truncated to 500 chars. Use read tool to see full lines]",
            "k".repeat(500)
        )
    );
    assert!(call(&tb, "grep", json!({"pattern": "("})).is_error);
}

#[test]
fn find_globs_relative_to_search_dir() {
    let sb = Sandbox::new();
    let tb = sb.toolbox(Profile::Interactive);
    sb.write(".gitignore", "target/\n");
    sb.write("README.md", "");
    sb.write("docs/a.md", "");
    sb.write("docs/deep/b.md", "");
    sb.write("target/c.md", "");
    sb.write("src/x.spec.ts", "");
    let r = call(&tb, "find", json!({"pattern": "*.md"}));
    assert_eq!(r.text_content(), "README.md\ndocs/a.md\ndocs/deep/b.md");
    let r = call(&tb, "find", json!({"pattern": "*.md", "path": "docs"}));
    assert_eq!(r.text_content(), "a.md\ndeep/b.md");
    let r = call(&tb, "find", json!({"pattern": "src/**/*.spec.ts"}));
    assert_eq!(r.text_content(), "src/x.spec.ts");
    let r = call(&tb, "find", json!({"pattern": "src/*.spec.ts"}));
    assert_eq!(r.text_content(), "src/x.spec.ts");
    let r = call(&tb, "find", json!({"pattern": "*.md", "limit": 1}));
    assert_eq!(
        r.text_content(),
        "README.md\n\n[1 results limit reached. Use limit=2 for more, or refine pattern]"
    );
    assert_eq!(
        call(&tb, "find", json!({"pattern": "*.zz"})).text_content(),
        "No files found matching pattern"
    );
}

#[test]
fn bash_exit_codes_output_and_no_output() {
    let sb = Sandbox::new();
    let tb = sb.toolbox(Profile::Interactive);
    let r = call(&tb, "bash", json!({"command": "pwd"}));
    assert_eq!(r.text_content(), format!("{}\n", sb.root.display()));
    assert!(r.details.is_none());
    let r = call(&tb, "bash", json!({"command": "true"}));
    assert_eq!(r.text_content(), "(no output)");
    let r = call(&tb, "bash", json!({"command": "exit 7"}));
    assert!(r.is_error);
    assert_eq!(
        r.text_content(),
        "(no output)\n\nCommand exited with code 7"
    );
    // Byte truncation keeps the tail and saves everything.
    let r = call(
        &tb,
        "bash",
        json!({"command": "for i in $(seq 1 1200); do printf '%099d\\n' $i; done"}),
    );
    let t = r.text_content();
    assert!(
        t.ends_with(&format!(
            "[Showing lines 689-1201 of 1201 (50.0KB limit). Full output: {}]",
            r.details.as_ref().unwrap()["fullOutputPath"]
                .as_str()
                .unwrap()
        )),
        "{}",
        &t[t.len() - 200..]
    );
    let tr = &r.details.as_ref().unwrap()["truncation"];
    assert_eq!(tr["truncatedBy"], "bytes");
    assert_eq!(tr["totalBytes"], 120000);
}

/// `sleep` processes (host-wide) whose arguments contain `marker`: the
/// sandboxed shell's own pids are those of its PID namespace.
fn alive_with(marker: &str) -> usize {
    fs_err::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs_err::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                c.starts_with(b"sleep\0") && String::from_utf8_lossy(&c).contains(marker)
            }) && !fs_err::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s.contains(") Z "))
                .unwrap_or(true)
        })
        .count()
}

fn marker() -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("300.{}{n}", std::process::id() % 1000)
}

#[test]
fn bash_timeout_kills_the_whole_group() {
    let sb = Sandbox::new();
    let tb = sb.toolbox(Profile::Interactive);
    let m = marker();
    let r = call(
        &tb,
        "bash",
        json!({"command": format!("sleep {m} & setsid sleep {m} & echo started; exec sleep {m}"), "timeout": 1}),
    );
    assert!(r.is_error);
    assert_eq!(
        r.text_content(),
        "started\n\n\nCommand timed out after 1 seconds"
    );
    assert_eq!(alive_with(&m), 0, "a process of the command survived");
}

#[test]
fn bash_cancel_and_background_cleanup() {
    let sb = Sandbox::new();
    let tb = sb.toolbox(Profile::Interactive);
    let cancel = CancelToken::new();
    let c2 = cancel.clone();
    let pid_file = sb.root.join("fg.pid");
    let m = marker();
    // Cancel once the command runs (it has written its pid).
    let t = std::thread::spawn(move || {
        while fs_err::read_to_string(&pid_file).map_or(true, |t| t.trim().is_empty()) {
            std::thread::sleep(Duration::from_millis(10));
        }
        c2.cancel();
    });
    let r = tb.call_with_cancel(
        "bash",
        &json!({"command": format!("echo $$ > fg.pid; exec sleep {m}")}),
        &cancel,
    );
    t.join().unwrap();
    assert_eq!(r.text_content(), "Command aborted");
    assert_eq!(alive_with(&m), 0, "the cancelled command survived");
    // A background job (even a setsid one) left by a finished command does
    // not outlive it.
    let m = marker();
    let r = call(
        &tb,
        "bash",
        json!({"command": format!("sleep {m} & setsid sleep {m} & echo ok")}),
    );
    assert!(!r.is_error);
    assert_eq!(alive_with(&m), 0);
}

/// Runs `command` reporting updates; returns them with the result.
fn bash_with_updates(
    tb: &bh_tools::Toolbox,
    command: &str,
    on_each: &(dyn Fn(&bh_tools::ToolUpdate) + Send + Sync),
) -> (Vec<bh_tools::ToolUpdate>, bh_tools::ToolResult) {
    let updates = std::sync::Mutex::new(Vec::new());
    let record = |u: bh_tools::ToolUpdate| {
        on_each(&u);
        updates.lock().unwrap().push(u);
    };
    let r = tb
        .call_with_updates(
            "bash",
            &json!({ "command": command, "timeout": 60 }),
            &CancelToken::new(),
            Some(&record),
        )
        .unwrap();
    (updates.into_inner().unwrap(), r)
}

#[test]
fn bash_streams_its_output_while_it_runs() {
    let sb = Sandbox::new();
    let tb = sb.toolbox(Profile::Interactive);
    // The command waits for a file that only the update carrying "a" creates:
    // the update must arrive while the command still runs.
    let go = sb.root.join("go");
    let (updates, r) = bash_with_updates(
        &tb,
        "printf a; while [ ! -e go ]; do sleep 0.01; done; printf b",
        &|u| {
            if u.text_content() == "a" {
                fs_err::write(&go, "").unwrap();
            }
        },
    );
    assert!(!r.is_error, "{}", r.text_content());
    // The final result is what it always was.
    assert_eq!(
        r,
        call(&tb, "bash", json!({"command": "printf a; printf b"}))
    );
    assert_eq!(r.text_content(), "ab");
    // Pi's shapes: `{"content":[]}` first, then the output so far.
    assert_eq!(
        serde_json::to_value(&updates[0]).unwrap(),
        json!({"content": []})
    );
    let texts: Vec<String> = updates[1..].iter().map(|u| u.text_content()).collect();
    assert_eq!(texts.first().map(String::as_str), Some("a"), "{texts:?}");
    assert_eq!(texts.last().map(String::as_str), Some("ab"), "{texts:?}");
    assert_eq!(
        serde_json::to_value(updates.last().unwrap()).unwrap(),
        json!({"content": [{"type": "text", "text": "ab"}], "details": {}})
    );
    // Without a callback nothing changes either.
    let plain = tb
        .call_with_updates(
            "bash",
            &json!({"command": "printf a; printf b"}),
            &CancelToken::new(),
            None,
        )
        .unwrap();
    assert_eq!(plain, r);
}

#[test]
fn bash_updates_keep_the_truncation_limits() {
    let sb = Sandbox::new();
    let tb = sb.toolbox(Profile::Interactive);
    let limits = |updates: &[bh_tools::ToolUpdate]| {
        for u in updates {
            let t = u.text_content();
            assert!(t.len() <= 50 * 1024, "{} bytes", t.len());
            assert!(t.split('\n').count() <= 2000, "{} lines", t.lines().count());
        }
    };
    // Lines: 3000 short lines, streamed in bursts.
    let (updates, r) = bash_with_updates(
        &tb,
        "for i in $(seq 1 3000); do echo \"line $i\"; if [ $((i % 1000)) = 0 ]; then sleep 0.05; fi; done",
        &|_| {},
    );
    limits(&updates);
    let last = updates.last().unwrap();
    let details = last.details.as_ref().unwrap();
    assert_eq!(details["truncation"]["truncatedBy"], "lines");
    assert_eq!(details["truncation"]["totalLines"], 3001);
    assert_eq!(
        details["fullOutputPath"],
        r.details.as_ref().unwrap()["fullOutputPath"]
    );
    // The last update is the final text without its notice.
    let final_text = r.text_content();
    assert!(final_text.starts_with(&last.text_content()));
    assert!(
        final_text[last.text_content().len()..]
            .starts_with("\n\n[Showing lines 1002-3001 of 3001.")
    );
    // Bytes: one 200 KB line is cut to its last 50 KB.
    let (updates, r) = bash_with_updates(
        &tb,
        "head -c 100000 /dev/zero | tr '\\0' x; sleep 0.05; head -c 100000 /dev/zero | tr '\\0' y",
        &|_| {},
    );
    limits(&updates);
    let last = updates.last().unwrap();
    assert_eq!(
        last.details.as_ref().unwrap()["truncation"]["lastLinePartial"],
        true
    );
    assert!(r.text_content().starts_with(&last.text_content()));
}
