//! Recipes for running a manifest of plans on an engine, generated from
//! typed values: a Slurm job array script ([`slurm`]) and a Kubernetes
//! Indexed Job ([`k8s`]). Each task or pod calls the one index-addressed
//! entry point, `bh exec run --plans … --index I --yes`, whose exit codes
//! the recipe maps to the engine's retries: 75 retried, the permanent codes
//! ([`PERMANENT_EXIT_CODES`]) never. Provider keys are never written into a
//! recipe: Slurm passes the submitting shell's environment (`--export`),
//! Kubernetes a Secret (`envFrom`).

pub mod k8s;
pub mod slurm;

/// The exit codes of `exec run --plans … --index I` that retrying cannot
/// fix (the CLI's exit-code table): usage 2, refused 3, not found 4,
/// tampered 5, invalid 6, limit 7, worker failed 9, ambiguous 10, the plan
/// re-checks 20–27, index out of range 28, ref taken 29, manifest 30.
pub const PERMANENT_EXIT_CODES: [u8; 19] = [
    2, 3, 4, 5, 6, 7, 9, 10, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30,
];

/// `s` quoted for a POSIX shell (single quotes; a `'` as `'\''`).
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@%".contains(&b))
    {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}
