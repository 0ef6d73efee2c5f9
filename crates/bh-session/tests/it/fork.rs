//! Forks in both of Pi's forms; the source is never modified.

use bh_protocol::EntryType;
use bh_session::{ForkOptions, ForkTarget, Session, SessionError, fork};
use pretty_assertions::assert_eq;

use crate::support::{all_fixtures, digest, fixture, fixtures_dir, scenario};

fn lines(b: &[u8]) -> Vec<String> {
    String::from_utf8(b.to_vec())
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn whole_tree_fork_of_every_fixture() {
    let dir = tempfile::tempdir().unwrap();
    for rel in all_fixtures() {
        let src_path = fixtures_dir().join(&rel);
        let before = digest(&src_path);
        let src = Session::load(&src_path).unwrap();
        let res = fork(
            &src,
            &ForkTarget::Dir(dir.path().to_path_buf()),
            &ForkOptions::default(),
        );
        if src.header().is_none() {
            assert!(
                matches!(res, Err(SessionError::NotASession { .. })),
                "{}",
                rel.display()
            );
            continue;
        }
        let f = res.unwrap();
        assert_eq!(digest(&src_path), before, "{} changed", rel.display());
        let out = Session::load(&f.path).unwrap();
        let h = out.header().unwrap();
        assert_eq!(h.version, Some(3));
        assert_eq!(h.id, f.session_id);
        assert_eq!(
            h.parent_session.as_deref(),
            Some(src_path.to_str().unwrap())
        );
        assert_eq!(h.cwd, src.header().unwrap().cwd);
        // Same ids, same tree, same leaf, same context.
        assert_eq!(out.entries().len(), src.entries().len());
        for (a, b) in src.entries().iter().zip(out.entries()) {
            assert_eq!(a.id, b.id);
            assert_eq!(a.parent_id, b.parent_id);
            assert_eq!(src.entry_line(a).unwrap(), out.line_text(b));
        }
        assert_eq!(out.leaf().map(|e| &e.id), src.leaf().map(|e| &e.id));
        let a: Vec<String> = src
            .context(None)
            .unwrap()
            .messages
            .iter()
            .map(|m| m.message.get().to_owned())
            .collect();
        let b: Vec<String> = out
            .context(None)
            .unwrap()
            .messages
            .iter()
            .map(|m| m.message.get().to_owned())
            .collect();
        assert_eq!(a, b, "{}", rel.display());
        // Pi naming: <timestamp>_<id>.jsonl
        let name = f.path.file_name().unwrap().to_str().unwrap();
        assert!(
            name.ends_with(&format!("_{}.jsonl", f.session_id)),
            "{name}"
        );
    }
}

#[test]
fn whole_tree_fork_at_an_entry_makes_it_the_leaf() {
    let dir = tempfile::tempdir().unwrap();
    let src = Session::load(scenario("s07-extension-entries")).unwrap();
    let opts = ForkOptions {
        entry: Some("bc9ba822".into()),
        cwd: Some("/elsewhere".into()),
        ..ForkOptions::default()
    };
    let f = fork(&src, &ForkTarget::File(dir.path().join("f.jsonl")), &opts).unwrap();
    let out = Session::load(&f.path).unwrap();
    assert_eq!(out.entries().len(), src.entries().len() + 1);
    let leaf = out.leaf().unwrap();
    assert_eq!(leaf.parent_id.as_deref(), Some("bc9ba822"));
    assert_eq!(leaf.kind, EntryType::Custom);
    assert_eq!(out.header().unwrap().cwd.as_deref(), Some("/elsewhere"));
    let want: Vec<String> = src
        .context(Some("bc9ba822"))
        .unwrap()
        .messages
        .iter()
        .map(|m| m.message.get().to_owned())
        .collect();
    let got: Vec<String> = out
        .context(None)
        .unwrap()
        .messages
        .iter()
        .map(|m| m.message.get().to_owned())
        .collect();
    assert_eq!(want, got);
    // --out refuses to overwrite.
    assert!(matches!(
        fork(&src, &ForkTarget::File(f.path.clone()), &opts),
        Err(SessionError::Exists { .. })
    ));
    // Unknown entry.
    let bad = ForkOptions {
        entry: Some("nope".into()),
        ..ForkOptions::default()
    };
    assert!(matches!(
        fork(&src, &ForkTarget::Dir(dir.path().into()), &bad),
        Err(SessionError::EntryNotFound { .. })
    ));
}

/// The path-only fork of s07 at its leaf is what Pi's clone produced in s23,
/// except that (like Pi 1.x) the child of the dropped label is re-linked.
#[test]
fn path_only_fork_relinks_across_labels_like_pi_1x() {
    let dir = tempfile::tempdir().unwrap();
    let src = Session::load(scenario("s07-extension-entries")).unwrap();
    let opts = ForkOptions {
        path_only: true,
        ..ForkOptions::default()
    };
    let f = fork(&src, &ForkTarget::Dir(dir.path().into()), &opts).unwrap();
    let out = Session::load(&f.path).unwrap();
    assert!(out.is_valid(), "{:?}", out.problems());
    let pi = Session::load(scenario("s23-clone-with-labels-on-path")).unwrap();
    let ours = lines(out.bytes());
    let theirs = lines(pi.bytes());
    // Pi appended a thinking_level_change after the clone; drop it. Headers differ.
    let theirs = &theirs[1..theirs.len() - 1];
    let ours = &ours[1..];
    assert_eq!(ours.len(), theirs.len());
    for (o, t) in ours.iter().zip(theirs) {
        let ov: serde_json::Value = serde_json::from_str(o).unwrap();
        let tv: serde_json::Value = serde_json::from_str(t).unwrap();
        if ov["type"] == "label" {
            // New ids; same target, label, timestamp.
            for k in ["targetId", "label", "timestamp"] {
                assert_eq!(ov[k], tv[k]);
            }
        } else if ov["id"] == "0cc46234" {
            assert_eq!(
                tv["parentId"], "a718cf02",
                "0.73.1 leaves the dangling parent"
            );
            assert_eq!(
                ov["parentId"], "02bb3ed8",
                "1.x re-links to the previous kept entry"
            );
            let mut ov2 = ov.clone();
            ov2["parentId"] = tv["parentId"].clone();
            assert_eq!(ov2, tv);
        } else {
            assert_eq!(o, t, "verbatim");
        }
    }
    // Context = the source's context at its leaf (no longer cut short).
    let a: Vec<String> = src
        .context(None)
        .unwrap()
        .messages
        .iter()
        .map(|m| m.message.get().to_owned())
        .collect();
    let b: Vec<String> = out
        .context(None)
        .unwrap()
        .messages
        .iter()
        .map(|m| m.message.get().to_owned())
        .collect();
    assert_eq!(a, b);
    assert_eq!(
        pi.context(None).unwrap().messages.len(),
        4,
        "Pi's broken clone"
    );
    assert_eq!(out.labels().len(), 2);
}

#[test]
fn path_only_fork_at_an_inner_entry() {
    let dir = tempfile::tempdir().unwrap();
    let src = Session::load(scenario("s07-extension-entries")).unwrap();
    let opts = ForkOptions {
        path_only: true,
        entry: Some("825ff67b".into()),
        ..ForkOptions::default()
    };
    let f = fork(&src, &ForkTarget::Dir(dir.path().into()), &opts).unwrap();
    let out = Session::load(&f.path).unwrap();
    assert!(out.is_valid(), "{:?}", out.problems());
    // The label on 59f3f2ac (on the path) is re-created at the end; the one on
    // 02bb3ed8 (not on the path) is not.
    let labels: Vec<(&str, &str)> = out
        .labels()
        .iter()
        .map(|l| (l.target_id.as_str(), l.label.as_str()))
        .collect();
    assert_eq!(labels, vec![("59f3f2ac", "checkpoint-1")]);
    assert!(out.entry("02bb3ed8").is_none());
    let a: Vec<String> = src
        .context(Some("825ff67b"))
        .unwrap()
        .messages
        .iter()
        .map(|m| m.message.get().to_owned())
        .collect();
    let b: Vec<String> = out
        .context(None)
        .unwrap()
        .messages
        .iter()
        .map(|m| m.message.get().to_owned())
        .collect();
    assert_eq!(a, b);
}

#[test]
fn path_only_fork_moves_first_kept_off_a_dropped_label() {
    let dir = tempfile::tempdir().unwrap();
    let h = crate::support::HEADER;
    let text = format!(
        "{h}\n{}\n{}\n{}\n{}\n{}\n",
        crate::support::entry("aa", None, "one"),
        r#"{"type":"label","id":"ll","parentId":"aa","timestamp":"2026-01-01T00:00:02.000Z","targetId":"aa","label":"L"}"#,
        crate::support::entry("bb", Some("ll"), "two"),
        r#"{"type":"compaction","id":"cc","parentId":"bb","timestamp":"2026-01-01T00:00:03.000Z","summary":"S","firstKeptEntryId":"ll","tokensBefore":5}"#,
        crate::support::entry("dd", Some("cc"), "three"),
    );
    let src = Session::parse(text.into_bytes(), None);
    let opts = ForkOptions {
        path_only: true,
        parent_session: Some("/x".into()),
        ..ForkOptions::default()
    };
    let f = fork(&src, &ForkTarget::Dir(dir.path().into()), &opts).unwrap();
    let out = Session::load(&f.path).unwrap();
    assert!(out.is_valid(), "{:?}", out.problems());
    assert_eq!(out.entry("bb").unwrap().parent_id.as_deref(), Some("aa"));
    assert_eq!(
        out.entry("cc").unwrap().first_kept_entry_id.as_deref(),
        Some("bb")
    );
    let line = String::from_utf8(out.line_text(out.entry("cc").unwrap()).to_vec()).unwrap();
    assert_eq!(
        line,
        r#"{"type":"compaction","id":"cc","parentId":"bb","timestamp":"2026-01-01T00:00:03.000Z","summary":"S","firstKeptEntryId":"bb","tokensBefore":5}"#
    );
}

#[test]
fn fork_of_v1_writes_migrated_v3_entries() {
    let dir = tempfile::tempdir().unwrap();
    let p = fixture("pi-mono-v1/large-session.jsonl");
    let before = digest(&p);
    let src = Session::load(&p).unwrap();
    let f = fork(
        &src,
        &ForkTarget::Dir(dir.path().into()),
        &ForkOptions::default(),
    )
    .unwrap();
    assert_eq!(digest(&p), before);
    let out = Session::load(&f.path).unwrap();
    assert_eq!(out.source_version(), 3);
    assert!(out.is_valid(), "{:?}", out.problems());
    assert!(out.entries().iter().all(|e| e.migration.is_none()));
    let a: Vec<String> = src
        .context(None)
        .unwrap()
        .messages
        .iter()
        .map(|m| m.message.get().to_owned())
        .collect();
    let b: Vec<String> = out
        .context(None)
        .unwrap()
        .messages
        .iter()
        .map(|m| m.message.get().to_owned())
        .collect();
    assert_eq!(a, b);
}
