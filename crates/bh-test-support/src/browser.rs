//! A real headless browser for the HTML report tests: Debian's Chromium
//! driven by `playwright-core` (from npm, installed into the target directory
//! on first use, like the real Pi). `.ci/run` installs Chromium; elsewhere the
//! tests skip, printing why, when Chromium, Node or npm is missing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fs_err::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::pi::{installed_version, npm_install, target_dir, which};

const PLAYWRIGHT_CORE: &str = "1.64.1";

/// Chromium and a Node that can drive it.
#[derive(Clone, Debug)]
pub struct Browser {
    pub node: PathBuf,
    pub chromium: PathBuf,
    /// The folder whose `node_modules` holds `playwright-core`.
    pub modules: PathBuf,
}

impl Browser {
    /// Runs `script` (an ES module) with Node; `CHROMIUM` in its environment
    /// names the browser. Returns stdout; panics with stderr on failure.
    pub fn run_script(&self, script: &str, args: &[&str]) -> String {
        let file = self.modules.join(format!(
            "script-{}-{}.mjs",
            std::process::id(),
            SCRIPTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        fs_err::write(&file, script).unwrap();
        let out = Command::new(&self.node)
            .arg(&file)
            .args(args)
            .env("CHROMIUM", &self.chromium)
            .output()
            .unwrap();
        let _ = fs_err::remove_file(&file);
        assert!(
            out.status.success(),
            "browser script failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

static SCRIPTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The browser, or `None` (reason printed) when Chromium, Node or npm is
/// missing; in CI (`CI=true`) a missing one fails instead.
pub fn browser() -> Option<Browser> {
    static CELL: OnceLock<Option<Browser>> = OnceLock::new();
    let found = CELL.get_or_init(install);
    if found.is_none() {
        crate::skip_or_fail_in_ci(
            "browser",
            "needs Chromium (/usr/bin/chromium, Debian's `chromium`; .ci/run installs it), node and npm",
        );
    }
    found.clone()
}

fn install() -> Option<Browser> {
    let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())?;
    let node = which("node")?;
    let npm = which("npm")?;
    let root = target_dir().join("browser");
    fs_err::create_dir_all(&root).unwrap();
    let lock = File::create(root.join(".lock")).unwrap();
    lock.lock().unwrap();
    let pkg: &Path = Path::new("node_modules/playwright-core/package.json");
    if installed_version(&root.join(pkg)).as_deref() != Some(PLAYWRIGHT_CORE) {
        npm_install(&npm, &root, &format!("playwright-core@{PLAYWRIGHT_CORE}"));
    }
    drop(lock);
    Some(Browser {
        node,
        chromium,
        modules: root,
    })
}
