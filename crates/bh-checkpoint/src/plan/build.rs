//! Building a rewind plan, in three steps: attribute the session's calls to
//! the paths they changed ([`Store::attribute`], one call at a time in
//! [`Store::call_changes`]), the refs they moved, then decide for each path
//! whether it is reverted, deleted, unchanged or a conflict
//! ([`Store::decide`]).

use std::collections::HashMap;

use bh_git::parse;

use super::{Action, CallSpan, Force, Now, PlanConflict, RewindPlan, Span, why};
use crate::error::{CheckpointError, Result};
use crate::meta::Checkpoint;
use crate::store::Store;

/// What the session's calls changed, path by path.
struct Attribution {
    /// The checkpoint before the first call.
    target: Checkpoint,
    /// The paths, in the order first changed.
    order: Vec<Vec<u8>>,
    /// Each path's state before its first change and after its last.
    paths: HashMap<Vec<u8>, Span>,
    /// How calls without an after-record were attributed.
    approximate: Vec<String>,
}

impl Store {
    pub(super) fn plan_locked(&self, spans: &[CallSpan], force: &Force) -> Result<RewindPlan> {
        let list = self.list()?;
        let Attribution {
            target,
            mut order,
            paths,
            approximate,
        } = self.attribute(&list, spans)?;
        let mut plan = RewindPlan {
            target: target.clone(),
            calls: spans.len(),
            revert: Vec::new(),
            delete: Vec::new(),
            conflicts: Vec::new(),
            left_alone: Vec::new(),
            unchanged: Vec::new(),
            approximate: (!approximate.is_empty()).then(|| approximate.join("; ")),
            refs: Vec::new(),
            actions: Vec::new(),
        };
        let mut ref_conflicts = Vec::new();
        plan.refs = self.plan_refs(
            spans.iter().flat_map(|s| &s.refs),
            &|name| force.covers(name),
            &mut ref_conflicts,
        );
        plan.conflicts
            .extend(ref_conflicts.into_iter().map(|c| PlanConflict {
                path: c.name,
                reason: c.reason,
                forced: c.forced,
            }));
        order.sort();
        self.decide(&mut plan, &order, &paths, force);
        plan.left_alone = self.left_alone(&target, &list, &paths)?;
        Ok(plan)
    }

    /// Per session path: its state before the first call that changed it,
    /// and after the last.
    fn attribute(&self, list: &[Checkpoint], spans: &[CallSpan]) -> Result<Attribution> {
        let Some(first) = spans.first() else {
            return Err(CheckpointError::InvalidArgument(
                "a rewind needs at least one call".into(),
            ));
        };
        let target = find(list, &first.before, first)?.clone();
        let mut out = Attribution {
            target,
            order: Vec::new(),
            paths: HashMap::new(),
            approximate: Vec::new(),
        };
        let mut status_cache: Option<Vec<Vec<u8>>> = None;
        for span in spans {
            let changes = self.call_changes(list, span, &mut status_cache, &mut out.approximate)?;
            for (path, (old, new)) in changes {
                match out.paths.get_mut(&path) {
                    Some(slot) => slot.1 = new,
                    None => {
                        out.order.push(path.clone());
                        out.paths.insert(path, (old, new));
                    }
                }
            }
        }
        Ok(out)
    }

    /// The paths one call changed, between its before and after
    /// checkpoints. Without an after-record: up to the next checkpoint, or
    /// (none) to the current files by a status kept in `status_cache`; how,
    /// is said in `approximate`.
    fn call_changes(
        &self,
        list: &[Checkpoint],
        span: &CallSpan,
        status_cache: &mut Option<Vec<Vec<u8>>>,
        approximate: &mut Vec<String>,
    ) -> Result<Vec<(Vec<u8>, Span)>> {
        let before = find(list, &span.before, span)?;
        let after_tree = match &span.after {
            Some(a) => Some(find(list, a, span)?.tree.clone()),
            None => {
                let next = list
                    .iter()
                    .filter(|c| c.seq > before.seq)
                    .min_by_key(|c| c.seq);
                if let Some(next) = next {
                    approximate.push(format!(
                        "{} (before {}): no after-record, attributed up to the next checkpoint {}",
                        span.tool, before.id, next.id
                    ));
                } else {
                    approximate.push(format!(
                        "{} (before {}): no after-record and no later checkpoint, attributed up to the current files",
                        span.tool, before.id
                    ));
                }
                next.map(|n| n.tree.clone())
            }
        };
        Ok(match after_tree {
            Some(after) => self
                .raw_changes(&before.tree, &after)?
                .into_iter()
                .filter(|c| c.old_mode != 0o160000 && c.new_mode != 0o160000)
                .map(|c| {
                    let old = (c.status != b'A').then(|| (c.old_mode, c.old_oid.clone()));
                    let new = (c.status != b'D').then(|| (c.new_mode, c.new_oid.clone()));
                    (c.path, (old, Some(new)))
                })
                .collect(),
            None => {
                if status_cache.is_none() {
                    *status_cache = Some(self.status_paths()?);
                }
                let changed = status_cache.clone().unwrap_or_default();
                let old = self.tree_states(&before.tree, &changed)?;
                changed
                    .into_iter()
                    .map(|p| {
                        let o = old.get(&p).cloned();
                        (p, (o, None))
                    })
                    .collect()
            }
        })
    }

    /// Each session path (in `order`) into the plan: unchanged when it is as
    /// before the session already; a conflict when someone changed it since
    /// the session's last call (taken only when forced); else reverted, or
    /// deleted when it did not exist before.
    fn decide(
        &self,
        plan: &mut RewindPlan,
        order: &[Vec<u8>],
        paths: &HashMap<Vec<u8>, Span>,
        force: &Force,
    ) {
        for path in order {
            let Some((old, new)) = paths.get(path) else {
                continue;
            };
            let now = self.now_state(path);
            let shown = parse::display_path(path);
            if now == Now::of(old) {
                plan.unchanged.push(shown);
                continue;
            }
            let conflict = match new {
                Some(left) if now != Now::of(left) => Some(why(&now, left)),
                _ if now == Now::Folder => Some("is a folder now".to_owned()),
                _ => None,
            };
            if let Some(reason) = conflict {
                let forced = force.covers(path);
                plan.conflicts.push(PlanConflict {
                    path: shown.clone(),
                    reason,
                    forced,
                });
                if !forced {
                    continue;
                }
            }
            match old {
                Some(_) => plan.revert.push(shown),
                None => plan.delete.push(shown),
            }
            plan.actions.push(Action {
                path: path.clone(),
                to: old.clone(),
            });
        }
    }
}

/// The checkpoint `id` (full commit or short id) a call names.
fn find<'a>(list: &'a [Checkpoint], id: &str, call: &CallSpan) -> Result<&'a Checkpoint> {
    list.iter()
        .find(|c| !id.is_empty() && (c.commit == id || c.id == id))
        .ok_or_else(|| CheckpointError::CallCheckpointGone {
            checkpoint: id.to_owned(),
            call: format!(
                "the {} call {}",
                call.tool,
                call.call.as_deref().unwrap_or("")
            ),
        })
}
