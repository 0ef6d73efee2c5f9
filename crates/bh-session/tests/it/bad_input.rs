//! Bad input of each kind is reported with its line number, never a failure to load.

use bh_session::{ProblemKind, Session, Severity};

use crate::support::{HEADER, entry};

fn parse(text: &str) -> Session {
    Session::parse(text.as_bytes().to_vec(), None)
}

fn has(s: &Session, kind: ProblemKind, line: usize) -> bool {
    s.problems()
        .iter()
        .any(|p| p.kind == kind && p.line == line)
}

#[test]
fn torn_last_line() {
    let text = format!(
        "{HEADER}\n{}\n{}\n{{\"type\":\"message\",\"id\":\"cc\",\"par",
        entry("aa", None, "one"),
        entry("bb", Some("aa"), "two")
    );
    let s = parse(&text);
    assert!(has(&s, ProblemKind::TornLastLine, 4), "{:?}", s.problems());
    assert_eq!(s.entries().len(), 2);
    assert_eq!(s.leaf().unwrap().id, "bb");
    assert!(!s.is_valid());
    let p = s
        .problems()
        .iter()
        .find(|p| p.kind == ProblemKind::TornLastLine)
        .unwrap();
    assert_eq!(p.severity, Severity::Error);
    assert!(p.to_string().starts_with("line 4: error:"), "{p}");
}

#[test]
fn malformed_line_in_the_middle() {
    let text = format!(
        "{HEADER}\n{}\nnot json at all\n{}\n",
        entry("aa", None, "one"),
        entry("bb", Some("aa"), "two")
    );
    let s = parse(&text);
    assert!(has(&s, ProblemKind::BadJson, 3), "{:?}", s.problems());
    assert_eq!(s.entries().len(), 2);
    assert_eq!(s.skipped_lines(), 1);
    assert!(!s.is_valid());
    // The context skips the bad line, like Pi.
    assert_eq!(s.context(None).unwrap().messages.len(), 2);
}

#[test]
fn json_that_is_not_an_object() {
    let text = format!("{HEADER}\n{}\n[1,2,3]\n", entry("aa", None, "one"));
    let s = parse(&text);
    assert!(has(&s, ProblemKind::NotAnObject, 3), "{:?}", s.problems());
}

#[test]
fn duplicated_header_is_a_warning() {
    let text = format!("{HEADER}\n{HEADER}\n{}\n", entry("aa", None, "one"));
    let s = parse(&text);
    assert!(
        has(&s, ProblemKind::DuplicateHeader, 2),
        "{:?}",
        s.problems()
    );
    assert!(s.is_valid());
    assert_eq!(s.entries().len(), 1);
}

#[test]
fn missing_parent() {
    let text = format!(
        "{HEADER}\n{}\n{}\n{}\n",
        entry("aa", None, "one"),
        entry("bb", Some("gone"), "two"),
        entry("cc", Some("bb"), "three")
    );
    let s = parse(&text);
    assert!(
        has(&s, ProblemKind::DanglingParent, 3),
        "{:?}",
        s.problems()
    );
    assert!(!s.is_valid());
    // Pi cuts the context at the broken link.
    assert_eq!(s.context(None).unwrap().messages.len(), 2);
    let (roots, _) = s.children_map();
    assert_eq!(roots.len(), 2);
}

#[test]
fn duplicate_ids() {
    let text = format!(
        "{HEADER}\n{}\n{}\n",
        entry("aa", None, "one"),
        entry("aa", None, "two")
    );
    let s = parse(&text);
    assert!(has(&s, ProblemKind::DuplicateId, 3), "{:?}", s.problems());
    let p = s
        .problems()
        .iter()
        .find(|p| p.kind == ProblemKind::DuplicateId)
        .unwrap();
    assert!(p.message.contains("line 2"), "{}", p.message);
    // Pi's Map keeps the later one.
    assert_eq!(s.entry("aa").unwrap().line, 3);
}

