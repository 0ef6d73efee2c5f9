//! The virtual worktree against the checkout it stands for: the same tool
//! calls on a detached worktree of the base (through `bh_tools::Root`) and
//! on a [`VirtualTree`] of the same tree named by the same path give the
//! same results, byte for byte, and the same result tree (`git add -A` in the
//! checkout, filters off, against `VirtualTree::tree`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use bh_git::Scope;
use bh_test_support::TestRepo;
use bh_tools::{Profile, ToolResult, Toolbox, ToolboxOptions};
use bh_vfs::VirtualTree;
use fs_err as fs;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// A base with every kind of entry the tools meet.
fn base(repo: &TestRepo, big: bool) -> String {
    repo.write("a.txt", "alpha\nbeta\n");
    repo.write("sub/b.txt", "in sub\n");
    repo.write("sub/deeper/c.txt", "deep\n");
    repo.write("with space.txt", "spaced\n");
    repo.write("new\nline.txt", "odd name\n");
    repo.write("crlf.txt", "one\r\ntwo\r\n");
    repo.write("bom.txt", "\u{FEFF}bom line\n");
    repo.write("bin.dat", [0u8, 159, 146, 150, 0, 1, 2, 255]);
    repo.write("image.png", b"\x89PNG\r\n\x1a\n0000");
    repo.write(".gitignore", "*.log\nbuild/\n");
    repo.write("sub/.gitignore", "local-only.txt\n");
    repo.write("tracked.log", "tracked even though ignored\n");
    let long: String = (1..=3000).map(|i| format!("line {i}\n")).collect();
    repo.write("long.txt", long);
    let script = repo.write("run.sh", "#!/bin/sh\necho hi\n");
    fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    if big {
        let mut bytes = Vec::with_capacity(50 << 20);
        let mut i = 0u32;
        while bytes.len() < 50 << 20 {
            bytes.extend_from_slice(format!("{i:08} the fifty megabyte file\n").as_bytes());
            i += 1;
        }
        repo.write("big.txt", bytes);
    }
    fs::os::unix::fs::symlink("a.txt", repo.dir.join("link")).unwrap();
    fs::os::unix::fs::symlink("sub", repo.dir.join("dirlink")).unwrap();
    repo.git(&["add", "-A", "-f"]);
    // A submodule (a gitlink whose commit this repository does not have).
    repo.git(&[
        "update-index",
        "--add",
        "--cacheinfo",
        "160000,1234567890123456789012345678901234567890,module",
    ]);
    repo.git(&["commit", "-q", "-m", "base"]);
    repo.git(&["rev-parse", "HEAD^{tree}"])
}

fn checkout(repo: &TestRepo, at: &Path) {
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        at.to_str().unwrap(),
        "HEAD",
    ]);
}

/// A virtual worktree of `tree` in the repository at `dir`, shown as
/// `root`, and the executor's tools over it.
fn virtual_tools(
    repo: &TestRepo,
    dir: &Path,
    tree: &str,
    root: &Path,
) -> (std::sync::Arc<VirtualTree>, Toolbox) {
    let user = repo.runner().repo(dir, Scope::User);
    let vt = std::sync::Arc::new(VirtualTree::open(&user, tree, root).unwrap());
    let tb = Toolbox::over(
        Box::new(vt.clone()),
        ToolboxOptions::new(root, Profile::Executor, repo.root.join("o")),
    )
    .unwrap();
    (vt, tb)
}

fn comparable(r: &ToolResult) -> Value {
    json!({
        "content": serde_json::to_value(&r.content).unwrap(),
        "details": r.details,
        "isError": r.is_error,
    })
}

