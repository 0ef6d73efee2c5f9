//! Puts the commit `bh` was built from into `bh --version`: read from the
//! checkout's `.git` files (HEAD, then the loose or packed ref), no git
//! process; "unknown commit" outside a checkout (e.g. a crates.io tarball).

use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = git_dir(&manifest)
        .and_then(|dir| {
            let head = dir.join("HEAD");
            println!("cargo:rerun-if-changed={}", head.display());
            let text = fs_err::read_to_string(&head).ok()?;
            let text = text.trim();
            match text.strip_prefix("ref: ") {
                Some(name) => {
                    let loose = dir.join(name);
                    println!("cargo:rerun-if-changed={}", loose.display());
                    println!(
                        "cargo:rerun-if-changed={}",
                        dir.join("packed-refs").display()
                    );
                    fs_err::read_to_string(&loose)
                        .ok()
                        .map(|s| s.trim().to_owned())
                        .or_else(|| packed(&dir, name))
                }
                None => Some(text.to_owned()),
            }
        })
        .filter(|c| c.len() >= 12 && c.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(|c| c[..12].to_owned())
        .unwrap_or_else(|| "unknown commit".to_owned());
    println!("cargo:rustc-env=BH_COMMIT={commit}");
}

/// The git dir of the checkout holding `start` (a `.git` folder, or the
/// folder a `.git` file points to, as in a linked worktree).
fn git_dir(start: &Path) -> Option<PathBuf> {
    for dir in start.ancestors() {
        let dot = dir.join(".git");
        if dot.is_dir() {
            return Some(dot);
        }
        if let Ok(text) = fs_err::read_to_string(&dot) {
            let target = text.trim().strip_prefix("gitdir: ")?;
            return Some(dir.join(target));
        }
    }
    None
}

/// A ref in `packed-refs` (a linked worktree's refs live in the common dir).
fn packed(dir: &Path, name: &str) -> Option<String> {
    let common = fs_err::read_to_string(dir.join("commondir"))
        .map(|c| dir.join(c.trim()))
        .unwrap_or_else(|_| dir.to_path_buf());
    let loose = common.join(name);
    if let Ok(s) = fs_err::read_to_string(&loose) {
        return Some(s.trim().to_owned());
    }
    let text = fs_err::read_to_string(common.join("packed-refs")).ok()?;
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .find(|(_, r)| *r == name)
        .map(|(sha, _)| sha.to_owned())
}
