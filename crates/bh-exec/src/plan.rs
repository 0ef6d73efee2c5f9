use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use bh_git::{GitRunner, Scope};
use bh_session::Session;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ExecError;

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

/// The session facts a plan records: file digest, id, and the entry's path.
/// What a plan records about the session: file digest, id, path digest and
/// length.
struct SessionFacts {
    file_sha256: String,
    id: String,
    path_sha256: String,
    path_length: usize,
}

/// Reads the session once, hashing the file while it is parsed. The path
/// digest is SHA-256 over the SHA-256 of each line on the root→entry path
/// (two levels, so the per-line work splits across cores).
fn session_facts(file: &Path, entry: &str) -> Result<SessionFacts, ExecError> {
    let shown = file.display().to_string();
    let bytes = fs::read(file).map_err(|e| ExecError::Session {
        file: shown.clone(),
        detail: e.to_string(),
    })?;
    let (file_sha256, session) = std::thread::scope(|scope| {
        let hash = scope.spawn(|| sha256_hex(&bytes));
        let session = Session::parse(bytes.clone(), Some(file.to_path_buf()));
        (hash.join().unwrap_or_default(), session)
    });
    let id = session
        .header()
        .map(|h| h.id.clone())
        .ok_or_else(|| ExecError::Session {
            file: shown.clone(),
            detail: "no session header".into(),
        })?;
    if session.entry(entry).is_none() {
        return Err(ExecError::UnknownEntry {
            file: shown,
            entry: entry.to_owned(),
        });
    }
    let path = session
        .path_to_root(entry)
        .map_err(|e| ExecError::Session {
            file: shown.clone(),
            detail: e.to_string(),
        })?;
    if let Some(root) = path.first()
        && let Some(parent) = root.parent_id.as_deref().filter(|p| !p.is_empty())
    {
        return Err(ExecError::BrokenChain {
            file: shown,
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
    let dir = fs::canonicalize(&req.repo).map_err(|_| ExecError::NotARepository {
        path: req.repo.display().to_string(),
    })?;
    let file = fs::canonicalize(&req.session).map_err(|e| ExecError::Session {
        file: req.session.display().to_string(),
        detail: e.to_string(),
    })?;
    // The repository questions and the session reading are independent.
    let (git, facts) = std::thread::scope(|scope| {
        let git = scope.spawn(|| -> Result<(String, String, String, String), ExecError> {
            let repo = runner.repo(&dir, Scope::User);
            let top = repo
                .run_line(["rev-parse", "--path-format=absolute", "--show-toplevel"])
                .map_err(|_| ExecError::NotARepository {
                    path: dir.display().to_string(),
                })?;
            let common =
                repo.run_line(["rev-parse", "--path-format=absolute", "--git-common-dir"])?;
            let commit = repo
                .resolve_commit(&req.base)
                .map_err(|_| ExecError::UnknownBase {
                    rev: req.base.clone(),
                    repo: top.clone(),
                })?;
            let tree = repo.tree_of(&commit)?;
            Ok((top, common, commit, tree))
        });
        let facts = session_facts(&file, &req.entry);
        let git = git.join().unwrap_or_else(|_| {
            Err(ExecError::NotARepository {
                path: dir.display().to_string(),
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

/// Writes the plan atomically; refuses to replace an existing file unless
/// `force`.
pub fn write_plan(path: &Path, plan: &Plan, force: bool) -> Result<(), ExecError> {
    let io = |what: &str| {
        let context = format!("cannot {what} {}", path.display());
        move |source| ExecError::Io { context, source }
    };
    if !force && path.exists() {
        return Err(ExecError::PlanExists {
            path: path.display().to_string(),
        });
    }
    let mut text = serde_json::to_vec_pretty(plan).map_err(|e| ExecError::Io {
        context: "cannot serialise the plan".into(),
        source: std::io::Error::other(e),
    })?;
    text.push(b'\n');
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io("write"))?;
    let written = f.write_all(&text).and_then(|()| f.sync_all());
    drop(f);
    let placed = written.and_then(|()| {
        if force {
            fs::rename(&tmp, path)
        } else {
            // no-clobber: hard_link fails when the target exists
            fs::hard_link(&tmp, path).and_then(|()| fs::remove_file(&tmp))
        }
    });
    if let Err(e) = placed {
        let _ = fs::remove_file(&tmp);
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            return Err(ExecError::PlanExists {
                path: path.display().to_string(),
            });
        }
        return Err(io("write")(e));
    }
    Ok(())
}

/// Reads a plan file (shape only; see [`verify_plan`]).
pub fn read_plan(path: &Path) -> Result<Plan, ExecError> {
    let unreadable = |detail: String| ExecError::PlanUnreadable {
        path: path.display().to_string(),
        detail,
    };
    let text = fs::read(path).map_err(|e| unreadable(e.to_string()))?;
    let plan: Plan = serde_json::from_slice(&text).map_err(|e| unreadable(e.to_string()))?;
    if plan.version != PLAN_VERSION {
        return Err(unreadable(format!(
            "plan version {} (this executor reads {PLAN_VERSION})",
            plan.version
        )));
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
            path: path.display().to_string(),
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
    let file = &plan.session.file;
    let shown = file.display().to_string();
    let bytes = fs::read(file).map_err(|e| ExecError::Session {
        file: shown.clone(),
        detail: e.to_string(),
    })?;
    let session = Session::parse(bytes.clone(), Some(file.clone()));
    let id_now = session.header().map(|h| h.id.clone()).unwrap_or_default();
    if id_now != plan.session.id {
        return Err(ExecError::SessionIdChanged {
            file: shown,
            planned: plan.session.id.clone(),
            now: id_now,
        });
    }
    match session_facts(file, &plan.session.entry) {
        Ok(f)
            if f.path_sha256 == plan.session.path_sha256
                && f.path_length == plan.session.path_length => {}
        _ => {
            return Err(ExecError::EntryChanged {
                file: shown,
                entry: plan.session.entry.clone(),
            });
        }
    }
    let now = sha256_hex(&bytes);
    if now != plan.session.sha256 {
        return Err(ExecError::SessionChanged {
            file: shown,
            planned: plan.session.sha256.clone(),
            now,
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
