//! Runs under attack: the session swapped between verification and fork,
//! and a repository whose attributes name a filter driver.

use fs_err as fs;

use bh_exec::{RunState, run_plan, write_plan};
use pretty_assertions::assert_eq;

use super::run::setup;
use super::{ENTRY, fx};

const DONE: &str = "{\"text\": \"Done.\"}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_forked_is_the_session_verified() {
    let f = fx();
    let plan = f.plan(&f.request(ENTRY)).unwrap();
    let path = f.root.join("plan.json");
    write_plan(&path, &plan, false).unwrap();
    let verified = fs::read_to_string(&f.session).unwrap();
    let swapped = verified.replace("First turn", "SWAPPED turn");
    assert_ne!(swapped, verified);
    let mut s = setup(&f, DONE);
    let file = f.session.clone();
    // Between verification and the fork (before the worktree exists), the
    // session file is replaced.
    s.after_verify = Some(Box::new(move || {
        fs::write(&file, &swapped).unwrap();
    }));
    let result = run_plan(&f.runner(), &path, &s).await.unwrap();
    assert_eq!(result.state, RunState::NoChanges, "{result:?}");
    let forked = fs::read_to_string(&result.forked_session).unwrap();
    assert!(forked.contains("First turn"), "{forked}");
    assert!(!forked.contains("SWAPPED"), "{forked}");
    // The plan copy in the execution folder is the plan verified.
    let copy: bh_exec::Plan =
        serde_json::from_slice(&fs::read(result.execution_dir.join("plan.json")).unwrap()).unwrap();
    assert_eq!(copy, plan);
}

/// A repository whose attributes send `*.dat` through a driver whose smudge
/// and clean commands leave marker files.
fn filtered_fixture() -> (super::Fx, std::path::PathBuf, std::path::PathBuf) {
    let f = fx();
    f.write(".gitattributes", "*.dat filter=marker\n");
    f.write("x.dat", "data\n");
    f.commit_all("filtered");
    let smudged = f.root.join("smudge-ran");
    let cleaned = f.root.join("clean-ran");
    f.git(&[
        "config",
        "filter.marker.smudge",
        &format!("touch '{}'; cat", smudged.display()),
    ]);
    f.git(&[
        "config",
        "filter.marker.clean",
        &format!("touch '{}'; cat", cleaned.display()),
    ]);
    f.git(&["config", "filter.marker.required", "true"]);
    (f, smudged, cleaned)
}

const EDIT_DAT: &str = r#"{"toolCalls": [{"name": "write", "arguments": {"path": "x.dat", "content": "new\n"}}]}
{"text": "Done."}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_drivers_do_not_run_unless_the_plan_allows_them() {
    let (f, smudged, cleaned) = filtered_fixture();
    let plan = f.plan(&f.request(ENTRY)).unwrap();
    assert!(!plan.allow_filters);
    let path = f.root.join("plan.json");
    write_plan(&path, &plan, false).unwrap();
    let result = run_plan(&f.runner(), &path, &setup(&f, EDIT_DAT))
        .await
        .unwrap();
    assert_eq!(result.state, RunState::Committed, "{result:?}");
    assert_eq!(result.changed_paths, vec!["M x.dat"]);
    assert!(!smudged.exists(), "the smudge filter ran");
    assert!(!cleaned.exists(), "the clean filter ran");
}

