//! Writing: naming, layout, ids, O_EXCL, locked appends, torn tails, leaf choice.

use std::collections::HashSet;
use std::path::Path;

use bh_protocol::SessionHeader;
use bh_protocol::message::{Content, UserMessage};
use bh_session::{
    Session, SessionError, SessionWriter, select_leaf, session_dir_for_cwd, session_file_name,
};
use pretty_assertions::assert_eq;

use crate::support::{HEADER, entry, scenario, write_file};

#[test]
fn pi_naming_and_layout() {
    assert_eq!(
        session_file_name("2026-11-30T10:04:40.390Z", "01a22be9-aaaa"),
        "2026-11-30T10-04-40-390Z_01a22be9-aaaa.jsonl"
    );
    assert_eq!(
        session_dir_for_cwd(
            Path::new("/a/agent"),
            "/home/dev/pi-corpus/v1.6.0/repos/s01-plain-text"
        ),
        Path::new("/a/agent/sessions/--home-dev-pi-corpus-v1.6.0-repos-s01-plain-text--")
    );
    assert_eq!(
        session_dir_for_cwd(Path::new("/ag"), "C:\\work\\x"),
        Path::new("/ag/sessions/--C--work-x--")
    );
    let ts = bh_session::now_iso();
    assert_eq!(ts.len(), 24, "{ts}");
    assert!(ts.ends_with('Z') && ts.as_bytes()[19] == b'.', "{ts}");
}

#[test]
fn new_session_is_created_with_o_excl_and_loads() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = SessionWriter::create_for_cwd(dir.path(), "/work/proj").unwrap();
    let path = w.path().to_path_buf();
    assert!(path.starts_with(dir.path().join("sessions/--work-proj--")));
    let name = path.file_name().unwrap().to_str().unwrap();
    assert!(name.ends_with(".jsonl") && name.contains('_'), "{name}");

    let m1 = w.append_model_change("fake", "fake-model").unwrap();
    let t1 = w.append_thinking_level_change("off").unwrap();
    let u1 = w
        .append_message(&UserMessage::new(Content::Text("hi".into()), 1))
        .unwrap();
    w.append_session_info("  my name ").unwrap();
    w.append_label(&u1, Some("start")).unwrap();
    assert!(w.append_label("nope", Some("x")).is_err());

    let s = Session::load(&path).unwrap();
    assert!(s.is_valid(), "{:?}", s.problems());
    assert_eq!(s.entries().len(), 5);
    assert_eq!(s.entries()[0].id, m1);
    assert_eq!(s.entries()[1].parent_id.as_deref(), Some(m1.as_str()));
    assert_eq!(s.entries()[2].parent_id.as_deref(), Some(t1.as_str()));
    assert_eq!(s.name(), Some("my name"));
    assert_eq!(s.label_of(&u1), Some("start"));
    for e in s.entries() {
        assert_eq!(e.id.len(), 8);
        assert!(e.id.chars().all(|c| c.is_ascii_hexdigit()));
    }
    // Key order as Pi writes it.
    let first = std::str::from_utf8(s.line_text(&s.entries()[0])).unwrap();
    assert!(
        first.starts_with(r#"{"type":"model_change","id":""#),
        "{first}"
    );
    let header =
        std::str::from_utf8(&s.bytes()[..s.bytes().iter().position(|&b| b == b'\n').unwrap()])
            .unwrap();
    assert!(
        header.starts_with(r#"{"type":"session","version":3,"id":""#),
        "{header}"
    );
    assert!(!header.contains("parentSession"));

    // O_EXCL: the same path again is refused and the file is untouched.
    let before = fs_err::read(&path).unwrap();
    let h = SessionHeader::new("x", "2026-01-01T00:00:00.000Z", "/w", None);
    match SessionWriter::create(&path, &h) {
        Err(SessionError::Exists { .. }) => {}
        other => panic!("expected Exists, got {other:?}"),
    }
    assert_eq!(fs_err::read(&path).unwrap(), before);
}

#[test]
fn ids_stay_unique_across_writers() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(
        dir.path(),
        "s.jsonl",
        &format!("{HEADER}\n{}\n", entry("aa", None, "x")),
    );
    let mut a = SessionWriter::open(&path).unwrap();
    let mut b = SessionWriter::open(&path).unwrap();
    for i in 0..50 {
        a.append_custom("a", Some(serde_json::json!(i))).unwrap();
        b.append_custom("b", Some(serde_json::json!(i))).unwrap();
    }
    let s = Session::load(&path).unwrap();
    assert!(s.is_valid(), "{:?}", s.problems());
    let ids: HashSet<&str> = s.entries().iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids.len(), 101);
}

