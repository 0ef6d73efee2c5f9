//! Hints for a worker that failed for a reason people cannot see: a
//! program or file under `/tmp`, which the sandbox replaces with a private,
//! empty one (the worker's `No such file or directory` does not say so).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// [`hidden_under_tmp`] for the task's command, when it runs sandboxed;
/// `own` are the folders the sandbox carries besides the options' ones.
pub(crate) fn hidden_by_the_sandbox(
    opts: &crate::options::TaskOptions,
    own: &[&Path],
) -> Vec<String> {
    let Some(s) = &opts.sandbox else {
        return Vec::new();
    };
    let carried: Vec<PathBuf> = own
        .iter()
        .map(|p| p.to_path_buf())
        .chain(s.allow_write.iter().cloned())
        .chain(s.allow_read.iter().cloned())
        .chain(s.protected.iter().cloned())
        .map(|p| fs_err::canonicalize(&p).unwrap_or(p))
        .collect();
    hidden_under_tmp(&opts.argv, &opts.env, &carried)
}

/// For each path of the command line the sandbox hides — the program (as
/// `PATH` finds it on the host when it is a bare name) and any absolute
/// argument — that lies under the host's `/tmp` and outside what the
/// sandbox carries over (`carried`), a sentence saying so and what to do.
pub(crate) fn hidden_under_tmp(
    argv: &[OsString],
    env: &[(OsString, OsString)],
    carried: &[PathBuf],
) -> Vec<String> {
    let tmp = fs_err::canonicalize("/tmp").unwrap_or_else(|_| PathBuf::from("/tmp"));
    let mut paths: Vec<PathBuf> = Vec::new();
    if let Some(program) = argv.first() {
        if program.as_bytes().contains(&b'/') {
            paths.push(PathBuf::from(program));
        } else if let Some((_, path)) = env.iter().find(|(k, _)| k == "PATH") {
            let found = path
                .as_bytes()
                .split(|b| *b == b':')
                .filter(|d| d.starts_with(b"/"))
                .map(|d| Path::new(OsStr::from_bytes(d)).join(program))
                .find(|p| p.is_file());
            paths.extend(found);
        }
    }
    paths.extend(
        argv.iter()
            .skip(1)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute()),
    );
    let mut out = Vec::new();
    for path in paths {
        if !path.is_absolute() || fs_err::symlink_metadata(&path).is_err() {
            continue;
        }
        let real = fs_err::canonicalize(&path).unwrap_or_else(|_| path.clone());
        let under = |p: &Path| p.starts_with(&tmp) || p.starts_with("/tmp");
        if !(under(&path) || under(&real)) || carried.iter().any(|c| real.starts_with(c)) {
            continue;
        }
        let folder = real.parent().unwrap_or(&real);
        out.push(format!(
            "{} lies under /tmp, which the sandbox replaces with a private one: pass \
             --allow-read {} to carry it over read-only, or install it elsewhere",
            path.display(),
            folder.display()
        ));
        if out.len() == 3 {
            break;
        }
    }
    out
}
