"""The backend-independent part of a value trace: frames, changes of their locals, bounded steps.

A line event arrives *before* its line runs, so what changed since a frame's previous line event was
done by that previous line: each change is recorded at the line that made it. Values are compared by
identity first (cheap); mutable builtins seen again are rendered again, so ``items.append(x)``
counts as a change of ``items``. Names pytest's assertion rewriting adds (``@py_assert1``) and dunder
names are left out.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Iterable
from types import FrameType
from typing import Any

from pytest_mcpdebug.protocol.trace import HEAD_STEPS, MAX_STEPS, Trace, TraceStep
from pytest_mcpdebug.values import is_library, render, render_named

_MUTABLE = (list, dict, set, bytearray)


class _Frame:
    __slots__ = ("file", "function", "last_line", "number", "raised", "unwinding", "values")

    def __init__(self, number: int, file: int, function: int, line: int) -> None:
        self.number = number
        self.file = file
        self.function = function
        self.last_line = line
        self.values: dict[str, tuple[Any, str]] = {}
        self.raised = 0
        self.unwinding = False
        """An exception went through and no line ran since: leaving now is not a return."""


class ValueRecorder:
    def __init__(
        self, *, backend: str, watch: Iterable[str] = (), max_steps: int = MAX_STEPS, head: int = HEAD_STEPS
    ) -> None:
        self.backend = backend
        self.watch = tuple(watch)
        self._files: dict[str, int] = {}
        self._functions: dict[str, int] = {}
        self._head: list[TraceStep] = []
        self._head_size = min(head, max_steps)
        self._tail: deque[TraceStep] = deque(maxlen=max(max_steps - self._head_size, 1))
        self._tail_seen = 0
        self._frames: dict[int, _Frame] = {}
        self._numbers = 0
        self._traced: dict[Any, bool] = {}
        self.lines = 0
        self.error = ""
        self.started = time.perf_counter()

    # Which code is traced -----------------------------------------------------------------------------

    def traced(self, code: Any) -> bool:
        """The project's code: not the standard library, installed packages, pytest or this plugin."""
        known = self._traced.get(code)
        if known is None:
            name = code.co_filename
            known = self._traced[code] = not is_library(name) and os.path.isabs(name)
        return known

    # Events (from a backend) ----------------------------------------------------------------------------

    def enter(self, frame: FrameType) -> _Frame:
        code = frame.f_code
        state = _Frame(
            self._numbers,
            self._index(self._files, code.co_filename),
            self._index(self._functions, code.co_qualname if hasattr(code, "co_qualname") else code.co_name),
            code.co_firstlineno,
        )
        self._numbers += 1
        self._frames[id(frame)] = state
        back = frame.f_back
        caller = self._frames.get(id(back)) if back is not None else None
        self._step(
            "call",
            state,
            code.co_firstlineno,
            caller=caller.number if caller is not None else -1,
            at=back.f_lineno or 0 if back is not None and caller is not None else 0,
        )
        self._changes(state, frame)  # the arguments, at the def line
        return state

    def line(self, frame: FrameType, line: int) -> None:
        state = self._frames.get(id(frame))
        if state is None:
            state = self.enter(frame)  # a resumed generator, or tracing started inside this frame
        self.lines += 1
        self._changes(state, frame)
        state.last_line = line
        state.unwinding = False

    def leave(self, frame: FrameType, value: Any, *, returned: bool | None = None) -> None:
        """The frame is left: ``returned`` None means "unless an exception is going through"."""
        state = self._frames.pop(id(frame), None)
        if state is None:
            return
        self._changes(state, frame)
        if returned or (returned is None and not state.unwinding):
            self._step("return", state, state.last_line, value=render(value))

    def exception(self, frame: FrameType, exc: BaseException) -> None:
        state = self._frames.get(id(frame))
        if state is None:
            return
        state.unwinding = True
        if state.raised == id(exc):
            return
        state.raised = id(exc)
        self._changes(state, frame)
        self._step(
            "raise", state, frame.f_lineno or state.last_line, name=type(exc).__name__, value=render(exc)
        )

    # Recording ------------------------------------------------------------------------------------------

    def _changes(self, state: _Frame, frame: FrameType) -> None:
        try:
            local = frame.f_locals
            names: Iterable[str] = self.watch or list(local)
        except Exception:
            return
        values = state.values
        for name in names:
            if name[0] == "@" or name.startswith("__"):
                continue
            try:
                value = local[name]
            except KeyError:
                continue
            old = values.get(name)
            if old is not None and old[0] is value and type(value) not in _MUTABLE:
                continue
            text = render_named(name, value)
            if old is not None and old[1] == text:
                values[name] = (value, text)
                continue
            values[name] = (value, text)
            self._step("set", state, state.last_line, name=name, value=text)

    def _step(
        self,
        kind: str,
        state: _Frame,
        line: int,
        *,
        name: str = "",
        value: str = "",
        caller: int = -1,
        at: int = 0,
    ) -> None:
        step = TraceStep(
            self.lines, kind, state.number, state.file, line, state.function, name, value, caller, at
        )
        if len(self._head) < self._head_size:
            self._head.append(step)
        else:
            self._tail.append(step)
            self._tail_seen += 1

    @staticmethod
    def _index(table: dict[str, int], key: str) -> int:
        found = table.get(key)
        if found is None:
            found = table[key] = len(table)
        return found

    def result(self) -> Trace:
        dropped = self._tail_seen - len(self._tail)
        return Trace(
            backend=self.backend,
            files=list(self._files),
            functions=list(self._functions),
            steps=[*self._head, *self._tail],
            lines=self.lines,
            head=len(self._head),
            dropped=dropped,
            watch=list(self.watch),
            duration=time.perf_counter() - self.started,
            error=self.error,
        )
