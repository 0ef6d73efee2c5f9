//! Every real Pi file: loads, validates as Pi would have it, round-trips byte
//! for byte, and gives the context the real Pi reported (tests/fixtures/expected).

use bh_protocol::RawObject;
use bh_session::{ProblemKind, Session};
use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::support::{all_fixtures, digest, expected, fixtures_dir};

/// Fixtures that are structurally broken, and the problem each must report.
const INVALID: &[(&str, ProblemKind, usize)] = &[
    ("empty-file.input.jsonl", ProblemKind::NoHeader, 1),
    ("garbage-not-a-session.input.jsonl", ProblemKind::BadJson, 1),
    (
        "handmade-v2-hookmessage.input.jsonl",
        ProblemKind::BadJson,
        4,
    ),
    ("handmade-v3-with-junk.input.jsonl", ProblemKind::BadJson, 3),
    (
        "handmade-v3-with-junk.after-continue-by-pi.jsonl",
        ProblemKind::BadJson,
        3,
    ),
    // Pi 0.73.1's own clone bug: a child of a dropped label entry.
    (
        "2026-11-30T10-10-48-958Z_01a22bef-8bfc-7272-8aa7-57f0c1f2688b.jsonl",
        ProblemKind::DanglingParent,
        8,
    ),
];

#[test]
fn there_are_fixtures() {
    assert!(all_fixtures().len() >= 39, "{:?}", all_fixtures());
}

#[test]
fn every_fixture_loads_and_is_never_modified() {
    for rel in all_fixtures() {
        let path = fixtures_dir().join(&rel);
        let before = digest(&path);
        let raw = fs_err::read(&path).unwrap();
        let s = Session::load(&path).unwrap();
        assert_eq!(s.bytes(), &raw[..], "{}", rel.display());
        // Touch everything that reads.
        let _ = s.stats();
        let _ = s.context(None).unwrap();
        let _ = s.children_map();
        assert_eq!(digest(&path), before, "{} changed", rel.display());
    }
}

#[test]
fn every_fixture_validates_as_pi_would_have_it() {
    for rel in all_fixtures() {
        let name = rel.file_name().unwrap().to_str().unwrap();
        let s = Session::load(fixtures_dir().join(&rel)).unwrap();
        match INVALID.iter().find(|(n, _, _)| *n == name) {
            Some((_, kind, line)) => {
                assert!(!s.is_valid(), "{name} should be invalid");
                assert!(
                    s.errors().any(|p| p.kind == *kind && p.line == *line),
                    "{name}: expected {kind:?} at line {line}, got {:?}",
                    s.problems()
                );
            }
            None => assert!(s.is_valid(), "{name}: {:?}", s.problems()),
        }
    }
}

#[test]
fn every_line_round_trips_byte_for_byte() {
    for rel in all_fixtures() {
        let s = Session::load(fixtures_dir().join(&rel)).unwrap();
        // The s21 *.input.jsonl files (and the lines Pi kept from them) were
        // written by a Python driver, not by Pi.
        let rs = rel.to_str().unwrap();
        let hand_written = rs.ends_with(".input.jsonl") || rs.contains("handmade-");
        for e in s.entries() {
            let line = std::str::from_utf8(s.line_text(e)).unwrap();
            let obj = RawObject::parse(line).unwrap();
            if hand_written {
                // Not compact JSON: equal as values, and still re-emitted verbatim.
                let a: Value = serde_json::from_str(&obj.to_json().unwrap()).unwrap();
                let b: Value = serde_json::from_str(line).unwrap();
                assert_eq!(a, b);
            } else {
                assert_eq!(obj.to_json().unwrap(), line, "{}:{}", rel.display(), e.line);
            }
            if e.migration.is_none() {
                assert_eq!(s.entry_line(e).unwrap(), line.as_bytes());
                if !hand_written {
                    assert_eq!(s.entry_object(e).unwrap().to_json().unwrap(), line);
                }
            }
        }
        if let Some(h) = s.header_line() {
            let line = std::str::from_utf8(&s.bytes()[h.span.0..h.span.1]).unwrap();
            if !hand_written {
                assert_eq!(RawObject::parse(line).unwrap().to_json().unwrap(), line);
            }
        }
    }
}

#[test]
fn leaf_and_entry_count_match_real_pi_export() {
    for rel in all_fixtures() {
        let exp = expected(&rel);
        let s = Session::load(fixtures_dir().join(&rel)).unwrap();
        assert_eq!(exp["export_rc"], 0, "{}", rel.display());
        assert_eq!(
            exp["export_entries"].as_u64().unwrap() as usize,
            s.entries().len(),
            "{}",
            rel.display()
        );
        if s.source_version() >= 3 {
            let leaf = s.leaf().map(|e| Value::String(e.id.clone()));
            assert_eq!(
                exp["export_leaf"],
                leaf.unwrap_or(Value::Null),
                "{}",
                rel.display()
            );
        }
    }
}

#[test]
fn context_matches_real_pi_get_messages() {
    for rel in all_fixtures() {
        let exp = expected(&rel);
        let s = Session::load(fixtures_dir().join(&rel)).unwrap();
        let ctx = s.context(None).unwrap();
        let ours: Vec<Value> = ctx
            .messages
            .iter()
            .map(|m| serde_json::from_str(m.message.get()).unwrap())
            .collect();
        let theirs = exp["messages"].as_array().cloned().unwrap_or_default();
        assert_eq!(ours.len(), theirs.len(), "{}", rel.display());
        assert_eq!(ours, theirs, "{}", rel.display());
    }
}

#[test]
fn session_name_matches_real_pi() {
    for rel in all_fixtures() {
        let exp = expected(&rel);
        let s = Session::load(fixtures_dir().join(&rel)).unwrap();
        let theirs = exp["state"]["sessionName"].as_str().map(str::to_owned);
        assert_eq!(s.name().map(str::to_owned), theirs, "{}", rel.display());
    }
}

/// Hand-made Pi 1.x files (system messages with sections and tool patches,
/// `context_edit`, `usage` entries, compaction `systemMessage`, 1.x message
/// fields, an unknown entry type) against what the real Pi 1.6.0 reported
/// (tests/fixtures/expected-pi-1.6.0, see regen-expected-1x.sh).
#[test]
fn pi_1x_files_match_real_pi_1_6() {
    let dir = fixtures_dir().join("handmade-1x");
    let mut files: Vec<_> = fs_err::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 2);
    for path in files {
        let rel = path.strip_prefix(fixtures_dir()).unwrap();
        let exp_path = fixtures_dir()
            .join("expected-pi-1.6.0")
            .join(rel.with_extension("json"));
        let exp: Value = serde_json::from_slice(&fs_err::read(&exp_path).unwrap()).unwrap();
        let before = digest(&path);
        let s = Session::load(&path).unwrap();
        assert!(s.is_valid(), "{:?}", s.problems());
        assert_eq!(exp["export_rc"], 0);
        assert_eq!(exp["export_leaf"], s.leaf().unwrap().id.as_str());
        assert_eq!(exp["export_entries"], s.entries().len());
        assert_eq!(exp["state"]["sessionName"], s.name().unwrap());
        let ours: Vec<Value> = s
            .context(None)
            .unwrap()
            .messages
            .iter()
            .map(|m| serde_json::from_str(m.message.get()).unwrap())
            .collect();
        assert_eq!(
            &ours,
            exp["messages"].as_array().unwrap(),
            "{}",
            rel.display()
        );
        assert_eq!(digest(&path), before);
    }
}
