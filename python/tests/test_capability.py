"""The seed's behaviours: snapshot before mutating tools, restore, debounce, selection, failures."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from conftest import make_agent, tree_digest
from pydantic_ai.messages import ModelRequest, ToolReturnPart

from pydantic_ai_bh import METADATA_KEY, Checkpoints, CheckpointWarning, StoreError


def test_snapshot_before_write_file_then_restore_round_trip(project: Path, state_dir: Path) -> None:
    cp = Checkpoints(state_dir=state_dir)
    agent = make_agent(project, [[('write_file', {'path': 'a.txt', 'content': 'a2\n'})]], cp)
    agent.run_sync('go')
    assert (project / 'a.txt').read_text() == 'a2\n'
    [c] = cp.checkpoints()
    assert c.tool_name == 'write_file'
    assert c.kind == 'snapshot'
    result = cp.restore(c.id)
    assert (project / 'a.txt').read_text() == 'a1\n'
    assert 'a.txt' in result.restored
    # The restore took an undo point first; restoring it undoes the restore.
    assert result.undo.kind == 'pre-restore'
    cp.restore(result.undo.id)
    assert (project / 'a.txt').read_text() == 'a2\n'


def test_snapshot_before_edit_file(project: Path, state_dir: Path) -> None:
    cp = Checkpoints(state_dir=state_dir)
    agent = make_agent(project, [[('edit_file', {'path': 'b.txt', 'old_text': 'b1', 'new_text': 'b2'})]], cp)
    agent.run_sync('go')
    assert (project / 'b.txt').read_text() == 'b2\n'
    [c] = cp.checkpoints()
    assert c.tool_name == 'edit_file'
    cp.restore(c.id)
    assert (project / 'b.txt').read_text() == 'b1\n'


def test_snapshot_before_shell_command_by_default(project: Path, state_dir: Path) -> None:
    cp = Checkpoints(state_dir=state_dir)
    agent = make_agent(project, [[('run_command', {'command': 'echo gone > a.txt && echo new > c.txt'})]], cp)
    agent.run_sync('go')
    assert (project / 'a.txt').read_text() == 'gone\n'
    [c] = cp.checkpoints()
    assert c.tool_name == 'run_command'
    cp.restore(c.id)
    assert (project / 'a.txt').read_text() == 'a1\n'
    # Additive: the file the command created stays.
    assert (project / 'c.txt').exists()


def test_shell_not_snapshotted_when_switched_off(project: Path, state_dir: Path) -> None:
    cp = Checkpoints(state_dir=state_dir, snapshot_before_shell=False)
    make_agent(project, [[('run_command', {'command': 'echo x > c.txt'})]], cp).run_sync('go')
    assert cp.checkpoints() == []


def test_read_only_tools_take_no_checkpoint(project: Path, state_dir: Path) -> None:
    cp = Checkpoints(state_dir=state_dir)
    make_agent(project, [[('read_file', {'path': 'a.txt'})], [('list_directory', {'path': '.'})]], cp).run_sync('go')
    assert cp.checkpoints() == []


def test_exact_restore_deletes_files_created_since(project: Path, state_dir: Path) -> None:
    cp = Checkpoints(state_dir=state_dir)
    make_agent(project, [[('write_file', {'path': 'new.txt', 'content': 'n\n'})]], cp).run_sync('go')
    [c] = cp.checkpoints()
    additive = cp.restore(c.id)
    assert (project / 'new.txt').exists() and 'new.txt' in additive.kept
    exact = cp.restore(c.id, exact=True)
    assert not (project / 'new.txt').exists() and exact.deleted == ['new.txt']


def test_path_scoped_restore(project: Path, state_dir: Path) -> None:
    cp = Checkpoints(state_dir=state_dir)
    steps = [[('write_file', {'path': 'a.txt', 'content': 'a2\n'}), ('write_file', {'path': 'b.txt', 'content': 'b2\n'})]]
    make_agent(project, steps, cp).run_sync('go')
    first = cp.checkpoints()[-1]
    r = cp.restore(first.id, paths=['sub/../a.txt'])
    assert r.restored == ['a.txt']
    assert (project / 'a.txt').read_text() == 'a1\n'
    assert (project / 'b.txt').read_text() == 'b2\n'
    # An absolute path inside the project is fine; one outside it is refused.
    cp.restore(first.id, paths=[project / 'b.txt'])
    assert (project / 'b.txt').read_text() == 'b1\n'
    for outside in ['../escape.txt', '/etc/passwd']:
        with pytest.raises(StoreError) as e:
            cp.restore(first.id, paths=[outside])
        assert e.value.kind == 'refused'
        assert 'outside the project' in str(e.value)


def test_non_git_project(plain_project: Path, state_dir: Path) -> None:
    cp = Checkpoints(state_dir=state_dir)
    make_agent(plain_project, [[('write_file', {'path': 'a.txt', 'content': 'a2\n'})]], cp).run_sync('go')
    assert not (plain_project / '.git').exists()
    [c] = cp.checkpoints()
    cp.restore(c.id)
    assert (plain_project / 'a.txt').read_text() == 'a1\n'
    assert not (plain_project / '.git').exists()


def test_users_git_untouched(project: Path, state_dir: Path) -> None:
    before = tree_digest(project / '.git')
    cp = Checkpoints(state_dir=state_dir)
    steps = [[('write_file', {'path': 'a.txt', 'content': 'a2\n'})], [('run_command', {'command': 'echo y > z.txt'})]]
    make_agent(project, steps, cp).run_sync('go')
    cp.restore(cp.checkpoints()[-1].id, exact=True)
    assert tree_digest(project / '.git') == before
    # And the store is not inside the project.
    assert not any(p.name == 'checkpoints' for p in project.rglob('*'))


def test_gitignore_respected(project: Path, state_dir: Path) -> None:
    (project / 'ignored.log').write_text('log1\n')
    cp = Checkpoints(state_dir=state_dir)
    steps = [[('run_command', {'command': 'echo log2 > ignored.log && mkdir -p build && echo o > build/out'})]]
    make_agent(project, steps, cp).run_sync('go')
    [c] = cp.checkpoints()
    r = cp.restore(c.id, exact=True)
    # Ignored files are neither captured (so not rolled back) nor deleted.
    assert (project / 'ignored.log').read_text() == 'log2\n'
    assert (project / 'build/out').exists()
    assert 'ignored.log' not in r.restored and r.deleted == []


def test_debounce_reuses_the_last_checkpoint(project: Path, state_dir: Path) -> None:
    cp = Checkpoints(state_dir=state_dir)
    same = ('write_file', {'path': 'a.txt', 'content': 'a2\n'})
    run = make_agent(project, [[same], [same], [same]], cp).run_sync('go')
    ids = [_attached(run.all_messages(), f'call-{n}-0') for n in range(3)]
    # 1st: before a2; 2nd: a2 is new; 3rd: nothing changed since the 2nd -> the same checkpoint.
    assert ids[0] != ids[1]
    assert ids[1] == ids[2]
    assert len(cp.checkpoints()) == 2


def test_mutating_tools_respected(project: Path, state_dir: Path) -> None:
    from pydantic_ai.toolsets import FunctionToolset

    def custom(path: str) -> str:
        """Write a marker file."""
        (project / path).write_text('custom\n')
        return 'ok'

    from pydantic_ai.capabilities import Toolset

    cp = Checkpoints(state_dir=state_dir, mutating_tools={'custom'}, snapshot_before_shell=False)
    steps = [[('write_file', {'path': 'a.txt', 'content': 'a2\n'})], [('custom', {'path': 'm.txt'})]]
    make_agent(project, steps, cp, extra=[Toolset(FunctionToolset([custom]))]).run_sync('go')
    [c] = cp.checkpoints()
    assert c.tool_name == 'custom'


def test_tools_selected_by_kind_whatever_their_name(project: Path, state_dir: Path) -> None:
    from pydantic_ai import ToolKind
    from pydantic_ai.capabilities import Toolset
    from pydantic_ai.toolsets import FunctionToolset

    patch_kind = ToolKind('myapp', 'patch')
    toolset: FunctionToolset[None] = FunctionToolset()

    @toolset.tool_plain(tool_kind=patch_kind)
    def apply_change(path: str) -> str:
        """Write a marker file."""
        (project / path).write_text('patched\n')
        return 'ok'

    seen: list = []
    cp = Checkpoints(state_dir=state_dir, mutating_tools={'myapp.patch'})
    make_agent(project, [[('apply_change', {'path': 'a.txt'})]], cp, extra=[Toolset(toolset)], seen=seen).run_sync('go')
    [c] = cp.checkpoints()
    assert c.tool_name == 'apply_change'
    # The defaults name FileSystem's tools by kind, which its tool definitions carry.
    kinds = {t.name: t.tool_kind for t in seen[0].function_tools}
    assert kinds['write_file'] == 'file_system.write_file' and kinds['edit_file'] == 'file_system.edit_file'
    assert Checkpoints(state_dir=state_dir).is_mutating(
        next(t for t in seen[0].function_tools if t.name == 'write_file').__class__(
            name='renamed', tool_kind='file_system.write_file'
        )
    )


def test_checkpoint_id_attached_to_the_tool_call(project: Path, state_dir: Path) -> None:
    cp = Checkpoints(state_dir=state_dir)
    run = make_agent(project, [[('write_file', {'path': 'a.txt', 'content': 'a2\n'})]], cp).run_sync('go')
    [c] = cp.checkpoints()
    assert _attached(run.all_messages(), 'call-0-0') == c.id
    assert c.tool_call_id == 'call-0-0'
    assert c.run_id is not None
    assert cp.checkpoint_for('call-0-0') == c.id


def test_expose_tool_off_by_default(project: Path, state_dir: Path) -> None:
    seen: list = []
    make_agent(project, [], Checkpoints(state_dir=state_dir), seen=seen).run_sync('go')
    names = {t.name for t in seen[0].function_tools}
    assert 'write_file' in names
    assert not names & {'list_checkpoints', 'restore_checkpoint'}


def test_expose_tool_gives_the_model_list_and_restore(project: Path, state_dir: Path) -> None:
    seen: list = []
    cp = Checkpoints(state_dir=state_dir, expose_tool=True)
    steps = [[('write_file', {'path': 'a.txt', 'content': 'a2\n'})], [('list_checkpoints', {})]]
    run = make_agent(project, steps, cp, seen=seen).run_sync('go')
    assert {'list_checkpoints', 'restore_checkpoint'} <= {t.name for t in seen[0].function_tools}
    [c] = cp.checkpoints()
    listing = _return(run.all_messages(), 'call-1-0')
    assert c.id in listing
    steps2 = [[('restore_checkpoint', {'checkpoint_id': c.id})]]
    make_agent(project, steps2, cp).run_sync('go')
    assert (project / 'a.txt').read_text() == 'a1\n'


def test_store_failure_is_a_warning_and_the_run_goes_on(project: Path, tmp_path: Path) -> None:
    not_a_dir = tmp_path / 'state-file'
    not_a_dir.write_text('')
    cp = Checkpoints(state_dir=not_a_dir)
    agent = make_agent(project, [[('write_file', {'path': 'a.txt', 'content': 'a2\n'})]], cp)
    with pytest.warns(CheckpointWarning, match='no checkpoint before write_file'):
        run = agent.run_sync('go')
    assert run.output == 'done'
    assert (project / 'a.txt').read_text() == 'a2\n'
    assert _attached(run.all_messages(), 'call-0-0') is None


def test_state_dir_owned_by_another_user_refused(project: Path, tmp_path: Path) -> None:
    import os

    if os.geteuid() != 0:
        pytest.skip('needs root to give a folder to another user')
    other = tmp_path / 'other-state'
    other.mkdir(mode=0o700)
    os.chown(other, 12345, 12345)
    cp = Checkpoints(state_dir=other)
    with pytest.raises(StoreError) as e:
        cp.checkpoints()
    assert e.value.kind == 'refused' and 'owned by uid 12345' in str(e.value)
    agent = make_agent(project, [[('write_file', {'path': 'a.txt', 'content': 'a2\n'})]], cp)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        agent.run_sync('go')
    assert any(issubclass(w.category, CheckpointWarning) and 'owned by uid' in str(w.message) for w in caught)
    assert list(other.iterdir()) == []


def _attached(messages: list, call_id: str) -> str | None:
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, ToolReturnPart) and p.tool_call_id == call_id:
                    return (p.metadata or {}).get(METADATA_KEY)
    raise AssertionError(f'no return for {call_id}')


def _return(messages: list, call_id: str) -> str:
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, ToolReturnPart) and p.tool_call_id == call_id:
                    return p.model_response_str()
    raise AssertionError(f'no return for {call_id}')


def test_a_call_a_guardrail_blocks_takes_no_checkpoint_whatever_the_order(project: Path, state_dir: Path) -> None:
    from pydantic_ai_harness.guardrails import GuardrailResult, ToolCallInfo, ToolGuardrail

    def no_secret(call: ToolCallInfo) -> GuardrailResult:
        if call.name == 'write_file' and call.args.get('path') == 'secret.txt':
            return GuardrailResult.block('secret.txt is off limits')
        return GuardrailResult.allow()

    steps = [
        [('write_file', {'path': 'secret.txt', 'content': 's\n'})],
        [('write_file', {'path': 'a.txt', 'content': 'a2\n'})],
    ]
    # The user lists Checkpoints first (outermost by list order); its ordering puts it inside the
    # guardrail, so the refused call is never snapshotted and the allowed one is.
    cp = Checkpoints(state_dir=state_dir)
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import LocalWorkspace
    from pydantic_ai_harness import FileSystem, Shell

    from conftest import scripted

    agent = Agent(
        scripted(steps),
        capabilities=[cp, LocalWorkspace(project), FileSystem(), Shell(), ToolGuardrail(guard=no_secret)],
    )
    agent.run_sync('go')
    assert not (project / 'secret.txt').exists()
    assert (project / 'a.txt').read_text() == 'a2\n'
    [c] = cp.checkpoints()
    assert c.tool_name == 'write_file'
    assert cp.checkpoint_for('call-0-0') is None
    assert cp.checkpoint_for('call-1-0') == c.id
