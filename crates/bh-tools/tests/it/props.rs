//! Generated hostile paths and symlink layouts against every path-taking
//! tool: nothing outside the root is read or written.

use fs_err::os::unix::fs::symlink;
use std::path::PathBuf;

use bh_tools::Profile;
use proptest::prelude::*;
use serde_json::json;

use crate::common::{SECRET, Sandbox, snapshot};

#[derive(Debug, Clone)]
enum Target {
    OutsideDir,
    OutsideFile,
    OutsideMissing,
    RelOutside,
    DotDot,
    Etc,
    InsideDir,
    InsideFile,
    SelfLoop,
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        Just(Target::OutsideDir),
        Just(Target::OutsideFile),
        Just(Target::OutsideMissing),
        Just(Target::RelOutside),
        Just(Target::DotDot),
        Just(Target::Etc),
        Just(Target::InsideDir),
        Just(Target::InsideFile),
        Just(Target::SelfLoop),
    ]
}

fn link_dir() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just(""), Just("sub"), Just("sub/deeper"), Just(".git")]
}

fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("..".to_string()),
        Just(".".to_string()),
        Just(".git".to_string()),
        Just(".GiT".to_string()),
        Just("sub".to_string()),
        Just("deeper".to_string()),
        Just("l0".to_string()),
        Just("l1".to_string()),
        Just("l2".to_string()),
        Just("secret.txt".to_string()),
        Just("dir".to_string()),
        Just("hidden.txt".to_string()),
        Just("file.txt".to_string()),
        Just("new.txt".to_string()),
        Just("outside".to_string()),
        Just("".to_string()),
        Just("a\0b".to_string()),
        Just("~".to_string()),
        "[a-z@.]{1,4}",
    ]
}

fn suffix() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just(""),
        Just("secret.txt"),
        Just("dir"),
        Just("dir/hidden-outside.txt"),
        Just("new.txt"),
        Just("x/new.txt"),
        Just("config"),
        Just("passwd"),
    ]
}

fn hostile_path() -> impl Strategy<Value = (u8, Vec<String>)> {
    (0u8..4, prop::collection::vec(component(), 0..6))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    #[test]
    fn nothing_outside_the_root_is_read_or_written(
        links in prop::collection::vec((link_dir(), target()), 0..4),
        paths in prop::collection::vec(hostile_path(), 1..6),
        via_links in prop::collection::vec((any::<prop::sample::Index>(), suffix()), 0..4),
        walk in any::<bool>(),
    ) {
        let sb = Sandbox::new();
        sb.write("file.txt", "alpha\n");
        sb.write("sub/deeper/file.txt", "alpha\n");
        sb.write(".git/config", "[core]\n");
        for (i, (dir, t)) in links.iter().enumerate() {
            let parent = sb.root.join(dir);
            fs_err::create_dir_all(&parent).unwrap();
            let dest: PathBuf = match t {
                Target::OutsideDir => sb.outside.clone(),
                Target::OutsideFile => sb.outside.join("secret.txt"),
                Target::OutsideMissing => sb.outside.join("new.txt"),
                Target::RelOutside => PathBuf::from("../".repeat(dir.matches('/').count() + 2) + "outside"),
                Target::DotDot => PathBuf::from(".."),
                Target::Etc => PathBuf::from("/etc"),
                Target::InsideDir => sb.root.join("sub"),
                Target::InsideFile => PathBuf::from("file.txt"),
                Target::SelfLoop => PathBuf::from(format!("l{i}")),
            };
            let _ = symlink(&dest, parent.join(format!("l{i}")));
        }
        let tb = sb.toolbox(Profile::Interactive);
        if walk {
            tb.confined_root().unwrap().disable_openat2();
        }
        let base = sb.root.parent().unwrap().to_path_buf();
        let before = snapshot(&sb.outside);
        let base_names: Vec<_> = fs_err::read_dir(&base).unwrap().flatten().map(|e| e.file_name()).collect();
        // Paths aimed at the generated links, plus the free-form ones.
        let mut all: Vec<(u8, Vec<String>)> = paths.clone();
        if !links.is_empty() {
            for (idx, suffix) in &via_links {
                let i = idx.index(links.len());
                let (dir, _) = &links[i];
                let mut comps: Vec<String> = dir.split('/').filter(|c| !c.is_empty()).map(String::from).collect();
                comps.push(format!("l{i}"));
                comps.extend(suffix.split('/').filter(|c| !c.is_empty()).map(String::from));
                all.push((i as u8 % 2, comps));
            }
        }
        for (kind, comps) in &all {
            let rel = comps.join("/");
            let path = match kind {
                0 => rel,
                1 => format!("{}/{rel}", sb.root.display()),
                2 => format!("{}/{rel}", sb.outside.display()),
                _ => format!("/{rel}"),
            };
            for (name, args) in [
                ("read", json!({"path": path})),
                ("ls", json!({"path": path})),
                ("write", json!({"path": path, "content": "PWNED"})),
                ("edit", json!({"path": path, "edits": [{"oldText": SECRET, "newText": "PWNED"}]})),
                ("edit", json!({"path": path, "oldText": "alpha", "newText": "PWNED"})),
                ("grep", json!({"pattern": "SECRET|core", "path": path})),
                ("find", json!({"pattern": "*", "path": path})),
                ("find", json!({"pattern": "**/*.txt"})),
            ] {
                let r = tb.call(name, &args);
                let text = serde_json::to_string(&r).unwrap();
                prop_assert!(!text.contains(SECRET), "{} {:?} leaked: {}", name, path, text);
                prop_assert!(r.is_error || !text.contains("hidden-outside"), "{} {:?} listed outside: {}", name, path, text);
                prop_assert!(!text.contains("[core]"), "{} {:?} read .git: {}", name, path, text);
            }
        }
        prop_assert_eq!(snapshot(&sb.outside), before);
        let after: Vec<_> = fs_err::read_dir(&base).unwrap().flatten().map(|e| e.file_name()).collect();
        prop_assert_eq!(after, base_names);
        prop_assert_eq!(fs_err::read_to_string(sb.root.join(".git/config")).unwrap(), "[core]\n");
        prop_assert!(!sb.root.join(".git").join("PWNED").exists());
    }
}
