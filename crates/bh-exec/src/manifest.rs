//! The sorted manifest of a batch: a directory of plan files (`*.json`
//! directly inside it, sorted by file name as bytes; dot files and
//! sub-folders such as `receipts/` are not plans), or a manifest file
//! listing plan paths one per line (relative to the manifest's folder;
//! blank lines and lines starting with `#` skipped). Index `I` is the
//! `I`-th plan, from 0, on every machine that reads the same manifest.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use fs_err as fs;

use crate::batch_error::BatchError;

/// The folder receipts go to by default, beside the plans.
pub const RECEIPTS_DIR: &str = "receipts";

/// A resolved manifest.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The directory or manifest file it was read from.
    pub source: PathBuf,
    /// Whether `source` is a directory of plans.
    pub is_dir: bool,
    /// The plans, in index order.
    pub plans: Vec<PathBuf>,
}

impl Manifest {
    /// Reads a directory of plans or a manifest file.
    pub fn open(path: &Path) -> Result<Manifest, BatchError> {
        let read = |source| BatchError::ManifestRead {
            path: path.to_path_buf(),
            source,
        };
        let meta = fs::metadata(path).map_err(read)?;
        if meta.is_dir() {
            let mut plans = Vec::new();
            for entry in fs::read_dir(path).map_err(read)? {
                let entry = entry.map_err(read)?;
                let name = entry.file_name();
                let bytes = name.as_bytes();
                if bytes.starts_with(b".") || !bytes.ends_with(b".json") {
                    continue;
                }
                let p = entry.path();
                if fs::metadata(&p).map(|m| m.is_file()).unwrap_or(false) {
                    plans.push(p);
                }
            }
            plans.sort_by(|a, b| file_name(a).cmp(file_name(b)));
            return Ok(Manifest {
                source: path.to_path_buf(),
                is_dir: true,
                plans,
            });
        }
        let bytes = bh_fs::read_regular_file(path).map_err(read)?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut plans = Vec::new();
        for (n, line) in bytes.split(|b| *b == b'\n').enumerate() {
            let line = line.trim_ascii();
            if line.is_empty() || line.starts_with(b"#") {
                continue;
            }
            if line.iter().any(|b| b.is_ascii_control()) {
                return Err(BatchError::ManifestLine {
                    path: path.to_path_buf(),
                    line: n + 1,
                    detail: "a plan path holds a control character".to_owned(),
                });
            }
            plans.push(base.join(Path::new(OsStr::from_bytes(line))));
        }
        Ok(Manifest {
            source: path.to_path_buf(),
            is_dir: false,
            plans,
        })
    }

    /// The plan of `index`.
    pub fn plan(&self, index: usize) -> Result<&Path, BatchError> {
        self.plans
            .get(index)
            .map(PathBuf::as_path)
            .ok_or_else(|| BatchError::IndexOutOfRange {
                path: self.source.clone(),
                index,
                count: self.plans.len(),
            })
    }

    /// Where receipts go unless told: `receipts/` inside a directory of
    /// plans, or beside a manifest file.
    pub fn default_receipts(&self) -> PathBuf {
        if self.is_dir {
            self.source.join(RECEIPTS_DIR)
        } else {
            self.source
                .parent()
                .unwrap_or(Path::new("."))
                .join(RECEIPTS_DIR)
        }
    }
}

fn file_name(p: &Path) -> &[u8] {
    p.file_name().map(OsStr::as_bytes).unwrap_or_default()
}
