"""The store, as Python sees it: the `Checkpoint` record and where the store lives.

The Rust module reads no environment; this is the one place that does, and it decides exactly as
the `bh` CLI does, so that `bh checkpoint list` in the project shows the same checkpoints.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pydantic_ai_bh import _bh

# The variables `bh` hands its git children (crates/bh-cli/src/context.rs, GIT_ENV_ALLOW).
_GIT_ENV_ALLOW = ('PATH', 'HOME', 'XDG_CONFIG_HOME', 'TMPDIR', 'USER', 'LOGNAME', 'TZ')


@dataclass(frozen=True)
class Checkpoint:
    """A snapshot of the project taken before a tool call (or a restore's undo point)."""

    id: str
    """Short id (12 hex digits), accepted by `restore` and by `bh checkpoint restore`."""
    time: datetime
    """When it was taken (UTC)."""
    tool_name: str
    """The tool that was about to run (`restore` for an undo point)."""
    files_changed: int
    """Files changed since the previous checkpoint."""
    tool_call_id: str | None = None
    """The tool call it was taken for, when taken by `Checkpoints`."""
    run_id: str | None = None
    """The agent run it was taken in, when taken by `Checkpoints`."""
    kind: str = 'snapshot'
    """`snapshot`, or `pre-restore` for the undo point a restore takes first."""
    commit: str = ''
    """The full commit id in the shadow repository."""

    @classmethod
    def _from_tuple(cls, t: _bh.CheckpointTuple) -> Checkpoint:
        commit, short, _seq, time_ms, tool, session, entry, files_changed, _skipped, kind = t
        return cls(
            id=short,
            time=datetime.fromtimestamp(time_ms / 1000, tz=timezone.utc),
            tool_name=tool,
            files_changed=files_changed,
            tool_call_id=entry,
            run_id=session,
            kind=kind,
            commit=commit,
        )


@dataclass(frozen=True)
class RestoreResult:
    """What a restore did."""

    checkpoint: Checkpoint
    """The checkpoint restored."""
    undo: Checkpoint
    """The checkpoint of the state just before the restore: restore it to undo."""
    restored: list[str]
    """Paths written back."""
    deleted: list[str]
    """Paths deleted (`exact=True` only)."""
    kept: list[str]
    """Paths created since the checkpoint and left in place (additive restore)."""


def default_state_dir() -> Path:
    """`$BH_STATE_DIR`, else `$XDG_STATE_HOME/better-harness`, else `~/.local/state/better-harness`."""
    if given := os.environ.get('BH_STATE_DIR'):
        return Path(given).absolute()
    xdg = os.environ.get('XDG_STATE_HOME')
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / 'better-harness'
    home = os.environ.get('HOME')
    if not home:
        raise _bh.StoreError('cannot find a state directory: pass state_dir=, or set BH_STATE_DIR or HOME')
    return Path(home) / '.local/state/better-harness'


def git_env() -> list[tuple[bytes, bytes]]:
    """The environment git children get: the CLI's allow-list, never a `GIT_*` variable."""
    return [(os.fsencode(k), os.fsencode(v)) for k, v in os.environ.items() if k in _GIT_ENV_ALLOW]


def open_store(project: str | os.PathLike[str], state_dir: str | os.PathLike[str] | None = None) -> _bh.Store:
    """Opens the store `bh checkpoint` uses for the project enclosing `project`."""
    state = Path(state_dir).absolute() if state_dir is not None else default_state_dir()
    return _bh.Store(Path(project).absolute(), state, git_env())
