"""Checkpoint cost per mutating tool call: pydantic-ai-bh (bh's store, in-process) against the
seed's way (`git add -A` + `git commit` into a shadow repository), side by side in one run on one
generated project; then an agent run of N tool calls with and without the capability.

    cd python && maturin develop --release && python bench/bench_checkpoints.py --files 10000

Prints a Markdown table (medians over --calls calls; the first snapshot once each) and the agent
runs' times (median of --rounds alternated runs each, each on a fresh project).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path


def git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    subprocess.run(['git', *args], cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)


def make_project(root: Path, files: int) -> None:
    rng = random.Random(7)
    for i in range(files):
        d = root / f'pkg{i % 50}' / f'mod{(i // 50) % 20}'
        d.mkdir(parents=True, exist_ok=True)
        lines = [f'line {j} {rng.getrandbits(64):x}' for j in range(rng.randint(20, 120))]
        (d / f'file{i}.py').write_text('\n'.join(lines) + '\n')
    (root / '.gitignore').write_text('*.log\nbuild/\n')
    env = {**os.environ, 'GIT_AUTHOR_NAME': 'b', 'GIT_AUTHOR_EMAIL': 'b@x', 'GIT_COMMITTER_NAME': 'b', 'GIT_COMMITTER_EMAIL': 'b@x'}
    git('init', '-q', '-b', 'main', cwd=root)
    git('add', '-A', cwd=root, env=env)
    git('commit', '-q', '-m', 'init', cwd=root, env=env)


def touch(root: Path, i: int) -> None:
    """What one mutating tool call does: change one file."""
    p = root / f'pkg{i % 50}' / f'mod{(i // 50) % 20}' / f'file{i}.py'
    p.write_text(p.read_text() + f'edit {i}\n')


class SeedShadow:
    """The seed's snapshot: a shadow repository, `git add -A` + `git commit` per call."""

    def __init__(self, project: Path, shadow: Path) -> None:
        self.project = project
        self.env = {
            **os.environ,
            'GIT_DIR': str(shadow / '.git'),
            'GIT_WORK_TREE': str(project),
            'GIT_AUTHOR_NAME': 'cp', 'GIT_AUTHOR_EMAIL': 'cp@x', 'GIT_COMMITTER_NAME': 'cp', 'GIT_COMMITTER_EMAIL': 'cp@x',
        }
        git('init', '-q', str(shadow))
        # The user's ignore rules, as the seed honours .gitignore.
        git('config', 'core.excludesFile', str(project / '.gitignore'), env=self.env)

    def snapshot(self) -> None:
        git('add', '-A', cwd=self.project, env=self.env)
        git('commit', '-q', '--allow-empty', '--no-verify', '-m', 'checkpoint', cwd=self.project, env=self.env)


def ms(f) -> float:
    t = time.perf_counter()
    f()
    return (time.perf_counter() - t) * 1000


def per_call(files: int, calls: int, work: Path) -> dict[str, tuple[float, float]]:
    from pydantic_ai_bh import open_store

    out: dict[str, tuple[float, float]] = {}
    for name in ('seed', 'bh'):
        project = work / f'project-{name}'
        make_project(project, files)
        if name == 'seed':
            s = SeedShadow(project, work / 'seed-shadow')
            first = ms(s.snapshot)
            snap = s.snapshot
        else:
            state = work / 'state'
            state.mkdir(mode=0o700, exist_ok=True)
            store = None

            def first_bh() -> None:
                nonlocal store
                store = open_store(project, state)
                store.snapshot('write_file')

            first = ms(first_bh)

            def snap() -> None:
                assert store is not None
                store.snapshot('write_file')

        times = []
        for i in range(calls):
            touch(project, i * 37 % files)
            times.append(ms(snap))
        out[name] = (first, statistics.median(times))
    return out


def agent_run(tool_calls: int, files: int, work: Path, with_checkpoints: bool) -> float:
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import LocalWorkspace
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.usage import UsageLimits
    from pydantic_ai_harness import FileSystem

    from pydantic_ai_bh import Checkpoints

    project = work / f'agent-{with_checkpoints}'
    make_project(project, files)

    def respond(messages, info):
        n = sum(isinstance(m, ModelResponse) for m in messages)
        if n < tool_calls:
            path = f'pkg{n % 50}/mod{(n // 50) % 20}/file{n}.py'
            return ModelResponse(parts=[ToolCallPart('write_file', {'path': path, 'content': f'v{n}\n'}, tool_call_id=f'c{n}')])
        return ModelResponse(parts=[TextPart('done')])

    caps: list = [LocalWorkspace(project), FileSystem()]
    cp = None
    if with_checkpoints:
        state = work / 'agent-state'
        state.mkdir(mode=0o700, exist_ok=True)
        cp = Checkpoints(state_dir=state)
        caps.append(cp)
    agent = Agent(FunctionModel(respond), capabilities=caps)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        agent.run_sync('go', usage_limits=UsageLimits(request_limit=None))
    elapsed = time.perf_counter() - t
    if cp is not None:
        taken = len(cp.checkpoints())
        assert taken == tool_calls, f'{taken} checkpoints for {tool_calls} calls'
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument('--files', type=int, default=10_000)
    ap.add_argument('--calls', type=int, default=30)
    ap.add_argument('--tool-calls', type=int, default=200)
    ap.add_argument('--rounds', type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix='bh-py-bench-'))
    try:
        r = per_call(args.files, args.calls, work)
        (sf, sp), (bf, bp) = r['seed'], r['bh']
        print(f'project: {args.files} files; per call = one file changed, then a snapshot (median of {args.calls})')
        print()
        print('| | seed (`git add -A` + `commit`, shadow repo) | pydantic-ai-bh | ratio |')
        print('|---|---:|---:|---:|')
        print(f'| first snapshot | {sf:.1f} ms | {bf:.1f} ms | {bf / sf:.2f}x |')
        print(f'| per mutating call | {sp:.1f} ms | {bp:.2f} ms | {bp / sp:.3f}x |')
        # Alternated, each on a fresh project and store, the median of --rounds of each.
        runs: dict[bool, list[float]] = {False: [], True: []}
        for r_ in range(args.rounds):
            for flag in (False, True):
                sub = work / f'round{r_}-{flag}'
                sub.mkdir()
                runs[flag].append(agent_run(args.tool_calls, args.files, sub, flag))
        without, with_cp = statistics.median(runs[False]), statistics.median(runs[True])
        print()
        print(f'agent run, {args.tool_calls} write_file calls (FunctionModel, FileSystem): '
              f'{without:.2f} s without, {with_cp:.2f} s with Checkpoints '
              f'({(with_cp - without) * 1000 / args.tool_calls:+.1f} ms per call, first snapshot included; '
              f'median of {args.rounds} alternated runs each)')
        print(f'python {sys.version.split()[0]}, {os.cpu_count()} cpus')
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
