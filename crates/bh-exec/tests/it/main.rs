//! Plans and their re-checks on real repositories and real Pi session files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::path::{Path, PathBuf};

use bh_exec::{
    ExecError, Limits, Plan, PlanKey, PlanRequest, Trust, make_plan, read_plan, verify_plan,
    write_plan,
};
use bh_test_support::TestRepo;
use pretty_assertions::assert_eq;

mod differential;
mod hardening;
mod run;
mod run_hardening;
mod settle;

const FIXTURE: &str = "../bh-session/tests/fixtures/pi-0.73.1/s04-continue-multi-run/2026-11-30T10-09-12-513Z_01a22bee-1340-7689-b93e-a75d86f1286e.jsonl";

/// A repository with one commit and a copy of a real Pi session beside it.
pub(crate) struct Fx {
    repo: TestRepo,
    pub(crate) session: PathBuf,
    /// The key of the state directory `root/state`.
    pub(crate) key: PlanKey,
}

pub(crate) fn fx() -> Fx {
    let repo = TestRepo::new();
    let session = repo.root.join("session.jsonl");
    fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE),
        &session,
    )
    .unwrap();
    repo.write("a.txt", "a\n");
    repo.commit_all("base");
    let key = PlanKey::open_or_create(&repo.root.join("state")).unwrap();
    Fx { repo, session, key }
}

impl std::ops::Deref for Fx {
    type Target = TestRepo;
    fn deref(&self) -> &TestRepo {
        &self.repo
    }
}

impl Fx {
    pub(crate) fn request(&self, entry: &str) -> PlanRequest {
        PlanRequest {
            repo: self.dir.clone(),
            base: "HEAD".into(),
            session: self.session.clone(),
            entry: entry.into(),
            prompt: "continue from here".into(),
            model: Some("scripted/demo".into()),
            limits: Limits::default(),
            allow_filters: false,
        }
    }

    /// This state directory's trust: its key, no foreign plans.
    pub(crate) fn trust(&self) -> Trust<'_> {
        Trust {
            key: Some(&self.key),
            foreign: false,
        }
    }

    pub(crate) fn plan(&self, req: &PlanRequest) -> Result<Plan, ExecError> {
        make_plan(&self.runner(), req, &self.key)
    }

    pub(crate) fn verify(&self, path: &Path) -> Result<Plan, ExecError> {
        verify_plan(&self.runner(), path, self.trust())
    }

    fn repo_state(&self) -> (String, String, String) {
        (
            self.git(&["for-each-ref"]),
            self.git(&["worktree", "list", "--porcelain"]),
            self.git(&["count-objects", "-v"]),
        )
    }
}

pub(crate) const ENTRY: &str = "188efa0e";

#[test]
fn a_plan_pins_full_ids_and_digests_and_touches_nothing() {
    let f = fx();
    let before = f.repo_state();
    let session_before = fs::read(&f.session).unwrap();
    let plan = f.plan(&f.request(ENTRY)).unwrap();
    assert_eq!(plan.base.commit, f.git(&["rev-parse", "HEAD"]));
    assert_eq!(plan.base.tree, f.git(&["rev-parse", "HEAD^{tree}"]));
    assert_eq!(plan.session.id, "01a22bee-1340-7689-b93e-a75d86f1286e");
    assert_eq!(plan.session.path_length, 3);
    assert_eq!(plan.tools, vec!["read", "ls", "edit", "write"]);
    assert_eq!(
        plan.limits,
        Limits {
            max_tool_calls: 64,
            timeout_secs: 900
        }
    );
    assert!(
        plan.output_ref
            .starts_with("refs/better-harness/executions/")
    );
    assert_eq!(plan.digest(), plan.plan_sha256);
    let path = f.root.join("plan.json");
    write_plan(&path, &plan, false).unwrap();
    assert_eq!(read_plan(&path).unwrap(), plan);
    assert!(matches!(
        write_plan(&path, &plan, false),
        Err(ExecError::PlanExists { .. })
    ));
    write_plan(&path, &plan, true).unwrap();
    f.verify(&path).unwrap();
    assert_eq!(
        f.repo_state(),
        before,
        "planning created nothing in the repository"
    );
    assert_eq!(
        fs::read(&f.session).unwrap(),
        session_before,
        "the session is never rewritten"
    );
}

