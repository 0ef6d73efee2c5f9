//! `bh_git::object` against git itself: the bytes it encodes hash to what
//! `git mktree` and `git commit-tree` write, and it parses what git stores.

use std::io::Write;
use std::process::Stdio;

use bh_git::object::{self, MODE_SYMLINK, MODE_TREE};
use pretty_assertions::assert_eq;

fn git(dir: &std::path::Path, args: &[&str], input: &[u8], env: &[(&str, &str)]) -> Vec<u8> {
    let mut child = bh_test_support::git_command()
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "git {args:?}");
    out.stdout
}

fn trim(v: Vec<u8>) -> String {
    String::from_utf8(v).unwrap().trim_end().to_owned()
}

#[test]
fn trees_and_commits_match_git() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    git(dir, &["init", "-q", "--bare", "."], b"", &[]);
    let blob = trim(git(dir, &["hash-object", "-w", "--stdin"], b"hello\n", &[]));
    let link = trim(git(dir, &["hash-object", "-w", "--stdin"], b"target", &[]));
    let empty_tree = trim(git(dir, &["mktree"], b"", &[]));
    let sub = trim(git(
        dir,
        &["mktree", "-z"],
        format!("100644 blob {blob}\tinner\0").as_bytes(),
        &[],
    ));
    // names that sort differently as trees ("a" < "a.txt" < "a/") and bytes
    let entries: Vec<(&[u8], u32, &str)> = vec![
        (b"a.txt", 0o100644, &blob),
        (b"a", MODE_TREE, &sub),
        (b"a-b", 0o100755, &blob),
        (b"link", MODE_SYMLINK, &link),
        (b"new\nline \xff", 0o100644, &blob),
        (b"z", MODE_TREE, &empty_tree),
    ];
    let mut listing = Vec::new();
    for (name, mode, oid) in &entries {
        let kind = if *mode == MODE_TREE { "tree" } else { "blob" };
        listing.extend_from_slice(format!("{mode:06o} {kind} {oid}\t").as_bytes());
        listing.extend_from_slice(name);
        listing.push(0);
    }
    let by_mktree = trim(git(dir, &["mktree", "-z"], &listing, &[]));
    let bytes = object::encode_tree(entries.iter().copied()).unwrap();
    let by_us = trim(git(
        dir,
        &["hash-object", "-t", "tree", "-w", "--stdin"],
        &bytes,
        &[],
    ));
    assert_eq!(by_us, by_mktree);
    // and back: git's stored bytes parse to the same entries, in git's order
    let stored = git(dir, &["cat-file", "tree", &by_mktree], b"", &[]);
    let parsed = object::parse_tree(&stored).unwrap();
    let names: Vec<&[u8]> = parsed.iter().map(|e| e.name.as_slice()).collect();
    assert_eq!(
        names,
        vec![
            &b"a-b"[..],
            b"a.txt",
            b"a",
            b"link",
            b"new\nline \xff",
            b"z"
        ]
    );
    assert_eq!(
        object::encode_tree(
            parsed
                .iter()
                .map(|e| (e.name.as_slice(), e.mode, e.oid.as_str()))
        )
        .unwrap(),
        stored
    );

    let who = object::ident(
        "Better Harness",
        "checkpoints@better-harness.invalid",
        1_700_000_000,
        "+0000",
    );
    let message = "checkpoint before x\n\nBh-Seq: 1\n";
    let env = [
        ("GIT_AUTHOR_NAME", "Better Harness"),
        ("GIT_AUTHOR_EMAIL", "checkpoints@better-harness.invalid"),
        ("GIT_COMMITTER_NAME", "Better Harness"),
        ("GIT_COMMITTER_EMAIL", "checkpoints@better-harness.invalid"),
        ("GIT_AUTHOR_DATE", "@1700000000 +0000"),
        ("GIT_COMMITTER_DATE", "@1700000000 +0000"),
    ];
    let root = trim(git(
        dir,
        &["commit-tree", &by_mktree],
        message.as_bytes(),
        &env,
    ));
    let ours = object::encode_commit(&by_mktree, &[], &who, &who, message).unwrap();
    let ours = trim(git(
        dir,
        &["hash-object", "-t", "commit", "-w", "--stdin"],
        &ours,
        &[],
    ));
    assert_eq!(ours, root);
    let child = trim(git(
        dir,
        &["commit-tree", &sub, "-p", &root],
        message.as_bytes(),
        &env,
    ));
    let ours = object::encode_commit(&sub, &[&root], &who, &who, message).unwrap();
    let ours = trim(git(
        dir,
        &["hash-object", "-t", "commit", "--stdin"],
        &ours,
        &[],
    ));
    assert_eq!(ours, child);
}
