//! Exclusive claims: a directory `<name>.claim` holding an `owner` file
//! (`pid start-time operation since`). It is built under a temporary name and
//! renamed into place, so a claim never exists without its owner; `rename(2)`
//! of a directory onto an existing non-empty one fails, which makes taking a
//! claim exclusive. A claim whose owner process is gone (same pid and start
//! time no longer running) is stale: it is renamed away (one racer wins) and
//! the claim retried once.

use std::path::{Path, PathBuf};

use crate::error::{Result, WorktreeError};

/// Held for the whole of one lifecycle operation on one worktree name.
#[derive(Debug)]
pub struct Claim {
    path: PathBuf,
}

/// Start time of a process (field 22 of `/proc/<pid>/stat`), `None` when it
/// does not run.
fn start_time(pid: u32) -> Option<String> {
    bh_proc::process_start_time(pid).map(|t| t.to_string())
}

/// Whether the process recorded in `owner` is gone.
fn owner_gone(owner: &str) -> bool {
    let mut parts = owner.split_whitespace();
    let (Some(pid), Some(start)) = (parts.next(), parts.next()) else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    start_time(pid).as_deref() != Some(start)
}

/// Removes the claim at `path` if its owner is gone. Breakers serialise on a
/// `flock` of `<claim>.lock` and re-read the owner under it, so a claim taken
/// after the stale one was removed is never broken.
fn break_stale(path: &Path) -> Result<bool> {
    let mut lock_path = path.as_os_str().to_owned();
    lock_path.push(".lock");
    let lock_path = PathBuf::from(lock_path);
    let lock = fs_err::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| WorktreeError::io(&lock_path, e))?;
    lock.lock().map_err(|e| WorktreeError::io(&lock_path, e))?;
    let owner = fs_err::read_to_string(path.join("owner")).unwrap_or_default();
    let broken = owner_gone(&owner) && retire(path);
    let _ = lock.unlock();
    Ok(broken)
}

/// Renames a claim folder away (atomic) and deletes it.
fn retire(path: &Path) -> bool {
    let mut gone = path.as_os_str().to_owned();
    gone.push(format!(".gone-{}", uuid::Uuid::now_v7().simple()));
    let gone = PathBuf::from(gone);
    if fs_err::rename(path, &gone).is_ok() {
        let _ = fs_err::remove_dir_all(&gone);
        true
    } else {
        false
    }
}

impl Claim {
    /// Takes the claim at `path` or fails with [`WorktreeError::Busy`].
    pub fn acquire(path: &Path, name: &str, operation: &str) -> Result<Claim> {
        let parent = path.parent().unwrap_or(Path::new("."));
        fs_err::create_dir_all(parent).map_err(|e| WorktreeError::io(parent, e))?;
        for attempt in 0..2 {
            match Self::try_take(path, operation)? {
                Some(claim) => return Ok(claim),
                None => {
                    if attempt == 0 && break_stale(path)? {
                        continue;
                    }
                    let owner = fs_err::read_to_string(path.join("owner")).unwrap_or_default();
                    let mut parts = owner.splitn(3, ' ');
                    let pid = parts.next().unwrap_or("?");
                    let what = parts.nth(1).unwrap_or("another operation").trim();
                    return Err(WorktreeError::Busy {
                        name: name.to_owned(),
                        detail: format!("{what} (pid {pid}) holds {}", path.display()),
                    });
                }
            }
        }
        Err(WorktreeError::Busy {
            name: name.to_owned(),
            detail: format!("{} is contended", path.display()),
        })
    }

    fn try_take(path: &Path, operation: &str) -> Result<Option<Claim>> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".tmp-{}", uuid::Uuid::now_v7().simple()));
        let tmp = PathBuf::from(tmp);
        fs_err::create_dir(&tmp).map_err(|e| WorktreeError::io(&tmp, e))?;
        let pid = std::process::id();
        let owner = format!(
            "{pid} {} {operation} since {}\n",
            start_time(pid).unwrap_or_else(|| "?".into()),
            jiff::Timestamp::now()
        );
        let file = tmp.join("owner");
        if let Err(e) = fs_err::write(&file, owner) {
            let _ = fs_err::remove_dir_all(&tmp);
            return Err(WorktreeError::io(file, e));
        }
        match fs_err::rename(&tmp, path) {
            Ok(()) => Ok(Some(Claim {
                path: path.to_path_buf(),
            })),
            Err(e) => {
                let _ = fs_err::remove_dir_all(&tmp);
                // ENOTEMPTY or EEXIST: someone holds it.
                if path.is_dir() {
                    Ok(None)
                } else {
                    Err(WorktreeError::io(path, e))
                }
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        retire(&self.path);
    }
}
