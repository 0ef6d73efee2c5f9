#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;

use bh_fs::{create_dir_all_mode, id_time_ms, run_id, write_atomic, write_json_atomic};

#[test]
fn writes_replace_whole_files_and_leave_no_temporary_behind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    write_json_atomic(&path, &serde_json::json!({"a": 1})).unwrap();
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&fs_err::read(&path).unwrap()).unwrap(),
        serde_json::json!({"a": 1})
    );
    assert_eq!(
        fs_err::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    write_atomic(&path, b"second", 0o600).unwrap();
    assert_eq!(fs_err::read(&path).unwrap(), b"second");
    let names: Vec<_> = fs_err::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
}

#[test]
fn concurrent_writers_never_tear_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x");
    std::thread::scope(|s| {
        for t in 0..8u8 {
            let path = &path;
            s.spawn(move || {
                for _ in 0..50 {
                    write_atomic(path, &[t; 4096], 0o644).unwrap();
                }
            });
        }
    });
    let bytes = fs_err::read(&path).unwrap();
    assert_eq!(bytes.len(), 4096);
    assert!(bytes.iter().all(|b| *b == bytes[0]));
    assert_eq!(fs_err::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn a_failed_write_names_the_problem_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let err = write_atomic(&dir.path().join("missing/x"), b"x", 0o600).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(fs_err::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn ids_are_unique_start_differently_and_carry_their_time() {
    let before = bh_fs::now_ms();
    let ids: Vec<String> = (0..1000).map(|_| run_id("t", b"salt")).collect();
    let after = bh_fs::now_ms();
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
    assert!(ids.iter().all(|i| i.starts_with('t')));
    // The first characters after the letter differ between ids made at
    // once (all 1000 sharing one of 16 digits: 16^-999).
    let first: HashSet<char> = ids.iter().map(|i| i.chars().nth(1).unwrap()).collect();
    assert!(first.len() > 1, "{first:?}");
    // The time they carry is when they were made, in order.
    let ms: Vec<u64> = ids.iter().map(|i| id_time_ms(i).unwrap()).collect();
    assert!(ms.windows(2).all(|w| w[0] <= w[1]));
    assert!(ms[0] >= u64::try_from(before).unwrap() && ms[999] <= u64::try_from(after).unwrap());
    // The earlier shape (time first) reads too.
    assert_eq!(id_time_ms("x19a0b1c2d3e-0badf00d"), Some(0x19a0b1c2d3e));
    assert_eq!(id_time_ms("x0badf00d-19a0b1c2d3e"), Some(0x19a0b1c2d3e));
    assert_eq!(id_time_ms("nonsense"), None);
}

#[test]
fn private_folders_are_created_with_their_mode_and_existing_ones_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mode = |p: &std::path::Path| fs_err::metadata(p).unwrap().permissions().mode() & 0o777;
    let deep = dir.path().join("a/b/c");
    create_dir_all_mode(&deep, 0o700).unwrap();
    assert_eq!(mode(&deep), 0o700);
    assert_eq!(mode(&dir.path().join("a")), 0o700);
    // Again: no error, nothing changed on a folder that exists with another mode.
    fs_err::set_permissions(&deep, std::fs::Permissions::from_mode(0o750)).unwrap();
    create_dir_all_mode(&deep, 0o700).unwrap();
    assert_eq!(mode(&deep), 0o750);
    // A file in the way is an error.
    let file = dir.path().join("f");
    fs_err::write(&file, "x").unwrap();
    assert!(create_dir_all_mode(&file.join("sub"), 0o700).is_err());
}
