//! Reading a plan back and re-checking it before anything runs: version,
//! digest, MAC, every field that steers the run, then what the plan pins
//! (base, session, entry, output ref). Each failure is its own error.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use bh_git::{GitRunner, Scope};
use bh_session::Session;
use fs_err as fs;

use crate::error::ExecError;
use crate::ids::{IdKind, check_id};
use crate::key::PlanKey;
use crate::plan::{
    EXECUTOR_TOOLS, OUTPUT_REF_PREFIX, PLAN_VERSION, Plan, PlanRequest, make_plan, read_session,
    session_facts, sha256_hex,
};

/// How a plan's origin is judged.
#[derive(Debug, Clone, Copy, Default)]
pub struct Trust<'a> {
    /// This state directory's key (`None`: it has none yet).
    pub key: Option<&'a PlanKey>,
    /// Accept a plan made with another key (another state directory or
    /// machine) once every re-check has passed. A plan that names this
    /// state directory's key and fails its MAC is refused regardless.
    pub foreign: bool,
}

/// Reads the plan copy of a past execution for showing it: version 1
/// copies (no MAC, no filter choice) are read too. Never for running.
pub(crate) fn read_plan_copy(path: &Path) -> Result<Plan, ExecError> {
    let text = fs::read(path).map_err(|source| ExecError::PlanRead {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_slice(&text).map_err(|source| ExecError::PlanFormat {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads a plan file (version and shape only; see [`verify_plan`]). A plan
/// of another version is refused before its fields are read.
pub fn read_plan(path: &Path) -> Result<Plan, ExecError> {
    let text = fs::read(path).map_err(|source| ExecError::PlanRead {
        path: path.to_path_buf(),
        source,
    })?;
    let format = |source| ExecError::PlanFormat {
        path: path.to_path_buf(),
        source,
    };
    let value: serde_json::Value = serde_json::from_slice(&text).map_err(format)?;
    let version = value.get("version").and_then(serde_json::Value::as_u64);
    if version != Some(u64::from(PLAN_VERSION)) {
        return Err(ExecError::PlanVersion {
            path: path.to_path_buf(),
            version: version.map_or(0, |v| u32::try_from(v).unwrap_or(u32::MAX)),
            supported: PLAN_VERSION,
        });
    }
    serde_json::from_value(value).map_err(format)
}

/// Re-checks a plan before anything runs, each failure its own error, in
/// this order: its digest; its MAC (see [`Trust`]); every field that steers
/// the run ([`check_steering`]); the base commit and tree; the session id,
/// the entry and its path, the session file digest (all from one read); and
/// that the output ref does not exist yet.
pub fn verify_plan(runner: &GitRunner, path: &Path, trust: Trust<'_>) -> Result<Plan, ExecError> {
    verify_read_once(runner, path, trust).map(|(plan, _)| plan)
}

/// [`verify_plan`], also returning the session bytes that were verified (the
/// run forks exactly these, never a second read of the file).
pub(crate) fn verify_read_once(
    runner: &GitRunner,
    path: &Path,
    trust: Trust<'_>,
) -> Result<(Plan, Vec<u8>), ExecError> {
    let plan = read_plan(path)?;
    let bytes = plan.canonical_bytes();
    if sha256_hex(&bytes) != plan.plan_sha256 {
        return Err(ExecError::PlanTampered {
            path: path.to_path_buf(),
        });
    }
    check_mac(runner, path, &plan, &bytes, trust)?;
    check_steering(runner, path, &plan)?;
    let repo = runner.repo(&plan.repo.top_level, Scope::User);
    let base = &plan.base.commit;
    match (repo.resolve_commit(base), repo.tree_of(base)) {
        (Ok(c), Ok(t)) if c == *base && t == plan.base.tree => {}
        (c, t) => {
            return Err(ExecError::BaseMoved {
                commit: base.clone(),
                detail: format!(
                    "commit: {}, tree: {}",
                    c.unwrap_or_else(|_| "missing".into()),
                    t.unwrap_or_else(|_| "missing".into())
                ),
            });
        }
    }
    // The session is read once: the id, the entry's path and the file digest
    // all come from these bytes, and the run forks them.
    let file = &plan.session.file;
    let bytes = read_session(file)?;
    let session = Session::parse(bytes.clone(), Some(file.clone()));
    let id_now = session.header().map(|h| h.id.clone()).unwrap_or_default();
    drop(session);
    if id_now != plan.session.id {
        return Err(ExecError::SessionIdChanged {
            file: file.clone(),
            planned: plan.session.id.clone(),
            now: id_now,
        });
    }
    let entry_changed = || ExecError::EntryChanged {
        file: file.clone(),
        entry: plan.session.entry.clone(),
    };
    // The entry gone, its chain broken or its path different: the entry
    // changed. Anything else (an invalid session, no header, a bad id) is
    // said in its own words.
    let facts = match session_facts(file, bytes.clone(), &plan.session.entry) {
        Ok(f)
            if f.path_sha256 == plan.session.path_sha256
                && f.path_length == plan.session.path_length =>
        {
            f
        }
        Ok(_)
        | Err(
            ExecError::UnknownEntry { .. }
            | ExecError::BrokenChain { .. }
            | ExecError::Session { .. },
        ) => return Err(entry_changed()),
        Err(e) => return Err(e),
    };
    if facts.file_sha256 != plan.session.sha256 {
        return Err(ExecError::SessionChanged {
            file: file.clone(),
            planned: plan.session.sha256.clone(),
            now: facts.file_sha256,
        });
    }
    if let Some(at) = repo.read_ref(&plan.output_ref)? {
        return Err(ExecError::RefExists {
            name: plan.output_ref.clone(),
            at,
        });
    }
    Ok((plan, bytes))
}

/// The MAC: a plan of this state directory's key must carry its MAC (else
/// the fields that differ from a re-plan of its inputs are named); a plan
/// of another key passes only with `trust.foreign` (the re-checks after
/// this still decide).
fn check_mac(
    runner: &GitRunner,
    path: &Path,
    plan: &Plan,
    bytes: &[u8],
    trust: Trust<'_>,
) -> Result<(), ExecError> {
    let not_ours = |detail: String| ExecError::PlanNotOurs {
        path: path.to_path_buf(),
        detail,
    };
    match trust.key {
        Some(key) if key.id() == plan.mac.key_id => {
            if key.verify(bytes, &plan.mac.hmac_sha256) {
                return Ok(());
            }
            Err(not_ours(differing_fields(runner, plan, key)))
        }
        _ if trust.foreign => Ok(()),
        key => Err(not_ours(format!(
            "it was sealed with key {:?}, this state directory's key is {}; re-plan it here \
             (`bh exec plan`), or pass --trust-plan to accept it once every re-check passes",
            plan.mac.key_id,
            key.map_or_else(
                || "not created yet".to_owned(),
                |k| format!("{:?} ({})", k.id(), k.path().display())
            )
        ))),
    }
}

/// Names the fields of `plan` that differ from a re-plan of its own inputs
/// (repository, base, session entry, prompt, model, limits, filter choice)
/// with this key.
fn differing_fields(runner: &GitRunner, plan: &Plan, key: &PlanKey) -> String {
    let req = PlanRequest {
        repo: plan.repo.top_level.clone(),
        base: plan.base.commit.clone(),
        session: plan.session.file.clone(),
        entry: plan.session.entry.clone(),
        prompt: plan.prompt.text.clone(),
        model: plan.model.clone(),
        limits: plan.limits,
        allow_filters: plan.allow_filters,
    };
    let fresh = match make_plan(runner, &req, key) {
        Ok(p) => p,
        Err(e) => return format!("its MAC does not match (a re-plan of its inputs failed: {e})"),
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    flatten("", &to_value(plan), &mut a);
    flatten("", &to_value(&fresh), &mut b);
    let mut fields: Vec<String> = Vec::new();
    for (name, value) in &a {
        if matches!(
            name.as_str(),
            "plan_sha256" | "mac.key_id" | "mac.hmac_sha256"
        ) {
            continue;
        }
        if b.iter().find(|(n, _)| n == name).map(|(_, v)| v) != Some(value) {
            fields.push(name.clone());
        }
    }
    if fields.is_empty() {
        "its MAC does not match; every field re-derivable from its inputs agrees, so a field \
         only the MAC covers (prompt, model, limits, filter choice) or the MAC itself was edited"
            .to_owned()
    } else {
        format!(
            "its MAC does not match; these fields differ from a re-plan of its inputs: {}",
            fields.join(", ")
        )
    }
}

fn to_value(plan: &Plan) -> serde_json::Value {
    serde_json::to_value(plan).unwrap_or(serde_json::Value::Null)
}

fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, serde_json::Value)>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&name, v, out);
            }
        }
        other => out.push((prefix.to_owned(), other.clone())),
    }
}

