//! What an index-addressed run's result means for the engine that called
//! it: done, worth retrying (transient: exit 75) or not (permanent). A
//! classification of [`run_plan`](crate::run_plan)'s results, kept apart
//! from the run itself.

use crate::run::{RunResult, RunState, StopReason};

/// `EX_TEMPFAIL` of sysexits.h: the exit code of a transient failure.
pub const EXIT_TEMPFAIL: u8 = 75;

/// How a finished [`RunResult`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Committed, or finished with no change: nothing to retry.
    Done,
    /// The provider or the network failed in a way a retry may not
    /// (5xx, 408/409/429, connection errors, a dropped or idle stream), or
    /// the run was cancelled (SIGTERM: preemption).
    Transient,
    /// A limit stopped it, or the model failed for good (4xx, a script
    /// played out): the same plan would fail again.
    Permanent,
}

/// The verdict of a run that returned a result.
pub fn verdict(result: &RunResult) -> Verdict {
    match (result.state, result.stop_reason) {
        (RunState::Committed | RunState::NoChanges, _) => Verdict::Done,
        (RunState::Aborted, StopReason::Cancelled) => Verdict::Transient,
        (RunState::Failed, _) if result.reason.as_deref().is_some_and(is_transient_reason) => {
            Verdict::Transient
        }
        _ => Verdict::Permanent,
    }
}

/// Whether a model failure message (as bh-llm words them: `"<status> …"`,
/// `"Connection error: …"`, `"Stream idle …"`, `"terminated: …"`, `"Stream
/// error: …"`) names a failure worth retrying later.
pub fn is_transient_reason(reason: &str) -> bool {
    let status: Option<u16> = reason
        .split(' ')
        .next()
        .filter(|s| s.len() == 3)
        .and_then(|s| s.parse().ok());
    if let Some(code) = status {
        return matches!(code, 408 | 409 | 429) || (500..600).contains(&code);
    }
    [
        "Connection error",
        "Stream idle",
        "terminated",
        "Stream error",
    ]
    .iter()
    .any(|p| reason.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_reasons() {
        for r in [
            "503 overloaded",
            "429 slow down",
            "500 status code (no body)",
            "408 timeout",
            "Connection error: error sending request: connection refused",
            "Stream idle for more than 300 s",
            "terminated: read ECONNRESET",
        ] {
            assert!(is_transient_reason(r), "{r}");
        }
        for r in [
            "401 Incorrect API key",
            "400 bad request",
            "404 model not found",
            "scripted: no more turns",
            "5000 apples",
            "",
        ] {
            assert!(!is_transient_reason(r), "{r}");
        }
    }
}
