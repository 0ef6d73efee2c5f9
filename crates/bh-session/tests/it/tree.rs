//! The tree: index, leaf, path, children, labels, name, models, totals.

use bh_session::Session;
use pretty_assertions::assert_eq;

use crate::support::{fixture, scenario};

#[test]
fn s07_tree() {
    let s = Session::load(scenario("s07-extension-entries")).unwrap();
    assert_eq!(s.entries().len(), 21);
    assert_eq!(s.leaf().unwrap().id, "b9b28e92");
    assert_eq!(s.name(), Some("Corpus extension session"));
    let labels: Vec<(&str, &str)> = s
        .labels()
        .iter()
        .map(|l| (l.target_id.as_str(), l.label.as_str()))
        .collect();
    assert_eq!(
        labels,
        vec![("59f3f2ac", "checkpoint-1"), ("02bb3ed8", "branch-point")]
    );
    assert_eq!(s.label_of("59f3f2ac"), Some("checkpoint-1"));

    let path: Vec<&str> = s
        .path_to_root("b9b28e92")
        .unwrap()
        .iter()
        .map(|e| e.id.as_str())
        .collect();
    assert_eq!(
        path,
        vec![
            "0caeceab", "3af32e86", "bda9dc17", "088265b7", "59f3f2ac", "02bb3ed8", "a718cf02",
            "0cc46234", "0097eeb9", "00fee3f5", "03a01c91", "b9b28e92"
        ]
    );
    let kids: Vec<&str> = s
        .children("59f3f2ac")
        .iter()
        .map(|e| e.id.as_str())
        .collect();
    assert_eq!(kids, vec!["a672eefc", "02bb3ed8"]);
    let (roots, children) = s.children_map();
    assert_eq!(roots.len(), 1);
    assert_eq!(children[s.index_of("59f3f2ac").unwrap()].len(), 2);
    assert!(s.path_to_root("nope").is_err());
}

#[test]
fn s07_stats() {
    let s = Session::load(scenario("s07-extension-entries")).unwrap();
    let st = s.stats();
    assert_eq!(st.messages, 9);
    assert_eq!(st.roles["assistant"], 5);
    assert_eq!(st.entry_types["custom_message"], 3);
    assert_eq!(st.models, vec!["fake/fake-model".to_owned()]);
    assert_eq!(st.totals.total_tokens, 4095);
    assert_eq!(st.totals.input, 2005);
    assert_eq!(st.totals.output, 88);
    assert!(
        (st.totals.cost - 0.007936).abs() < 1e-6,
        "{}",
        st.totals.cost
    );
}

#[test]
fn s06_model_change_and_thinking() {
    let s = Session::load(scenario("s06-rpc-session-ops")).unwrap();
    let st = s.stats();
    assert!(st.models.len() >= 2, "{:?}", st.models);
    let ctx = s.context(None).unwrap();
    // medium, then high, then off after the model switch
    assert_eq!(ctx.thinking_level, "off");
    let before_switch = s.context(Some("d358efe8")).unwrap();
    assert_eq!(before_switch.thinking_level, "high");
    let m = ctx.model.unwrap();
    assert_eq!(m.provider.as_deref(), Some("fake"));
}

#[test]
fn v1_files_get_ids_in_memory() {
    let p = fixture("pi-mono-v1/before-compaction.jsonl");
    let s = Session::load(&p).unwrap();
    assert_eq!(s.source_version(), 1);
    assert!(s.is_valid(), "{:?}", s.problems());
    let ids: std::collections::HashSet<&str> = s.entries().iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids.len(), s.entries().len());
    assert!(s.entries().iter().all(|e| e.id.len() == 8));
    // Linear chain.
    for w in s.entries().windows(2) {
        assert_eq!(w[1].parent_id.as_deref(), Some(w[0].id.as_str()));
    }
    // Deterministic.
    let again = Session::load(&p).unwrap();
    assert_eq!(again.leaf().unwrap().id, s.leaf().unwrap().id);
    // Migrated lines look like Pi's: id/parentId appended, index replaced.
    let comp = s
        .entries()
        .iter()
        .find(|e| e.kind == bh_protocol::EntryType::Compaction)
        .unwrap();
    let line = String::from_utf8(s.entry_line(comp).unwrap()).unwrap();
    assert!(!line.contains("firstKeptEntryIndex"), "{line}");
    assert!(line.contains("\"firstKeptEntryId\""), "{line}");
}

#[test]
fn v2_hookmessage_becomes_custom() {
    let p =
        fixture("pi-0.73.1/s21-load-handcrafted-and-legacy/handmade-v2-hookmessage.input.jsonl");
    let s = Session::load(&p).unwrap();
    assert_eq!(s.source_version(), 2);
    let e = s
        .entries()
        .iter()
        .find(|e| e.migration.as_ref().is_some_and(|m| m.role_renamed))
        .unwrap();
    assert_eq!(e.role.as_deref(), Some("custom"));
    let line = String::from_utf8(s.entry_line(e).unwrap()).unwrap();
    assert!(line.contains("\"role\":\"custom\""), "{line}");
    // Compare with Pi's own in-place migration of the same file.
    let pi = Session::load(fixture(
        "pi-0.73.1/s21-load-handcrafted-and-legacy/handmade-v2-hookmessage.after-export-by-pi.jsonl",
    ))
    .unwrap();
    let pi_line = pi.entry(&e.id).map(|pe| pi.line_text(pe).to_vec()).unwrap();
    assert_eq!(String::from_utf8(pi_line).unwrap(), line);
}
