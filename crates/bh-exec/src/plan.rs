//! Plans: what a run will do, pinned as full ids and digests, authenticated
//! by the state directory's key (the re-checks are in `verify.rs`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use fs_err as fs;

use bh_git::{GitRunner, Scope};
use bh_session::{ProblemKind, Session};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{ExecError, io, session as session_err};
use crate::ids::{IdKind, check_id};
use crate::key::PlanKey;

/// Version 2 added the MAC, the filter choice and the strict ids; a version 1
/// plan is refused ("re-plan").
pub const PLAN_VERSION: u32 = 2;
/// Executions keep their commits under this namespace in the user's repository.
pub const OUTPUT_REF_PREFIX: &str = "refs/better-harness/executions/";
/// Exactly the tools an execution may use.
pub const EXECUTOR_TOOLS: [&str; 4] = ["read", "ls", "edit", "write"];
/// Bounds of [`Limits`], checked when a plan is made and when it is run.
pub const MAX_TOOL_CALLS: u32 = 100_000;
pub const MAX_TIMEOUT_SECS: u64 = 7 * 24 * 3600;

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
    /// Run the repository's smudge/clean filter drivers in the execution's
    /// worktree (off by default; see ARCHITECTURE.md).
    pub allow_filters: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub max_tool_calls: u32,
    pub timeout_secs: u64,
}

impl Limits {
    /// `None` when within bounds, else what is wrong.
    pub fn out_of_bounds(&self) -> Option<String> {
        if !(1..=MAX_TOOL_CALLS).contains(&self.max_tool_calls) {
            return Some(format!(
                "max_tool_calls {} is outside 1..={MAX_TOOL_CALLS}",
                self.max_tool_calls
            ));
        }
        if !(1..=MAX_TIMEOUT_SECS).contains(&self.timeout_secs) {
            return Some(format!(
                "timeout_secs {} is outside 1..={MAX_TIMEOUT_SECS}",
                self.timeout_secs
            ));
        }
        None
    }
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

/// Who made a plan: the id of the state directory's key and the
/// HMAC-SHA256 of the plan's canonical bytes under it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanMac {
    pub key_id: String,
    pub hmac_sha256: String,
}

/// A versioned, digested and authenticated execution plan.
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
    /// Whether the worktree runs the repository's filter drivers (absent
    /// in version 1 plan copies, which are read only to be shown).
    #[serde(default)]
    pub allow_filters: bool,
    pub output_ref: String,
    /// SHA-256 of the canonical bytes: names the plan (the trailer), does
    /// not authenticate it.
    pub plan_sha256: String,
    /// Authenticates the canonical bytes (see [`PlanKey`]); absent in the
    /// plan copies of version 1 executions (an empty MAC never verifies).
    #[serde(default)]
    pub mac: PlanMac,
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl Plan {
    /// The canonical bytes: the plan as compact JSON, fields in their fixed
    /// order, with `plan_sha256` and `mac` empty.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let mut copy = self.clone();
        copy.plan_sha256 = String::new();
        copy.mac = PlanMac::default();
        // A plan that reached here was read from or made into JSON (paths
        // are UTF-8: `make_plan` refuses others), so this cannot fail.
        serde_json::to_vec(&copy).unwrap_or_default()
    }

    /// SHA-256 of the canonical bytes.
    pub fn digest(&self) -> String {
        sha256_hex(&self.canonical_bytes())
    }

    /// Sets `plan_sha256` and the MAC under `key`.
    pub fn seal(&mut self, key: &PlanKey) {
        let bytes = self.canonical_bytes();
        self.plan_sha256 = sha256_hex(&bytes);
        self.mac = PlanMac {
            key_id: key.id().to_owned(),
            hmac_sha256: key.mac(&bytes),
        };
    }

    /// The output ref this plan's fields derive: the first 16 hex digits of
    /// SHA-256 over commit, session digest, entry, prompt digest and model.
    pub fn derived_output_ref(&self) -> String {
        let key = sha256_hex(
            format!(
                "{}\n{}\n{}\n{}\n{}",
                self.base.commit,
                self.session.sha256,
                self.session.entry,
                self.prompt.sha256,
                self.model.as_deref().unwrap_or("")
            )
            .as_bytes(),
        );
        format!("{OUTPUT_REF_PREFIX}{}", &key[..16])
    }
}

