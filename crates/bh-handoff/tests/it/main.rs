//! `bh-handoff` on real repositories in temp dirs with real git: sessions
//! carried into managed worktrees (made with `bh-worktree`) and back.
//!
//! Over 600 lines: the crate's one integration binary; tests are independent and share the helpers at the top.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use bh_handoff::{
    ConsumeOutcome, EnterOptions, HandoffError, ORIENTATION_TYPE, VERIFICATION_TYPE, consume,
    discard, enter, enter_main, handoff_path,
};
use bh_session::{Session, SessionWriter};
use bh_test_support::worktree_repo::{WorktreeRepo, write};
use bh_worktree::{CreateOptions, WorktreeError, create};
use serde_json::json;

mod consume;

/// The shared repository ([`bh_test_support::worktree_repo`]) and this
/// crate's own helpers.
struct Fx(WorktreeRepo);

impl std::ops::Deref for Fx {
    type Target = WorktreeRepo;
    fn deref(&self) -> &WorktreeRepo {
        &self.0
    }
}

fn fx() -> Fx {
    Fx(WorktreeRepo::new())
}

/// How many verification entries (consumed handoffs) `target` holds.
fn verdicts(target: &Path) -> usize {
    Session::load(target)
        .unwrap()
        .entries()
        .iter()
        .filter(|e| e.custom_type.as_deref() == Some(VERIFICATION_TYPE))
        .count()
}

impl Fx {
    fn agent(&self) -> PathBuf {
        self.root.join("agent")
    }

    fn create_opts(&self, name: &str) -> CreateOptions {
        CreateOptions {
            name: name.into(),
            cwd: self.repo.clone(),
            command_env: vec![("PATH".into(), std::env::var_os("PATH").unwrap_or_default())],
            ..CreateOptions::default()
        }
    }
}

// ---------------------------------------------------------------- enter

