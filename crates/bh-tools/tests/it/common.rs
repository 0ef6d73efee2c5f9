use std::path::{Path, PathBuf};

use bh_tools::{Profile, ToolResult, Toolbox, ToolboxOptions};
use serde_json::Value;

/// `outer/root` is the tool root; `outer/outside` holds secrets that must
/// never show up in any result; `outer/out` receives bash logs.
pub struct Sandbox {
    pub _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub outside: PathBuf,
    pub out: PathBuf,
}

pub const SECRET: &str = "TOP-SECRET-7f3a9c";

impl Sandbox {
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let base = fs_err::canonicalize(tmp.path()).unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        let out = base.join("out");
        fs_err::create_dir_all(&root).unwrap();
        fs_err::create_dir_all(outside.join("dir")).unwrap();
        fs_err::write(outside.join("secret.txt"), format!("{SECRET}\n")).unwrap();
        fs_err::write(
            outside.join("dir/hidden-outside.txt"),
            format!("{SECRET} inner\n"),
        )
        .unwrap();
        Sandbox {
            _tmp: tmp,
            root,
            outside,
            out,
        }
    }

    pub fn toolbox(&self, profile: Profile) -> Toolbox {
        Toolbox::new(ToolboxOptions::new(&self.root, profile, &self.out)).unwrap()
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let p = self.root.join(rel);
        fs_err::create_dir_all(p.parent().unwrap()).unwrap();
        fs_err::write(p, content).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        fs_err::read_to_string(self.root.join(rel)).unwrap()
    }
}

pub fn call(tb: &Toolbox, name: &str, args: Value) -> ToolResult {
    tb.call(name, &args)
}

/// A snapshot of a directory tree: (relative path, kind, content or link target, mtime).
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, String, Vec<u8>, i128)> {
    let mut out = Vec::new();
    fn rec(base: &Path, dir: &Path, out: &mut Vec<(PathBuf, String, Vec<u8>, i128)>) {
        let mut entries: Vec<_> = fs_err::read_dir(dir).unwrap().flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let md = fs_err::symlink_metadata(&p).unwrap();
            let mtime = md
                .modified()
                .unwrap()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as i128;
            let rel = p.strip_prefix(base).unwrap().to_path_buf();
            if md.file_type().is_symlink() {
                let t = fs_err::read_link(&p).unwrap();
                out.push((
                    rel,
                    "link".into(),
                    t.as_os_str().as_encoded_bytes().to_vec(),
                    mtime,
                ));
            } else if md.is_dir() {
                out.push((rel, "dir".into(), Vec::new(), mtime));
                rec(base, &p, out);
            } else {
                out.push((rel, "file".into(), fs_err::read(&p).unwrap(), mtime));
            }
        }
    }
    rec(dir, dir, &mut out);
    out
}
