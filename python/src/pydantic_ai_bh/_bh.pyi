"""Stubs for the Rust extension module (crates/bh-py)."""

import builtins
from os import PathLike
from pathlib import Path

DEFAULT_MAX_FILE_SIZE: int

# (commit, id, seq, time_ms, tool, session, entry, files_changed, skipped, kind)
CheckpointTuple = tuple[str, str, int, int, str, str | None, str | None, int, int, str]

class StoreError(Exception):
    """A store operation failed; `kind` is `refused`, `not_found`, `usage`, `ambiguous` or `internal`."""

    kind: str

class Store:
    """One project's checkpoint store: the one `bh checkpoint` uses for that project."""

    def __init__(
        self,
        path: str | PathLike[str],
        state_dir: str | PathLike[str],
        git_env: list[tuple[bytes, bytes]],
        *,
        max_file_size: int = ...,
        git: str | PathLike[str] = 'git',
    ) -> None: ...
    @property
    def project(self) -> Path: ...
    @property
    def dir(self) -> Path: ...
    def snapshot(
        self, tool: str, *, session: str | None = None, entry: str | None = None
    ) -> tuple[CheckpointTuple, bool, int]: ...
    def list(self) -> builtins.list[CheckpointTuple]: ...
    def restore(
        self, id: str, *, paths: builtins.list[str | PathLike[str]] | None = None, exact: bool = False
    ) -> tuple[CheckpointTuple, CheckpointTuple, builtins.list[str], builtins.list[str], builtins.list[str]]: ...
