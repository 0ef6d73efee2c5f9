//! The broker's writes into the real repository, each through the
//! harness's hardened runner: objects imported through `index-pack
//! --strict` (every object re-hashed and checked as `fsck` checks it), refs
//! moved by `update-ref` with the value they had when the command started
//! (a ref someone else moved meanwhile is not overwritten), the index
//! rebuilt entry by entry (`update-index --index-info` checks every path as
//! `git add` does) under the index's own lock.

use std::io::Write;
use std::path::{Path, PathBuf};

use bh_git::{Repo, Scope};

use super::upper::Objects;

/// Object ids among `ids` that the real repository does not have.
pub(crate) fn missing(real: &Repo, ids: &[String]) -> Result<Vec<String>, String> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let out = real
        .cmd(["cat-file", "--batch-check=%(objectname)"])
        .stdin(ids.join("\n").into_bytes())
        .run()
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(" missing"))
        .map(str::to_owned)
        .collect())
}

/// Brings the objects the command wrote (and the real repository lacks)
/// into it. Returns how many.
pub(crate) fn import(
    real: &Repo,
    objects_dir: &Path,
    written: &Objects,
    scratch: &Path,
) -> Result<usize, String> {
    let mut ids: Vec<String> = written.loose.iter().map(|(o, _)| o.clone()).collect();
    for (idx, _) in &written.packs {
        let bytes = fs_err::read(idx).map_err(|e| e.to_string())?;
        let out = real
            .cmd(["show-index"])
            .stdin(bytes)
            .run()
            .map_err(|e| format!("{}: {e}", idx.display()))?;
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some(oid) = line.split(' ').nth(1) {
                ids.push(oid.to_owned());
            }
        }
    }
    ids.sort();
    ids.dedup();
    let wanted = missing(real, &ids)?;
    if wanted.is_empty() {
        return Ok(0);
    }
    // A private repository holding only the command's object files (never
    // its `info/alternates`), borrowing the real objects for deltas.
    let import = scratch.join("import.git");
    real.runner()
        .repo(scratch, Scope::Isolated)
        .run(["init", "--bare", "-q", "--template=", "import.git"])
        .map_err(|e| e.to_string())?;
    let obj = import.join("objects");
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    fs_err::create_dir_all(obj.join("info")).map_err(|e| io(&obj, e))?;
    fs_err::write(
        obj.join("info/alternates"),
        format!("{}\n", objects_dir.display()),
    )
    .map_err(|e| io(&obj, e))?;
    for (oid, file) in &written.loose {
        let to = obj.join(&oid[..2]);
        fs_err::create_dir_all(&to).map_err(|e| io(&to, e))?;
        fs_err::copy(file, to.join(&oid[2..])).map_err(|e| io(file, e))?;
    }
    let packs = obj.join("pack");
    fs_err::create_dir_all(&packs).map_err(|e| io(&packs, e))?;
    for (idx, pack) in &written.packs {
        for f in [idx, pack] {
            let name = f.file_name().unwrap_or_default();
            fs_err::copy(f, packs.join(name)).map_err(|e| io(f, e))?;
        }
    }
    let mut list = wanted.join("\n").into_bytes();
    list.push(b'\n');
    let pack = real
        .runner()
        .repo(&import, Scope::Isolated)
        .cmd(["pack-objects", "--stdout", "-q"])
        .stdin(list)
        .run()
        .map_err(|e| format!("packing the command's objects: {e}"))?;
    real.cmd(["index-pack", "--stdin", "--strict"])
        .stdin(pack.stdout)
        .run()
        .map_err(|e| format!("the command's objects were refused: {}", e.stderr().trim()))?;
    Ok(wanted.len())
}

/// `git cat-file -t`, or `None` when the object is not there.
pub(crate) fn object_type(real: &Repo, oid: &str) -> Option<String> {
    real.run_line(["cat-file", "-t", oid]).ok()
}

/// Moves `name` from `old` (`None`: must not exist) to `new` (`None`:
/// deleted), with `msg` in its reflog.
pub(crate) fn update_ref(
    real: &Repo,
    name: &str,
    old: Option<&str>,
    new: Option<&str>,
    msg: &str,
    zero: &str,
) -> Result<(), String> {
    let old = old.unwrap_or(zero);
    let r = match new {
        Some(new) => real.run(["update-ref", "--create-reflog", "-m", msg, name, new, old]),
        None => real.run(["update-ref", "-m", msg, "-d", name, old]),
    };
    r.map(|_| ()).map_err(|e| e.stderr().trim().to_owned())
}

/// The entries of an index file (`git ls-files -s -z`, a format
/// `update-index --index-info -z` reads back).
pub(crate) fn index_entries(real: &Repo, index: &Path) -> Result<Vec<u8>, String> {
    real.cmd(["ls-files", "-s", "-z"])
        .env("GIT_INDEX_FILE", index.as_os_str())
        .run()
        .map(|o| o.stdout)
        .map_err(|e| format!("{}: {}", index.display(), e.stderr().trim()))
}

/// The blob ids an index's entries name (gitlinks excluded).
pub(crate) fn index_blobs(entries: &[u8]) -> Vec<String> {
    entries
        .split(|b| *b == 0)
        .filter_map(|e| {
            let e = std::str::from_utf8(e.split(|b| *b == b'\t').next()?).ok()?;
            let mut parts = e.split(' ');
            let mode = parts.next()?;
            let oid = parts.next()?;
            (mode != "160000").then(|| oid.to_owned())
        })
        .collect()
}

/// Replaces the real index (of `git_dir`) with `entries`, under its lock;
/// then refreshes its stat data.
pub(crate) fn install_index(real: &Repo, git_dir: &Path, entries: Vec<u8>) -> Result<(), String> {
    let lock = git_dir.join("index.lock");
    let mut held = fs_err::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)
        .map_err(|e| format!("the index is locked or cannot be locked ({e})"))?;
    let built: PathBuf = git_dir.join(format!("index.bh-{}", std::process::id()));
    let result = (|| {
        let _ = fs_err::remove_file(&built);
        real.cmd(["update-index", "-z", "--index-info"])
            .env("GIT_INDEX_FILE", built.as_os_str())
            .stdin(entries)
            .run()
            .map_err(|e| format!("the index was refused: {}", e.stderr().trim()))?;
        fs_err::rename(&built, git_dir.join("index")).map_err(|e| e.to_string())
    })();
    let _ = held.flush();
    drop(held);
    let _ = fs_err::remove_file(&built);
    let _ = fs_err::remove_file(&lock);
    result?;
    // Stat data for the new entries (`needs update` lines exit 1: fine).
    let _ = real
        .cmd(["update-index", "-q", "--refresh"])
        .ok_codes(&[0, 1])
        .run();
    Ok(())
}
