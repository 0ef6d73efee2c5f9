"""Beyond the seed: rewind (history + files), a store shared across processes, and `bh` itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import make_agent
from pydantic_ai.messages import ModelResponse, ToolCallPart

from pydantic_ai_bh import Checkpoints, open_store


def _steps() -> list:
    return [
        [('write_file', {'path': 'a.txt', 'content': 'a2\n'})],
        [('write_file', {'path': 'b.txt', 'content': 'b2\n'})],
        [('write_file', {'path': 'new.txt', 'content': 'n\n'})],
    ]


def test_rewind_cuts_history_and_files_at_a_tool_call(project: Path, state_dir: Path) -> None:
    cp = Checkpoints(state_dir=state_dir)
    run = make_agent(project, _steps(), cp).run_sync('go')
    messages = run.all_messages()
    rw = cp.rewind(messages, to='call-1-0', exact=True)
    # The history ends before the response that made call-1-0 ...
    assert all(
        not (isinstance(p, ToolCallPart) and p.tool_call_id in {'call-1-0', 'call-2-0'})
        for m in rw.messages
        for p in (m.parts if isinstance(m, ModelResponse) else [])
    )
    assert rw.messages == messages[: len(rw.messages)]
    # ... and the files are as they were just before it: call-0-0 done, the rest undone.
    assert (project / 'a.txt').read_text() == 'a2\n'
    assert (project / 'b.txt').read_text() == 'b1\n'
    assert not (project / 'new.txt').exists()
    assert rw.checkpoint is not None and rw.checkpoint.tool_call_id == 'call-1-0'
    assert rw.result is not None and rw.result.undo.kind == 'pre-restore'
    # The cut history goes on as a conversation.
    make_agent(project, [], cp).run_sync('again', message_history=rw.messages)


def test_rewind_by_index_from_a_fresh_process_uses_the_history_and_the_store(project: Path, state_dir: Path) -> None:
    run = make_agent(project, _steps(), Checkpoints(state_dir=state_dir)).run_sync('go')
    messages = run.all_messages()
    # A new capability (as after a restart) knows nothing in memory: the ids come from the history.
    fresh = Checkpoints(state_dir=state_dir, root=project)
    rw = fresh.rewind(messages, to=1)
    assert rw.messages == messages[:1]
    assert (project / 'a.txt').read_text() == 'a1\n'
    assert (project / 'new.txt').exists()  # additive by default
    # Without the metadata (history stored elsewhere), the store's record of the call is used.
    for m in messages:
        for p in getattr(m, 'parts', []):
            if getattr(p, 'metadata', None):
                p.metadata = None
    rw2 = Checkpoints(state_dir=state_dir, root=project).rewind(messages, to='call-2-0')
    assert rw2.checkpoint is not None and rw2.checkpoint.tool_call_id == 'call-2-0'
    assert (project / 'b.txt').read_text() == 'b2\n'


def test_rewind_after_the_last_mutating_call_restores_nothing(project: Path, state_dir: Path) -> None:
    cp = Checkpoints(state_dir=state_dir)
    run = make_agent(project, _steps(), cp).run_sync('go')
    rw = cp.rewind(run.all_messages(), to=-1)
    assert rw.checkpoint is None and rw.result is None
    assert (project / 'new.txt').exists()
    with pytest.raises(ValueError):
        cp.rewind(run.all_messages(), to='no-such-call')


_WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from pydantic_ai_bh import open_store
    project, state, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    store = open_store(project, state)
    for i in range(n):
        (project / f'w{i}.txt').write_text(str(i))
        store.snapshot('worker', entry=f'w{i}')
    print('ok')
    """
)


def test_a_second_process_shares_the_store(project: Path, state_dir: Path) -> None:
    worker = subprocess.Popen(
        [sys.executable, '-c', _WORKER, str(project), str(state_dir), '15'], stdout=subprocess.PIPE, text=True
    )
    cp = Checkpoints(state_dir=state_dir)
    steps = [[('write_file', {'path': f'agent{i}.txt', 'content': f'{i}\n'})] for i in range(15)]
    make_agent(project, steps, cp).run_sync('go')
    out, _ = worker.communicate(timeout=120)
    assert worker.returncode == 0 and out.strip() == 'ok'
    listed = cp.checkpoints()
    entries = {c.tool_call_id for c in listed}
    # Every snapshot of both processes is in the one store (some debounced onto another's).
    assert {c.tool_name for c in listed} <= {'write_file', 'worker'}
    assert len({c.id for c in listed}) == len(listed)
    assert entries & {f'call-{i}-0' for i in range(15)}
    assert entries & {f'w{i}' for i in range(15)}
    # Each checkpoint holds a consistent tree: restoring the newest brings back every file.
    cp.restore(listed[0].id)
    seqs = [c.time for c in listed]
    assert seqs == sorted(seqs, reverse=True)


def test_kill_9_during_snapshots_loses_nothing(project: Path, state_dir: Path) -> None:
    for i in range(300):
        (project / f'f{i}.txt').write_text(str(i) * 200)
    store = open_store(project, state_dir)
    store.snapshot('before')
    worker = subprocess.Popen(
        [sys.executable, '-c', _WORKER, str(project), str(state_dir), '100000'], stdout=subprocess.DEVNULL
    )
    # Let it take some snapshots, then kill it wherever it is.
    while len(store.list()) < 4:
        pass
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    # The store still opens, lists, snapshots and restores; the killed process's lock is gone.
    after = open_store(project, state_dir)
    before_kill = after.list()
    (project / 'a.txt').write_text('changed\n')
    t, created, _ = after.snapshot('after')
    assert created
    first = before_kill[-1]
    after.restore(first[1], paths=['a.txt'])
    assert (project / 'a.txt').read_text() == 'a1\n'
    assert [c[1] for c in after.list()][-len(before_kill) :] == [c[1] for c in before_kill]


def test_bh_checkpoint_list_and_restore_see_the_agents_checkpoints(project: Path, state_dir: Path) -> None:
    bh = os.environ.get('BH_BIN')
    if not bh:
        pytest.skip('BH_BIN (the built `bh` binary) not given: run through crates/bh-py/tests/python.rs')
    cp = Checkpoints(state_dir=state_dir)
    run = make_agent(project, _steps()[:1], cp).run_sync('go')
    [c] = cp.checkpoints()
    env = {**os.environ, 'BH_STATE_DIR': str(state_dir)}
    out = subprocess.run([bh, 'checkpoint', 'list', '--json'], cwd=project, env=env, check=True, capture_output=True, text=True)
    listed = json.loads(out.stdout)
    items = listed if isinstance(listed, list) else listed.get('checkpoints', [])
    assert any(item['id'] == c.id and item['tool'] == 'write_file' for item in items), out.stdout
    subprocess.run([bh, 'checkpoint', 'restore', c.id], cwd=project, env=env, check=True, capture_output=True)
    assert (project / 'a.txt').read_text() == 'a1\n'
    # And `bh`'s own undo point is in the list the capability reads.
    assert cp.checkpoints()[0].kind == 'pre-restore'
    assert run.output == 'done'
