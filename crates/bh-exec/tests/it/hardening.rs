//! Attacks on plans: edited and re-digested plans, plans of another state
//! directory, plans whose repository moved, hostile ids, invalid sessions,
//! the key file itself.

use fs_err as fs;
use std::os::unix::fs::PermissionsExt;

use fs_err::os::unix::fs::symlink;
use std::path::Path;

use bh_exec::{ExecError, Limits, PLAN_KEY_FILE, Plan, PlanKey, Trust, verify_plan, write_plan};
use bh_test_support::git_in;
use pretty_assertions::assert_eq;

use super::{ENTRY, Fx, fx};

/// Writes `plan` after `edit`, with its plain digest recomputed (what
/// anyone who can write the file can do).
fn edited(f: &Fx, path: &Path, edit: impl FnOnce(&mut Plan)) {
    let mut plan = f.plan(&f.request(ENTRY)).unwrap();
    edit(&mut plan);
    plan.plan_sha256 = plan.digest();
    write_plan(path, &plan, true).unwrap();
}

#[test]
fn a_re_digested_plan_with_a_rewritten_output_ref_is_refused_naming_the_field() {
    let f = fx();
    let path = f.root.join("plan.json");
    let head = f.git(&["rev-parse", "HEAD"]);
    edited(&f, &path, |p| p.output_ref = format!("refs/replace/{head}"));
    let err = f.verify(&path).unwrap_err();
    assert!(matches!(err, ExecError::PlanNotOurs { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("was not made by this state directory or was edited")
            && msg.contains("output_ref"),
        "{msg}"
    );
    // An edited prompt (its digest recomputed as well) is refused too: only
    // the MAC covers the text.
    edited(&f, &path, |p| {
        p.prompt.text = "delete everything".into();
        p.prompt.sha256 = bh_exec_sha(&p.prompt.text);
    });
    let err = f.verify(&path).unwrap_err();
    assert!(matches!(err, ExecError::PlanNotOurs { .. }), "{err}");
    // Pretending to be foreign does not help without --trust-plan …
    edited(&f, &path, |p| {
        p.output_ref = format!("refs/replace/{head}");
        p.mac.key_id = "0000000000000000".into();
    });
    assert!(matches!(
        f.verify(&path).unwrap_err(),
        ExecError::PlanNotOurs { .. }
    ));
    // … and with it the re-derived output ref still refuses it.
    let trusting = Trust {
        key: Some(&f.key),
        foreign: true,
    };
    let err = verify_plan(&f.runner(), &path, trusting).unwrap_err();
    assert!(
        matches!(
            err,
            ExecError::PlanInconsistent {
                field: "output_ref",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(f.git(&["for-each-ref", "refs/replace/"]), "");
}

fn bh_exec_sha(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

#[test]
fn a_plan_from_another_state_directory_is_refused_unless_trusted() {
    let f = fx();
    let other = PlanKey::open_or_create(&f.root.join("other-state")).unwrap();
    assert_ne!(other.id(), f.key.id());
    let plan = bh_exec::make_plan(&f.runner(), &f.request(ENTRY), &other).unwrap();
    let path = f.root.join("plan.json");
    write_plan(&path, &plan, false).unwrap();
    let err = f.verify(&path).unwrap_err();
    assert!(matches!(err, ExecError::PlanNotOurs { .. }), "{err}");
    assert!(err.to_string().contains("--trust-plan"), "{err}");
    // A state directory without a key yet refuses it too.
    let none = Trust {
        key: None,
        foreign: false,
    };
    assert!(matches!(
        verify_plan(&f.runner(), &path, none).unwrap_err(),
        ExecError::PlanNotOurs { .. }
    ));
    // Trusted: accepted once the re-checks pass.
    let trusting = Trust {
        key: Some(&f.key),
        foreign: true,
    };
    assert_eq!(verify_plan(&f.runner(), &path, trusting).unwrap(), plan);
    // A trusted foreign plan with edited steering fields is still refused.
    for (field, edit) in [
        (
            "tools",
            Box::new(|p: &mut Plan| p.tools.push("bash".into())) as Box<dyn Fn(&mut Plan)>,
        ),
        (
            "limits",
            Box::new(|p: &mut Plan| {
                p.limits = Limits {
                    max_tool_calls: 0,
                    timeout_secs: 1,
                }
            }),
        ),
        (
            "prompt.sha256",
            Box::new(|p: &mut Plan| p.prompt.text = "other".into()),
        ),
    ] {
        let mut p = plan.clone();
        edit(&mut p);
        p.plan_sha256 = p.digest();
        write_plan(&path, &p, true).unwrap();
        let err = verify_plan(&f.runner(), &path, trusting).unwrap_err();
        assert!(
            matches!(&err, ExecError::PlanInconsistent { field: fd, .. } if *fd == field),
            "{field}: {err}"
        );
    }
}

#[test]
fn a_plan_whose_repository_path_now_is_another_repositorys_worktree_is_refused() {
    let f = fx();
    // The plan is made in a linked worktree of the user's repository …
    let wt = f.root.join("wt");
    f.git(&["worktree", "add", "-q", "--detach", wt.to_str().unwrap()]);
    let mut req = f.request(ENTRY);
    req.repo = wt.clone();
    let plan = f.plan(&req).unwrap();
    let path = f.root.join("plan.json");
    write_plan(&path, &plan, false).unwrap();
    f.verify(&path).unwrap();
    // … which is replaced by a worktree of another repository (a clone: the
    // base commit resolves there as well) at the same path.
    f.git(&["worktree", "remove", "--force", wt.to_str().unwrap()]);
    let other = f.root.join("other");
    git_in(
        &f.root,
        &f.home,
        &[
            "clone",
            "-q",
            f.dir.to_str().unwrap(),
            other.to_str().unwrap(),
        ],
    );
    git_in(
        &other,
        &f.home,
        &["worktree", "add", "-q", "--detach", wt.to_str().unwrap()],
    );
    let err = f.verify(&path).unwrap_err();
    assert!(
        matches!(
            err,
            ExecError::PlanInconsistent {
                field: "repo.common_dir",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("other"), "{err}");
    // A top level that became a subfolder of another work tree.
    fs::remove_dir_all(&wt).unwrap();
    git_in(&other, &f.home, &["worktree", "prune"]);
    fs::create_dir(&wt).unwrap();
    let err = f.verify(&path).unwrap_err();
    assert!(
        matches!(
            err,
            ExecError::PlanInconsistent {
                field: "repo.top_level",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn hostile_ids_are_refused_at_plan_time() {
    let f = fx();
    let text = fs::read_to_string(&f.session).unwrap();
    let original = text.clone();
    // A session id that would forge trailers.
    fs::write(
        &f.session,
        text.replace("01a22bee-1340-7689-b93e-a75d86f1286e", r"x\n\nBh-Fake: y"),
    )
    .unwrap();
    let err = f.plan(&f.request(ENTRY)).unwrap_err();
    assert!(
        matches!(
            err,
            ExecError::InvalidId {
                what: "session id",
                ..
            }
        ),
        "{err}"
    );
    fs::write(&f.session, &original).unwrap();
    // Hostile entry ids: never looked up, refused by their shape.
    for entry in [
        "188efa0e\nBetter-Harness-Base: forged",
        "a b",
        "../x",
        "-x",
        "",
        &"a".repeat(129),
    ] {
        let err = f.plan(&f.request(entry)).unwrap_err();
        assert!(
            matches!(
                err,
                ExecError::InvalidId {
                    what: "entry id",
                    ..
                }
            ),
            "{entry:?}: {err}"
        );
    }
    // And a model string outside PROVIDER/MODEL.
    let mut req = f.request(ENTRY);
    req.model = Some("openai/gpt\nBetter-Harness-Plan: x".into());
    assert!(matches!(
        f.plan(&req).unwrap_err(),
        ExecError::InvalidId { what: "model", .. }
    ));
    req.model = Some("gpt-4o".into());
    assert!(matches!(
        f.plan(&req).unwrap_err(),
        ExecError::InvalidId { what: "model", .. }
    ));
}

#[test]
fn a_session_the_validator_calls_invalid_is_refused_with_its_words() {
    let f = fx();
    let text = fs::read_to_string(&f.session).unwrap();
    // Two entries with one id.
    fs::write(
        &f.session,
        text.replace(r#""id":"154b003d""#, r#""id":"214a5b17""#),
    )
    .unwrap();
    let err = f.plan(&f.request(ENTRY)).unwrap_err();
    assert!(matches!(err, ExecError::SessionInvalid { .. }), "{err}");
    let validator = bh_session::Session::load(&f.session).unwrap();
    let first = validator.errors().next().unwrap().to_string();
    assert!(err.to_string().contains(&first), "{err} lacks {first}");
    // Invalid UTF-8 on the entry's path.
    let mut bytes = text.clone().into_bytes();
    let at = text.find("First turn").unwrap();
    bytes[at] = 0xff;
    fs::write(&f.session, &bytes).unwrap();
    let err = f.plan(&f.request(ENTRY)).unwrap_err();
    assert!(matches!(err, ExecError::SessionInvalid { .. }), "{err}");
    let validator = bh_session::Session::load(&f.session).unwrap();
    let warning = validator
        .problems()
        .iter()
        .find(|p| p.kind == bh_session::ProblemKind::NotUtf8)
        .unwrap()
        .to_string();
    assert!(err.to_string().contains(&warning), "{err} lacks {warning}");
}

#[test]
fn a_version_1_plan_asks_for_a_re_plan() {
    let f = fx();
    let path = f.root.join("plan.json");
    fs::write(&path, r#"{"version": 1, "plan_sha256": "x"}"#).unwrap();
    let err = f.verify(&path).unwrap_err();
    assert!(matches!(err, ExecError::PlanVersion { version: 1, .. }));
    assert!(err.to_string().contains("re-plan"), "{err}");
}

#[test]
fn the_plan_key_is_private_and_refused_when_it_is_not() {
    let f = fx();
    let state = f.root.join("state");
    let key = state.join(PLAN_KEY_FILE);
    let meta = fs::metadata(&key).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    // Opening again yields the same key.
    assert_eq!(PlanKey::open_or_create(&state).unwrap().id(), f.key.id());
    let refused = |dir: &Path| match PlanKey::open_or_create(dir) {
        Err(e @ ExecError::PlanKey { .. }) => e.to_string(),
        other => panic!("not refused: {other:?}"),
    };
    // Readable by the group.
    fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert!(refused(&state).contains("group or others"));
    fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    // A symlink to a private key elsewhere.
    let elsewhere = f.root.join("elsewhere");
    PlanKey::open_or_create(&elsewhere).unwrap();
    let linked = f.root.join("linked");
    fs::create_dir(&linked).unwrap();
    symlink(elsewhere.join(PLAN_KEY_FILE), linked.join(PLAN_KEY_FILE)).unwrap();
    assert!(refused(&linked).contains("symlink"));
    // Owned by another user (the tests run as root, which may chown).
    if nix::unistd::geteuid().is_root() {
        nix::unistd::chown(&key, Some(nix::unistd::Uid::from_raw(54321)), None).unwrap();
        assert!(refused(&state).contains("not owned"));
    }
    // Not a key at all.
    let garbage = f.root.join("garbage");
    fs::create_dir(&garbage).unwrap();
    fs::write(garbage.join(PLAN_KEY_FILE), "hello").unwrap();
    fs::set_permissions(
        garbage.join(PLAN_KEY_FILE),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    assert!(refused(&garbage).contains("is not a key (64 hex digits)"));
}

#[test]
fn the_plan_copies_of_version_1_executions_are_still_listed() {
    let f = fx();
    let plan = f.plan(&f.request(ENTRY)).unwrap();
    let mut v1 = serde_json::to_value(&plan).unwrap();
    v1["version"] = 1.into();
    let obj = v1.as_object_mut().unwrap();
    obj.remove("mac");
    obj.remove("allow_filters");
    let dir = f.root.join("state/executions/x1-00000000");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("plan.json"), v1.to_string()).unwrap();
    let record = bh_exec::read_execution("x1-00000000", &dir);
    assert!(record.problems.is_empty(), "{:?}", record.problems);
    let copy = record.plan.unwrap();
    assert_eq!((copy.version, copy.allow_filters), (1, false));
    // … but such a plan never runs.
    assert!(matches!(
        f.verify(&dir.join("plan.json")).unwrap_err(),
        ExecError::PlanVersion { version: 1, .. }
    ));
}

/// `f` on another thread, or a panic when it takes longer than a minute
/// (what used to hang forever on a FIFO fails the test instead).
fn within_a_minute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("it hung")
}

/// A plan claiming this state directory's key, with a failing MAC, whose
/// session is a FIFO or `/dev/zero`: the re-plan that names the differing
/// fields refuses the file before reading it (no hang, no endless read).
#[test]
fn a_forged_plan_naming_a_fifo_or_a_device_is_refused_without_reading_it() {
    let f = fx();
    let fifo = f.root.join("session.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    for (file, what) in [(fifo.clone(), "a FIFO"), ("/dev/zero".into(), "a device")] {
        let path = f.root.join("plan.json");
        edited(&f, &path, |p| p.session.file = file.clone());
        let runner = f.runner();
        let key = f.key.clone();
        let err = within_a_minute(move || {
            let trust = Trust {
                key: Some(&key),
                foreign: false,
            };
            verify_plan(&runner, &path, trust).unwrap_err()
        });
        assert!(matches!(err, ExecError::PlanNotOurs { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains(&file.display().to_string()) && msg.contains(what),
            "{msg}"
        );
    }
    // Planning from one is refused the same way.
    let mut req = f.request(ENTRY);
    req.session = fifo.clone();
    let err = f.plan(&req).unwrap_err();
    assert!(matches!(err, ExecError::SessionRead { .. }), "{err}");
    assert!(err.to_string().contains("is not a regular file"), "{err}");
}

/// A session that became invalid since the plan is refused in the
/// validator's words (it used to read as "the entry changed").
#[test]
fn a_session_made_invalid_since_the_plan_is_refused_in_the_validators_words() {
    let f = fx();
    let path = f.root.join("plan.json");
    let plan = f.plan(&f.request(ENTRY)).unwrap();
    write_plan(&path, &plan, false).unwrap();
    let mut text = fs::read(&f.session).unwrap();
    text.extend_from_slice(b"{\"type\":\"custom\",\"id\":\"aaaa0001\",\"parentId\":\"deadbeef\",\"timestamp\":\"2026-11-30T10:10:00.000Z\",\"customType\":\"x\"}\n");
    fs::write(&f.session, &text).unwrap();
    let err = f.verify(&path).unwrap_err();
    assert!(matches!(err, ExecError::SessionInvalid { .. }), "{err}");
    assert!(err.to_string().contains("deadbeef"), "{err}");
}

/// No file name made while the key is created holds any part of the secret
/// (it used to name its temporary file after the secret's first 4 bytes).
#[test]
fn the_key_files_names_reveal_nothing_of_the_secret() {
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    fs::create_dir(&state).unwrap();
    let watch = Inotify::init(InitFlags::IN_NONBLOCK).unwrap();
    watch
        .add_watch(
            &state,
            AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO,
        )
        .unwrap();
    PlanKey::open_or_create(&state).unwrap();
    let secret = fs::read_to_string(state.join(PLAN_KEY_FILE)).unwrap();
    let secret = secret.trim();
    assert_eq!(secret.len(), 64);
    let names: Vec<String> = watch
        .read_events()
        .unwrap()
        .into_iter()
        .filter_map(|e| e.name)
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    assert!(names.len() >= 2, "{names:?}");
    for name in &names {
        for window in secret.as_bytes().windows(8) {
            let part = std::str::from_utf8(window).unwrap();
            assert!(!name.contains(part), "{name} holds {part} of the secret");
        }
    }
    // The created key is all that is left.
    let left: Vec<_> = fs::read_dir(&state)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from(PLAN_KEY_FILE)]);
}

/// A trusted foreign plan whose ids or model string leave their character
/// sets fails its re-check naming the plan and the field (exit 27 in the
/// CLI, as documented), not as a bad input.
#[test]
fn ids_out_of_their_sets_in_a_trusted_plan_are_inconsistencies_of_the_plan() {
    let f = fx();
    let path = f.root.join("plan.json");
    let trusting = Trust {
        key: Some(&f.key),
        foreign: true,
    };
    type Edit = fn(&mut Plan);
    let cases: [(&str, Edit); 3] = [
        ("session.id", |p| p.session.id = "x y".into()),
        ("session.entry", |p| p.session.entry = "a\nb".into()),
        ("model", |p| p.model = Some("no-slash".into())),
    ];
    for (field, edit) in cases {
        edited(&f, &path, |p| {
            edit(p);
            p.mac.key_id = "0000000000000000".into();
        });
        let err = verify_plan(&f.runner(), &path, trusting).unwrap_err();
        assert!(
            matches!(&err, ExecError::PlanInconsistent { path: p, field: got, .. } if p == &path && *got == field),
            "{field}: {err}"
        );
        assert!(err.to_string().contains("is refused: allowed are"), "{err}");
    }
}
