//! Properties: unknown JSON survives byte for byte; loading never fails.

use bh_protocol::RawObject;
use bh_session::Session;
use proptest::prelude::*;
use serde_json::{Map, Value};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e9f64..1e9)
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[a-zA-Z0-9 \\\\\"\n\t\u{e9}\u{1F600}]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[a-z]{1,6}", inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn unknown_entries_round_trip(fields in prop::collection::vec(("[a-zA-Z_]{1,8}", json_value()), 0..6),
                                  kind in "[a-z_]{1,12}") {
        prop_assume!(kind != "session");
        // An entry of any (possibly unknown) type with arbitrary extra fields,
        // written compactly the way JSON.stringify does.
        let mut line = format!("{{\"type\":\"{kind}\",\"id\":\"abcd1234\",\"parentId\":null");
        for (k, v) in &fields {
            if ["type", "id", "parentId"].contains(&k.as_str()) { continue; }
            line.push_str(&format!(",\"{k}\":{}", serde_json::to_string(v).unwrap()));
        }
        line.push('}');
        let text = format!("{}\n{line}\n", crate::support::HEADER);
        let s = Session::parse(text.clone().into_bytes(), None);
        prop_assert_eq!(s.bytes(), text.as_bytes());
        let e = s.entry("abcd1234");
        prop_assert!(e.is_some(), "{:?}", s.problems());
        let e = e.unwrap();
        prop_assert_eq!(s.entry_line(e).unwrap(), line.as_bytes().to_vec());
        prop_assert_eq!(RawObject::parse(&line).unwrap().to_json().unwrap(), line);
    }

    #[test]
    fn loading_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let s = Session::parse(bytes, None);
        let _ = s.context(None);
        let _ = s.stats();
        let _ = s.children_map();
    }

    #[test]
    fn truncating_a_file_anywhere_reports_a_line(cut in 0usize..2000) {
        let path = crate::support::scenario("s07-extension-entries");
        let data = fs_err::read(path).unwrap();
        let cut = cut.min(data.len());
        let s = Session::parse(data[..cut].to_vec(), None);
        if cut > 0 && data[cut - 1] != b'\n' && s.header().is_some() {
            // The cut line is torn (or happens to be a complete object without newline).
            prop_assert!(!s.problems().is_empty());
        }
        let _ = s.context(None).unwrap();
    }
}
