//! The same plans run both ways — over the base tree with no checkout (the
//! default) and in a detached worktree (`checkout`) — make the same tree,
//! and the model is told the same thing at every step (the forked sessions'
//! tool results, each run's worktree path aside).

use fs_err as fs;
use std::os::unix::fs::PermissionsExt;

use bh_exec::{RunResult, RunState, WorkMode, run_plan, write_plan};
use pretty_assertions::assert_eq;

use super::run::setup;
use super::{ENTRY, Fx, fx};

/// A base with exec bits, symlinks, binary files, odd names, ignore rules.
fn varied_base(big: bool) -> Fx {
    let f = fx();
    f.write("src/lib.rs", "pub fn a() {}\n");
    let script = f.write("tool.sh", "#!/bin/sh\necho base\n");
    fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    f.write("bin.dat", [0u8, 255, 1, 254, 0]);
    f.write("a dir/with space.txt", "spaced\n");
    f.write("line\nbreak.txt", "newline in the name\n");
    f.write(".gitignore", "*.log\ntarget/\n");
    if big {
        let block = "0123456789abcdef the base's fifty megabytes\n".repeat(1 << 10);
        f.write("big.txt", format!("FIRST LINE\n{}", block.repeat(1190)));
    }
    fs::os::unix::fs::symlink("src/lib.rs", f.dir.join("lib-link")).unwrap();
    fs::os::unix::fs::symlink("src", f.dir.join("src-link")).unwrap();
    f.commit_all("varied base");
    f
}

const SCRIPT: &str = r#"{"toolCalls": [{"name": "ls", "arguments": {}}, {"name": "read", "arguments": {"path": "lib-link"}}, {"name": "read", "arguments": {"path": "src-link/lib.rs"}}, {"name": "read", "arguments": {"path": "bin.dat"}}]}
{"toolCalls": [{"name": "edit", "arguments": {"path": "tool.sh", "edits": [{"oldText": "base", "newText": "edited"}]}}, {"name": "write", "arguments": {"path": "src/new/deep.rs", "content": "pub fn deep() {}\n"}}, {"name": "write", "arguments": {"path": "a dir/with space.txt", "content": "rewritten\n"}}]}
{"toolCalls": [{"name": "write", "arguments": {"path": "line\nbreak.txt", "content": "still odd\n"}}, {"name": "write", "arguments": {"path": "run.log", "content": "ignored\n"}}, {"name": "write", "arguments": {"path": "target/out.o", "content": "ignored dir\n"}}, {"name": "write", "arguments": {"path": "lib-link", "content": "through a link\n"}}, {"name": "edit", "arguments": {"path": "missing.rs", "edits": [{"oldText": "a", "newText": "b"}]}}]}
{"toolCalls": [{"name": "write", "arguments": {"path": "renamed.rs", "content": "pub fn a() {}\n"}}, {"name": "read", "arguments": {"path": "run.log"}}, {"name": "ls", "arguments": {"path": "src"}}, {"name": "ls", "arguments": {"path": "src/new"}}]}
{"text": "Done."}
"#;

const BIG_SCRIPT: &str = r#"{"toolCalls": [{"name": "read", "arguments": {"path": "big.txt", "offset": 1000000, "limit": 2}}, {"name": "edit", "arguments": {"path": "big.txt", "edits": [{"oldText": "FIRST LINE", "newText": "the first line, changed"}]}}]}
{"text": "Done."}
"#;

/// The tool results the forked session recorded, the worktree path made
/// neutral.
fn tool_results(result: &RunResult) -> Vec<serde_json::Value> {
    let wt = result
        .execution_dir
        .join(format!("wt-{}", result.execution_id));
    let text = fs::read_to_string(&result.forked_session)
        .unwrap()
        .replace(&wt.display().to_string(), "<worktree>");
    let all: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["message"]["role"] == "toolResult")
        .map(|v| {
            // The checkpoint ids are the checkout's bookkeeping (a virtual
            // run has nothing on disk to checkpoint), not the tool's answer.
            let mut details = v["message"]["details"].clone();
            if let Some(d) = details.as_object_mut() {
                d.remove("checkpoint");
                d.remove("checkpointAfter");
                if d.is_empty() {
                    details = serde_json::Value::Null;
                }
            }
            serde_json::json!({
                "content": v["message"]["content"],
                "details": details,
                "isError": v["message"]["isError"],
            })
        })
        .collect();
    // The run's own (the fork carries the conversation before it).
    all[all.len() - result.tool_calls as usize..].to_vec()
}

async fn both_ways(f: &Fx, script: &str) -> (RunResult, RunResult) {
    let mut out = Vec::new();
    for (i, checkout) in [true, false].into_iter().enumerate() {
        // Two plans (a plan runs once), the same conversation point and model.
        let mut req = f.request(ENTRY);
        req.prompt = format!("differential run {i}");
        let plan = f.plan(&req).unwrap();
        let path = f.root.join(format!("plan-{i}.json"));
        write_plan(&path, &plan, false).unwrap();
        let mut s = setup(f, script);
        s.checkout = checkout;
        let result = run_plan(&f.runner(), &path, &s).await.unwrap();
        assert_eq!(result.state, RunState::Committed, "{result:?}");
        out.push(result);
    }
    let virt = out.pop().unwrap();
    let checkout = out.pop().unwrap();
    assert_eq!(checkout.mode, WorkMode::Checkout);
    assert_eq!(virt.mode, WorkMode::Virtual);
    assert_eq!(tool_results(&virt), tool_results(&checkout));
    assert_eq!(virt.tree, checkout.tree, "the result trees differ");
    assert_eq!(virt.changed_paths, checkout.changed_paths);
    (checkout, virt)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn varied_plans_make_the_same_commit_tree_both_ways() {
    let f = varied_base(false);
    let (_, virt) = both_ways(&f, SCRIPT).await;
    let tree = virt.tree.unwrap();
    // Modes are the base's: the exec bit kept; new files 100644; links kept.
    let ls = f.git(&["ls-tree", "-r", &tree]);
    assert!(
        ls.contains("100755 blob") && ls.contains("\ttool.sh"),
        "{ls}"
    );
    assert!(
        ls.lines()
            .any(|l| l.starts_with("120000") && l.ends_with("\tlib-link")),
        "{ls}"
    );
    assert!(
        ls.lines()
            .any(|l| l.starts_with("100644") && l.ends_with("\tsrc/new/deep.rs")),
        "{ls}"
    );
    assert!(
        !ls.contains("run.log") && !ls.contains("target/"),
        "ignored files left out: {ls}"
    );
    assert_eq!(
        f.git(&["show", &format!("{tree}:tool.sh")]),
        "#!/bin/sh\necho edited"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifty_megabyte_file_is_edited_the_same_both_ways() {
    let f = varied_base(true);
    let (_, virt) = both_ways(&f, BIG_SCRIPT).await;
    assert_eq!(virt.changed_paths, vec!["M big.txt"]);
}
