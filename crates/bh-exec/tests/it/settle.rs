//! `settle`: a plan is run at most once, whoever asks. Through the library:
//! its first settle runs it and commits; every later one finds the ref
//! holding this plan's result and does not call `run`; a ref holding
//! anything else is taken; a `no-changes` receipt of this very plan skips
//! the run; a lost race is settled by what the winner made.

use bh_exec::{
    BatchError, ExecError, Receipt, ReceiptState, SettleError, Settled, read_plan, run_plan,
    settle, write_plan,
};
use bh_git::Scope;

use super::run::setup;
use super::{ENTRY, fx};

const SCRIPT: &str = r#"{"toolCalls": [{"name": "write", "arguments": {"path": "new.txt", "content": "n\n"}}]}
{"text": "Done."}
"#;

fn receipt(state: ReceiptState, plan_sha256: &str) -> Receipt {
    Receipt {
        index: 0,
        plan: None,
        plan_sha256: Some(plan_sha256.to_owned()),
        output_ref: None,
        commit: None,
        model: None,
        execution_id: Some("e1".into()),
        state,
        exit_code: 0,
        message: None,
        published: None,
        started_unix_ms: 0,
        finished_unix_ms: 0,
        duration_ms: 0,
        attempt: 1,
        host: String::new(),
    }
}

#[test]
fn a_plan_is_run_once_and_then_found_done() {
    let f = fx();
    let plan = f.plan(&f.request(ENTRY)).unwrap();
    let path = f.root.join("plan.json");
    write_plan(&path, &plan, false).unwrap();
    let plan = read_plan(&path).unwrap();
    let runner = f.runner();
    let repo = runner.repo(&f.dir, Scope::User);
    let s = setup(&f, SCRIPT);

    // First settle: nothing there yet, so `run` is called; its commit is
    // the result.
    let mut ran = 0;
    let mut result = None;
    let first: Settled = settle(&repo, &plan, None, None, || {
        ran += 1;
        let rt = tokio::runtime::Runtime::new().unwrap();
        let r = rt.block_on(run_plan(&runner, &path, &s));
        result = r.as_ref().ok().cloned();
        Ok::<_, SettleError>(r)
    })
    .unwrap();
    let result = result.unwrap();
    assert_eq!(ran, 1);
    assert_eq!(first.state, ReceiptState::Committed);
    assert_eq!(first.commit, result.commit);

    // Every later settle finds the ref holding this plan's result.
    let again = settle(&repo, &plan, None, None, || -> Result<_, SettleError> {
        panic!("a settled plan must not run again")
    })
    .unwrap();
    assert_eq!(again.state, ReceiptState::Done);
    assert_eq!(again.commit, result.commit);

    // A lost race (the ref made by another run first) is done too.
    let raced = settle(&repo, &plan, None, None, || {
        Ok::<_, SettleError>(Err(ExecError::RefExists {
            name: plan.output_ref.clone(),
            at: String::new(),
        }))
    });
    assert_eq!(raced.unwrap().state, ReceiptState::Done);

    // The ref moved to a commit that is not this plan's result: taken.
    f.git(&["update-ref", &plan.output_ref, "HEAD"]);
    let taken = settle(&repo, &plan, None, None, || -> Result<_, SettleError> {
        panic!("a taken ref must not be run over")
    });
    assert!(
        matches!(taken, Err(SettleError::Batch(BatchError::RefTaken { .. }))),
        "{taken:?}"
    );
}

#[test]
fn a_no_changes_receipt_of_this_plan_skips_the_run_and_another_plans_does_not() {
    let f = fx();
    let plan = f.plan(&f.request(ENTRY)).unwrap();
    let repo = f.runner().repo(&f.dir, Scope::User);
    let skipped = settle(
        &repo,
        &plan,
        None,
        Some(&receipt(ReceiptState::NoChanges, &plan.plan_sha256)),
        || -> Result<_, SettleError> { panic!("a plan that made no change must not run again") },
    )
    .unwrap();
    assert_eq!(skipped.state, ReceiptState::NoChanges);
    assert_eq!(skipped.execution_id.as_deref(), Some("e1"));

    // Another plan's receipt (or a failed one) does not stand for this one.
    for r in [
        receipt(ReceiptState::NoChanges, "0000"),
        receipt(ReceiptState::Transient, &plan.plan_sha256),
    ] {
        let mut ran = false;
        let out = settle(&repo, &plan, None, Some(&r), || {
            ran = true;
            Ok::<_, SettleError>(Err(ExecError::Io {
                what: "test",
                path: f.root.clone(),
                source: std::io::Error::other("stop here"),
            }))
        });
        assert!(ran);
        assert!(matches!(out, Err(SettleError::Exec(_))), "{out:?}");
    }
}