/// What a plan records about the session: file digest, id, path digest and
/// length.
pub(crate) struct SessionFacts {
    pub(crate) file_sha256: String,
    pub(crate) id: String,
    pub(crate) path_sha256: String,
    pub(crate) path_length: usize,
}

/// Reads a session file, which must be a regular file (a FIFO, a device
/// such as `/dev/zero` or a folder is refused before a byte is read: a
/// plan's session path is not trusted before its MAC is).
pub fn read_session(file: &Path) -> Result<Vec<u8>, ExecError> {
    bh_fs::read_regular_file(file).map_err(|source| ExecError::SessionRead {
        file: file.to_path_buf(),
        source,
    })
}

/// The facts of the session bytes `bytes` (read once by the caller), hashing
/// the file while it is parsed. The path digest is SHA-256 over the SHA-256
/// of each line on the root→entry path (two levels, so the per-line work
/// splits across cores).
pub(crate) fn session_facts(
    file: &Path,
    bytes: Vec<u8>,
    entry: &str,
) -> Result<SessionFacts, ExecError> {
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
    // What `bh session validate` refuses, refused here with its words.
    if !session.is_valid() {
        let problems: Vec<String> = session.errors().map(|p| p.to_string()).collect();
        return Err(ExecError::SessionInvalid {
            file: file.to_path_buf(),
            problems: problems.join("; "),
        });
    }
    check_id(IdKind::Session, &id)?;
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
    // The validator warns of lines that are not UTF-8 (Pi reads them
    // lossily); a line the run continues from must be exact: refused, in the
    // validator's words.
    let on_path: HashSet<usize> = path.iter().map(|e| e.line).collect();
    let not_utf8: Vec<String> = session
        .problems()
        .iter()
        .filter(|p| p.kind == ProblemKind::NotUtf8 && on_path.contains(&p.line))
        .map(|p| p.to_string())
        .collect();
    if !not_utf8.is_empty() {
        return Err(ExecError::SessionInvalid {
            file: file.to_path_buf(),
            problems: not_utf8.join("; "),
        });
    }
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

/// Resolves and digests everything a plan pins, and seals it with `key`.
/// Reads only. Refuses ids and model strings outside their character sets
/// ([`crate::IdKind`]), limits out of bounds, and a session that `bh session
/// validate` calls invalid.
pub fn make_plan(runner: &GitRunner, req: &PlanRequest, key: &PlanKey) -> Result<Plan, ExecError> {
    check_id(IdKind::Entry, &req.entry)?;
    if let Some(m) = &req.model {
        check_id(IdKind::Model, m)?;
    }
    if let Some(problem) = req.limits.out_of_bounds() {
        return Err(ExecError::LimitsOutOfBounds { detail: problem });
    }
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
        allow_filters: req.allow_filters,
        output_ref: String::new(),
        plan_sha256: String::new(),
        mac: PlanMac::default(),
    };
    plan.output_ref = plan.derived_output_ref();
    // Paths go into JSON: they must be UTF-8.
    for (what, p) in [
        ("repository", &plan.repo.top_level),
        ("common dir", &plan.repo.common_dir),
        ("session file", &plan.session.file),
    ] {
        if p.to_str().is_none() {
            return Err(ExecError::NonUtf8Path {
                what,
                path: p.clone(),
            });
        }
    }
    plan.seal(key);
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
    match bh_fs::write_new_atomic(path, &text, 0o600) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(exists()),
        other => other.map_err(io("write", path)),
    }
}
