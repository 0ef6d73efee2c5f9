//! `pydantic_ai_bh._bh`: the Python extension module over `bh-checkpoint`.
//!
//! One [`PyStore`] is one project's checkpoint store, the very store `bh
//! checkpoint` opens for that project under the same state directory (the
//! project is the Git repository enclosing the given folder, else the folder,
//! as `bh checkpoint` decides it from its current directory). Every store call
//! runs with the GIL released, so Python threads (and the event loop's worker
//! threads) go on while a snapshot hashes files.
//!
//! Nothing here reads the environment: the Python package computes the state
//! directory and the allow-listed environment for git, as the CLI does, and
//! passes them in. Checkpoints cross into Python as plain tuples; the package
//! turns them into its frozen `Checkpoint` dataclass.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::sync::Arc;

use bh_checkpoint::{
    Checkpoint, CheckpointError, LiveStore, RestoreMode, SnapshotRequest, Store, StoreOptions,
};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    _bh,
    StoreError,
    PyException,
    "A checkpoint store operation failed; `kind` is refused, not_found, usage or internal."
);

/// `(commit, id, seq, time_ms, tool, session, entry, files_changed, skipped, kind)`.
type CheckpointTuple = (
    String,
    String,
    u64,
    i64,
    String,
    Option<String>,
    Option<String>,
    u64,
    u64,
    String,
);

fn tuple(c: &Checkpoint) -> CheckpointTuple {
    (
        c.commit.clone(),
        c.id.clone(),
        c.seq,
        c.time_ms,
        c.tool.clone(),
        c.session.clone(),
        c.entry.clone(),
        c.files_changed,
        c.skipped,
        c.kind.as_str().to_owned(),
    )
}

fn store_error(err: CheckpointError) -> PyErr {
    let kind = err.class().as_str();
    let py_err = StoreError::new_err(err.to_string());
    Python::attach(|py| {
        // Setting an attribute on a fresh exception instance cannot fail in
        // practice; if it did, the message alone still says what went wrong.
        let _ = py_err.value(py).setattr("kind", kind);
    });
    py_err
}

/// One project's checkpoint store (see the module docs).
#[pyclass(module = "pydantic_ai_bh._bh", name = "Store", frozen)]
struct PyStore {
    live: LiveStore,
}

#[pymethods]
impl PyStore {
    /// Opens (creating it private to the user if missing) the store of the
    /// project enclosing `path`, under `state_dir`. `git_env` is the whole
    /// environment git children get (the runner drops every `GIT_*`).
    #[new]
    #[pyo3(signature = (path, state_dir, git_env, *, max_file_size = bh_checkpoint::DEFAULT_MAX_FILE_SIZE, git = PathBuf::from("git")))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        state_dir: PathBuf,
        git_env: Vec<(Vec<u8>, Vec<u8>)>,
        max_file_size: u64,
        git: PathBuf,
    ) -> PyResult<PyStore> {
        let env = git_env
            .into_iter()
            .map(|(k, v)| (OsString::from_vec(k), OsString::from_vec(v)))
            .collect();
        let runner = bh_git::GitRunner::new(git, env);
        let options = StoreOptions {
            state_dir,
            max_file_size,
        };
        let store = py
            .detach(|| Store::open_in(&runner, &path, &options))
            .map_err(store_error)?;
        Ok(PyStore {
            live: LiveStore::new(Arc::new(store)),
        })
    }

    /// The project's top folder (canonical).
    #[getter]
    fn project(&self) -> PathBuf {
        self.live.store().project().to_path_buf()
    }

    /// The store folder.
    #[getter]
    fn dir(&self) -> PathBuf {
        self.live.store().dir().to_path_buf()
    }

    /// Snapshots the project before `tool` runs. Returns `(checkpoint,
    /// created, changed)`: `created` is false when nothing changed and the
    /// last checkpoint was reused; `changed` is the number of paths changed.
    #[pyo3(signature = (tool, *, session = None, entry = None))]
    fn snapshot(
        &self,
        py: Python<'_>,
        tool: String,
        session: Option<String>,
        entry: Option<String>,
    ) -> PyResult<(CheckpointTuple, bool, usize)> {
        let request = SnapshotRequest {
            tool,
            session,
            entry,
        };
        let outcome = py
            .detach(|| self.live.snapshot(&request))
            .map_err(store_error)?;
        Ok((
            tuple(&outcome.checkpoint),
            outcome.created,
            outcome.changed.len(),
        ))
    }

    /// Every checkpoint, oldest first.
    fn list(&self, py: Python<'_>) -> PyResult<Vec<CheckpointTuple>> {
        let list = py
            .detach(|| self.live.store().list())
            .map_err(store_error)?;
        Ok(list.iter().map(tuple).collect())
    }

    /// Restores `paths` (relative to the project, or absolute inside it;
    /// none = the whole project) from checkpoint `id` (a prefix of at least 4
    /// hex digits, or `latest`). An undo point is taken first. `exact` also
    /// deletes files created since that the checkpoint would have captured.
    /// Returns `(checkpoint, undo_point, restored, deleted, kept)`.
    #[pyo3(signature = (id, *, paths = None, exact = false))]
    fn restore(
        &self,
        py: Python<'_>,
        id: String,
        paths: Option<Vec<PathBuf>>,
        exact: bool,
    ) -> PyResult<RestoreTuple> {
        let store = self.live.store();
        let project = store.project();
        let mut rel = Vec::new();
        for p in paths.unwrap_or_default() {
            let r = bh_checkpoint::project_relative(project, project, &p).map_err(store_error)?;
            if r.is_empty() {
                // The project itself: the whole tree.
                rel.clear();
                break;
            }
            rel.push(r);
        }
        let mode = if exact {
            RestoreMode::Exact
        } else {
            RestoreMode::Additive
        };
        let outcome = py
            .detach(|| store.restore(&id, &rel, mode))
            .map_err(store_error)?;
        Ok((
            tuple(&outcome.checkpoint),
            tuple(&outcome.safety),
            outcome.restored,
            outcome.deleted,
            outcome.kept,
        ))
    }

    fn __repr__(&self) -> String {
        format!(
            "Store(project={:?}, dir={:?})",
            self.live.store().project(),
            self.live.store().dir()
        )
    }
}

type RestoreTuple = (
    CheckpointTuple,
    CheckpointTuple,
    Vec<String>,
    Vec<String>,
    Vec<String>,
);

#[pymodule]
fn _bh(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStore>()?;
    m.add("StoreError", m.py().get_type::<StoreError>())?;
    m.add(
        "DEFAULT_MAX_FILE_SIZE",
        bh_checkpoint::DEFAULT_MAX_FILE_SIZE,
    )?;
    Ok(())
}
