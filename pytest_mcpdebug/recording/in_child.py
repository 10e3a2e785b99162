"""In a child a test forked without exec: the recording's side of `pytest_mcpdebug.forks`.

Most children (a pool's worker, a daemon) run the test's code and end with ``os._exit``: for them the
process-wide parts matter (signals, descriptors, faulthandler, logging and warnings hooks: `forks`
and the parts that register with it). A child can also go on through pytest (``os.fork`` in a test,
the child returning; pytest-forked runs each test so): then the recording's code would run in it,
from the hooks and from the frames of ours the fork caught half-way (the output tail's end of a
phase, a hook wrapper's end), against a copy of the parent's state: its locks possibly held by
threads the child does not have, its write-ahead file and dump header mapped, shared with the
parent. So, in every child, at once and cheaply (the copy of each page touched costs a fault):

- the locks the recorder's threads take are made new, so nothing in the child waits for ever;
- whatever would leave the child is closed (the spool, the write-ahead copy, the connection) and the
  dump header is let go: nothing the child does reaches the parent's files;

and at the child's first hook call, if it ever makes one, the recording's plugins leave pytest (pluggy's
public hook-call monitoring: nothing is touched until then, and a pool's worker never pays for it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest
from pluggy import HookImpl, Result

if TYPE_CHECKING:
    from pytest_mcpdebug.recording.recorder import Recorder

PREFIX = "mcpdebug-"
"""The name of every plugin of the recording (`plugin.py`, the recorder and the parts it registers)."""


def forget(recorder: Recorder) -> None:
    """Called in the child (`forks.in_child`), the recorder as the fork found it."""
    sender, reporter, tail = recorder.sender, recorder.reporter, recorder.tail
    locks = [sender._bytes_lock, sender._flush_lock, sender._send_lock, sender.spool._lock, sender.wal._lock]
    for lock in locks:
        lock._at_fork_reinit()  # type: ignore[attr-defined]
    sender.spool._closed = sender.wal._closed = True
    sender._ws = None
    sender.started = False  # no thread here to wait for
    if reporter is not None:
        reporter._lock._at_fork_reinit()  # type: ignore[attr-defined]
        reporter.dump = None
    if tail is not None:
        tail._lock._at_fork_reinit()  # type: ignore[attr-defined]
    _leave_at_first_hook(recorder.config.pluginmanager)


def _leave_at_first_hook(manager: pytest.PytestPluginManager) -> None:
    undo: Any = None

    def before(hook_name: str, hook_impls: Sequence[HookImpl], kwargs: Mapping[str, Any]) -> None:
        nonlocal undo
        if undo is None:
            return
        undo()
        undo = None
        ours = [
            (name, plugin)
            for name, plugin in manager.list_name_plugin()
            if name is not None and name.startswith(PREFIX) and plugin is not None
        ]
        for name, plugin in ours:
            with contextlib.suppress(ValueError):
                manager.unregister(plugin, name)
        gone = {id(plugin) for _, plugin in ours}
        if isinstance(hook_impls, list):  # pluggy's copy for this call: ours leave it too
            hook_impls[:] = [impl for impl in hook_impls if id(impl.plugin) not in gone]

    undo = manager.add_hookcall_monitoring(before, _after)


def _after(
    outcome: Result[Any], hook_name: str, hook_impls: Sequence[HookImpl], kwargs: Mapping[str, Any]
) -> None:
    pass
