//! `work.patch` and `rejected.patch`: streamed from `git diff` into the
//! artifact folder with a cap, so a small set of objects (a few KiB of
//! compressed repetition) cannot become a patch of hundreds of MiB in the
//! harness's memory or on disk.

use fs_err as fs;
use std::io::{Read, Write};
use std::path::Path;

use bh_git::Repo;

use crate::error::{PreflightError, io};

/// Writes the diff from `from` to `to` (binary, no external diff, no
/// textconv: no driver runs) to `path`, at most `limit` bytes of it.
/// Returns whether it was cut; a cut patch ends with a line saying so.
pub(crate) fn write_patch(
    repo: &Repo,
    from: &str,
    to: &str,
    path: &Path,
    limit: u64,
) -> Result<bool, PreflightError> {
    let mut git = repo
        .cmd([
            "diff",
            "--binary",
            "--no-ext-diff",
            "--no-textconv",
            from,
            to,
            "--",
        ])
        .spawn_process()?;
    // fs_err: its errors, the writes' too, name the file.
    let file = fs::File::create(path).map_err(PreflightError::Fs)?;
    let mut out = std::io::BufWriter::new(file);
    let write_err = || PreflightError::Fs;
    let mut buf = vec![0u8; 64 * 1024];
    let mut written: u64 = 0;
    let mut cut = false;
    loop {
        let n = git
            .stdout
            .read(&mut buf)
            .map_err(io(format!("cannot read `{}`", git.argv())))?;
        if n == 0 {
            break;
        }
        let room = usize::try_from(limit - written).unwrap_or(usize::MAX);
        if n > room {
            out.write_all(&buf[..room]).map_err(write_err())?;
            cut = true;
            break;
        }
        out.write_all(&buf[..n]).map_err(write_err())?;
        written += n as u64;
    }
    if cut {
        // Dropping the process kills it: the rest is never produced.
        drop(git);
        writeln!(
            out,
            "\n# bh: cut at {limit} bytes; the whole diff: git diff --binary {from} {to}"
        )
        .map_err(write_err())?;
    } else {
        let status = git
            .wait()
            .map_err(io(format!("cannot wait for `{}`", git.argv())))?;
        if !status.success() {
            return Err(PreflightError::Io {
                context: format!("`{}` for {}", git.argv(), path.display()),
                source: std::io::Error::other(format!("git exited with {status}")),
            });
        }
    }
    out.flush().map_err(write_err())?;
    Ok(cut)
}
