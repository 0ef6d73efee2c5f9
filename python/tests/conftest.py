"""Shared fixtures: a project (a Git repository, or a plain folder), a private state dir, and a
scripted pydantic-ai `FunctionModel` agent with the real harness `FileSystem` and `Shell`."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import LocalWorkspace
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness import FileSystem, Shell

from pydantic_ai_bh import Checkpoints

Step = Sequence[tuple[str, dict[str, Any]]]


def git(cwd: Path, *args: str) -> str:
    env = {
        'PATH': os.environ.get('PATH', '/usr/bin:/bin'),
        'HOME': str(cwd),
        'GIT_CONFIG_NOSYSTEM': '1',
        'GIT_AUTHOR_NAME': 't',
        'GIT_AUTHOR_EMAIL': 't@example.com',
        'GIT_COMMITTER_NAME': 't',
        'GIT_COMMITTER_EMAIL': 't@example.com',
    }
    return subprocess.run(['git', *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    d = tmp_path / 'state'
    d.mkdir(mode=0o700)
    return d


@pytest.fixture
def plain_project(tmp_path: Path) -> Path:
    p = tmp_path / 'plain'
    p.mkdir()
    (p / 'a.txt').write_text('a1\n')
    (p / 'b.txt').write_text('b1\n')
    return p


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / 'repo'
    p.mkdir()
    git(p, 'init', '-q', '-b', 'main')
    (p / 'a.txt').write_text('a1\n')
    (p / 'b.txt').write_text('b1\n')
    (p / '.gitignore').write_text('ignored.log\nbuild/\n')
    git(p, 'add', '-A')
    git(p, 'commit', '-q', '-m', 'init')
    return p


def scripted(steps: Sequence[Step], seen: list[AgentInfo] | None = None) -> FunctionModel:
    """A model that makes the tool calls of each step in turn (one response per step), then answers."""
    counter = iter(range(10_000))

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if seen is not None:
            seen.append(info)
        n = sum(isinstance(m, ModelResponse) for m in messages)
        next(counter)
        if n < len(steps):
            return ModelResponse(
                parts=[
                    ToolCallPart(name, args, tool_call_id=f'call-{n}-{i}') for i, (name, args) in enumerate(steps[n])
                ]
            )
        return ModelResponse(parts=[TextPart('done')])

    return FunctionModel(respond)


def make_agent(
    project: Path, steps: Sequence[Step], checkpoints: Checkpoints | None, *, seen: list[AgentInfo] | None = None,
    extra: Sequence[Any] = (), filesystem: Any = None,
) -> Agent[None, str]:
    caps: list[Any] = [LocalWorkspace(project), filesystem if filesystem is not None else FileSystem(), Shell(), *extra]
    if checkpoints is not None:
        caps.append(checkpoints)
    return Agent(scripted(steps, seen), capabilities=caps)


def tree_digest(path: Path) -> str:
    """A digest of every file's path, mode and bytes under `path`."""
    h = hashlib.sha256()
    for p in sorted(path.rglob('*')):
        st = p.lstat()
        h.update(str(p.relative_to(path)).encode() + b'\0' + oct(st.st_mode).encode() + b'\0')
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def run_agent() -> Callable[..., Any]:
    def run(agent: Agent[None, str], prompt: str = 'go', **kw: Any) -> Any:
        return agent.run_sync(prompt, **kw)

    return run
