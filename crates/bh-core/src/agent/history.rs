//! The agent's session: the history loaded at the writer's leaf, switching
//! to another file or entry, and appending messages.

use std::sync::Arc;
use std::time::Instant;

use bh_llm::{Message, Provider, ThinkingLevel};
use bh_session::{Session, SessionWriter};
use serde::Serialize;
use serde_json::Value;

use super::Agent;
use crate::error::{CoreError, Result};

pub(super) fn session_err(
    path: &std::path::Path,
) -> impl Fn(bh_session::SessionError) -> CoreError + '_ {
    move |source| CoreError::Session {
        file: path.display().to_string(),
        source,
    }
}

impl Agent {
    /// Continue in another session file (e.g. a fork): the history is
    /// rebuilt from its context at the writer's leaf.
    pub fn switch_session(&mut self, writer: SessionWriter) -> Result<()> {
        let mut writer = writer;
        let (session_id, history) =
            load_history(&mut writer, self.provider.model(), self.thinking)?;
        self.writer = writer;
        self.session_id = session_id;
        self.history = history;
        Ok(())
    }

    /// Continue from another entry of the same session (Pi's `/tree`
    /// navigation): the next message becomes a child of `entry` (a new root
    /// for `None`) and the history is rebuilt from its context.
    pub fn branch(&mut self, entry: Option<&str>) -> Result<()> {
        let path = self.writer.path().to_path_buf();
        let mut writer = SessionWriter::open(&path).map_err(session_err(&path))?;
        writer.branch(entry).map_err(session_err(&path))?;
        self.switch_session(writer)
    }

    /// Switch models; appends a `model_change` entry as Pi does.
    pub fn set_provider(&mut self, provider: Arc<dyn Provider>) -> Result<()> {
        let spec = provider.model();
        let path = self.writer.path().to_path_buf();
        self.writer
            .append_model_change(&spec.provider, &spec.id)
            .map_err(session_err(&path))?;
        self.provider = provider;
        Ok(())
    }

    pub(super) fn persist<M: Serialize>(&mut self, message: &M) -> Result<String> {
        let started = Instant::now();
        let path = self.writer.path().to_path_buf();
        let id = self
            .writer
            .append_message(message)
            .map_err(session_err(&path));
        self.persist_time += started.elapsed();
        id
    }
}

/// The session id and model history at the writer's leaf; appends
/// `model_change` / `thinking_level_change` when the session is new or they
/// differ from the context's.
pub(super) fn load_history(
    writer: &mut SessionWriter,
    spec: &bh_llm::ModelSpec,
    thinking: ThinkingLevel,
) -> Result<(String, Vec<Message>)> {
    let path = writer.path().to_path_buf();
    let session = Session::load(&path).map_err(session_err(&path))?;
    let session_id = session.header().map(|h| h.id.clone()).unwrap_or_default();
    let context = session.context(writer.leaf()).map_err(session_err(&path))?;
    let mut history = Vec::with_capacity(context.messages.len());
    for m in &context.messages {
        let v: Value = serde_json::from_str(m.message.get())?;
        let msg = Message::from_agent_message(&v).map_err(|e| CoreError::History {
            file: path.display().to_string(),
            entry: m.entry_id.clone(),
            message: e.to_string(),
        })?;
        history.extend(msg);
    }
    let same_model = context.model.as_ref().is_some_and(|m| {
        m.provider.as_deref() == Some(spec.provider.as_str())
            && m.model_id.as_deref() == Some(spec.id.as_str())
    });
    if !same_model {
        writer
            .append_model_change(&spec.provider, &spec.id)
            .map_err(session_err(&path))?;
    }
    let level = thinking.as_str();
    if writer.leaf().is_none() || context.thinking_level != level || !same_model {
        writer
            .append_thinking_level_change(level)
            .map_err(session_err(&path))?;
    }
    Ok((session_id, history))
}
