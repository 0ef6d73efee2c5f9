//! A retried model call is kept in the session as the real Pi 1.6 keeps it
//! (issue 27 item 16): the failed attempt's error message, a `context_edit`
//! that omits it from the model's context, then the retried answer. The real
//! Pi writes one against the mock model, `bh agent` the other against the same
//! responses; the entries after the prompt agree, and the real Pi loads bh's
//! file with the failed attempt left out of its context.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::pi_rpc;

use bh_test_support::mock_openai::{chunk, serve, usage};
use bh_test_support::pi::PiRelease;
use pi_rpc::{Run, entries, settled};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// A stream cut before its finish reason, then a whole answer.
fn responses() -> Vec<String> {
    let cut = chunk(json!({"role": "assistant", "content": "Half an ans"}), None);
    let whole = [
        chunk(
            json!({"role": "assistant", "content": "The whole answer."}),
            None,
        ),
        chunk(json!({}), Some("stop")),
        usage(10, 4),
    ]
    .concat();
    vec![cut, whole]
}

/// The entries from the first assistant message on, with what may differ
/// between two writers (ids, times, the model's names) left out.
fn after_prompt(file: &std::path::Path) -> Vec<Value> {
    let all = entries(file);
    let ids: Vec<Value> = all.iter().map(|e| e["id"].clone()).collect();
    let index = |id: &Value| ids.iter().position(|i| i == id);
    let first = all
        .iter()
        .position(|e| e["message"]["role"] == "assistant")
        .expect("an assistant message");
    all[first..]
        .iter()
        .map(|e| match e["type"].as_str() {
            Some("message") => json!({
                "type": "message",
                // The fields present (their values are the writers' own).
                "keys": e["message"].as_object().unwrap().keys().cloned().collect::<Vec<_>>(),
                "role": e["message"]["role"],
                "stopReason": e["message"]["stopReason"],
                "errorMessage": e["message"]["errorMessage"],
                "content": e["message"]["content"],
            }),
            Some("context_edit") => json!({
                "type": "context_edit",
                // Which entry it edits, by position; and whether it omits it.
                "target": index(&e["targetId"]),
                "parent": index(&e["parentId"]),
                "replacement": e["replacement"],
                "hasReplacement": e.get("replacement").is_some(),
            }),
            other => json!({"type": other}),
        })
        .collect()
}

#[test]
fn a_retried_call_is_kept_as_the_real_pi_keeps_it() {
    let release = PiRelease::Current;
    let Some(run) = Run::new(release) else {
        return;
    };
    // The real Pi (its default auto-retry: 3 attempts from 2 s).
    let mut rpc = run.start(responses());
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "answer"}));
    rpc.until("", settled(release));
    drop(rpc);
    let pi_file = run.session_file();
    let pi = after_prompt(&pi_file);
    assert!(
        pi.iter().any(|e| e["type"] == "context_edit"),
        "the real Pi kept no failed attempt: {pi:#?}"
    );

    // bh agent on the same responses.
    let (base, _seen) = serve(responses());
    let bh_file = run.tmp.join("bh.jsonl");
    let out = run
        .bh()
        .env("OPENAI_API_KEY", "k")
        .args([
            "--json",
            "agent",
            "--model",
            "openai/m",
            "--base-url",
            &base,
        ])
        .args(["--session", bh_file.to_str().unwrap(), "-p", "answer"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let bh = after_prompt(&bh_file);
    // Positions are from the files' starts: compare relative to the first
    // assistant message.
    let rel = |v: &[Value], file: &std::path::Path| {
        let first = entries(file)
            .iter()
            .position(|e| e["message"]["role"] == "assistant")
            .unwrap() as i64;
        v.iter()
            .map(|e| {
                let mut e = e.clone();
                for k in ["target", "parent"] {
                    if let Some(i) = e[k].as_i64() {
                        e[k] = json!(i - first);
                    }
                }
                e
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(rel(&bh, &bh_file), rel(&pi, &pi_file));

    // The real Pi loads bh's file; its context leaves the failed attempt out.
    let (mut cmd, _) = run.pi_cmd(Vec::new());
    cmd.args(["--mode", "rpc", "--session"])
        .arg(&bh_file)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"{\"id\":\"m\",\"type\":\"get_messages\"}\n")
            .unwrap();
        stdin.flush().unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut messages = None;
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
            let v: Value = serde_json::from_str(&line.unwrap()).unwrap_or(Value::Null);
            if v["id"] == "m" {
                messages = Some(v["data"]["messages"].clone());
                break;
            }
        }
        drop(stdin);
        let _ = child.kill();
        let _ = child.wait();
        let messages = messages.expect("Pi answered get_messages");
        let texts: Vec<&str> = messages
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .map(|m| m["content"][0]["text"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(texts, ["The whole answer."], "{messages:#}");
    }
}
