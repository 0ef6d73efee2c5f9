"""Checkpoints for pydantic-ai agents, on Better Harness's checkpoint store (Rust, in-process)."""

from pydantic_ai_bh._bh import StoreError
from pydantic_ai_bh._capability import (
    DEFAULT_MUTATING_TOOLS,
    METADATA_KEY,
    SHELL_TOOL_NAMES,
    CheckpointWarning,
    Checkpoints,
    Rewind,
)
from pydantic_ai_bh._store import Checkpoint, RestoreResult, default_state_dir, open_store

__all__ = [
    'DEFAULT_MUTATING_TOOLS',
    'METADATA_KEY',
    'SHELL_TOOL_NAMES',
    'Checkpoint',
    'CheckpointWarning',
    'Checkpoints',
    'RestoreResult',
    'Rewind',
    'StoreError',
    'default_state_dir',
    'open_store',
]
