use super::scan::{PARALLEL_MIN_BYTES, PIECE_BYTES, memchr_nl, scan_workers, split_at_newlines};
use super::*;

fn parse_with(data: &[u8], workers: usize, piece: usize) -> String {
    let mut s = Session::unindexed(data.to_vec(), None);
    s.index_with(workers, piece);
    // `by_id` is a HashMap: compare it sorted.
    let mut by_id: Vec<_> = std::mem::take(&mut s.by_id).into_iter().collect();
    by_id.sort();
    // The bytes are the input; leave them out of the comparison.
    s.data = Vec::new();
    format!("{s:?} {by_id:?}")
}

fn assert_same_all_splits(data: &[u8]) {
    let one = parse_with(data, 1, PIECE_BYTES);
    for workers in [2, 3, 5, 8] {
        for piece in [97, 4096, PIECE_BYTES] {
            assert_eq!(
                one,
                parse_with(data, workers, piece),
                "workers = {workers}, piece = {piece}"
            );
        }
    }
}

const BODY: &[&str] = &[
    r#"{"type":"message","id":"a1","parentId":null,"timestamp":"t","message":{"role":"user","content":"hi"}}"#,
    "",
    "   ",
    r#"{"type":"message","id":"a2","parentId":"a1","message":{"role":"assistant","provider":"p","model":"m","usage":{"input":1,"output":2}}}"#,
    r#"{"type":"label","id":"l1","parentId":"a2","targetId":"a1","label":"x"}"#,
    r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#,
    r#"{"type":"session","version":3,"id":"other"}"#,
    "{not json",
    "[1,2]",
    "42",
    r#"{"type":"message","id":"d1","id":"d2","parentId":"a2","message":{"role":"user"}}"#,
    r#"{"type":"weird","id":"w1"}"#,
    r#"{"id":"nt"}"#,
    r#"{"type":"message","id":"m0"}"#,
    r#"{"type":"message","id":"r1","message":{"role":"hookMessage"}}"#,
    r#"{"type":"compaction","id":"c1","firstKeptEntryIndex":3,"summary":"s"}"#,
    r#"{"type":"session_info","id":"i1","name":"n"}"#,
    r#"{"type":"model_change","id":"mc","provider":"p","modelId":"m"}"#,
];

fn big(header: &str, tail: &str, min: usize) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(header.as_bytes());
    let mut i = 0usize;
    while out.len() < min {
        out.extend_from_slice(BODY[i % BODY.len()].as_bytes());
        out.push(b'\n');
        i += 1;
    }
    out.extend_from_slice(tail.as_bytes());
    out
}

#[test]
fn parallel_scan_matches_sequential() {
    // `index_with` takes the parallel path whatever the size.
    let min = 20_000;
    let v3 =
        "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n";
    let v1 = "{\"type\":\"session\",\"id\":\"s1\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n";
    for header in [
        v3,
        v1,
        "{\"type\":\"session\",\"version\":2,\"id\":\"s2\"}\n",
        "",
        "\n[]\n",
    ] {
        for tail in [
            "",
            "{\"type\":\"message\",\"id\":\"z\"}",
            "{\"type\":\"mess",
            "\n\n",
            "  ",
        ] {
            let data = big(header, tail, min);
            assert_same_all_splits(&data);
        }
    }
    // Tiny inputs and inputs with fewer lines than workers.
    for data in [
        &b""[..],
        b"\n",
        b"{}",
        b"{\"type\":\"session\",\"id\":\"s\"}\n{}\n",
    ] {
        assert_same_all_splits(data);
    }
    // Lines that are not UTF-8 (every user prompt's text), wherever the pieces fall.
    let mut bad = big(v3, "", min);
    let hits: Vec<usize> = bad
        .windows(4)
        .enumerate()
        .filter(|(_, w)| *w == b"\"hi\"")
        .map(|(i, _)| i + 1)
        .collect();
    assert!(hits.len() > 10);
    for i in hits {
        bad[i] = 0xff;
    }
    assert!(parse_with(&bad, 1, PIECE_BYTES).contains("NotUtf8"));
    assert_same_all_splits(&bad);
    // One long line without a newline: a single chunk.
    let mut one = vec![b' '; min];
    one.push(b'{');
    assert_same_all_splits(&one);
}

#[test]
fn pieces_cover_the_data_and_end_at_newlines() {
    let data = big("", "tail", 5000);
    for pieces in [1, 2, 7, 100, 10_000] {
        let ranges = split_at_newlines(&data, pieces);
        assert!(ranges.len() <= pieces);
        let mut at = 0;
        for (ix, &(a, b)) in ranges.iter().enumerate() {
            assert_eq!(a, at);
            assert!(b > a);
            if ix + 1 < ranges.len() {
                assert_eq!(data[b - 1], b'\n');
            }
            at = b;
        }
        assert_eq!(at, data.len());
    }
    assert!(split_at_newlines(b"", 4).is_empty());
}

#[test]
fn newline_search_matches_the_naive_one() {
    let mut hay = vec![b'x'; 40];
    assert_eq!(memchr_nl(&hay), None);
    for at in 0..40 {
        hay[at] = b'\n';
        for from in 0..=at {
            assert_eq!(memchr_nl(&hay[from..]), Some(at - from));
        }
        hay[at] = 0x8a; // high bit set, low bits of `\n`
        assert_eq!(memchr_nl(&hay), None);
        hay[at] = b'x';
    }
    assert_eq!(memchr_nl(b"\x0b\x0a"), Some(1));
    assert_eq!(memchr_nl(b"\x09\x0a\x0a"), Some(1));
}

#[test]
fn big_inputs_scan_in_parallel_small_ones_do_not() {
    assert_eq!(scan_workers(PARALLEL_MIN_BYTES - 1), 1);
    assert!((1..=8).contains(&scan_workers(PARALLEL_MIN_BYTES)));
}
