//! `consume` in two steps: a verdict that writes nothing, then one append
//! under the record's lock. A failure between them leaves the handoff
//! pending; a verdict already in the session is never appended twice.

use super::*;

/// Every `<target>.handoff*` sibling's name suffix, sorted.
fn records(target: &Path) -> Vec<String> {
    let name = target.file_name().unwrap().to_str().unwrap().to_owned();
    let mut out: Vec<String> = fs::read_dir(target.parent().unwrap())
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().into_string().unwrap();
            n.strip_prefix(&format!("{name}.handoff"))
                .map(str::to_owned)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_failed_append_leaves_the_handoff_pending_for_the_next_open() {
    let f = fx();
    create(&f.runner(), &f.create_opts("p")).unwrap();
    let (src, _) = source_session(&f, 2);
    let out = enter(&f.runner(), &enter_opts(&f, "p", &src, None)).unwrap();
    let target = out.target.clone();
    // The session cannot be appended to (a folder stands where it was).
    let aside = with_suffix(&target, ".aside");
    fs::rename(&target, &aside).unwrap();
    fs::create_dir(&target).unwrap();
    let err = consume(&f.runner(), &f.state(), &target).unwrap_err();
    assert!(
        err.to_string().contains(target.to_str().unwrap()),
        "the error names the session: {err}"
    );
    assert_eq!(records(&target), vec![".json".to_owned()], "still pending");
    // Same process, next open: the handoff was not lost.
    fs::remove_dir(&target).unwrap();
    fs::rename(&aside, &target).unwrap();
    assert!(matches!(
        consume(&f.runner(), &f.state(), &target).unwrap(),
        ConsumeOutcome::Verified { .. }
    ));
    assert_eq!(verdicts(&target), 1);
    assert_eq!(records(&target), vec![".consumed.json".to_owned()]);
    assert_eq!(
        consume(&f.runner(), &f.state(), &target).unwrap(),
        ConsumeOutcome::NotPending
    );
}

#[test]
fn a_verdict_appended_before_a_crash_is_not_appended_again() {
    let f = fx();
    create(&f.runner(), &f.create_opts("c")).unwrap();
    let (src, _) = source_session(&f, 2);
    let out = enter(&f.runner(), &enter_opts(&f, "c", &src, None)).unwrap();
    let target = out.target.clone();
    assert!(matches!(
        consume(&f.runner(), &f.state(), &target).unwrap(),
        ConsumeOutcome::Verified { .. }
    ));
    // The consumer appended its verdict and died before renaming the record.
    fs::rename(
        with_suffix(&target, ".handoff.consumed.json"),
        handoff_path(&target),
    )
    .unwrap();
    let before = fs::read(&target).unwrap();
    assert_eq!(
        consume(&f.runner(), &f.state(), &target).unwrap(),
        ConsumeOutcome::NotPending
    );
    assert_eq!(fs::read(&target).unwrap(), before, "nothing appended");
    assert_eq!(verdicts(&target), 1);
    assert_eq!(records(&target), vec![".consumed.json".to_owned()]);
}

#[test]
fn consumers_waiting_on_the_record_lock_append_once_when_it_is_released() {
    let f = fx();
    create(&f.runner(), &f.create_opts("l")).unwrap();
    let (src, _) = source_session(&f, 2);
    let out = enter(&f.runner(), &enter_opts(&f, "l", &src, None)).unwrap();
    let target = out.target.clone();
    let before = fs::read(&target).unwrap();
    // Another consumer holds the record's lock: every verdict waits for it
    // and nothing is written meanwhile.
    let held = fs_err::File::open(handoff_path(&target)).unwrap();
    held.lock().unwrap();
    let n = 4;
    let barrier = Arc::new(Barrier::new(n + 1));
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let b = barrier.clone();
            let runner = f.runner();
            let state = f.state();
            let target = target.clone();
            std::thread::spawn(move || {
                b.wait();
                consume(&runner, &state, &target).unwrap()
            })
        })
        .collect();
    barrier.wait();
    assert_eq!(fs::read(&target).unwrap(), before);
    assert_eq!(records(&target), vec![".json".to_owned()]);
    held.unlock().unwrap();
    drop(held);
    let results: Vec<ConsumeOutcome> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let verified = results
        .iter()
        .filter(|r| matches!(r, ConsumeOutcome::Verified { .. }))
        .count();
    assert_eq!(verified, 1, "{results:?}");
    assert_eq!(verdicts(&target), 1);
    assert_eq!(records(&target), vec![".consumed.json".to_owned()]);
}

/// A record bh sealed, then edited (a planted worktree path, a `resumed`
/// length that would cut the session), is not bh's any more: `consume`
/// leaves it and the session alone, `discard` refuses to act on it.
#[test]
fn an_edited_record_is_foreign_to_consume_and_discard() {
    let f = fx();
    create(&f.runner(), &f.create_opts("e")).unwrap();
    let (src, _) = source_session(&f, 2);
    let out = enter(&f.runner(), &enter_opts(&f, "e", &src, None)).unwrap();
    let target = out.target.clone();
    let hpath = handoff_path(&target);
    let mut record: serde_json::Value = serde_json::from_slice(&fs::read(&hpath).unwrap()).unwrap();
    assert!(
        record["mac"].as_str().is_some_and(|m| m.len() == 64),
        "{record}"
    );
    record["worktree"] = serde_json::json!("/elsewhere");
    record["resumed"] =
        serde_json::json!({"fromLen": 0, "toLen": fs::metadata(&target).unwrap().len()});
    fs::write(&hpath, serde_json::to_vec(&record).unwrap()).unwrap();
    let before = fs::read(&target).unwrap();

    let ConsumeOutcome::Foreign { record: at, reason } =
        consume(&f.runner(), &f.state(), &target).unwrap()
    else {
        panic!("an edited record was accepted");
    };
    assert_eq!(at, hpath);
    assert!(reason.contains("not sealed"), "{reason}");
    assert_eq!(fs::read(&target).unwrap(), before, "nothing appended");
    assert_eq!(records(&target), vec![".json".to_owned()], "left in place");

    let err = discard(&f.state(), &target).unwrap_err();
    assert!(
        err.to_string().contains("not a handoff record bh wrote"),
        "{err}"
    );
    assert_eq!(fs::read(&target).unwrap(), before, "not cut, not deleted");
}

/// A record sealed with another state directory's key is not this one's.
#[test]
fn a_record_sealed_under_another_state_directory_is_foreign() {
    let f = fx();
    create(&f.runner(), &f.create_opts("k")).unwrap();
    let (src, _) = source_session(&f, 2);
    let mut opts = enter_opts(&f, "k", &src, None);
    opts.state_dir = f.root.join("other-state");
    let out = enter(&f.runner(), &opts).unwrap();
    // This state directory has no key yet: nothing can be its own.
    assert!(matches!(
        consume(&f.runner(), &f.state(), &out.target).unwrap(),
        ConsumeOutcome::Foreign { .. }
    ));
    // Its own state directory accepts it.
    assert!(matches!(
        consume(&f.runner(), &opts.state_dir, &out.target).unwrap(),
        ConsumeOutcome::Verified { .. }
    ));
}
