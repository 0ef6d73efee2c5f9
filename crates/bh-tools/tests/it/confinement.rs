//! Every confinement case, for every tool that takes a path, with `openat2`
//! and with the `O_NOFOLLOW` walk.

use fs_err::os::unix::fs::symlink;

use bh_tools::{Profile, Toolbox};
use serde_json::{Value, json};

use crate::common::{SECRET, Sandbox, call, snapshot};

/// Calls every path-taking tool with `path`; every call must fail, mention
/// no secret, and leave `outside` untouched. Returns the error texts.
fn all_refuse(sb: &Sandbox, tb: &Toolbox, path: &str) -> Vec<String> {
    let before = snapshot(&sb.outside);
    let calls: Vec<(&str, Value)> = vec![
        ("read", json!({"path": path})),
        ("ls", json!({"path": path})),
        ("write", json!({"path": path, "content": "PWNED"})),
        (
            "edit",
            json!({"path": path, "edits": [{"oldText": SECRET, "newText": "PWNED"}]}),
        ),
        ("grep", json!({"pattern": "SECRET", "path": path})),
        ("find", json!({"pattern": "*", "path": path})),
    ];
    let mut errors = Vec::new();
    for (name, args) in calls {
        let r = tb.call(name, &args);
        let text = serde_json::to_string(&r).unwrap();
        assert!(r.is_error, "{name} {path:?} succeeded: {text}");
        assert!(!text.contains(SECRET), "{name} {path:?} leaked: {text}");
        errors.push(r.text_content());
    }
    assert_eq!(snapshot(&sb.outside), before, "outside changed by {path:?}");
    errors
}

fn both_modes(f: impl Fn(&Sandbox, &Toolbox)) {
    for walk in [false, true] {
        let sb = Sandbox::new();
        let tb = sb.toolbox(Profile::Interactive);
        if walk {
            tb.confined_root().unwrap().disable_openat2();
        }
        f(&sb, &tb);
    }
}

#[test]
fn absolute_paths_only_inside_the_root() {
    both_modes(|sb, tb| {
        for p in [
            "/etc/passwd".to_string(),
            sb.outside.join("secret.txt").display().to_string(),
            sb.outside.display().to_string(),
            "/".to_string(),
            "~/x".to_string(),
        ] {
            let errs = all_refuse(sb, tb, &p);
            assert!(
                errs[0].starts_with("Path is outside the working directory"),
                "{errs:?}"
            );
        }
        sb.write("in.txt", "inside\n");
        let abs = sb.root.join("in.txt").display().to_string();
        assert_eq!(
            call(tb, "read", json!({"path": abs})).text_content(),
            "inside\n"
        );
    });
}

#[test]
fn dot_dot_cannot_leave_the_root() {
    both_modes(|sb, tb| {
        for p in [
            "../outside/secret.txt",
            "a/../../outside/secret.txt",
            "..",
            "./../outside",
        ] {
            all_refuse(sb, tb, p);
        }
        sb.write("b.txt", "bee\n");
        assert_eq!(
            call(tb, "read", json!({"path": "a/../b.txt"})).text_content(),
            "bee\n"
        );
    });
}

