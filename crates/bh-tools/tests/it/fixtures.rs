//! Results compared with what Pi 0.73.1 stored for the same calls
//! (`tests/fixtures/pi-0.73.1-tool-results.jsonl`, copied from the Pi session corpus).

use bh_tools::Profile;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::Sandbox;

const RESULTS: &str = include_str!("../fixtures/pi-0.73.1-tool-results.jsonl");
const PI_REPOS: &str = "/home/dev/pi-corpus/v0.73.1/repos/";

struct Row {
    scenario: String,
    name: String,
    arguments: Value,
    result: Value,
}

fn rows(scenario: &str) -> Vec<Row> {
    RESULTS
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["scenario"] == scenario)
        .map(|v| Row {
            scenario: v["scenario"].as_str().unwrap().to_string(),
            name: v["name"].as_str().unwrap().to_string(),
            arguments: v["arguments"].clone(),
            result: v["result"].clone(),
        })
        .collect()
}

/// Runs each row and compares the stored result, after replacing our root
/// (and any bash log path) with Pi's.
fn check(sb: &Sandbox, scenario: &str, skip: &[&str]) {
    let tb = sb.toolbox(Profile::Interactive);
    let mut n = 0;
    for row in rows(scenario) {
        if skip.contains(&row.name.as_str()) {
            continue;
        }
        let got = tb.call(&row.name, &row.arguments);
        let mut text = serde_json::to_string(&got).unwrap();
        text = text.replace(
            sb.root.to_str().unwrap(),
            &format!("{PI_REPOS}{}", row.scenario),
        );
        if let Some(p) = got
            .details
            .as_ref()
            .and_then(|d| d.get("fullOutputPath"))
            .and_then(Value::as_str)
        {
            let pi_path = row.result["details"]["fullOutputPath"].as_str().unwrap();
            text = text.replace(p, pi_path);
        }
        let got: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            got, row.result,
            "{scenario}: {} {}",
            row.name, row.arguments
        );
        n += 1;
    }
    assert!(n > 0);
}

#[test]
fn s02_write_read_edit() {
    let sb = Sandbox::new();
    // `ls` is not in Pi's default tools there, and `bash` runs git status.
    check(&sb, "s02-tools-json-mode", &["ls", "bash"]);
    assert_eq!(sb.read("notes/todo.txt"), "alpha\nBETA\ngamma\n");
}

#[test]
fn s03_tool_errors() {
    let sb = Sandbox::new();
    sb.write("README.md", "# s03\n\nSome readme text.\n");
    check(&sb, "s03-tool-errors", &[]);
}

#[test]
fn s13_output_truncation() {
    let sb = Sandbox::new();
    let big: String = (1..=100).map(|i| format!("line {i}\n")).collect();
    sb.write("big.txt", big);
    check(&sb, "s13-output-truncation", &[]);
    // The full output was saved.
    let logs: Vec<_> = fs_err::read_dir(&sb.out).unwrap().flatten().collect();
    assert_eq!(logs.len(), 1);
    let full = fs_err::read_to_string(logs[0].path()).unwrap();
    let expected: String = (1..=3000).map(|i| format!("{i}\n")).collect();
    assert_eq!(full, expected);
}

#[test]
fn s14_grep_find_ls() {
    let sb = Sandbox::new();
    sb.write(
        "README.md",
        "# Corpus repo\n\nhello from the corpus generator\n",
    );
    sb.write("src/hello.py", "print('hello')\n");
    sb.write("big.txt", "x\n");
    sb.write("pixel.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    fs_err::create_dir_all(sb.root.join(".git")).unwrap();
    check(&sb, "s14-all-builtin-tools", &["ls"]);
    // Divergence from Pi: `.git` is never listed (no tool can open it).
    let tb = sb.toolbox(Profile::Interactive);
    let got = tb.call("ls", &json!({"path": "."}));
    assert_eq!(got.text_content(), "big.txt\npixel.png\nREADME.md\nsrc/");
    assert_eq!(
        rows("s14-all-builtin-tools")
            .iter()
            .find(|r| r.name == "ls")
            .unwrap()
            .result["content"][0]["text"],
        ".git/\nbig.txt\npixel.png\nREADME.md\nsrc/"
    );
}

#[test]
fn s15_legacy_edit_args() {
    let sb = Sandbox::new();
    check(&sb, "s15-legacy-edit-args", &[]);
    assert_eq!(sb.read("notes/legacy.txt"), "one\nTWO\n");
}

#[test]
fn specs_are_exactly_what_pi_sends() {
    let sent: Value =
        serde_json::from_str(include_str!("../fixtures/tool-schemas-as-sent.json")).unwrap();
    for tool in sent["tools"].as_array().unwrap() {
        let f = &tool["function"];
        let name = f["name"].as_str().unwrap();
        let spec = bh_tools::all_specs()
            .into_iter()
            .find(|s| s.name == name)
            .unwrap();
        assert_eq!(spec.description, f["description"].as_str().unwrap());
        assert_eq!(spec.parameters(), f["parameters"]);
        // Byte-exact, in Pi's key order.
        let compact = serde_json::to_string(&spec.parameters_raw().unwrap()).unwrap();
        assert_eq!(compact, spec.parameters_json);
        assert!(compact.starts_with(r#"{"type":"object""#), "{compact}");
    }
    assert_eq!(sent["tools"].as_array().unwrap().len(), 7);
}

#[test]
fn profiles() {
    let names = |p: Profile| p.specs().iter().map(|s| s.name).collect::<Vec<_>>();
    assert_eq!(names(Profile::Executor), ["read", "ls", "edit", "write"]);
    assert_eq!(
        names(Profile::Interactive),
        ["read", "ls", "edit", "write", "bash", "grep", "find"]
    );
    for (name, mutating) in [
        ("read", false),
        ("ls", false),
        ("edit", true),
        ("write", true),
        ("bash", true),
        ("grep", false),
        ("find", false),
    ] {
        assert_eq!(bh_tools::is_mutating(name), mutating, "{name}");
    }
    let sb = Sandbox::new();
    let tb = sb.toolbox(Profile::Executor);
    let r = tb.call("bash", &json!({"command": "echo hi"}));
    assert!(r.is_error);
    assert_eq!(r.text_content(), "Tool bash not found");
    assert_eq!(r.details, Some(json!({})));
}

#[test]
fn to_message_matches_pi_tool_result_shape() {
    let sb = Sandbox::new();
    let tb = sb.toolbox(Profile::Executor);
    let r = tb.call(
        "write",
        &json!({"path": "notes/todo.txt", "content": "alpha\nbeta\ngamma\n"}),
    );
    let msg = r.to_message("call_tools_0_2_0", "write", 1796033395993);
    assert_eq!(
        serde_json::to_string(&msg).unwrap(),
        r#"{"role":"toolResult","toolCallId":"call_tools_0_2_0","toolName":"write","content":[{"type":"text","text":"Successfully wrote 17 bytes to notes/todo.txt"}],"isError":false,"timestamp":1796033395993}"#
    );
    let r = tb.call("nope", &json!({}));
    let msg = r.to_message("c1", "nope", 1);
    assert_eq!(
        serde_json::to_string(&msg).unwrap(),
        r#"{"role":"toolResult","toolCallId":"c1","toolName":"nope","content":[{"type":"text","text":"Tool nope not found"}],"details":{},"isError":true,"timestamp":1}"#
    );
}

#[test]
fn toolbox_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<bh_tools::Toolbox>();
    check::<bh_tools::CancelToken>();
}
