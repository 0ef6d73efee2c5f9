//! The call journal: one line per tagged snapshot request, in call order,
//! naming the checkpoint that stood before the call — also when the snapshot
//! was debounced into an older checkpoint, which the store's own tags cannot
//! say (a reused checkpoint keeps the tags of the call that created it).

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Result, ServeError};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Call {
    pub commit: String,
    pub session: String,
    pub entry: String,
    pub tool: String,
    pub created: bool,
}

#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
}

impl Journal {
    pub(crate) fn new(path: PathBuf) -> Journal {
        Journal { path }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one call with a single `write(2)` (`O_APPEND`, so concurrent
    /// servers never interleave inside a line).
    pub(crate) fn append(&self, call: &Call) -> Result<()> {
        let mut line = serde_json::to_vec(call).map_err(|e| {
            ServeError::io("cannot encode a journal line for", &self.path, e.into())
        })?;
        line.push(b'\n');
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&self.path)
            .map_err(|e| ServeError::io("cannot open the call journal", &self.path, e))?;
        file.write_all(&line)
            .map_err(|e| ServeError::io("cannot append to the call journal", &self.path, e))
    }

    /// Every readable call, in call order (a torn or foreign line is skipped).
    pub(crate) fn calls(&self) -> Result<Vec<Call>> {
        let file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(ServeError::io(
                    "cannot open the call journal",
                    &self.path,
                    e,
                ));
            }
        };
        let mut out = Vec::new();
        for line in BufReader::new(file).split(b'\n') {
            let line =
                line.map_err(|e| ServeError::io("cannot read the call journal", &self.path, e))?;
            if let Ok(call) = serde_json::from_slice::<Call>(&line) {
                out.push(call);
            }
        }
        Ok(out)
    }
}