#[test]
fn symlinks_anywhere_are_refused() {
    both_modes(|sb, tb| {
        symlink(&sb.outside, sb.root.join("out_dir")).unwrap();
        symlink(sb.outside.join("secret.txt"), sb.root.join("out_file")).unwrap();
        symlink("../outside", sb.root.join("rel_out")).unwrap();
        symlink(sb.outside.join("missing.txt"), sb.root.join("dangling")).unwrap();
        symlink(sb.outside.join("nodir"), sb.root.join("dangling_dir")).unwrap();
        sb.write("real/ok.txt", "ok\n");
        symlink("real", sb.root.join("in_dir")).unwrap();
        symlink("real/ok.txt", sb.root.join("in_file")).unwrap();
        fs_err::create_dir_all(sb.root.join("deep/er")).unwrap();
        symlink(&sb.outside, sb.root.join("deep/er/hop")).unwrap();
        for p in [
            "out_dir",
            "out_dir/secret.txt",
            "out_dir/dir/hidden-outside.txt",
            "out_file",
            "rel_out/secret.txt",
            "dangling",
            "dangling_dir/new.txt",
            "in_dir/ok.txt",
            "in_file",
            "deep/er/hop/secret.txt",
            "deep/er/hop/dir",
        ] {
            all_refuse(sb, tb, p);
        }
        assert!(!sb.outside.join("missing.txt").exists());
        assert!(!sb.outside.join("nodir").exists());
        // Walks and listings do not follow them either.
        let r = call(tb, "grep", json!({"pattern": "SECRET"}));
        assert_eq!(r.text_content(), "No matches found");
        let r = call(tb, "find", json!({"pattern": "*.txt"}));
        assert_eq!(r.text_content(), "real/ok.txt");
        let r = call(tb, "ls", json!({}));
        assert_eq!(
            r.text_content(),
            "dangling\ndangling_dir\ndeep/\nin_dir\nin_file\nout_dir\nout_file\nreal/\nrel_out"
        );
        let r = call(tb, "read", json!({"path": "out_dir/secret.txt"}));
        assert!(
            r.text_content().contains("symbolic link"),
            "{}",
            r.text_content()
        );
    });
}

#[test]
fn symlink_created_by_an_earlier_call_is_refused() {
    both_modes(|sb, tb| {
        let r = call(
            tb,
            "bash",
            json!({"command": format!("ln -s {} made && ln -s {}/secret.txt made_file", sb.outside.display(), sb.outside.display())}),
        );
        assert!(!r.is_error, "{r:?}");
        for p in ["made/secret.txt", "made/new.txt", "made_file", "made"] {
            all_refuse(sb, tb, p);
        }
        assert!(!sb.outside.join("new.txt").exists());
    });
}

#[test]
fn git_components_in_any_case_are_refused() {
    both_modes(|sb, tb| {
        sb.write(".git/config", "[core]\n");
        sb.write("nested/.git", "gitdir: ../.git/modules/nested\n");
        sb.write("nested/file.txt", "fine\n");
        for p in [
            ".git",
            ".git/config",
            ".GIT/config",
            ".Git/hooks/pre-commit",
            "nested/.git",
            "nested/.GiT",
            "x/../.git/config",
            ".git./config",
            "./.git",
        ] {
            let errs = all_refuse(sb, tb, p);
            assert!(
                errs[0].starts_with("Access to .git is not allowed"),
                "{p}: {errs:?}"
            );
        }
        assert!(!sb.root.join(".git/hooks").exists());
        assert_eq!(
            call(tb, "read", json!({"path": "nested/file.txt"})).text_content(),
            "fine\n"
        );
        let r = call(tb, "find", json!({"pattern": "*"}));
        assert_eq!(r.text_content(), "nested/\nnested/file.txt");
        let r = call(tb, "grep", json!({"pattern": "core|gitdir"}));
        assert_eq!(r.text_content(), "No matches found");
    });
}

#[test]
fn nul_bytes_and_overlong_paths() {
    both_modes(|sb, tb| {
        let errs = all_refuse(sb, tb, "a\0b");
        assert_eq!(errs[0], "Path contains a NUL byte");
        let long = "a/".repeat(2100);
        let errs = all_refuse(sb, tb, &long);
        assert!(errs[0].starts_with("Path is too long"), "{errs:?}");
        let name = "n".repeat(300);
        let errs = all_refuse(sb, tb, &name);
        assert!(
            errs[0].starts_with("Path component is too long"),
            "{errs:?}"
        );
    });
}

