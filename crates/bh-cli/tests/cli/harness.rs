//! The hermetic harness itself (`bh_test_support::cli`), through the built
//! `bh`: run under a parent whose environment leaks everything a developer's
//! shell or a hook may hold (provider keys, `GIT_DIR`, `BH_*`, XDG, `CI`),
//! `bh` and the agent's bash see none of it.

use serde_json::Value;

const CHILD: &str = "BH_CLI_HARNESS_LEAK_CHILD";
const LEAK: &str = "LEAKED-c41e";

#[test]
fn bh_in_a_world_sees_nothing_of_a_leaky_parent() {
    if std::env::var_os(CHILD).is_none() {
        // The test binary again, this test only, with the leaks set: a
        // test process cannot set its own environment safely (tests run in
        // parallel threads), a child can have any.
        let leak_path = format!("/nonexistent-{LEAK}");
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "harness::bh_in_a_world_sees_nothing_of_a_leaky_parent",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .env("OPENAI_API_KEY", LEAK)
            .env("ANTHROPIC_API_KEY", LEAK)
            .env("GIT_DIR", &leak_path)
            .env("GIT_WORK_TREE", &leak_path)
            .env("GIT_INDEX_FILE", &leak_path)
            .env("BH_STATE_DIR", &leak_path)
            .env("BH_CONFIG", &leak_path)
            .env("BH_TASK_SESSION", LEAK)
            .env("BH_CHECKPOINT_NO_SERVER", LEAK)
            .env("PI_CODING_AGENT_DIR", &leak_path)
            .env("CLAUDE_PROJECT_DIR", &leak_path)
            .env("XDG_CONFIG_HOME", &leak_path)
            .env("XDG_STATE_HOME", &leak_path)
            .env("NO_COLOR", LEAK)
            .env("TERM", LEAK)
            .env("CI", LEAK)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "the leaky child run: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let w = crate::world();
    let repo = w.root.join("repo");
    fs_err::create_dir_all(&repo).unwrap();
    w.git(&repo, &["init", "-q", "-b", "main"]);
    w.git(&repo, &["commit", "-q", "--allow-empty", "-m", "init"]);
    // The agent's bash prints the environment bh gave it.
    let script =
        serde_json::json!({"toolCalls": [{"name": "bash", "arguments": {"command": "env"}}]});
    fs_err::write(
        w.root.join("env.jsonl"),
        format!("{script}\n{{\"text\": \"ok\"}}\n"),
    )
    .unwrap();
    let out = w
        .bh(&repo)
        .args(["--json", "agent", "--script", "../env.jsonl", "-p", "go"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        !stdout.contains(LEAK) && !stderr.contains(LEAK),
        "{stdout}{stderr}"
    );
    let end = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["type"] == "tool_execution_end")
        .unwrap();
    let seen = end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        seen.contains(&format!("BH_STATE_DIR={}", w.state.display())),
        "{seen}"
    );
    assert!(
        seen.contains(&format!("HOME={}", w.home.display())),
        "{seen}"
    );
    for name in ["GIT_DIR", "XDG_CONFIG_HOME", "CI", "TERM", "NO_COLOR"] {
        assert!(
            !seen.lines().any(|l| l.starts_with(&format!("{name}="))),
            "{name} reached the agent's bash: {seen}"
        );
    }
}
