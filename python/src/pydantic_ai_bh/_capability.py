"""`Checkpoints`: snapshot the project before every file-mutating tool call, on bh's store."""

from __future__ import annotations

import functools
import os
import threading
import warnings
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio.to_thread
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturn, ToolReturnPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import FunctionToolset

from pydantic_ai_bh import _bh
from pydantic_ai_bh._store import Checkpoint, RestoreResult, open_store

METADATA_KEY = 'bh_checkpoint'
"""The key under which a tool return's metadata carries the id of the checkpoint taken before it."""

DEFAULT_MUTATING_TOOLS: frozenset[str] = frozenset(
    {
        # pydantic-ai-harness FileSystem, by kind (whatever the tools are named) ...
        'file_system.write_file',
        'file_system.edit_file',
        'file_system.create_directory',
        # ... and the usual names of such tools elsewhere.
        'write_file',
        'edit_file',
    }
)
"""Tool names and tool kinds snapshotted by default (shell tools come with `snapshot_before_shell`)."""

SHELL_TOOL_NAMES: frozenset[str] = frozenset({'run_command', 'start_command', 'shell', 'bash'})
"""Names of command-running tools (pydantic-ai-harness `Shell`'s, and the common `bash`)."""


class CheckpointWarning(UserWarning):
    """A checkpoint could not be taken or read; the agent run goes on without it."""


@dataclass(frozen=True)
class Rewind:
    """What `Checkpoints.rewind` did."""

    messages: list[ModelMessage]
    """The history cut at the chosen point: pass it as `message_history` to go on from there."""
    checkpoint: Checkpoint | None
    """The checkpoint the files were restored to; `None` when no mutating call came after the point."""
    result: RestoreResult | None
    """The restore, with its undo point; `None` when nothing was restored."""