/// A driver the config defines only for linked worktrees (an included file
/// under `includeIf "gitdir:**/worktrees/**"`): the main checkout's git
/// does not see it, the execution worktree's git does. It must not run in
/// a `--checkout` run either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_defined_only_for_worktrees_does_not_run() {
    let f = fx();
    f.write(".gitattributes", "*.sn filter=sneaky\n");
    f.write("y.sn", "data\n");
    f.commit_all("sneaky");
    let ran = f.root.join("sneaky-ran");
    let included = f.root.join("worktrees.config");
    fs::write(
        &included,
        format!(
            "[filter \"sneaky\"]\n\tsmudge = touch '{0}'; cat\n\tclean = touch '{0}'; cat\n",
            ran.display()
        ),
    )
    .unwrap();
    f.git(&[
        "config",
        "includeIf.gitdir:**/worktrees/**.path",
        included.to_str().unwrap(),
    ]);
    let plan = f.plan(&f.request(ENTRY)).unwrap();
    assert!(!plan.allow_filters);
    let path = f.root.join("plan.json");
    write_plan(&path, &plan, false).unwrap();
    let mut s = setup(&f, EDIT_SN);
    s.checkout = true;
    let result = run_plan(&f.runner(), &path, &s).await.unwrap();
    assert_eq!(result.state, RunState::Committed, "{result:?}");
    assert_eq!(result.mode, bh_exec::WorkMode::Checkout);
    assert_eq!(result.changed_paths, vec!["M y.sn"]);
    assert!(!ran.exists(), "the worktree-only driver ran");
}

