//! For benchmarks: the large generated project tree the checkpoint benches
//! measure (pseudo-source files in 2 levels of folders, plus an ignored
//! `node_modules/`), deterministic for a given size.

use fs_err as fs;
use std::io::{BufWriter, Write};
use std::path::Path;

/// Deterministic pseudo-source text (gzip ratio ≈ 0.45, like real code).
pub struct Gen(pub u64);
impl Gen {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// `bytes` of pseudo-source into `out` (cleared first).
    pub fn text(&mut self, bytes: usize, out: &mut Vec<u8>) {
        const WORDS: &[&str] = &[
            "fn", "let", "mut", "self", "impl", "struct", "return", "match", "value", "index",
            "buffer", "result", "error", "path", "config", "state", "count", "name", "if", "else",
            "for", "in", "while", "Some", "None", "Ok", "Err", "=", "+", "->", "{", "}", "(", ")",
            ";", "&", "0", "1", "data", "node", "tree", "entry", "len", "iter",
        ];
        out.clear();
        while out.len() < bytes {
            let r = self.next_u64();
            let w = WORDS[(r % WORDS.len() as u64) as usize];
            out.extend_from_slice(w.as_bytes());
            // a sprinkle of identifiers keeps the text from compressing too well
            if r.is_multiple_of(5) {
                out.extend_from_slice(format!("_{:x}", (r >> 20) % 4096).as_bytes());
            }
            out.push(if r.is_multiple_of(11) { b'\n' } else { b' ' });
        }
    }
}

/// Writes `files` source files of about `total_mib` MiB in all, and `deps`
/// files under the ignored `node_modules/`; returns the source bytes written.
pub fn generate(project: &Path, files: usize, total_mib: u64, deps: usize) -> std::io::Result<u64> {
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    let avg = (total_mib * 1024 * 1024) as usize / files.max(1);
    let dirs = (files / 50).max(1);
    let mut buf = Vec::new();
    let mut total = 0u64;
    for i in 0..files {
        let d = i % dirs;
        let dir = project.join(format!("src/m{:02}/d{:04}", d % 40, d));
        if i < dirs {
            fs::create_dir_all(&dir)?;
        }
        let size = avg / 2 + (g.next_u64() as usize % avg.max(1));
        g.text(size, &mut buf);
        total += buf.len() as u64;
        let mut f = BufWriter::new(fs::File::create(dir.join(format!("f{i}.rs")))?);
        f.write_all(&buf)?;
    }
    fs::write(project.join(".gitignore"), "node_modules/\n")?;
    for i in 0..deps {
        let dir = project.join(format!("node_modules/pkg{:04}", i % 1000));
        if i < 1000 {
            fs::create_dir_all(&dir)?;
        }
        g.text(2048, &mut buf);
        fs::write(dir.join(format!("index{i}.js")), &buf)?;
    }
    Ok(total)
}
