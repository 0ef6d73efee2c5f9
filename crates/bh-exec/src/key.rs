//! The plan key: the state directory's key ([`bh_fs::key::StateKey`],
//! `<state>/plan.key`) as the executor uses it — plans are authenticated by
//! HMAC-SHA256 over their canonical bytes (no domain label: plans were its
//! first use, and their JSON's first byte `{` keeps them apart from every
//! labelled use).

use std::path::Path;

use bh_fs::key::{KeyError, StateKey};

use crate::error::ExecError;

/// The key's file name inside the state directory.
pub const PLAN_KEY_FILE: &str = bh_fs::key::KEY_FILE;

/// An opened, checked plan key.
#[derive(Clone, Debug)]
pub struct PlanKey(StateKey);

fn plan_key_error(e: KeyError) -> ExecError {
    ExecError::PlanKey {
        path: e.path,
        problem: e.problem,
        source: e.source,
    }
}

impl PlanKey {
    /// The key of `state_dir`, created (with the folder, 0700) when missing.
    pub fn open_or_create(state_dir: &Path) -> Result<PlanKey, ExecError> {
        StateKey::open_or_create(state_dir)
            .map(PlanKey)
            .map_err(plan_key_error)
    }

    /// The key of `state_dir`; `None` when it has none yet (no plan was
    /// made there, so no plan can be its own).
    pub fn open(state_dir: &Path) -> Result<Option<PlanKey>, ExecError> {
        StateKey::open(state_dir)
            .map(|k| k.map(PlanKey))
            .map_err(plan_key_error)
    }

    /// A short public name of the key (it reveals nothing of the secret).
    pub fn id(&self) -> &str {
        self.0.id()
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// HMAC-SHA256 of `bytes`, hex.
    pub fn mac(&self, bytes: &[u8]) -> String {
        self.0.mac(&[bytes])
    }

    /// Whether `mac_hex` is the MAC of `bytes` (constant-time comparison).
    pub fn verify(&self, bytes: &[u8], mac_hex: &str) -> bool {
        self.0.verify(&[bytes], mac_hex)
    }
}
