//! Paths no scope can grant.

/// The harness's own policy folder in a repository.
pub const HARNESS_POLICY_DIR: &str = ".better-harness";

/// Dependency lock files, protected wherever they are.
pub const LOCK_FILES: &[&str] = &[
    "Cargo.lock",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "bun.lockb",
    "bun.lock",
    "poetry.lock",
    "uv.lock",
    "Pipfile.lock",
    "pdm.lock",
    "Gemfile.lock",
    "go.sum",
    "composer.lock",
    "mix.lock",
    "pubspec.lock",
    "Package.resolved",
    "packages.lock.json",
    "flake.lock",
];

/// Git control files, protected wherever they are.
const GIT_CONTROL_FILES: &[&str] = &[".gitmodules", ".gitattributes", ".gitignore", ".mailmap"];

/// CI definition folders (prefixes from the repository root).
const CI_DIRS: &[&str] = &[
    ".github/workflows/",
    ".github/actions/",
    ".circleci/",
    ".buildkite/",
];

/// CI definition files at the repository root.
const CI_FILES: &[&str] = &[".gitlab-ci.yml", "azure-pipelines.yml", ".travis.yml"];

/// Hook folders (prefixes from the repository root).
const HOOK_DIRS: &[&str] = &[".githooks/", ".husky/"];

/// Why `path` (repository-relative, `/`-separated bytes) is protected, or
/// `None`. `hooks_path` is the repository's relative `core.hooksPath`, if any.
/// Matching ignores ASCII case, so `.GitHub/Workflows/x` — the same file on a
/// case-insensitive file system — is protected too.
pub fn protected_reason(path: &[u8], hooks_path: Option<&[u8]>) -> Option<&'static str> {
    let path = &path.to_ascii_lowercase();
    let hooks_path = hooks_path.map(<[u8]>::to_ascii_lowercase);
    let hooks_path = hooks_path.as_deref();
    let components: Vec<&[u8]> = path.split(|b| *b == b'/').collect();
    if components.iter().any(|c| c.eq_ignore_ascii_case(b".git")) {
        return Some("Git control path");
    }
    let name = components.last().copied().unwrap_or_default();
    let is = |n: &str| name == n.to_ascii_lowercase().as_bytes();
    if LOCK_FILES.iter().any(|l| is(l)) {
        return Some("lock file");
    }
    if GIT_CONTROL_FILES.iter().any(|g| is(g)) {
        return Some("Git control file");
    }
    if is("CODEOWNERS") {
        return Some("code owners file");
    }
    if name == b".pre-commit-config.yaml" {
        return Some("pre-commit configuration");
    }
    if is("Jenkinsfile") || CI_FILES.iter().any(|f| path == f.as_bytes()) {
        return Some("CI definition");
    }
    if CI_DIRS.iter().any(|d| path.starts_with(d.as_bytes())) {
        return Some("CI definition");
    }
    if HOOK_DIRS.iter().any(|d| path.starts_with(d.as_bytes())) {
        return Some("hook folder");
    }
    if let Some(hooks) = hooks_path {
        let hooks = hooks.strip_suffix(b"/").unwrap_or(hooks);
        if !hooks.is_empty()
            && !hooks.starts_with(b"/")
            && (path == hooks || (path.starts_with(hooks) && path.get(hooks.len()) == Some(&b'/')))
        {
            return Some("hook folder (core.hooksPath)");
        }
    }
    if path == HARNESS_POLICY_DIR.as_bytes()
        || (path.starts_with(HARNESS_POLICY_DIR.as_bytes())
            && path.get(HARNESS_POLICY_DIR.len()) == Some(&b'/'))
    {
        return Some("harness policy");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::protected_reason as p;

    #[test]
    fn protected_everywhere() {
        assert_eq!(p(b"src/.git/config", None), Some("Git control path"));
        assert_eq!(p(b"sub/.GIT", None), Some("Git control path"));
        assert_eq!(p(b"crates/x/Cargo.lock", None), Some("lock file"));
        assert_eq!(p(b"web/.gitignore", None), Some("Git control file"));
        assert_eq!(p(b"docs/CODEOWNERS", None), Some("code owners file"));
        assert_eq!(p(b".github/workflows/ci.yml", None), Some("CI definition"));
        assert_eq!(p(b".gitlab-ci.yml", None), Some("CI definition"));
        assert_eq!(p(b".husky/pre-commit", None), Some("hook folder"));
        assert_eq!(
            p(b"tools/hooks/pre-push", Some(b"tools/hooks")),
            Some("hook folder (core.hooksPath)")
        );
        assert_eq!(p(b"tools/hooksmith.rs", Some(b"tools/hooks")), None);
        assert_eq!(
            p(b".better-harness/policy.toml", None),
            Some("harness policy")
        );
        assert_eq!(p(b".GitHub/Workflows/x.yml", None), Some("CI definition"));
        assert_eq!(p(b"crates/CARGO.LOCK", None), Some("lock file"));
        assert_eq!(p(b"src/lib.rs", None), None);
        assert_eq!(p(b"src/gitignore.rs", None), None);
        assert_eq!(p(b"sub/.gitlab-ci.yml", None), None);
    }
}
