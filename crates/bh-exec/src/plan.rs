//! Plans: what a run will do, pinned as full ids and digests, and their
//! re-checks.

use fs_err as fs;
use std::path::{Path, PathBuf};

use bh_git::{GitRunner, Scope};
use bh_session::Session;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{ExecError, io, session as session_err};

pub const PLAN_VERSION: u32 = 1;
/// Executions keep their commits under this namespace in the user's repository.
pub const OUTPUT_REF_PREFIX: &str = "refs/better-harness/executions/";
/// Exactly the tools an execution may use.
pub const EXECUTOR_TOOLS: [&str; 4] = ["read", "ls", "edit", "write"];

/// What the caller asks to plan.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    pub repo: PathBuf,
    pub base: String,
    pub session: PathBuf,
    pub entry: String,
    pub prompt: String,
    pub model: Option<String>,
    pub limits: Limits,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub max_tool_calls: u32,
    pub timeout_secs: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_tool_calls: 64,
            timeout_secs: 15 * 60,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoRecord {
    pub top_level: PathBuf,
    pub common_dir: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseRecord {
    pub commit: String,
    pub tree: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionRecord {
    pub file: PathBuf,
    pub sha256: String,
    pub id: String,
    pub entry: String,
    /// Digest of the raw lines from the root to the entry, in order.
    pub path_sha256: String,
    pub path_length: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptRecord {
    pub text: String,
    pub sha256: String,
}

/// A versioned, self-digested execution plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub version: u32,
    pub repo: RepoRecord,
    pub base: BaseRecord,
    pub session: SessionRecord,
    pub prompt: PromptRecord,
    pub model: Option<String>,
    pub limits: Limits,
    pub tools: Vec<String>,
    pub output_ref: String,
    /// SHA-256 of this plan serialised with this field empty.
    pub plan_sha256: String,
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl Plan {
    /// The digest over every other field, in their fixed order.
    pub fn digest(&self) -> String {
        let mut copy = self.clone();
        copy.plan_sha256 = String::new();
        // Serialising a struct of plain fields cannot fail.
        let bytes = serde_json::to_vec(&copy).unwrap_or_default();
        sha256_hex(&bytes)
    }
}

/// What a plan records about the session: file digest, id, path digest and
/// length.
struct SessionFacts {
    file_sha256: String,
    id: String,
    path_sha256: String,
    path_length: usize,
}

fn read_session(file: &Path) -> Result<Vec<u8>, ExecError> {
    fs::read(file).map_err(|source| ExecError::SessionRead {
        file: file.to_path_buf(),
        source,
    })
}

/// The facts of the session bytes `bytes` (read once by the caller), hashing
/// the file while it is parsed. The path digest is SHA-256 over the SHA-256
/// of each line on the root→entry path (two levels, so the per-line work
/// splits across cores).
fn session_facts(file: &Path, bytes: Vec<u8>, entry: &str) -> Result<SessionFacts, ExecError> {
    let (file_sha256, session) = std::thread::scope(|scope| {
        let hash = scope.spawn(|| sha256_hex(&bytes));
        let session = Session::parse(bytes.clone(), Some(file.to_path_buf()));
        (hash.join().unwrap_or_default(), session)
    });
    let id = session
        .header()
        .map(|h| h.id.clone())
        .ok_or_else(|| ExecError::NoHeader {
            file: file.to_path_buf(),
        })?;
    if session.entry(entry).is_none() {
        return Err(ExecError::UnknownEntry {
            file: file.to_path_buf(),
            entry: entry.to_owned(),
        });
    }
    let path = session.path_to_root(entry).map_err(session_err(file))?;
    if let Some(root) = path.first()
        && let Some(parent) = root.parent_id.as_deref().filter(|p| !p.is_empty())
    {
        return Err(ExecError::BrokenChain {
            file: file.to_path_buf(),
            entry: entry.to_owned(),
            at: parent.to_owned(),
        });
    }
    let lines: Vec<&[u8]> = path.iter().map(|e| session.line_text(e)).collect();
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8);
    let per = lines.len().div_ceil(workers).max(1);
    let digests: Vec<Vec<[u8; 32]>> = std::thread::scope(|scope| {
        let handles: Vec<_> = lines
            .chunks(per)
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|l| Sha256::digest(l).into())
                        .collect::<Vec<[u8; 32]>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut h = Sha256::new();
    for d in digests.iter().flatten() {
        h.update(d);
    }
    Ok(SessionFacts {
        file_sha256,
        id,
        path_sha256: hex::encode(h.finalize()),
        path_length: path.len(),
    })
}

/// Resolves and digests everything a plan pins. Reads only.
pub fn make_plan(runner: &GitRunner, req: &PlanRequest) -> Result<Plan, ExecError> {
    let dir = fs::canonicalize(&req.repo).map_err(|e| ExecError::NotARepository {
        path: req.repo.clone(),
        source: Box::new(e),
    })?;
    let file = fs::canonicalize(&req.session).map_err(|source| ExecError::SessionRead {
        file: req.session.clone(),
        source,
    })?;
    // The repository questions and the session reading are independent.
    let (git, facts) = std::thread::scope(|scope| {
        let git = scope.spawn(|| -> Result<(String, String, String, String), ExecError> {
            let repo = runner.repo(&dir, Scope::User);
            let top = repo
                .run_line(["rev-parse", "--path-format=absolute", "--show-toplevel"])
                .map_err(|e| ExecError::NotARepository {
                    path: dir.clone(),
                    source: Box::new(e),
                })?;
            let common =
                repo.run_line(["rev-parse", "--path-format=absolute", "--git-common-dir"])?;
            let commit = repo
                .resolve_commit(&req.base)
                .map_err(|e| ExecError::UnknownBase {
                    rev: req.base.clone(),
                    repo: PathBuf::from(&top),
                    source: Box::new(e),
                })?;
            let tree = repo.tree_of(&commit)?;
            Ok((top, common, commit, tree))
        });
        let facts = read_session(&file).and_then(|b| session_facts(&file, b, &req.entry));
        let git = git.join().unwrap_or_else(|_| {
            Err(ExecError::NotARepository {
                path: dir.clone(),
                source: "the repository lookup panicked".into(),
            })
        });
        (git, facts)
    });
    let (top, common, commit, tree) = git?;
    let facts = facts?;
    let (id, path_sha256, path_length) = (facts.id, facts.path_sha256, facts.path_length);
    let session_sha = facts.file_sha256;
    let prompt_sha = sha256_hex(req.prompt.as_bytes());
    let key = sha256_hex(
        format!(
            "{commit}\n{session_sha}\n{}\n{prompt_sha}\n{}",
            req.entry,
            req.model.as_deref().unwrap_or("")
        )
        .as_bytes(),
    );
    let mut plan = Plan {
        version: PLAN_VERSION,
        repo: RepoRecord {
            top_level: PathBuf::from(top),
            common_dir: PathBuf::from(common),
        },
        base: BaseRecord { commit, tree },
        session: SessionRecord {
            file,
            sha256: session_sha,
            id,
            entry: req.entry.clone(),
            path_sha256,
            path_length,
        },
        prompt: PromptRecord {
            text: req.prompt.clone(),
            sha256: prompt_sha,
        },
        model: req.model.clone(),
        limits: req.limits,
        tools: EXECUTOR_TOOLS.iter().map(|t| (*t).to_owned()).collect(),
        output_ref: format!("{OUTPUT_REF_PREFIX}{}", &key[..16]),
        plan_sha256: String::new(),
    };
    plan.plan_sha256 = plan.digest();
    Ok(plan)
}

/// Writes the plan atomically (`bh_fs`); refuses to replace an existing
/// file unless `force` (without it the finished file is linked into place,
/// which fails when the name is taken).
pub fn write_plan(path: &Path, plan: &Plan, force: bool) -> Result<(), ExecError> {
    let exists = || ExecError::PlanExists {
        path: path.to_path_buf(),
    };
    if !force && path.exists() {
        return Err(exists());
    }
    let mut text = serde_json::to_vec_pretty(plan).map_err(|e| ExecError::Io {
        what: "serialise the plan for",
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    })?;
    text.push(b'\n');
    if force {
        return bh_fs::write_atomic(path, &text, 0o600).map_err(io("write", path));
    }
    let mut staged = path.as_os_str().to_owned();
    staged.push(format!(".new-{}", std::process::id()));
    let staged = PathBuf::from(staged);
    bh_fs::write_atomic(&staged, &text, 0o600).map_err(io("write", &staged))?;
    let linked = fs::hard_link(&staged, path);
    let _ = fs::remove_file(&staged);
    match linked {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(exists()),
        other => other.map_err(io("write", path)),
    }
}

/// Reads a plan file (shape only; see [`verify_plan`]).
pub fn read_plan(path: &Path) -> Result<Plan, ExecError> {
    let text = fs::read(path).map_err(|source| ExecError::PlanRead {
        path: path.to_path_buf(),
        source,
    })?;
    let plan: Plan = serde_json::from_slice(&text).map_err(|source| ExecError::PlanFormat {
        path: path.to_path_buf(),
        source,
    })?;
    if plan.version != PLAN_VERSION {
        return Err(ExecError::PlanVersion {
            path: path.to_path_buf(),
            version: plan.version,
            supported: PLAN_VERSION,
        });
    }
    Ok(plan)
}

/// Re-checks a plan before anything runs: its own digest, the base commit and
/// tree, the session id, the entry and its path, the session file digest, and
/// that the output ref does not exist yet — in that order (most specific
/// first), each with its own error.
pub fn verify_plan(runner: &GitRunner, path: &Path) -> Result<Plan, ExecError> {
    let plan = read_plan(path)?;
    if plan.digest() != plan.plan_sha256 {
        return Err(ExecError::PlanTampered {
            path: path.to_path_buf(),
        });
    }
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
    // all come from these bytes.
    let file = &plan.session.file;
    let bytes = read_session(file)?;
    let session = Session::parse(bytes.clone(), Some(file.clone()));
    let id_now = session.header().map(|h| h.id.clone()).unwrap_or_default();
    if id_now != plan.session.id {
        return Err(ExecError::SessionIdChanged {
            file: file.clone(),
            planned: plan.session.id.clone(),
            now: id_now,
        });
    }
    let facts = match session_facts(file, bytes, &plan.session.entry) {
        Ok(f)
            if f.path_sha256 == plan.session.path_sha256
                && f.path_length == plan.session.path_length =>
        {
            f
        }
        _ => {
            return Err(ExecError::EntryChanged {
                file: file.clone(),
                entry: plan.session.entry.clone(),
            });
        }
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
    Ok(plan)
}