#[test]
fn concurrent_appends_do_not_interleave() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(
        dir.path(),
        "s.jsonl",
        &format!("{HEADER}\n{}\n", entry("aa", None, "x")),
    );
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut w = SessionWriter::open(&path).unwrap();
                let big = "y".repeat(20_000);
                for i in 0..25 {
                    w.append_custom("t", Some(serde_json::json!({"t": t, "i": i, "big": big})))
                        .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let s = Session::load(&path).unwrap();
    assert!(s.is_valid(), "{:?}", s.problems());
    assert_eq!(s.entries().len(), 101);
}

#[test]
fn append_after_a_torn_line_starts_a_new_line() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{HEADER}\n{}\n{{\"type\":\"mess", entry("aa", None, "x"));
    let path = write_file(dir.path(), "s.jsonl", &text);
    let mut w = SessionWriter::open(&path).unwrap();
    let id = w.append_custom("after", None).unwrap();
    let data = fs_err::read(&path).unwrap();
    assert!(data.starts_with(text.as_bytes()), "existing bytes kept");
    let s = Session::load(&path).unwrap();
    // The torn line stays where it was (now a malformed middle line), the new entry loads.
    assert_eq!(s.leaf().unwrap().id, id);
    assert_eq!(s.leaf().unwrap().parent_id.as_deref(), Some("aa"));
    assert!(s.problems().iter().any(|p| p.line == 3));
}

#[test]
fn open_refuses_a_file_without_header() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path(), "s.jsonl", "garbage\n");
    assert!(matches!(
        SessionWriter::open(&path),
        Err(SessionError::NotASession { .. })
    ));
    assert_eq!(fs_err::read(&path).unwrap(), b"garbage\n");
}

#[test]
fn select_leaf_appends_under_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let src = scenario("s07-extension-entries");
    let path = dir.path().join("copy.jsonl");
    fs_err::copy(&src, &path).unwrap();
    let before = fs_err::read(&path).unwrap();
    let want = Session::load(&path)
        .unwrap()
        .context(Some("bc9ba822"))
        .unwrap();
    let new_id = select_leaf(&path, "bc9ba822").unwrap();
    let after = fs_err::read(&path).unwrap();
    assert!(after.starts_with(&before), "append only");
    let s = Session::load(&path).unwrap();
    assert_eq!(s.leaf().unwrap().id, new_id);
    assert_eq!(s.leaf().unwrap().parent_id.as_deref(), Some("bc9ba822"));
    let got = s.context(None).unwrap();
    let a: Vec<&str> = want.messages.iter().map(|m| m.message.get()).collect();
    let b: Vec<&str> = got.messages.iter().map(|m| m.message.get()).collect();
    assert_eq!(a, b);
    assert!(matches!(
        select_leaf(&path, "zzzzzzzz"),
        Err(SessionError::EntryNotFound { .. })
    ));
}

#[test]
fn extend_and_truncate_only_when_unchanged_and_never_through_a_link() {
    use bh_session::write::{extend_if_unchanged, truncate_if_unchanged};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let first = format!("{HEADER}\n");
    fs_err::write(&path, &first).unwrap();
    let len = first.len() as u64;
    let line = b"{\"type\":\"custom\"}\n";

    // Someone appended since it was read: nothing written.
    assert!(!extend_if_unchanged(&path, len + 1, line).unwrap());
    assert_eq!(fs_err::read(&path).unwrap(), first.as_bytes());
    // A line without its newline is refused.
    assert!(extend_if_unchanged(&path, len, b"{}").is_err());

    assert!(extend_if_unchanged(&path, len, line).unwrap());
    let grown = len + line.len() as u64;
    assert_eq!(fs_err::metadata(&path).unwrap().len(), grown);
    // Cut back only from the length the caller left.
    assert!(!truncate_if_unchanged(&path, grown + 5, len).unwrap());
    assert!(truncate_if_unchanged(&path, grown, len).unwrap());
    assert_eq!(fs_err::read(&path).unwrap(), first.as_bytes());

    // A symlink planted where the session was: refused, the file it points
    // at untouched.
    let victim = dir.path().join("victim.jsonl");
    fs_err::write(&victim, &first).unwrap();
    let link = dir.path().join("link.jsonl");
    fs_err::os::unix::fs::symlink(&victim, &link).unwrap();
    let err = extend_if_unchanged(&link, len, line).unwrap_err();
    assert!(err.to_string().contains("link.jsonl"), "{err}");
    assert!(truncate_if_unchanged(&link, len, 0).is_err());
    assert_eq!(fs_err::read(&victim).unwrap(), first.as_bytes());
}
