//! Counts, models used and token/cost totals of a session.

use std::collections::BTreeMap;

use bh_protocol::EntryType;
use serde::Serialize;

use crate::session::Session;

/// Sums of the usage objects in a session ([P16] `usage-totals.js`: assistant
/// messages, `usage` entries, tool results and summaries that carry usage).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total_tokens: u64,
    pub cost: f64,
}

impl Totals {
    /// Adds one message's `usage` (the agent loop sums a run's this way).
    pub fn add(&mut self, u: &bh_protocol::message::Usage) {
        self.input += u.input;
        self.output += u.output;
        self.cache_read += u.cache_read;
        self.cache_write += u.cache_write;
        self.total_tokens += u.total_tokens;
        self.cost += u.cost.total;
    }
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub entries: usize,
    /// Count per entry type, in type-name order.
    pub entry_types: BTreeMap<String, usize>,
    pub messages: usize,
    /// Count per message role.
    pub roles: BTreeMap<String, usize>,
    /// `provider/model` strings in order of first use (model changes,
    /// assistant messages, usage entries).
    pub models: Vec<String>,
    pub totals: Totals,
}

impl Session {
    pub fn stats(&self) -> Stats {
        let mut s = Stats {
            entries: self.entries().len(),
            ..Stats::default()
        };
        for e in self.entries() {
            *s.entry_types.entry(e.kind.as_str().to_owned()).or_default() += 1;
            if e.kind == EntryType::Message {
                s.messages += 1;
                let role = e.role.clone().unwrap_or_else(|| "?".to_owned());
                *s.roles.entry(role).or_default() += 1;
            }
            if let (Some(p), Some(m)) = (&e.provider, &e.model) {
                let key = format!("{p}/{m}");
                if !s.models.contains(&key) {
                    s.models.push(key);
                }
            }
            let counts = match e.kind {
                EntryType::Message => matches!(e.role.as_deref(), Some("assistant" | "toolResult")),
                EntryType::Usage | EntryType::Compaction | EntryType::BranchSummary => true,
                _ => false,
            };
            if counts && let Some(u) = e.usage {
                s.totals.input += u.input as u64;
                s.totals.output += u.output as u64;
                s.totals.cache_read += u.cache_read as u64;
                s.totals.cache_write += u.cache_write as u64;
                s.totals.total_tokens += u.total_tokens as u64;
                s.totals.cost += u.cost_total;
            }
        }
        s
    }
}
