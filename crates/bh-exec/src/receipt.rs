//! One receipt per manifest index, `<receipts>/<I>.json`, written
//! atomically at the end of every attempt (the last attempt wins): what
//! ran, where it ended, how, on which host. Never a provider key: it holds
//! ids, digests, paths and messages only (the CLI scrubs key values from
//! messages before they are recorded).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::batch_error::BatchError;

/// How an index ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReceiptState {
    /// This attempt committed the plan's result under its ref.
    Committed,
    /// The ref already held this plan's result: nothing ran.
    Done,
    /// The agent finished without changing anything: no commit, no ref.
    NoChanges,
    /// Worth retrying (exit 75): provider 5xx/429, network, preemption.
    Transient,
    /// Retrying cannot help: bad or tampered plan, ref taken, index out of range, …
    Permanent,
    /// Unexpected (I/O, git failing where it should not): exit 1.
    Internal,
}

impl ReceiptState {
    /// Whether the index needs nothing more.
    pub fn is_done(self) -> bool {
        matches!(
            self,
            ReceiptState::Committed | ReceiptState::Done | ReceiptState::NoChanges
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ReceiptState::Committed => "committed",
            ReceiptState::Done => "done",
            ReceiptState::NoChanges => "no-changes",
            ReceiptState::Transient => "transient",
            ReceiptState::Permanent => "permanent",
            ReceiptState::Internal => "internal",
        }
    }
}

/// `receipts/<I>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    pub index: usize,
    /// The plan file the index resolved to (absent: out of range).
    pub plan: Option<PathBuf>,
    /// The digest the plan file names (absent: unreadable).
    pub plan_sha256: Option<String>,
    #[serde(rename = "ref")]
    pub output_ref: Option<String>,
    pub commit: Option<String>,
    pub model: Option<String>,
    pub execution_id: Option<String>,
    pub state: ReceiptState,
    pub exit_code: u8,
    /// Why it failed (absent on success).
    pub message: Option<String>,
    /// The remote the ref was published to.
    pub published: Option<String>,
    pub started_unix_ms: u64,
    pub finished_unix_ms: u64,
    pub duration_ms: u64,
    /// 1 for the first attempt of this index with these receipts, +1 each retry.
    pub attempt: u32,
    pub host: String,
}

/// The receipt file of `index`.
pub fn receipt_path(dir: &Path, index: usize) -> PathBuf {
    dir.join(format!("{index}.json"))
}

/// Reads the receipt of `index`, `None` when there is none (or it is not a
/// receipt: it will be overwritten).
pub fn read_receipt(dir: &Path, index: usize) -> Option<Receipt> {
    let bytes = bh_fs::read_regular_file(&receipt_path(dir, index)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Writes the receipt (creating the folder 0755: receipts hold no secret).
pub fn write_receipt(dir: &Path, receipt: &Receipt) -> Result<PathBuf, BatchError> {
    bh_fs::create_dir_all_mode(dir, 0o755).map_err(|source| BatchError::Receipt {
        what: "create the folder of",
        path: dir.to_path_buf(),
        source,
    })?;
    let path = receipt_path(dir, receipt.index);
    bh_fs::write_json_atomic(&path, receipt).map_err(|source| BatchError::Receipt {
        what: "write",
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// The indices of `0..count` to resubmit: a receipt with exit code 75, or
/// no receipt at all (the task never ran or died without one). Permanent
/// failures are never in it.
pub fn retry_indices(dir: &Path, count: usize) -> Vec<usize> {
    (0..count)
        .filter(|i| read_receipt(dir, *i).is_none_or(|r| r.exit_code == crate::EXIT_TEMPFAIL))
        .collect()
}

/// This machine's host name (`/proc/sys/kernel/hostname`), `unknown` when unreadable.
pub fn host_name() -> String {
    fs_err::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}
