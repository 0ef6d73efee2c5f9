//! What a run did: limits, why it stopped, its outcome and overhead.

use std::time::Duration;

use bh_protocol::message::AssistantMessage;
use serde::Serialize;

/// Hard limits of an agent. They count from the agent's first [`Agent::run`]
/// until [`Agent::reset_limits`]; `None` means unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Tool calls executed.
    pub max_tool_calls: Option<u64>,
    /// Wall-clock time.
    pub timeout: Option<Duration>,
    /// Model calls (Pi's turns: one assistant message and its tool results).
    pub max_turns: Option<u64>,
}

/// Which hard limit stopped a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    ToolCalls,
    Time,
    Turns,
}

impl LimitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::ToolCalls => "tool_calls",
            LimitKind::Time => "time",
            LimitKind::Turns => "turns",
        }
    }
}

/// Why a run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStop {
    /// The model stopped on its own (`stop` or `length`).
    Completed,
    /// The model call failed (`stopReason: "error"`).
    Error,
    /// The cancellation token fired.
    Cancelled,
    /// A hard limit fired ([`RunOutcome::limit`] says which).
    Limit,
    /// The harness could not run a tool at all (its sandbox cannot be
    /// built, the project folder is gone): [`RunOutcome::reason`] says
    /// which tool and why.
    Harness,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    pub stop: RunStop,
    pub limit: Option<LimitKind>,
    /// The error or abort message (`errorMessage` of the last assistant message).
    pub reason: Option<String>,
    /// Turns and tool calls counted so far against the limits.
    pub turns: u64,
    pub tool_calls: u64,
    /// The session's leaf after the run.
    pub leaf: Option<String>,
    /// The last assistant message.
    pub last_assistant: Option<AssistantMessage>,
    /// Checkpoint ids taken in this run, in order.
    pub checkpoints: Vec<String>,
    /// Token and cost totals of this run's assistant messages.
    pub usage: bh_session::Totals,
    /// Harness overhead of each executed tool call, in order: the wall time
    /// of its turn minus the time spent waiting on the model's stream, in the
    /// tool itself and in the checkpoint (i.e. request building, event
    /// emission, persistence, history), divided among the turn's calls.
    pub tool_call_overhead: Vec<Duration>,
    /// The part of each [`RunOutcome::tool_call_overhead`] spent appending
    /// to the session file (write + `fdatasync`).
    pub tool_call_persist: Vec<Duration>,
}

/// Summary of [`RunOutcome::tool_call_overhead`] (the `overhead` of `run_end`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OverheadStats {
    /// Tool calls measured.
    pub calls: u64,
    pub median_us: u64,
    pub p90_us: u64,
    pub max_us: u64,
    pub total_us: u64,
    /// Median of the part spent appending to the session (write + fdatasync).
    pub persist_median_us: u64,
}

impl OverheadStats {
    /// `None` when there is nothing to summarise.
    pub fn of(samples: &[Duration], persist: &[Duration]) -> Option<OverheadStats> {
        if samples.is_empty() {
            return None;
        }
        let sorted = |v: &[Duration]| {
            let mut us: Vec<u64> = v
                .iter()
                .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
                .collect();
            us.sort_unstable();
            us
        };
        let us = sorted(samples);
        let persist = sorted(persist);
        let at = |q: usize| us[(us.len() - 1) * q / 100];
        Some(OverheadStats {
            persist_median_us: persist
                .get((persist.len().max(1) - 1) / 2)
                .copied()
                .unwrap_or(0),
            calls: us.len() as u64,
            median_us: at(50),
            p90_us: at(90),
            max_us: us[us.len() - 1],
            total_us: us.iter().fold(0u64, |a, b| a.saturating_add(*b)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overhead_stats_summarise_the_samples() {
        assert_eq!(OverheadStats::of(&[], &[]), None);
        let us = |v: &[u64]| {
            v.iter()
                .map(|&u| Duration::from_micros(u))
                .collect::<Vec<_>>()
        };
        let s = OverheadStats::of(&us(&[30, 10, 20, 1000]), &us(&[5, 6, 7, 8])).unwrap();
        assert_eq!(s.calls, 4);
        assert_eq!(s.median_us, 20);
        assert_eq!(s.max_us, 1000);
        assert_eq!(s.total_us, 1060);
        assert_eq!(s.persist_median_us, 6);
    }
}
