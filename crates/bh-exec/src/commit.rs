//! The execution's commit: its message (summary, body, the seven provenance
//! trailers in their fixed order), the trailer parser, and the commit object
//! itself (one parent, the executor's identity, a date fixed by the
//! execution).

use bh_git::Repo;

use crate::error::ExecError;
use crate::ids::{IdKind, check_id};
use crate::plan::Plan;

/// Who makes the executor's commits (author and committer).
pub const IDENTITY_NAME: &str = "Better Harness";
pub const IDENTITY_EMAIL: &str = "executor@better-harness.invalid";

/// The trailer keys, in the order they are written.
pub const TRAILER_KEYS: [&str; 7] = [
    "Better-Harness-Plan",
    "Better-Harness-Base",
    "Better-Harness-Session",
    "Better-Harness-Session-SHA256",
    "Better-Harness-Entry",
    "Better-Harness-Execution",
    "Better-Harness-Model",
];

/// The provenance an execution's commit carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trailers {
    /// `sha256:<plan digest>`.
    pub plan: String,
    pub base: String,
    pub session: String,
    pub session_sha256: String,
    pub entry: String,
    pub execution: String,
    pub model: String,
}

impl Trailers {
    pub fn of(plan: &Plan, execution: &str, model: &str) -> Trailers {
        Trailers {
            plan: format!("sha256:{}", plan.plan_sha256),
            base: plan.base.commit.clone(),
            session: plan.session.id.clone(),
            session_sha256: plan.session.sha256.clone(),
            entry: plan.session.entry.clone(),
            execution: execution.to_owned(),
            model: model.to_owned(),
        }
    }

    fn values(&self) -> [&str; 7] {
        [
            &self.plan,
            &self.base,
            &self.session,
            &self.session_sha256,
            &self.entry,
            &self.execution,
            &self.model,
        ]
    }

    /// The trailer block (each line `Key: value`), refusing a value that
    /// is empty or holds whitespace or a control character (so it can
    /// never end its line or start another trailer).
    pub fn render(&self) -> Result<String, ExecError> {
        let mut out = String::new();
        for (key, value) in TRAILER_KEYS.iter().zip(self.values()) {
            if value.is_empty() || value.chars().any(|c| c.is_control() || c.is_whitespace()) {
                return Err(ExecError::TrailerValue {
                    trailer: key,
                    value: value.to_owned(),
                });
            }
            out.push_str(key);
            out.push_str(": ");
            out.push_str(value);
            out.push('\n');
        }
        Ok(out)
    }

    /// The trailers of a commit message: its last paragraph must be exactly
    /// the seven `Key: value` lines, in order.
    pub fn parse(message: &str) -> Option<Trailers> {
        let last = message.trim_end().rsplit("\n\n").next()?;
        let lines: Vec<&str> = last.lines().collect();
        if lines.len() != TRAILER_KEYS.len() {
            return None;
        }
        let mut values = Vec::with_capacity(7);
        for (line, key) in lines.iter().zip(TRAILER_KEYS) {
            let value = line.strip_prefix(key)?.strip_prefix(": ")?;
            values.push(value.to_owned());
        }
        let mut v = values.into_iter();
        Some(Trailers {
            plan: v.next()?,
            base: v.next()?,
            session: v.next()?,
            session_sha256: v.next()?,
            entry: v.next()?,
            execution: v.next()?,
            model: v.next()?,
        })
    }
}

/// The commit message: summary, body, and the provenance trailers.
pub fn commit_message(plan: &Plan, execution: &str, model: &str) -> Result<String, ExecError> {
    let first_line = plan.prompt.text.lines().next().unwrap_or("").trim();
    let mut summary: String = first_line
        .chars()
        .take(60)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if first_line.chars().count() > 60 {
        summary.push('…');
    }
    check_id(IdKind::Execution, execution)?;
    let trailers = Trailers::of(plan, execution, model).render()?;
    Ok(format!(
        "Continue session {session} from entry {entry}: {summary}\n\n\
         Continued Pi session {session} from entry {entry} at commit {base}\n\
         with the prompt (sha256:{prompt}), by the Better Harness session-checkpoint\n\
         executor, execution {execution}.\n\n\
         {trailers}",
        session = plan.session.id,
        entry = plan.session.entry,
        base = plan.base.commit,
        prompt = plan.prompt.sha256,
    ))
}

/// Writes the commit of `tree` on the plan's base with `message`, dated
/// `unix_secs` (UTC) so an execution's commit is deterministic.
pub(crate) fn commit_tree(
    repo: &Repo,
    tree: &str,
    base: &str,
    message: String,
    unix_secs: u64,
) -> Result<String, ExecError> {
    let date = format!("@{unix_secs} +0000");
    let out = repo
        .cmd(["commit-tree", tree, "-p", base, "-F", "-"])
        .env("GIT_AUTHOR_NAME", IDENTITY_NAME)
        .env("GIT_AUTHOR_EMAIL", IDENTITY_EMAIL)
        .env("GIT_COMMITTER_NAME", IDENTITY_NAME)
        .env("GIT_COMMITTER_EMAIL", IDENTITY_EMAIL)
        .env("GIT_AUTHOR_DATE", &date)
        .env("GIT_COMMITTER_DATE", &date)
        .stdin(message.into_bytes())
        .run()?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