#[test]
fn bad_requests_name_what_is_wrong() {
    let f = fx();
    let err = f.plan(&f.request("nope1234")).unwrap_err();
    assert!(matches!(err, ExecError::UnknownEntry { .. }), "{err}");
    let mut req = f.request(ENTRY);
    req.base = "no-such-branch".into();
    assert!(matches!(f.plan(&req), Err(ExecError::UnknownBase { .. })));
    // an entry whose parent is missing: the chain to the root is broken
    let text = fs::read_to_string(&f.session).unwrap();
    fs::write(
        &f.session,
        text.replace(r#""parentId":"214a5b17""#, r#""parentId":"deadbeef""#),
    )
    .unwrap();
    // (the validator refuses it first, with its own words)
    let err = f.plan(&f.request(ENTRY)).unwrap_err();
    assert!(matches!(err, ExecError::SessionInvalid { .. }), "{err}");
    assert!(err.to_string().contains("deadbeef"));
}

#[test]
fn every_recheck_has_its_own_error() {
    let f = fx();
    let path = f.root.join("plan.json");
    let fresh = |f: &Fx| {
        let plan = f.plan(&f.request(ENTRY)).unwrap();
        write_plan(&path, &plan, true).unwrap();
        plan
    };
    let code = |f: &Fx| f.verify(&path).unwrap_err();

    // the plan itself edited
    fresh(&f);
    let text = fs::read_to_string(&path).unwrap();
    fs::write(
        &path,
        text.replace("continue from here", "rm -rf everything"),
    )
    .unwrap();
    assert!(matches!(code(&f), ExecError::PlanTampered { .. }));
    // unknown fields are not smuggled in either
    fresh(&f);
    let text = fs::read_to_string(&path).unwrap();
    fs::write(&path, text.replacen('{', "{\"extra\": 1,", 1)).unwrap();
    assert!(matches!(code(&f), ExecError::PlanFormat { .. }));

    // the session appended to (same id, same entry path)
    fresh(&f);
    let original = fs::read(&f.session).unwrap();
    let mut appended = original.clone();
    appended.extend_from_slice(b"{\"type\":\"custom\",\"id\":\"aaaa0001\",\"parentId\":\"188efa0e\",\"timestamp\":\"2026-11-30T10:10:00.000Z\",\"customType\":\"x\"}\n");
    fs::write(&f.session, &appended).unwrap();
    let err = code(&f);
    assert!(matches!(err, ExecError::SessionChanged { .. }), "{err}");
    // another session at that path
    let text = String::from_utf8(original.clone()).unwrap();
    fs::write(
        &f.session,
        text.replace(
            "01a22bee-1340-7689-b93e-a75d86f1286e",
            "01a22bee-0000-7000-8000-000000000000",
        ),
    )
    .unwrap();
    assert!(matches!(code(&f), ExecError::SessionIdChanged { .. }));
    // the entry's path changed
    fs::write(
        &f.session,
        text.replace(r#""thinkingLevel":"medium""#, r#""thinkingLevel":"high""#),
    )
    .unwrap();
    assert!(matches!(code(&f), ExecError::EntryChanged { .. }));
    fs::write(&f.session, &original).unwrap();

    // the output ref exists already
    let plan = fresh(&f);
    let head = f.git(&["rev-parse", "HEAD"]);
    f.git(&["update-ref", &plan.output_ref, &head]);
    assert!(matches!(code(&f), ExecError::RefExists { .. }));
    f.git(&["update-ref", "-d", &plan.output_ref]);

    // the base commit disappeared (history rewritten and collected)
    fs::write(f.dir.join("b.txt"), "b\n").unwrap();
    f.git(&["add", "-A"]);
    f.git(&["commit", "-q", "-m", "second"]);
    fresh(&f);
    f.git(&["reset", "-q", "--hard", "HEAD~1"]);
    f.git(&["reflog", "expire", "--expire=now", "--all"]);
    f.git(&["gc", "-q", "--prune=now"]);
    assert!(matches!(code(&f), ExecError::BaseMoved { .. }));
}