fn source_session(f: &Fx, n: usize) -> (PathBuf, Vec<String>) {
    let mut w = SessionWriter::create_for_cwd(&f.agent(), &f.repo.display().to_string()).unwrap();
    let mut ids = Vec::new();
    for i in 0..n {
        let msg = if i % 2 == 0 {
            json!({"role": "user", "content": format!("turn {i}"), "timestamp": 1_700_000_000_000u64 + i as u64})
        } else {
            json!({"role": "assistant", "content": [{"type": "text", "text": format!("reply {i}")}],
                   "api": "anthropic-messages", "provider": "anthropic", "model": "m",
                   "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                   "stopReason": "stop", "timestamp": 1_700_000_000_000u64 + i as u64})
        };
        ids.push(w.append_message(&msg).unwrap());
    }
    (w.path().to_path_buf(), ids)
}

fn enter_opts(f: &Fx, name: &str, session: &Path, entry: Option<&str>) -> EnterOptions {
    EnterOptions {
        name: name.into(),
        cwd: f.repo.clone(),
        session: session.to_path_buf(),
        entry: entry.map(str::to_owned),
        agent_dir: f.agent(),
        unflushed: Vec::new(),
        state_dir: f.state(),
    }
}

fn orientations(s: &Session) -> usize {
    s.entries()
        .iter()
        .filter(|e| e.custom_type.as_deref() == Some(ORIENTATION_TYPE))
        .count()
}

#[test]
fn enter_carries_a_complete_session_and_ends_in_one_orientation() {
    let f = fx();
    create(&f.runner(), &f.create_opts("e")).unwrap();
    write(&f.repo.join("left.txt"), "left behind\n");
    let (src, ids) = source_session(&f, 4);
    let before = fs::read(&src).unwrap();
    let out = enter(&f.runner(), &enter_opts(&f, "e", &src, None)).unwrap();
    assert_eq!(
        fs::read(&src).unwrap(),
        before,
        "the source is never written"
    );
    assert_eq!(out.carry, bh_handoff::Carry::WholeTree);
    assert_eq!(out.left_behind_count, Some(1));
    assert_eq!(out.left_behind, vec!["left.txt"]);
    let wt = f.wt("e");
    assert!(out.target.starts_with(bh_session::session_dir_for_cwd(
        &f.agent(),
        &wt.display().to_string()
    )));
    let s = Session::load(&out.target).unwrap();
    assert!(s.is_valid());
    assert_eq!(
        s.header().unwrap().cwd.as_deref(),
        Some(wt.to_str().unwrap())
    );
    assert_eq!(
        s.header().unwrap().parent_session.as_deref(),
        Some(src.to_str().unwrap())
    );
    assert_eq!(s.entries().len(), 5);
    assert_eq!(orientations(&s), 1);
    let leaf = s.leaf().unwrap();
    assert_eq!(leaf.id, out.orientation_id);
    assert_eq!(leaf.parent_id.as_deref(), Some(ids[3].as_str()));
    let line: serde_json::Value = serde_json::from_slice(s.line_text(leaf)).unwrap();
    assert_eq!(line["type"], "custom_message");
    assert_eq!(line["display"], true);
    let text = line["content"].as_str().unwrap();
    assert!(text.contains(wt.to_str().unwrap()));
    assert!(text.contains("off-limits"));
    assert!(text.contains("Branch: e"));
    assert!(text.contains("left.txt"));
    // The orientation is in the model's context.
    let ctx = s.context(None).unwrap();
    assert_eq!(ctx.messages.len(), 5);
    assert!(handoff_path(&out.target).exists());
}

#[test]
fn enter_from_an_entry_carries_the_path_to_it() {
    let f = fx();
    create(&f.runner(), &f.create_opts("p")).unwrap();
    let (src, ids) = source_session(&f, 4);
    let before = fs::read(&src).unwrap();
    let out = enter(&f.runner(), &enter_opts(&f, "p", &src, Some(&ids[1]))).unwrap();
    assert_eq!(fs::read(&src).unwrap(), before);
    assert_eq!(out.carry, bh_handoff::Carry::FromEntry);
    let s = Session::load(&out.target).unwrap();
    assert!(s.is_valid());
    assert_eq!(s.entries().len(), 3);
    assert_eq!(orientations(&s), 1);
    assert_eq!(
        s.leaf().unwrap().parent_id.as_deref(),
        Some(ids[1].as_str())
    );

    // The file's own leaf given as the entry is the complete case.
    let out = enter(&f.runner(), &enter_opts(&f, "p", &src, Some(&ids[3]))).unwrap();
    assert_eq!(out.carry, bh_handoff::Carry::WholeTree);

    let err = enter(&f.runner(), &enter_opts(&f, "p", &src, Some("nope0000"))).unwrap_err();
    assert!(matches!(err, HandoffError::Session(_)), "{err}");
}

#[test]
fn enter_carries_unflushed_entries_without_writing_the_source() {
    let f = fx();
    create(&f.runner(), &f.create_opts("u")).unwrap();
    let (src, ids) = source_session(&f, 2);
    let before = fs::read(&src).unwrap();
    let mut o = enter_opts(&f, "u", &src, None);
    o.unflushed = vec![
        json!({"type": "message", "id": "beef0001", "parentId": ids[1], "timestamp": "2026-01-01T00:00:00.000Z",
               "message": {"role": "user", "content": "not flushed yet", "timestamp": 1_767_225_600_000u64}}),
        json!({"type": "custom", "customType": "ext", "data": {}, "id": "beef0002", "parentId": "beef0001",
               "timestamp": "2026-01-01T00:00:01.000Z"}),
    ];
    let out = enter(&f.runner(), &o).unwrap();
    assert_eq!(fs::read(&src).unwrap(), before);
    let s = Session::load(&out.target).unwrap();
    assert!(s.is_valid());
    assert_eq!(s.entries().len(), 5);
    assert_eq!(s.leaf().unwrap().parent_id.as_deref(), Some("beef0002"));
    assert_eq!(s.context(None).unwrap().messages.len(), 4);

    // Nothing on disk yet at all: the unflushed entries alone.
    let missing = f.root.join("unwritten.jsonl");
    let mut o = enter_opts(&f, "u", &missing, None);
    o.unflushed = vec![
        json!({"type": "message", "id": "cafe0001", "parentId": null,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": "first", "timestamp": 1_767_225_600_000u64}}),
    ];
    let out = enter(&f.runner(), &o).unwrap();
    assert!(!missing.exists());
    let s = Session::load(&out.target).unwrap();
    assert!(s.is_valid());
    assert_eq!(s.entries().len(), 2);
    assert_eq!(s.leaf().unwrap().parent_id.as_deref(), Some("cafe0001"));
}

#[test]
fn enter_with_no_entries_makes_a_valid_session_with_only_the_orientation() {
    let f = fx();
    create(&f.runner(), &f.create_opts("z")).unwrap();
    // Header only.
    let (src, _) = source_session(&f, 0);
    let out = enter(&f.runner(), &enter_opts(&f, "z", &src, None)).unwrap();
    assert_eq!(out.carry, bh_handoff::Carry::Empty);
    let s = Session::load(&out.target).unwrap();
    assert!(s.is_valid());
    assert_eq!(s.entries().len(), 1);
    assert_eq!(s.leaf().unwrap().parent_id, None);
    assert_eq!(orientations(&s), 1);
    // Not written yet at all (Pi writes lazily).
    let missing = f.root.join("never-written.jsonl");
    let out = enter(&f.runner(), &enter_opts(&f, "z", &missing, None)).unwrap();
    let s = Session::load(&out.target).unwrap();
    assert!(s.is_valid());
    assert_eq!(s.entries().len(), 1);
    assert!(!missing.exists());
}

#[test]
fn enter_refuses_unknown_and_unready_worktrees() {
    let f = fx();
    let (src, _) = source_session(&f, 2);
    let err = enter(&f.runner(), &enter_opts(&f, "ghost", &src, None)).unwrap_err();
    assert!(matches!(
        err,
        HandoffError::Worktree(WorktreeError::NotFound { .. })
    ));
    f.config("post_create = [\"exit 1\"]\n");
    create(&f.runner(), &f.create_opts("f")).unwrap_err();
    let err = enter(&f.runner(), &enter_opts(&f, "f", &src, None)).unwrap_err();
    assert!(matches!(err, HandoffError::Refused(_)), "{err}");
}

/// A pid that belonged to a process which has exited.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

fn with_suffix(target: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let mut name = target.file_name().unwrap().to_owned();
    name.push(suffix);
    target.with_file_name(name)
}

#[test]
fn a_handoff_claimed_by_a_process_that_died_is_recovered_once() {
    let f = fx();
    create(&f.runner(), &f.create_opts("d")).unwrap();
    let (src, _) = source_session(&f, 2);
    let out = enter(&f.runner(), &enter_opts(&f, "d", &src, None)).unwrap();
    // It claimed the record and died before appending the verdict.
    let pid = dead_pid();
    let abandoned = with_suffix(&out.target, &format!(".handoff.claimed-{pid}-x.json"));
    fs_err::rename(handoff_path(&out.target), &abandoned).unwrap();
    assert!(matches!(
        consume(&f.runner(), &f.state(), &out.target).unwrap(),
        ConsumeOutcome::Verified { .. }
    ));
    assert!(!abandoned.exists());
    assert_eq!(
        consume(&f.runner(), &f.state(), &out.target).unwrap(),
        ConsumeOutcome::NotPending
    );
    assert_eq!(verdicts(&out.target), 1);

    // It appended the verdict and died before marking the record consumed:
    // recovering finishes the bookkeeping without a second verdict.
    let consumed = with_suffix(&out.target, ".handoff.consumed.json");
    fs_err::rename(&consumed, &abandoned).unwrap();
    assert_eq!(
        consume(&f.runner(), &f.state(), &out.target).unwrap(),
        ConsumeOutcome::NotPending
    );
    assert_eq!(verdicts(&out.target), 1);
    assert!(consumed.exists() && !abandoned.exists());

    // A claimer that is alive (this process) is left alone.
    let live = with_suffix(
        &out.target,
        &format!(".handoff.claimed-{}-y.json", std::process::id()),
    );
    fs_err::rename(&consumed, &live).unwrap();
    assert_eq!(
        consume(&f.runner(), &f.state(), &out.target).unwrap(),
        ConsumeOutcome::NotPending
    );
    assert!(live.exists());
    assert!(Session::load(&out.target).unwrap().is_valid());
}

#[test]
fn a_handoff_is_consumed_exactly_once_by_racing_threads() {
    let f = fx();
    create(&f.runner(), &f.create_opts("h")).unwrap();
    let (src, _) = source_session(&f, 2);
    let out = enter(&f.runner(), &enter_opts(&f, "h", &src, None)).unwrap();
    let n = 8;
    let barrier = Arc::new(Barrier::new(n));
    let results: Vec<ConsumeOutcome> = (0..n)
        .map(|_| {
            let b = barrier.clone();
            let runner = f.runner();
            let state = f.state();
            let target = out.target.clone();
            std::thread::spawn(move || {
                b.wait();
                consume(&runner, &state, &target).unwrap()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    let verified = results
        .iter()
        .filter(|r| matches!(r, ConsumeOutcome::Verified { .. }))
        .count();
    assert_eq!(verified, 1, "{results:?}");
    assert_eq!(
        results
            .iter()
            .filter(|r| **r == ConsumeOutcome::NotPending)
            .count(),
        n - 1
    );
    assert_eq!(
        consume(&f.runner(), &f.state(), &out.target).unwrap(),
        ConsumeOutcome::NotPending
    );
    let s = Session::load(&out.target).unwrap();
    assert!(s.is_valid());
    let v: Vec<_> = s
        .entries()
        .iter()
        .filter(|e| e.custom_type.as_deref() == Some(VERIFICATION_TYPE))
        .collect();
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].kind, bh_protocol::EntryType::Custom);
    // Not in the model's context: still the carried turns plus the orientation.
    assert_eq!(s.context(None).unwrap().messages.len(), 3);
}

#[test]
fn a_handoff_whose_receipt_changed_leaves_a_visible_caveat() {
    let f = fx();
    create(&f.runner(), &f.create_opts("v")).unwrap();
    let (src, _) = source_session(&f, 2);
    let out = enter(&f.runner(), &enter_opts(&f, "v", &src, None)).unwrap();
    let rp = f.repo.join(".git/better-harness/worktrees/v.json");
    let mut r: serde_json::Value = serde_json::from_slice(&fs::read(&rp).unwrap()).unwrap();
    r["base"] = json!("0000000000000000000000000000000000000000");
    fs::write(&rp, serde_json::to_vec_pretty(&r).unwrap()).unwrap();
    let ConsumeOutcome::Caveat { problems, entry_id } =
        consume(&f.runner(), &f.state(), &out.target).unwrap()
    else {
        panic!("expected a caveat");
    };
    assert!(
        problems.iter().any(|p| p.contains("changed")),
        "{problems:?}"
    );
    let s = Session::load(&out.target).unwrap();
    let e = s.entry(&entry_id).unwrap();
    assert_eq!(e.kind, bh_protocol::EntryType::CustomMessage);
    assert_eq!(
        s.context(None).unwrap().messages.len(),
        4,
        "the caveat is in context"
    );
    assert_eq!(
        consume(&f.runner(), &f.state(), &out.target).unwrap(),
        ConsumeOutcome::NotPending
    );
}

#[test]
fn enter_main_carries_the_session_back_with_its_own_orientation() {
    let f = fx();
    create(&f.runner(), &f.create_opts("b")).unwrap();
    let wt = f.wt("b");
    let (src, _) = source_session(&f, 2);
    let into = enter(&f.runner(), &enter_opts(&f, "b", &src, None)).unwrap();
    assert!(matches!(
        consume(&f.runner(), &f.state(), &into.target).unwrap(),
        ConsumeOutcome::Verified { .. }
    ));
    write(&wt.join("wip.txt"), "work in progress\n");
    let before = fs::read(&into.target).unwrap();

    let mut o = enter_opts(&f, "b", &into.target, None);
    o.cwd = wt.clone();
    let back = enter_main(&f.runner(), &o, true).unwrap();
    assert_eq!(
        fs::read(&into.target).unwrap(),
        before,
        "the source is never written"
    );
    assert_eq!(back.worktree, f.repo);
    assert_eq!(back.source_cwd, wt.display().to_string());
    // The session's earlier file in the main checkout holds a prefix of it:
    // extended, not copied again.
    assert_eq!(back.carry, bh_handoff::Carry::Resumed);
    assert_eq!(back.target, src);
    assert_eq!(back.left_behind, vec!["wip.txt"]);
    assert!(back.target.starts_with(bh_session::session_dir_for_cwd(
        &f.agent(),
        &f.repo.display().to_string()
    )));
    let s = Session::load(&back.target).unwrap();
    assert!(s.is_valid());
    assert_eq!(
        s.header().unwrap().cwd.as_deref(),
        Some(f.repo.to_str().unwrap())
    );
    assert_eq!(s.header().unwrap().parent_session, None, "its own header");
    // One orientation per move: the way in (carried) and the way back.
    assert_eq!(orientations(&s), 2);
    let leaf = s.leaf().unwrap();
    assert_eq!(leaf.id, back.orientation_id);
    let line: serde_json::Value = serde_json::from_slice(s.line_text(leaf)).unwrap();
    let text = line["content"].as_str().unwrap();
    assert!(text.contains("came back from the worktree"), "{text}");
    assert!(text.contains("main checkout"), "{text}");
    assert!(text.contains("being disposed"), "{text}");
    assert!(text.contains("Branch: main."), "{text}");
    assert!(text.contains("wip.txt"), "{text}");
    assert_eq!(line["details"]["disposing"], true);
    assert_eq!(line["details"]["from"]["name"], "b");
    // The handoff verifies against the main checkout.
    let h: bh_handoff::Handoff =
        serde_json::from_slice(&fs::read(handoff_path(&back.target)).unwrap()).unwrap();
    assert_eq!(h.worktree, f.repo);
    assert_eq!(h.receipt, None);
    assert!(matches!(
        consume(&f.runner(), &f.state(), &back.target).unwrap(),
        ConsumeOutcome::Verified { .. }
    ));
    // Carried with in-memory entries, the source file untouched.
    let leaf_id = Session::load(&into.target)
        .unwrap()
        .leaf()
        .unwrap()
        .id
        .clone();
    o.unflushed = vec![
        json!({"type": "message", "id": "beef0101", "parentId": leaf_id, "timestamp": "2026-01-01T00:00:00.000Z",
               "message": {"role": "user", "content": "not flushed yet", "timestamp": 1_767_225_600_000u64}}),
    ];
    let back = enter_main(&f.runner(), &o, false).unwrap();
    assert_eq!(fs::read(&into.target).unwrap(), before);
    let s = Session::load(&back.target).unwrap();
    assert!(s.is_valid());
    assert_eq!(s.leaf().unwrap().parent_id.as_deref(), Some("beef0101"));
    let line: serde_json::Value = serde_json::from_slice(s.line_text(s.leaf().unwrap())).unwrap();
    assert!(!line["content"].as_str().unwrap().contains("being disposed"));
}

#[test]
fn enter_main_refuses_from_the_main_checkout_and_bad_names() {
    let f = fx();
    create(&f.runner(), &f.create_opts("r")).unwrap();
    let (src, _) = source_session(&f, 2);
    let err = enter_main(&f.runner(), &enter_opts(&f, "r", &src, None), false).unwrap_err();
    assert!(
        matches!(&err, HandoffError::Refused(m) if m.contains("main checkout")),
        "{err}"
    );
    let err = enter_main(&f.runner(), &enter_opts(&f, "../x", &src, None), false).unwrap_err();
    assert!(
        matches!(
            err,
            HandoffError::Worktree(WorktreeError::InvalidName { .. })
        ),
        "{err}"
    );
    let dir = bh_session::session_dir_for_cwd(&f.agent(), &f.repo.display().to_string());
    assert_eq!(
        fs::read_dir(dir).unwrap().count(),
        1,
        "only the source session"
    );
}

#[test]
fn discard_deletes_a_prepared_target_and_its_handoff_records() {
    let f = fx();
    create(&f.runner(), &f.create_opts("d")).unwrap();
    let (src, _) = source_session(&f, 2);
    let before = fs::read(&src).unwrap();
    let dir = bh_session::session_dir_for_cwd(&f.agent(), &f.wt("d").display().to_string());

    // Pending handoff.
    let out = enter(&f.runner(), &enter_opts(&f, "d", &src, None)).unwrap();
    assert!(handoff_path(&out.target).exists());
    discard(&f.state(), &out.target).unwrap();
    assert!(!out.target.exists() && !handoff_path(&out.target).exists());
    assert!(!dir.exists(), "the emptied session folder goes too");

    // Consumed handoff; another session of the folder stays.
    let keep = enter(&f.runner(), &enter_opts(&f, "d", &src, None)).unwrap();
    let out = enter(&f.runner(), &enter_opts(&f, "d", &src, None)).unwrap();
    consume(&f.runner(), &f.state(), &out.target).unwrap();
    discard(&f.state(), &out.target).unwrap();
    let left: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left.contains(&keep.target) && left.contains(&keep.handoff));
    // Idempotent, and the source was never touched.
    discard(&f.state(), &out.target).unwrap();
    assert_eq!(fs::read(&src).unwrap(), before);
}

#[test]
fn round_trips_extend_the_earlier_files_instead_of_copying_the_session() {
    let f = fx();
    create(&f.runner(), &f.create_opts("rt")).unwrap();
    let wt = f.wt("rt");
    let (src, _) = source_session(&f, 2);
    let main_dir = bh_session::session_dir_for_cwd(&f.agent(), &f.repo.display().to_string());
    let wt_dir = bh_session::session_dir_for_cwd(&f.agent(), &wt.display().to_string());
    let sessions = || {
        let mut v: Vec<PathBuf> = [&main_dir, &wt_dir]
            .iter()
            .flat_map(|d| fs::read_dir(d).into_iter().flatten())
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        v.sort();
        v
    };
    let mut here = src.clone();
    let mut files_after_first = None;
    for round in 0..3 {
        let into = enter(&f.runner(), &enter_opts(&f, "rt", &here, None)).unwrap();
        consume(&f.runner(), &f.state(), &into.target).unwrap();
        SessionWriter::open(&into.target)
            .unwrap()
            .append_message(&json!({"role": "user", "content": format!("in the worktree {round}"), "timestamp": 1_700_000_001_000u64}))
            .unwrap();
        let mut o = enter_opts(&f, "rt", &into.target, None);
        o.cwd = wt.clone();
        let back = enter_main(&f.runner(), &o, false).unwrap();
        consume(&f.runner(), &f.state(), &back.target).unwrap();
        assert_eq!(back.target, src, "round {round}: back into the first file");
        assert_eq!(back.carry, bh_handoff::Carry::Resumed);
        if round == 0 {
            files_after_first = Some(sessions());
        } else {
            assert_eq!(into.carry, bh_handoff::Carry::Resumed, "round {round}");
            assert_eq!(
                Some(sessions()),
                files_after_first,
                "round {round}: no new file"
            );
        }
        here = back.target;
    }
    // One file per checkout, each a valid session whose leaf is the last move.
    assert_eq!(files_after_first.unwrap().len(), 2);
    let s = Session::load(&src).unwrap();
    assert!(s.is_valid());
    assert_eq!(orientations(&s), 6, "three round trips, two moves each");
    let ctx = s.context(None).unwrap();
    let texts: Vec<String> = ctx.messages.iter().map(|m| format!("{m:?}")).collect();
    assert!(
        texts.iter().any(|t| t.contains("in the worktree 2")),
        "{texts:?}"
    );
}

#[test]
fn an_earlier_file_written_since_is_not_extended_and_a_discard_cuts_back() {
    let f = fx();
    create(&f.runner(), &f.create_opts("w")).unwrap();
    let wt = f.wt("w");
    let (src, _) = source_session(&f, 2);
    let into = enter(&f.runner(), &enter_opts(&f, "w", &src, None)).unwrap();
    consume(&f.runner(), &f.state(), &into.target).unwrap();
    let mut o = enter_opts(&f, "w", &into.target, None);
    o.cwd = wt.clone();

    // A resumed move that is discarded leaves the earlier file as it was and
    // keeps nothing of the move.
    let before = fs::read(&src).unwrap();
    let back = enter_main(&f.runner(), &o, false).unwrap();
    assert_eq!(back.target, src);
    assert!(fs::read(&src).unwrap().len() > before.len());
    discard(&f.state(), &back.target).unwrap();
    assert_eq!(fs::read(&src).unwrap(), before, "cut back to what it was");
    assert!(!handoff_path(&src).exists());
    assert!(src.exists(), "never deleted");

    // Someone wrote to the earlier file after the session left it: it is not
    // a prefix any more, so the move makes a new file and leaves it alone.
    SessionWriter::open(&src)
        .unwrap()
        .append_message(&json!({"role": "user", "content": "another Pi went on here", "timestamp": 1_700_000_002_000u64}))
        .unwrap();
    let written = fs::read(&src).unwrap();
    let back = enter_main(&f.runner(), &o, false).unwrap();
    assert_eq!(back.carry, bh_handoff::Carry::WholeTree);
    assert_ne!(back.target, src);
    assert_eq!(fs::read(&src).unwrap(), written);
}

// ---------------------------------------------------------------- claims

#[test]
fn enter_is_busy_while_a_live_claim_is_held() {
    let f = fx();
    let claim = f.repo.join(".git/better-harness/worktrees/x.claim");
    fs::create_dir_all(&claim).unwrap();
    // Live owner (this process): busy, whatever the operation.
    let me = std::process::id();
    let start = proc_start(me);
    fs::write(
        claim.join("owner"),
        format!("{me} {start} create since now\n"),
    )
    .unwrap();
    let (src, _) = source_session(&f, 1);
    assert!(matches!(
        enter(&f.runner(), &enter_opts(&f, "x", &src, None)).unwrap_err(),
        HandoffError::Worktree(WorktreeError::Busy { .. })
    ));
}

fn proc_start(pid: u32) -> String {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 1..];
    after.split_whitespace().nth(19).unwrap().to_owned()
}