#[test]
fn cycles() {
    let text = format!(
        "{HEADER}\n{}\n{}\n{}\n",
        entry("aa", Some("cc"), "one"),
        entry("bb", Some("aa"), "two"),
        entry("cc", Some("bb"), "three")
    );
    let s = parse(&text);
    assert!(
        s.problems().iter().any(|p| p.kind == ProblemKind::Cycle),
        "{:?}",
        s.problems()
    );
    assert!(!s.is_valid());
    // Context building terminates.
    assert_eq!(s.context(None).unwrap().messages.len(), 3);

    let selfloop = format!("{HEADER}\n{}\n", entry("aa", Some("aa"), "one"));
    let s = parse(&selfloop);
    assert!(has(&s, ProblemKind::Cycle, 2), "{:?}", s.problems());
}

#[test]
fn no_header() {
    let s = parse("");
    assert!(has(&s, ProblemKind::NoHeader, 1));
    let s = parse(&format!("{}\n", entry("aa", None, "x")));
    assert!(has(&s, ProblemKind::NoHeader, 1), "{:?}", s.problems());
    assert!(s.header().is_none());
    let s = parse("{\"type\":\"session\",\"version\":3}\n");
    assert!(has(&s, ProblemKind::NoHeader, 1), "{:?}", s.problems());
    // Blank lines first: the header is the first JSON line, reported at its line.
    let s = parse(&format!("\n\n{}\n", entry("aa", None, "x")));
    assert!(has(&s, ProblemKind::NoHeader, 3), "{:?}", s.problems());
}

#[test]
fn missing_type_and_id() {
    let text = format!(
        "{HEADER}\n{{\"id\":\"aa\",\"parentId\":null}}\n{{\"type\":\"custom\",\"parentId\":null}}\n"
    );
    let s = parse(&text);
    assert!(has(&s, ProblemKind::MissingType, 2), "{:?}", s.problems());
    assert!(has(&s, ProblemKind::MissingId, 3), "{:?}", s.problems());
}

#[test]
fn unknown_types_and_roles_are_warnings_and_survive() {
    let unknown = r#"{"type":"x_future","id":"bb","parentId":"aa","timestamp":"2026-01-01T00:00:02.000Z","weird":{"z":1,"a":[1.50,"\u00e9"]}}"#;
    let role = r#"{"type":"message","id":"cc","parentId":"bb","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"oracle","content":"hm","timestamp":3,"extra":true}}"#;
    let text = format!(
        "{HEADER}\n{}\n{unknown}\n{role}\n",
        entry("aa", None, "one")
    );
    let s = parse(&text);
    assert!(has(&s, ProblemKind::UnknownType, 3));
    assert!(has(&s, ProblemKind::UnknownRole, 4));
    assert!(s.is_valid());
    let e = s.entry("bb").unwrap();
    assert_eq!(s.entry_line(e).unwrap(), unknown.as_bytes());
    let e = s.entry("cc").unwrap();
    assert_eq!(s.entry_line(e).unwrap(), role.as_bytes());
    // Unknown roles go to the context as stored (Pi passes messages through).
    let ctx = s.context(None).unwrap();
    assert_eq!(ctx.messages.len(), 2);
    assert_eq!(
        ctx.messages[1].message.get(),
        r#"{"role":"oracle","content":"hm","timestamp":3,"extra":true}"#
    );
}

#[test]
fn lenient_field_types() {
    // A label whose label is a number, a usage that is a string: still loads.
    let text = format!(
        "{HEADER}\n{}\n{{\"type\":\"label\",\"id\":\"bb\",\"parentId\":\"aa\",\"targetId\":\"aa\",\"label\":5}}\n{{\"type\":\"usage\",\"id\":\"cc\",\"parentId\":\"bb\",\"usage\":\"lots\"}}\n",
        entry("aa", None, "x")
    );
    let s = parse(&text);
    assert!(s.is_valid(), "{:?}", s.problems());
    assert_eq!(s.entries().len(), 3);
    assert!(s.labels().is_empty());
}