#[test]
fn fifos_and_devices_are_never_opened() {
    both_modes(|sb, tb| {
        nix::unistd::mkfifo(
            &sb.root.join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        let dev = nix::sys::stat::mknod(
            &sb.root.join("zero"),
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
            nix::sys::stat::makedev(1, 5),
        )
        .is_ok();
        let mut names = vec!["fifo"];
        if dev {
            names.push("zero");
        }
        for p in names {
            for (name, args) in [
                ("read", json!({"path": p})),
                ("write", json!({"path": p, "content": "x"})),
                (
                    "edit",
                    json!({"path": p, "edits": [{"oldText": "a", "newText": "b"}]}),
                ),
            ] {
                let r = tb.call(name, &args);
                assert!(r.is_error, "{name} {p}");
                assert!(r.text_content().starts_with("Not a regular file"), "{r:?}");
            }
        }
        // Walks skip them without blocking.
        assert_eq!(
            call(tb, "grep", json!({"pattern": "x"})).text_content(),
            "No matches found"
        );
    });
}

#[test]
fn swapped_symlink_between_check_and_use() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    both_modes(|sb, tb| {
        sb.write("race/secret.txt", "not secret\n");
        let stop = Arc::new(AtomicBool::new(false));
        let root = sb.root.clone();
        let outside = sb.outside.clone();
        let s2 = stop.clone();
        let swapper = std::thread::spawn(move || {
            // `race` flips atomically between the real directory and a
            // symlink to the outside (renameat2 RENAME_EXCHANGE).
            let real = root.join("race");
            let link = root.join("race_link");
            symlink(&outside, &link).unwrap();
            while !s2.load(Ordering::Relaxed) {
                nix::fcntl::renameat2(
                    nix::fcntl::AT_FDCWD,
                    &real,
                    nix::fcntl::AT_FDCWD,
                    &link,
                    nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                )
                .unwrap();
                std::thread::yield_now();
            }
        });
        let before = snapshot(&sb.outside);
        for i in 0..400 {
            for (name, args) in [
                ("read", json!({"path": "race/secret.txt"})),
                (
                    "write",
                    json!({"path": format!("race/w{i}.txt"), "content": "PWNED"}),
                ),
                (
                    "edit",
                    json!({"path": "race/secret.txt", "edits": [{"oldText": SECRET, "newText": "PWNED"}]}),
                ),
                ("ls", json!({"path": "race"})),
                ("grep", json!({"pattern": "SECRET", "path": "race"})),
                ("find", json!({"pattern": "*"})),
            ] {
                let r = tb.call(name, &args);
                let text = serde_json::to_string(&r).unwrap();
                assert!(!text.contains(SECRET), "{name} leaked: {text}");
                assert!(
                    !text.contains("hidden-outside"),
                    "{name} listed outside: {text}"
                );
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        assert_eq!(snapshot(&sb.outside), before);
    });
}

#[test]
fn hard_links_are_never_modified() {
    both_modes(|sb, tb| {
        fs_err::hard_link(sb.outside.join("secret.txt"), sb.root.join("hl.txt")).unwrap();
        let before = snapshot(&sb.outside);
        let r = call(tb, "write", json!({"path": "hl.txt", "content": "PWNED"}));
        assert!(
            r.text_content()
                .starts_with("Refusing to modify a file with several hard links"),
            "{r:?}"
        );
        let r = call(
            tb,
            "edit",
            json!({"path": "hl.txt", "edits": [{"oldText": SECRET, "newText": "PWNED"}]}),
        );
        assert!(r.is_error, "{r:?}");
        assert_eq!(snapshot(&sb.outside), before);
        fs_err::remove_file(sb.root.join("hl.txt")).unwrap();
    });
}

#[test]
fn root_named_through_a_symlink_and_at_prefix() {
    let sb = Sandbox::new();
    let alias = sb.root.parent().unwrap().join("alias");
    symlink(&sb.root, &alias).unwrap();
    let tb = Toolbox::new(bh_tools::ToolboxOptions::new(
        &alias,
        Profile::Executor,
        &sb.out,
    ))
    .unwrap();
    sb.write("f.txt", "eff\n");
    assert_eq!(tb.root(), sb.root.as_path());
    for p in [alias.join("f.txt"), sb.root.join("f.txt")] {
        let r = call(&tb, "read", json!({"path": p}));
        assert_eq!(r.text_content(), "eff\n", "{p:?}");
    }
    assert_eq!(
        call(&tb, "read", json!({"path": "@f.txt"})).text_content(),
        "eff\n"
    );
}
