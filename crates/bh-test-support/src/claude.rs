//! The real Claude Code CLI for the hook tests: npm's native build of
//! `@anthropic-ai/claude-code` (the platform package, one self-contained
//! binary), installed into the target directory on first use like the real
//! Pi, pinned. It runs offline against a local Anthropic-compatible mock
//! ([`crate::mock_anthropic`]) through `ANTHROPIC_BASE_URL`. Without npm the
//! tests skip, printing why (in CI they fail instead).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fs_err::File;
use std::path::PathBuf;
use std::sync::OnceLock;

use crate::pi::{installed_version, npm_install, target_dir, which};

/// The Claude Code release the tests run (2.1.x ships a native binary).
pub const VERSION: &str = "2.1.332";

/// npm's package that carries the binary for this machine.
fn package() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "@anthropic-ai/claude-code-linux-arm64",
        _ => "@anthropic-ai/claude-code-linux-x64",
    }
}

/// The `claude` binary, or `None` (reason printed) when npm is missing.
pub fn real_claude() -> Option<PathBuf> {
    static CELL: OnceLock<Option<PathBuf>> = OnceLock::new();
    let found = CELL.get_or_init(install);
    if found.is_none() {
        crate::skip_or_fail_in_ci(
            "Claude Code",
            &format!(
                "`npm` is needed to install {}@{VERSION} (not on PATH)",
                package()
            ),
        );
    }
    found.clone()
}

fn install() -> Option<PathBuf> {
    let npm = which("npm")?;
    let prefix = target_dir().join("real-claude").join(VERSION);
    fs_err::create_dir_all(&prefix).unwrap();
    // One installer at a time (test binaries run in parallel).
    let lock = File::create(prefix.join(".lock")).unwrap();
    lock.lock().unwrap();
    let dir = prefix.join("node_modules").join(package());
    if installed_version(&dir.join("package.json")).as_deref() != Some(VERSION) {
        npm_install(&npm, &prefix, &format!("{}@{VERSION}", package()));
    }
    let bin = dir.join("claude");
    assert!(bin.is_file(), "{} was not installed", bin.display());
    Some(bin)
}