/// The calls both sides get, in order (writes change what later reads see).
// A table of calls, one per line.
#[allow(clippy::too_many_lines)]
fn calls(root: &Path) -> Vec<(&'static str, Value)> {
    let abs = |p: &str| root.join(p).display().to_string();
    vec![
        ("read", json!({"path": "a.txt"})),
        ("read", json!({"path": "./sub/../a.txt", "offset": 2})),
        ("read", json!({"path": abs("a.txt"), "limit": 1})),
        ("read", json!({"path": "@with space.txt"})),
        ("read", json!({"path": "new\nline.txt"})),
        ("read", json!({"path": "long.txt"})),
        ("read", json!({"path": "long.txt", "offset": 2990})),
        ("read", json!({"path": "long.txt", "offset": 5000})),
        ("read", json!({"path": "bin.dat"})),
        ("read", json!({"path": "image.png"})),
        ("read", json!({"path": "crlf.txt"})),
        ("read", json!({"path": "missing.txt"})),
        ("read", json!({"path": "nope/missing.txt"})),
        ("read", json!({"path": "sub"})),
        ("read", json!({"path": "."})),
        ("read", json!({"path": "module"})),
        ("read", json!({"path": "module/x"})),
        ("read", json!({"path": "link"})),
        ("read", json!({"path": "dirlink/b.txt"})),
        ("read", json!({"path": "dirlink/deeper/c.txt"})),
        ("read", json!({"path": "a.txt/x"})),
        ("read", json!({"path": "a.txt/x/y"})),
        ("read", json!({"path": ".git/config"})),
        ("read", json!({"path": "sub/.GIT"})),
        ("read", json!({"path": "../outside"})),
        ("read", json!({"path": "/etc/passwd"})),
        ("read", json!({"path": "~/x"})),
        ("read", json!({})),
        ("ls", json!({})),
        ("ls", json!({"path": "sub"})),
        ("ls", json!({"path": "module"})),
        ("ls", json!({"path": "a.txt"})),
        ("ls", json!({"path": "link"})),
        ("ls", json!({"path": "dirlink"})),
        ("ls", json!({"path": "missing"})),
        ("ls", json!({"path": "a.txt/x"})),
        ("ls", json!({"limit": 3})),
        (
            "edit",
            json!({"path": "a.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}),
        ),
        (
            "edit",
            json!({"path": "a.txt", "edits": [{"oldText": "not there", "newText": "x"}]}),
        ),
        (
            "edit",
            json!({"path": "crlf.txt", "edits": [{"oldText": "two", "newText": "deux"}]}),
        ),
        (
            "edit",
            json!({"path": "bom.txt", "edits": [{"oldText": "bom line", "newText": "still bom"}]}),
        ),
        (
            "edit",
            json!({"path": "bin.dat", "edits": [{"oldText": "a", "newText": "b"}]}),
        ),
        (
            "edit",
            json!({"path": "missing.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
        ),
        (
            "edit",
            json!({"path": "sub", "edits": [{"oldText": "a", "newText": "b"}]}),
        ),
        (
            "edit",
            json!({"path": "link", "edits": [{"oldText": "a", "newText": "b"}]}),
        ),
        (
            "edit",
            json!({"path": "run.sh", "edits": [{"oldText": "hi", "newText": "hello"}]}),
        ),
        (
            "edit",
            json!({"path": "a.txt", "oldText": "alpha", "newText": "ALPHA"}),
        ),
        ("write", json!({"path": "fresh.txt", "content": "fresh\n"})),
        (
            "write",
            json!({"path": "new/dir/deep.txt", "content": "made parents\n"}),
        ),
        (
            "write",
            json!({"path": "sub/b.txt", "content": "replaced\n"}),
        ),
        (
            "write",
            json!({"path": "run.sh", "content": "#!/bin/sh\necho rewritten\n"}),
        ),
        ("write", json!({"path": "sub", "content": "x"})),
        ("write", json!({"path": "link", "content": "x"})),
        ("write", json!({"path": "dirlink/new.txt", "content": "x"})),
        (
            "write",
            json!({"path": "dirlink/newdir/new.txt", "content": "x"}),
        ),
        ("write", json!({"path": "a.txt/inside", "content": "x"})),
        (
            "write",
            json!({"path": "a.txt/inside/deeper", "content": "x"}),
        ),
        ("write", json!({"path": "module", "content": "x"})),
        (
            "write",
            json!({"path": ".git/hooks/pre-commit", "content": "x"}),
        ),
        (
            "write",
            json!({"path": "debug.log", "content": "ignored\n"}),
        ),
        (
            "write",
            json!({"path": "build/out.txt", "content": "ignored dir\n"}),
        ),
        (
            "write",
            json!({"path": "sub/local-only.txt", "content": "ignored below\n"}),
        ),
        (
            "write",
            json!({"path": "tracked.log", "content": "tracked, changed\n"}),
        ),
        (
            "write",
            json!({"path": "odd name\twith tab.txt", "content": "tab\n"}),
        ),
        ("write", json!({"path": "empty.txt", "content": ""})),
        (
            "write",
            json!({"path": "new/.gitignore", "content": "*.tmp\n"}),
        ),
        (
            "write",
            json!({"path": "new/scratch.tmp", "content": "ignored by a new rule\n"}),
        ),
        (
            "write",
            json!({"path": "new/kept.txt", "content": "kept\n"}),
        ),
        ("read", json!({"path": "fresh.txt"})),
        ("read", json!({"path": "debug.log"})),
        ("read", json!({"path": "new"})),
        ("read", json!({"path": "new/dir/deep.txt/x"})),
        ("read", json!({"path": "a.txt"})),
        ("ls", json!({})),
        ("ls", json!({"path": "new"})),
        ("ls", json!({"path": "new/dir"})),
        ("write", json!({"path": "new", "content": "x"})),
        (
            "write",
            json!({"path": "fresh.txt", "content": "second write\n"}),
        ),
        (
            "edit",
            json!({"path": "fresh.txt", "edits": [{"oldText": "second", "newText": "third"}]}),
        ),
        ("read", json!({"path": "fresh.txt"})),
    ]
}

fn run_both(big: bool, extra: &[(&'static str, Value)]) {
    let repo = TestRepo::new();
    let base_tree = base(&repo, big);
    let wt = repo.root.join("checkout");
    checkout(&repo, &wt);
    let out = repo.root.join("out");
    let disk = Toolbox::new({
        let mut o = ToolboxOptions::new(&wt, Profile::Executor, &out);
        o.git = Some(repo.runner());
        o
    })
    .unwrap();
    let user = repo.runner().repo(&repo.dir, Scope::User);
    let vt = std::sync::Arc::new(VirtualTree::open(&user, &base_tree, &wt).unwrap());
    let virt = Toolbox::over(
        Box::new(vt.clone()),
        ToolboxOptions::new(&wt, Profile::Executor, &out),
    )
    .unwrap();
    assert_eq!(virt.root(), disk.root());
    let mut list = calls(disk.root());
    list.extend(extra.iter().cloned());
    if big {
        list.push(("read", json!({"path": "big.txt"})));
        list.push((
            "read",
            json!({"path": "big.txt", "offset": 1_500_000, "limit": 3}),
        ));
        list.push((
            "edit",
            json!({"path": "big.txt", "edits": [{"oldText": "00000007 the fifty", "newText": "seven"}]}),
        ));
    }
    for (i, (tool, args)) in list.iter().enumerate() {
        let a = disk.call(tool, args);
        let b = virt.call(tool, args);
        assert_eq!(
            comparable(&b),
            comparable(&a),
            "call {i}: {tool} {args} differs (left: virtual, right: checkout)"
        );
    }
    // The result trees agree: the checkout staged as the executor stages it.
    let index = repo.root.join("index");
    let staged = |args: &[&str]| {
        let out = bh_test_support::git_command()
            .current_dir(&wt)
            .env("GIT_INDEX_FILE", &index)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    staged(&["read-tree", &base_tree]);
    staged(&["add", "-A"]);
    let want = staged(&["write-tree"]);
    let scratch = repo.root.join("scratch");
    fs::create_dir_all(&scratch).unwrap();
    assert_eq!(vt.tree(&scratch).unwrap(), want);
    assert_eq!(
        fs::read_dir(&scratch).unwrap().count(),
        0,
        "scratch left empty"
    );
}

#[test]
fn tool_results_and_trees_match_the_checkout() {
    run_both(false, &[]);
}

#[test]
fn a_fifty_megabyte_file_reads_and_edits_the_same() {
    run_both(true, &[]);
}

/// What the checkout cannot show on this file system, the virtual worktree
/// does as a case-insensitive checkout would: an existing name matches in
/// any letter case, so a write changes the existing file.
#[test]
fn ignore_case_matches_existing_names_in_any_case() {
    let repo = TestRepo::new();
    repo.write("Docs/ReadMe.md", "old\n");
    repo.commit_all("base");
    repo.git(&["config", "core.ignorecase", "true"]);
    let tree = repo.git(&["rev-parse", "HEAD^{tree}"]);
    let (vt, tb) = virtual_tools(&repo, &repo.dir, &tree, &repo.root.join("v"));
    assert_eq!(
        tb.call("read", &json!({"path": "docs/readme.MD"}))
            .text_content(),
        "old\n"
    );
    assert!(
        !tb.call(
            "write",
            &json!({"path": "DOCS/README.md", "content": "new\n"})
        )
        .is_error
    );
    assert!(
        !tb.call(
            "write",
            &json!({"path": "docs/Other.md", "content": "other\n"})
        )
        .is_error
    );
    assert_eq!(
        tb.call("ls", &json!({"path": "docs"})).text_content(),
        "Other.md\nReadMe.md"
    );
    let scratch = repo.root.join("scratch");
    fs::create_dir_all(&scratch).unwrap();
    let out = vt.tree(&scratch).unwrap();
    assert_eq!(
        repo.git(&["ls-tree", "-r", "--name-only", &out]),
        "Docs/Other.md\nDocs/ReadMe.md"
    );
    assert_eq!(
        repo.git(&["cat-file", "blob", &format!("{out}:Docs/ReadMe.md")]),
        "new"
    );
}

/// A write inside a submodule is refused (and names the path), where the
/// checkout would have written into its empty folder and then had no way to
/// record it.
#[test]
fn a_write_inside_a_submodule_is_refused() {
    let repo = TestRepo::new();
    repo.write("a.txt", "a\n");
    repo.git(&["add", "-A"]);
    repo.git(&[
        "update-index",
        "--add",
        "--cacheinfo",
        "160000,1234567890123456789012345678901234567890,module",
    ]);
    repo.git(&["commit", "-q", "-m", "base"]);
    let tree = repo.git(&["rev-parse", "HEAD^{tree}"]);
    let (vt, tb) = virtual_tools(&repo, &repo.dir, &tree, &repo.root.join("v"));
    let r = tb.call("write", &json!({"path": "module/x.txt", "content": "x"}));
    assert!(r.is_error);
    assert!(
        r.text_content().contains("module/x.txt") && r.text_content().contains("submodule"),
        "{}",
        r.text_content()
    );
    let scratch = repo.root.join("scratch");
    fs::create_dir_all(&scratch).unwrap();
    assert_eq!(vt.tree(&scratch).unwrap(), tree, "nothing written");
}

/// A SHA-256 repository: trees of 32-byte ids are read and built.
#[test]
fn a_sha256_repository_works() {
    let repo = TestRepo::new();
    let dir = repo.root.join("sha256");
    let git = |args: &[&str]| {
        let out = bh_test_support::git_command()
            .current_dir(&dir)
            .env("HOME", &repo.home)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    fs::create_dir_all(dir.join("d")).unwrap();
    git(&["init", "-q", "--object-format=sha256"]);
    fs::write(dir.join("d/f.txt"), "sha256\n").unwrap();
    git(&["add", "-A"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "-m",
        "base",
    ]);
    let tree = git(&["rev-parse", "HEAD^{tree}"]);
    assert_eq!(tree.len(), 64);
    let (vt, tb) = virtual_tools(&repo, &dir, &tree, &repo.root.join("v"));
    assert_eq!(
        tb.call("read", &json!({"path": "d/f.txt"})).text_content(),
        "sha256\n"
    );
    assert!(
        !tb.call(
            "edit",
            &json!({"path": "d/f.txt", "edits": [{"oldText": "sha256", "newText": "edited"}]})
        )
        .is_error
    );
    let scratch = repo.root.join("scratch");
    fs::create_dir_all(&scratch).unwrap();
    let out = vt.tree(&scratch).unwrap();
    assert_eq!(
        git(&["cat-file", "blob", &format!("{out}:d/f.txt")]),
        "edited"
    );
}

/// A base the repository does not have is refused when the tree is opened.
#[test]
fn an_unknown_base_is_refused() {
    let repo = TestRepo::new();
    repo.write("a.txt", "a\n");
    repo.commit_all("base");
    let user = repo.runner().repo(&repo.dir, Scope::User);
    let err = VirtualTree::open(&user, &"0".repeat(40), &repo.root.join("v")).unwrap_err();
    assert!(err.to_string().contains(&"0".repeat(40)), "{err}");
    let commit = repo.git(&["rev-parse", "HEAD"]);
    let err = VirtualTree::open(&user, &commit, &repo.root.join("v")).unwrap_err();
    assert!(err.to_string().contains("commit, not a tree"), "{err}");
}