#[test]
fn crlf_line_endings_load() {
    let text = format!("{HEADER}\r\n{}\r\n", entry("aa", None, "x"));
    let s = parse(&text);
    assert!(s.is_valid(), "{:?}", s.problems());
    assert_eq!(s.entries().len(), 1);
}

#[test]
fn missing_trailing_newline_is_a_warning() {
    let text = format!("{HEADER}\n{}", entry("aa", None, "x"));
    let s = parse(&text);
    assert!(s.is_valid());
    assert!(has(&s, ProblemKind::NoTrailingNewline, 2));
}

#[test]
fn bytes_that_are_not_utf8_are_a_warning_and_kept() {
    let mut bytes = format!(
        "{HEADER}\n{}\n{}\n",
        entry("aa", None, "one"),
        entry("bb", Some("aa"), "tw_")
    )
    .into_bytes();
    let at = bytes.iter().rposition(|&b| b == b'_').unwrap();
    bytes[at] = 0xff;
    let s = Session::parse(bytes.clone(), None);
    // Pi loads it (lossily): still valid, with a warning naming line and entry.
    assert!(s.is_valid(), "{:?}", s.problems());
    assert!(has(&s, ProblemKind::NotUtf8, 3), "{:?}", s.problems());
    let p = s
        .problems()
        .iter()
        .find(|p| p.kind == ProblemKind::NotUtf8)
        .unwrap();
    assert_eq!(p.severity, Severity::Warning);
    assert_eq!(p.entry_id.as_deref(), Some("bb"));
    assert!(
        p.to_string().starts_with("line 3: warning: not UTF-8"),
        "{p}"
    );
    // The bytes are kept as they are.
    assert!(s.line_text(s.entry("bb").unwrap()).contains(&0xff));
    assert_eq!(s.problems().len(), 1, "{:?}", s.problems());
}

#[test]
fn duplicate_keys_last_wins_like_json_parse() {
    let text = format!(
        "{HEADER}\n{}\n{{\"type\":\"custom\",\"id\":\"xx\",\"parentId\":null,\"id\":\"bb\",\"parentId\":\"aa\",\"customType\":\"c\"}}\n",
        entry("aa", None, "x")
    );
    let s = parse(&text);
    assert!(s.is_valid(), "{:?}", s.problems());
    let e = s.entry("bb").unwrap();
    assert_eq!(e.parent_id.as_deref(), Some("aa"));
    assert!(s.entry("xx").is_none());
}

#[test]
fn message_that_is_not_an_object() {
    let text = format!(
        "{HEADER}\n{}\n{{\"type\":\"message\",\"id\":\"bb\",\"parentId\":\"aa\",\"message\":null}}\n",
        entry("aa", None, "x")
    );
    let s = parse(&text);
    assert!(
        has(&s, ProblemKind::MissingMessage, 3),
        "{:?}",
        s.problems()
    );
    assert_eq!(s.entries().len(), 2);
}

#[test]
fn header_with_odd_field_types_is_still_a_header() {
    let text = format!(
        "{{\"type\":\"session\",\"version\":3,\"id\":\"h\",\"cwd\":42}}\n{}\n",
        entry("aa", None, "x")
    );
    let s = parse(&text);
    assert!(s.is_valid(), "{:?}", s.problems());
    assert_eq!(s.header().unwrap().id, "h");
    assert_eq!(s.header().unwrap().cwd, None);
}

#[test]
fn non_object_first_line_means_no_header() {
    let text = format!("42\n{HEADER}\n{}\n", entry("aa", None, "x"));
    let s = parse(&text);
    assert!(has(&s, ProblemKind::NoHeader, 1), "{:?}", s.problems());
    assert!(has(&s, ProblemKind::NotAnObject, 1), "{:?}", s.problems());
}