@dataclass
class Checkpoints(AbstractCapability[Any]):
    """Snapshots the project into Better Harness's checkpoint store before each mutating tool call.

    The store is the one `bh checkpoint` uses: `bh checkpoint list` in the project shows these
    checkpoints and `bh checkpoint restore` restores them. The user's `.git` is never touched, the
    project need not be a Git repository, and ignored files (`.gitignore`, `.git/info/exclude`)
    are not captured. When nothing changed since the last checkpoint, it is reused. A failure to
    snapshot is a `CheckpointWarning`; the tool call runs anyway.
    """

    mutating_tools: Collection[str] = DEFAULT_MUTATING_TOOLS
    """Tool names, or tool kinds (such as `file_system.write_file`), to snapshot before."""
    state_dir: str | os.PathLike[str] | None = None
    """Better Harness state directory; default as `bh`: `$BH_STATE_DIR`, `$XDG_STATE_HOME/better-harness`, `~/.local/state/better-harness`."""
    expose_tool: bool = False
    """Give the model `list_checkpoints` and `restore_checkpoint` tools."""
    root: str | os.PathLike[str] | None = None
    """The project folder; default: the run's local workspace, else the current directory."""
    snapshot_before_shell: bool = True
    """Also snapshot before command-running tools (`Shell`'s `run_command`, `start_command`, `shell`)."""

    _stores: dict[Path, _bh.Store] = field(default_factory=dict, init=False, repr=False, compare=False)
    _calls: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)
    _running: dict[int, str] = field(default_factory=dict, init=False, repr=False, compare=False)
    """`id()` of each call between its checkpoint and its result, with the checkpoint's id."""
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)
    _last_root: Path | None = field(default=None, init=False, repr=False, compare=False)

    # -- which calls ---------------------------------------------------------------------------

    def is_mutating(self, tool_def: ToolDefinition) -> bool:
        """Whether a call of this tool is snapshotted before it runs."""
        names = self.mutating_tools
        if tool_def.name in names or (tool_def.tool_kind is not None and tool_def.tool_kind in names):
            return True
        if not self.snapshot_before_shell:
            return False
        metadata = tool_def.metadata or {}
        return tool_def.name in SHELL_TOOL_NAMES or metadata.get('code_arg_language') == 'shell'

    # -- the store -----------------------------------------------------------------------------

    def _root_for(self, ctx: RunContext[Any] | None) -> Path:
        if self.root is not None:
            return Path(self.root).absolute()
        if ctx is not None:
            ref = getattr(ctx.workspace, 'ref', None)
            if ref is not None and getattr(ref, 'provider', None) == 'local':
                return Path(ref.id)
        if self._last_root is not None:
            return self._last_root
        return Path.cwd()

    def store(self, ctx: RunContext[Any] | None = None) -> _bh.Store:
        """The store of the project (opened once, then kept); raises `StoreError`."""
        root = self._root_for(ctx)
        with self._lock:
            self._last_root = root
            found = self._stores.get(root)
            if found is None:
                found = open_store(root, self.state_dir)
                self._stores[root] = found
            return found

    def snapshot(self, tool_name: str = 'manual', *, run_id: str | None = None, tool_call_id: str | None = None) -> Checkpoint:
        """Takes a checkpoint now (blocking; the GIL is released while it runs)."""
        store = self.store()
        t, _created, _changed = store.snapshot(tool_name, session=run_id, entry=tool_call_id)
        return Checkpoint._from_tuple(t)

    def checkpoints(self) -> list[Checkpoint]:
        """Every checkpoint of the project, newest first, as `bh checkpoint list` shows them (restores' undo points included)."""
        return [Checkpoint._from_tuple(t) for t in self.store().list()]

    def restore(
        self,
        checkpoint_id: str,
        *,
        paths: Sequence[str | os.PathLike[str]] | None = None,
        exact: bool = False,
    ) -> RestoreResult:
        """Puts files back as they were at `checkpoint_id` (additive: newer files stay, unless `exact`).

        A checkpoint of the current state is taken first (`RestoreResult.undo`). `paths` (relative to
        the project, or absolute inside it) limits the restore; a path outside the project is refused.
        """
        c, undo, restored, deleted, kept = self.store().restore(
            checkpoint_id, paths=list(paths) if paths is not None else None, exact=exact
        )
        return RestoreResult(Checkpoint._from_tuple(c), Checkpoint._from_tuple(undo), restored, deleted, kept)

    def checkpoint_for(self, tool_call_id: str) -> str | None:
        """The id of the checkpoint taken before the tool call `tool_call_id` in this process, if any."""
        return self._calls.get(tool_call_id)

    # -- the hook ------------------------------------------------------------------------------

    async def _take(self, ctx: RunContext[Any], call: ToolCallPart, tool_def: ToolDefinition) -> str | None:
        try:
            store = self.store(ctx)
            t, _created, _changed = await anyio.to_thread.run_sync(
                functools.partial(store.snapshot, tool_def.name, session=ctx.run_id, entry=call.tool_call_id)
            )
        except Exception as e:  # noqa: BLE001 - any failure of the store must not stop the run
            warnings.warn(
                CheckpointWarning(f'no checkpoint before {tool_def.name} ({call.tool_call_id}): {e}'), stacklevel=2
            )
            return None
        checkpoint_id: str = t[1]
        self._calls[call.tool_call_id] = checkpoint_id
        return checkpoint_id

    def get_ordering(self) -> CapabilityOrdering:
        """Sit innermost, inside every capability that may still refuse or rewrite a call.

        Argument hooks run outermost first, so this one's `before_tool_execute` runs after those
        of the guardrails, judges and injection defenders (`ToolGuardrail`, `ToolCallJudge`,
        `PromptInjectionDefender`, themselves innermost, which wrap this capability whatever the
        order the user lists them in): a checkpoint is taken only for a call that will run, with
        the arguments it runs with. A call deferred for approval reaches it only once approved.
        """
        return CapabilityOrdering(position='innermost', wrapped_by=_call_deciders())

    async def before_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
    ) -> dict[str, Any]:
        """The checkpoint, once every outer capability has let the call through."""
        if self.is_mutating(tool_def):
            checkpoint_id = await self._take(ctx, call, tool_def)
            if checkpoint_id is not None:
                self._running[id(call)] = checkpoint_id
        return args

    async def after_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        result: Any,
    ) -> Any:
        """The result, with the id of the checkpoint taken before the call in its metadata."""
        checkpoint_id = self._running.pop(id(call), None)
        if checkpoint_id is None:
            return result
        return _attach(result, checkpoint_id)

    # -- model-facing tools --------------------------------------------------------------------

    def get_toolset(self) -> Any:
        if not self.expose_tool:
            return None

        def list_checkpoints() -> str:
            """List the project's checkpoints (snapshots taken before file-changing tool calls), newest first."""
            lines = [
                f'{c.id}  {c.time.isoformat(timespec="seconds")}  {c.tool_name}  {c.files_changed} file(s) changed'
                + ('  (undo point of a restore)' if c.kind == 'pre-restore' else '')
                for c in self.checkpoints()
            ]
            return '\n'.join(lines) or 'no checkpoints yet'

        def restore_checkpoint(checkpoint_id: str, paths: list[str] | None = None) -> str:
            """Restore files from a checkpoint (all files, or only `paths`); the current state is checkpointed first."""
            r = self.restore(checkpoint_id, paths=paths)
            return f'restored {len(r.restored)} path(s) from {r.checkpoint.id}; undo with checkpoint {r.undo.id}'

        return FunctionToolset([list_checkpoints, restore_checkpoint])

    # -- conversation + files ------------------------------------------------------------------

    def rewind(self, messages: Sequence[ModelMessage], *, to: int | str | ModelMessage, exact: bool = False) -> Rewind:
        """Cuts the history at `to` and puts the files back to before the first mutating call after it.

        `to` is an index into `messages` (the messages before it are kept), a tool call id (the
        history is cut before the response that made that call) or one of the messages.
        """
        cut = _cut_index(messages, to)
        kept, later = list(messages[:cut]), list(messages[cut:])
        by_call = dict(self._calls)
        for message in later:
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, ToolReturnPart) and isinstance(part.metadata, dict):
                        if isinstance(found := part.metadata.get(METADATA_KEY), str):
                            by_call[part.tool_call_id] = found
        calls = [p for m in later if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, ToolCallPart)]
        if any(c.tool_call_id not in by_call for c in calls):
            for cp in self.checkpoints():
                if cp.tool_call_id is not None and cp.kind == 'snapshot':
                    by_call.setdefault(cp.tool_call_id, cp.id)
        for call in calls:
            if (checkpoint_id := by_call.get(call.tool_call_id)) is not None:
                result = self.restore(checkpoint_id, exact=exact)
                return Rewind(kept, result.checkpoint, result)
        return Rewind(kept, None, None)


