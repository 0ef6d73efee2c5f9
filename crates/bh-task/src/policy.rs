//! Paths no scope can grant.

use std::os::unix::ffi::OsStrExt;

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
    "deno.lock",
    "Podfile.lock",
    "gradle.lockfile",
    ".terraform.lock.hcl",
    "pixi.lock",
    "conda-lock.yml",
    "Manifest.toml",
    "renv.lock",
];

/// Git control files, protected wherever they are.
const GIT_CONTROL_FILES: &[&str] = &[
    ".gitmodules",
    ".gitattributes",
    ".gitignore",
    ".mailmap",
    ".lfsconfig",
];

/// CI definition folders (prefixes from the repository root).
const CI_DIRS: &[&str] = &[
    ".github/workflows/",
    ".github/actions/",
    ".circleci/",
    ".buildkite/",
    ".gitea/workflows/",
    ".forgejo/workflows/",
    ".gitlab/ci/",
    ".azure-pipelines/",
];

/// CI definition files at the repository root.
const CI_FILES: &[&str] = &[
    ".gitlab-ci.yml",
    "azure-pipelines.yml",
    ".travis.yml",
    "bitbucket-pipelines.yml",
    ".drone.yml",
    "appveyor.yml",
    ".appveyor.yml",
    ".woodpecker.yml",
    "cloudbuild.yaml",
    "cloudbuild.yml",
    ".github/dependabot.yml",
];

/// Hook folders (prefixes from the repository root).
const HOOK_DIRS: &[&str] = &[".githooks/", ".husky/", ".lefthook/"];

/// Hook runner configuration files at the repository root.
const HOOK_FILES: &[&str] = &[
    "lefthook.yml",
    "lefthook.yaml",
    ".lefthook.yml",
    ".lefthook.yaml",
    "lefthook-local.yml",
];

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
    if HOOK_FILES.iter().any(|f| path == f.as_bytes()) {
        return Some("hook configuration");
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

/// `core.hooksPath` as Git resolves it for the source (the runner forces it
/// to `/dev/null` on the command line: that entry is skipped), normalised to
/// a repository-relative path; `None` when unset or outside the checkout.
pub(crate) fn resolved_hooks_path(repo: &bh_git::Repo, top: &std::path::Path) -> Option<Vec<u8>> {
    let out = repo
        .cmd([
            "config",
            "--show-scope",
            "-z",
            "--get-all",
            "core.hooksPath",
        ])
        .ok_codes(&[0, 1])
        .run()
        .ok()?;
    // `-z --show-scope`: scope NUL value NUL, per entry; the last wins.
    let fields: Vec<&[u8]> = bh_git::parse::split_z(&out.stdout).collect();
    let value = fields
        .chunks(2)
        .filter(|pair| pair.len() == 2 && pair[0] != b"command")
        .map(|pair| pair[1].to_vec())
        .next_back()?;
    let path = std::path::Path::new(std::ffi::OsStr::from_bytes(&value));
    let rel = if path.is_absolute() {
        path.strip_prefix(top).ok()?.to_path_buf()
    } else {
        path.to_path_buf()
    };
    let mut parts: Vec<&[u8]> = Vec::new();
    for c in rel.components() {
        match c {
            std::path::Component::Normal(n) => parts.push(n.as_bytes()),
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                parts.pop()?;
            }
            _ => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join(&b'/'))
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
        // sandbox.md item 8: every one of these is protected.
        for path in [
            "deno.lock",
            "ios/Podfile.lock",
            "app/gradle.lockfile",
            "infra/.terraform.lock.hcl",
            "pixi.lock",
            "conda-lock.yml",
            "Manifest.toml",
            "renv.lock",
            "bitbucket-pipelines.yml",
            ".drone.yml",
            "appveyor.yml",
            ".woodpecker.yml",
            ".gitea/workflows/ci.yml",
            ".forgejo/workflows/ci.yml",
            ".gitlab/ci/build.yml",
            ".azure-pipelines/build.yml",
            "cloudbuild.yaml",
            "lefthook.yml",
            ".lefthook/pre-commit/x.sh",
            ".lfsconfig",
            ".github/dependabot.yml",
        ] {
            assert!(
                p(path.as_bytes(), None).is_some(),
                "{path} is not protected"
            );
        }
    }
}