const EDIT_SN: &str = r#"{"toolCalls": [{"name": "write", "arguments": {"path": "y.sn", "content": "new\n"}}]}
{"text": "Done."}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_drivers_run_when_the_plan_allows_them() {
    let (f, smudged, cleaned) = filtered_fixture();
    let mut req = f.request(ENTRY);
    req.allow_filters = true;
    let plan = f.plan(&req).unwrap();
    assert!(plan.allow_filters);
    let path = f.root.join("plan.json");
    write_plan(&path, &plan, false).unwrap();
    let result = run_plan(&f.runner(), &path, &setup(&f, EDIT_DAT))
        .await
        .unwrap();
    assert_eq!(result.state, RunState::Committed, "{result:?}");
    assert!(smudged.exists(), "the smudge filter did not run");
    assert!(cleaned.exists(), "the clean filter did not run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_that_cannot_be_switched_off_refuses_the_run_before_anything_is_made() {
    let (f, smudged, _) = filtered_fixture();
    f.git(&[
        "config",
        "filter.a=b.smudge",
        &format!("touch '{}'; cat", smudged.display()),
    ]);
    let plan = f.plan(&f.request(ENTRY)).unwrap();
    let path = f.root.join("plan.json");
    write_plan(&path, &plan, false).unwrap();
    let mut s = setup(&f, DONE);
    s.checkout = true;
    let err = run_plan(&f.runner(), &path, &s).await.unwrap_err();
    assert!(
        matches!(&err, bh_exec::ExecError::FilterName { name } if name == "a=b"),
        "{err}"
    );
    assert!(!f.root.join("state/executions").exists());
    assert!(!smudged.exists());
    // With no checkout no driver can run at all: the run goes ahead.
    let result = run_plan(&f.runner(), &path, &setup(&f, EDIT_DAT))
        .await
        .unwrap();
    assert_eq!(result.state, RunState::Committed, "{result:?}");
    assert_eq!(result.mode, bh_exec::WorkMode::Virtual);
    assert!(!smudged.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_replaced_after_the_caller_checked_it_is_refused() {
    let f = fx();
    let first = f.plan(&f.request(ENTRY)).unwrap();
    let mut req = f.request(ENTRY);
    req.prompt = "another authentic plan".into();
    let second = f.plan(&req).unwrap();
    let path = f.root.join("plan.json");
    // The caller checked `first`; the file now holds `second`.
    write_plan(&path, &second, false).unwrap();
    let mut s = setup(&f, DONE);
    s.expect_plan_sha256 = Some(first.plan_sha256.clone());
    let err = run_plan(&f.runner(), &path, &s).await.unwrap_err();
    assert!(
        matches!(err, bh_exec::ExecError::PlanTampered { .. }),
        "{err}"
    );
    assert!(!f.root.join("state/executions").exists());
}

const WRITE_NEW: &str = r#"{"toolCalls": [{"name": "write", "arguments": {"path": "new.txt", "content": "work\n"}}]}
{"text": "Done."}
"#;

/// The output ref cannot be created once the agent has run (here a ref
/// below its name is in the way): the worktree with the agent's work stays,
/// a later `gc` leaves it alone, and the error names the worktree, the
/// commit made and Git's own reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_to_record_keeps_the_agents_work_and_says_where() {
    let f = fx();
    let plan = f.plan(&f.request(ENTRY)).unwrap();
    let path = f.root.join("plan.json");
    write_plan(&path, &plan, false).unwrap();
    let head = f.git(&["rev-parse", "HEAD"]);
    f.git(&[
        "update-ref",
        &format!("{}/in-the-way", plan.output_ref),
        &head,
    ]);
    // No checkout: the result tree is written and named.
    let err = run_plan(&f.runner(), &path, &setup(&f, WRITE_NEW))
        .await
        .unwrap_err();
    let bh_exec::ExecError::TreeKept {
        tree, dir, source, ..
    } = &err
    else {
        panic!("{err}");
    };
    assert!(
        matches!(source.as_ref(), bh_exec::ExecError::RefCreate { .. }),
        "{source}"
    );
    assert!(err.to_string().contains(tree.as_str()), "{err}");
    assert_eq!(f.git(&["show", &format!("{tree}:new.txt")]), "work");
    assert!(dir.join("kept").exists());
    assert!(!dir.join("result.json").exists());
}

/// The same with `--checkout`: the worktree holding the work stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_to_record_in_a_checkout_keeps_the_worktree() {
    let f = fx();
    let plan = f.plan(&f.request(ENTRY)).unwrap();
    let path = f.root.join("plan.json");
    write_plan(&path, &plan, false).unwrap();
    let head = f.git(&["rev-parse", "HEAD"]);
    f.git(&[
        "update-ref",
        &format!("{}/in-the-way", plan.output_ref),
        &head,
    ]);
    let mut s = setup(&f, WRITE_NEW);
    s.checkout = true;
    let err = run_plan(&f.runner(), &path, &s).await.unwrap_err();
    let bh_exec::ExecError::WorkKept {
        worktree,
        dir,
        source,
    } = &err
    else {
        panic!("{err}");
    };
    let bh_exec::ExecError::RefCreate { name, commit, .. } = source.as_ref() else {
        panic!("{source}");
    };
    assert_eq!(name, &plan.output_ref);
    let text = err.to_string();
    assert!(text.contains(&worktree.display().to_string()), "{text}");
    assert!(text.contains(commit.as_str()), "{text}");
    assert!(std::error::Error::source(source.as_ref()).is_some());
    assert_eq!(
        fs::read_to_string(worktree.join("new.txt")).unwrap(),
        "work\n"
    );
    assert_eq!(f.git(&["show", &format!("{commit}:new.txt")]), "work");
    assert!(dir.join("kept").exists());
    assert!(!dir.join("result.json").exists());
    // The process that ran it is gone for gc's purposes only through the
    // owner stamp; make it a dead one, then collect.
    fs::write(dir.join("owner"), "1 0").unwrap();
    let removed = bh_exec::gc(&f.runner(), &f.dir, &f.root.join("state")).unwrap();
    assert!(removed.is_empty(), "{removed:?}");
    assert!(worktree.join("new.txt").exists());
}

/// A plan without a model runs the provider's: a model string that cannot
/// be a trailer value refuses the run before the agent starts (it used to
/// fail at the commit, after the work, and lose it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_model_that_cannot_be_a_trailer_refuses_the_run_before_the_agent() {
    use bh_llm::{Api, ModelSpec, ScriptedProvider};
    let f = fx();
    let mut req = f.request(ENTRY);
    req.model = None;
    let plan = f.plan(&req).unwrap();
    let path = f.root.join("plan.json");
    write_plan(&path, &plan, false).unwrap();
    let mut s = setup(&f, WRITE_NEW);
    s.provider = std::sync::Arc::new(
        ScriptedProvider::from_str(
            WRITE_NEW,
            ModelSpec::new("scripted", "demo model", Api::Scripted),
        )
        .unwrap(),
    );
    let err = run_plan(&f.runner(), &path, &s).await.unwrap_err();
    assert!(
        matches!(&err, bh_exec::ExecError::InvalidId { what: "model", value, .. } if value == "scripted/demo model"),
        "{err}"
    );
    assert!(!f.root.join("state/executions").exists());
}