def _call_deciders() -> list[type[AbstractCapability[Any]]]:
    """The pydantic-ai-harness capabilities that decide whether a call runs (those installed)."""
    found: list[type[AbstractCapability[Any]]] = []
    try:
        from pydantic_ai_harness.guardrails import ToolGuardrail

        found.append(ToolGuardrail)
    except ImportError:  # pragma: no cover - harness optional
        pass
    try:
        from pydantic_ai_harness.tool_call_judge import ToolCallJudge

        found.append(ToolCallJudge)
    except ImportError:  # pragma: no cover
        pass
    try:
        from pydantic_ai_harness.prompt_injection_defender import PromptInjectionDefender

        found.append(PromptInjectionDefender)
    except ImportError:  # pragma: no cover
        pass
    return found


def _attach(result: Any, checkpoint_id: str) -> Any:
    """The tool's result with the checkpoint id in its return metadata (not sent to the model)."""
    if isinstance(result, ToolReturn):
        if result.metadata is None:
            result.metadata = {METADATA_KEY: checkpoint_id}
        elif isinstance(result.metadata, dict):
            result.metadata = {**result.metadata, METADATA_KEY: checkpoint_id}
        return result
    return ToolReturn(return_value=result, metadata={METADATA_KEY: checkpoint_id})


def _cut_index(messages: Sequence[ModelMessage], to: int | str | ModelMessage) -> int:
    if isinstance(to, int):
        n = len(messages)
        if not -n <= to <= n:
            raise IndexError(f'rewind point {to} is outside a history of {n} messages')
        return to % n if to < 0 else to
    for i, m in enumerate(messages):
        if isinstance(to, str):
            if isinstance(m, ModelResponse) and any(
                isinstance(p, ToolCallPart) and p.tool_call_id == to for p in m.parts
            ):
                return i
        elif m is to:
            return i
    raise ValueError(f'rewind point {to!r} is not in the history')
