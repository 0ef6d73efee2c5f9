//! Builds the `pydantic-ai-bh` Python package with maturin and runs its pytest
//! suite (python/tests) against real pydantic-ai and pydantic-ai-harness, then
//! type-checks the package with `mypy --strict`.
//!
//! The venv lives under the target directory, keyed by the Python version and
//! the bytes of python/requirements-test.txt, created once (under a file lock)
//! and reused; the package is rebuilt into it (`maturin develop`) on every run.
//! The suite's `bh` cross-check gets the workspace's `bh` binary (built here
//! when absent). Skips, saying why, only when `python3` is not on `PATH`; any
//! other failure (pip, maturin, a test) fails this test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest, Sha256};

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// `<target>` (the folder holding `debug/deps/<this test>`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    exe.ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "deps"))
        .and_then(|deps| deps.parent())
        .and_then(|profile| profile.parent())
        .map(Path::to_path_buf)
        .expect("the test runs from <target>/<profile>/deps")
}

fn run(cmd: &mut Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The cached venv with the pinned requirements installed.
fn venv(python: &Path, requirements: &Path) -> PathBuf {
    let version = run(Command::new(python).arg("--version"), "python3 --version").stdout;
    let reqs = fs_err::read(requirements).unwrap();
    let digest = Sha256::new()
        .chain_update(&version)
        .chain_update(&reqs)
        .finalize();
    let key = hex::encode(&digest[..8]);
    let root = target_dir().join("py-venv");
    fs_err::create_dir_all(&root).unwrap();
    let lock = fs_err::File::create(root.join(".lock")).unwrap();
    lock.lock().unwrap();
    let venv = root.join(key);
    let ready = venv.join(".ready");
    if !ready.is_file() {
        if venv.exists() {
            fs_err::remove_dir_all(&venv).unwrap();
        }
        run(
            Command::new(python).args(["-m", "venv"]).arg(&venv),
            "python3 -m venv",
        );
        run(
            Command::new(venv.join("bin/python"))
                .args([
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--disable-pip-version-check",
                    "-r",
                ])
                .arg(requirements),
            "pip install -r python/requirements-test.txt",
        );
        fs_err::write(&ready, &reqs).unwrap();
    }
    venv
}

#[test]
fn pytest_suite_passes_on_the_built_package() {
    let Some(python) = which("python3") else {
        eprintln!("skipped: python3 is not on PATH (the pydantic-ai-bh suite needs it)");
        return;
    };
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let package = workspace.join("python");
    let target = target_dir();
    let venv = venv(&python, &package.join("requirements-test.txt"));
    let path = std::env::join_paths(std::iter::once(venv.join("bin")).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());

    let bh = target.join("debug/bh");
    if !bh.is_file() {
        run(
            Command::new(&cargo)
                .args(["build", "-q", "-p", "bh-cli", "--bin", "bh"])
                .current_dir(&workspace)
                .env("CARGO_TARGET_DIR", &target),
            "cargo build -p bh-cli",
        );
    }

    run(
        Command::new(venv.join("bin/maturin"))
            .args(["develop", "-q"])
            .current_dir(&package)
            .env("VIRTUAL_ENV", &venv)
            .env("PATH", &path)
            .env("CARGO", &cargo)
            .env("CARGO_TARGET_DIR", &target),
        "maturin develop",
    );

    let scratch = tempfile::tempdir().unwrap();
    let out = run(
        Command::new(venv.join("bin/python"))
            .args([
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-rs",
                "tests",
            ])
            .arg("--basetemp")
            .arg(scratch.path().join("pytest"))
            .current_dir(&package)
            .env("PATH", &path)
            .env("BH_BIN", &bh)
            .env_remove("BH_STATE_DIR")
            .env("PYTHONDONTWRITEBYTECODE", "1"),
        "pytest python/tests",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert!(text.contains(" passed"), "pytest ran no test:\n{text}");

    // The package is typed (py.typed, stubs for the extension): `mypy --strict`
    // on it, against the pinned pydantic-ai, finds nothing.
    let cache = scratch.path().join("mypy-cache");
    let out = run(
        Command::new(venv.join("bin/python"))
            .args(["-m", "mypy", "--strict", "--cache-dir"])
            .arg(&cache)
            .arg("src/pydantic_ai_bh")
            .current_dir(&package)
            .env("PATH", &path),
        "mypy --strict python/src/pydantic_ai_bh",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Success: no issues found"), "{text}");
}
