//! Reading tasks back: the artifact folders under the tasks folder (the
//! default place of `bh task run`), each with its frozen `task.json` and —
//! once it ended — `state.json`. Reads only.

use std::path::{Path, PathBuf};

use fs_err as fs;

use crate::run::{Outcome, TaskReport};

/// One task's artifact folder read back.
#[derive(Debug, Clone)]
pub struct TaskRecord {
    pub id: String,
    pub dir: PathBuf,
    /// The freeze (`task.json`): base, argv, scope, sandbox…
    pub task: Option<serde_json::Value>,
    /// The ending (`state.json`); `None` while the task runs, or when it was
    /// killed before writing it.
    pub report: Option<TaskReport>,
    /// Why part of the folder could not be read.
    pub problems: Vec<String>,
}

impl TaskRecord {
    pub fn outcome(&self) -> Option<Outcome> {
        self.report.as_ref().map(|r| r.outcome)
    }

    /// The worker's command line as frozen.
    pub fn argv(&self) -> Vec<String> {
        self.task
            .as_ref()
            .and_then(|t| t["argv"].as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Every task folder under `tasks_root` (one with a `task.json` or a
/// `state.json`), oldest first (ids are time-ordered). A missing folder is
/// an empty list.
pub fn list_tasks(tasks_root: &Path) -> std::io::Result<Vec<TaskRecord>> {
    let entries = match fs::read_dir(tasks_root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry?;
        let dir = entry.path();
        let Some(id) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if dir.join("task.json").is_file() || dir.join("state.json").is_file() {
            out.push(read_task(&id, &dir));
        }
    }
    // Oldest first, by the time the id carries.
    out.sort_by(|a, b| (bh_fs::id_time_ms(&a.id), &a.id).cmp(&(bh_fs::id_time_ms(&b.id), &b.id)));
    Ok(out)
}

/// Reads one artifact folder; what cannot be read is named in `problems`.
pub fn read_task(id: &str, dir: &Path) -> TaskRecord {
    let mut problems = Vec::new();
    let mut read = |name: &str| -> Option<Vec<u8>> {
        match fs::read(dir.join(name)) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                problems.push(e.to_string());
                None
            }
        }
    };
    let task_bytes = read("task.json");
    let state_bytes = read("state.json");
    let task = task_bytes.and_then(|b| {
        serde_json::from_slice(&b)
            .map_err(|e| problems.push(format!("{}: {e}", dir.join("task.json").display())))
            .ok()
    });
    let report = state_bytes.and_then(|b| {
        serde_json::from_slice::<TaskReport>(&b)
            .map_err(|e| {
                problems.push(format!(
                    "{} is not a task state: {e}",
                    dir.join("state.json").display()
                ))
            })
            .ok()
    });
    TaskRecord {
        id: report
            .as_ref()
            .map(|r| r.id.clone())
            .or_else(|| {
                task.as_ref()
                    .and_then(|t: &serde_json::Value| t["id"].as_str().map(str::to_owned))
            })
            .unwrap_or_else(|| id.to_owned()),
        dir: dir.to_path_buf(),
        task,
        report,
        problems,
    }
}