/// Every field that steers the run, re-checked from the plan's own content
/// and the repository as it is now, before anything is mutated: the ids and
/// the model string (their character sets), the prompt digest, the tools,
/// the limits, the output ref (re-derived, under
/// `refs/better-harness/executions/`, a valid ref name), and the repository
/// (`repo.top_level` is still the top level of a work tree whose common dir
/// is `repo.common_dir`, both compared by device and inode).
pub fn check_steering(runner: &GitRunner, path: &Path, plan: &Plan) -> Result<(), ExecError> {
    let bad = |field: &'static str, detail: String| ExecError::PlanInconsistent {
        path: path.to_path_buf(),
        field,
        detail,
    };
    // An id outside its character set is a field of this plan that fails
    // its re-check: named with the plan (27), not as a bad input (6).
    let id = |field: &'static str, kind: IdKind, value: &str| {
        check_id(kind, value).map_err(|_| {
            bad(
                field,
                format!("{value:?} is refused: allowed are {}", kind.rule()),
            )
        })
    };
    id("session.id", IdKind::Session, &plan.session.id)?;
    id("session.entry", IdKind::Entry, &plan.session.entry)?;
    if let Some(m) = &plan.model {
        id("model", IdKind::Model, m)?;
    }
    if sha256_hex(plan.prompt.text.as_bytes()) != plan.prompt.sha256 {
        return Err(bad(
            "prompt.sha256",
            "is not the SHA-256 of prompt.text".into(),
        ));
    }
    if plan.tools != EXECUTOR_TOOLS {
        return Err(bad(
            "tools",
            format!(
                "are {:?}, an execution has exactly {EXECUTOR_TOOLS:?}",
                plan.tools
            ),
        ));
    }
    if let Some(problem) = plan.limits.out_of_bounds() {
        return Err(bad("limits", problem));
    }
    let derived = plan.derived_output_ref();
    if plan.output_ref != derived || !plan.output_ref.starts_with(OUTPUT_REF_PREFIX) {
        return Err(bad(
            "output_ref",
            format!(
                "{:?} is not the ref its fields derive ({derived})",
                plan.output_ref
            ),
        ));
    }
    let repo = runner.repo(&plan.repo.top_level, Scope::User);
    // The prefix checked above keeps the name from reading as an option.
    repo.run(["check-ref-format", &plan.output_ref])
        .map_err(|_| {
            bad(
                "output_ref",
                format!("{:?} is not a valid ref name", plan.output_ref),
            )
        })?;
    let top = &plan.repo.top_level;
    if !top.is_absolute() || !plan.repo.common_dir.is_absolute() {
        return Err(bad("repo", "paths must be absolute".into()));
    }
    let now_top = repo
        .run_line(["rev-parse", "--path-format=absolute", "--show-toplevel"])
        .map_err(|e| {
            bad(
                "repo.top_level",
                format!("{} is no longer a Git work tree ({e})", top.display()),
            )
        })?;
    if !same_file(top, Path::new(&now_top)) {
        return Err(bad(
            "repo.top_level",
            format!(
                "{} is no longer the top level of its work tree (that is {now_top})",
                top.display()
            ),
        ));
    }
    let now_common = PathBuf::from(repo.run_line([
        "rev-parse",
        "--path-format=absolute",
        "--git-common-dir",
    ])?);
    if !same_file(&plan.repo.common_dir, &now_common) {
        return Err(bad(
            "repo.common_dir",
            format!(
                "{} now belongs to the repository at {}, the plan's is {}",
                top.display(),
                now_common.display(),
                plan.repo.common_dir.display()
            ),
        ));
    }
    Ok(())
}

/// Whether two paths name the same file (device and inode).
fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}
