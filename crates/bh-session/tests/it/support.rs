use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every session fixture, relative to `fixtures_dir()`, sorted.
pub fn all_fixtures() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for top in ["pi-0.73.1", "pi-mono-v1"] {
        walk(&fixtures_dir().join(top), &mut out);
    }
    out.sort();
    out.into_iter()
        .map(|p| p.strip_prefix(fixtures_dir()).unwrap().to_path_buf())
        .collect()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs_err::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            out.push(p);
        }
    }
}

pub fn fixture(rel: &str) -> PathBuf {
    fixtures_dir().join(rel)
}

/// The single session file of a scenario folder (first one when several).
pub fn scenario(name: &str) -> PathBuf {
    let dir = fixtures_dir().join("pi-0.73.1").join(name);
    let mut files: Vec<PathBuf> = fs_err::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files.remove(0)
}

pub fn digest(path: &Path) -> String {
    hex::encode(Sha256::digest(fs_err::read(path).unwrap()))
}

/// What the real Pi 0.73.1 reported for a fixture (tests/fixtures/expected).
pub fn expected(rel: &Path) -> serde_json::Value {
    let p = fixtures_dir()
        .join("expected")
        .join(rel.with_extension("json"));
    serde_json::from_slice(&fs_err::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap()
}

/// Write `text` to a new file in `dir` and return its path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    fs_err::write(&p, text).unwrap();
    p
}

pub const HEADER: &str = r#"{"type":"session","version":3,"id":"s-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#;

pub fn entry(id: &str, parent: Option<&str>, extra: &str) -> String {
    let parent = match parent {
        Some(p) => format!("\"{p}\""),
        None => "null".to_owned(),
    };
    format!(
        r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":[{{"type":"text","text":"{extra}"}}],"timestamp":1}}}}"#
    )
}
