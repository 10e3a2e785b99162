"""Feeding a `ValueRecorder`: sys.monitoring on Python 3.12+, sys.settrace before.

Both trace only the project's code: sys.settrace's global function declines every other frame (no
line events there), and sys.monitoring turns line events on per code object of the project and
disables the start event everywhere else, so library code runs at full speed after its first call.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol

from pytest_mcpdebug.tracing.recorder import ValueRecorder


class Backend(Protocol):
    recorder: ValueRecorder

    def start(self) -> None: ...

    def stop(self) -> None: ...


def backend(watch: tuple[str, ...]) -> Backend:
    if sys.version_info >= (3, 12):
        return MonitoringBackend(ValueRecorder(backend="sys.monitoring", watch=watch))
    return SettraceBackend(ValueRecorder(backend="sys.settrace", watch=watch))


class SettraceBackend:
    def __init__(self, recorder: ValueRecorder) -> None:
        self.recorder = recorder
        self._previous: Any = None

    def start(self) -> None:
        self._previous = sys.gettrace()
        if self._previous is not None:
            owner = getattr(type(self._previous), "__module__", None) or type(self._previous).__name__
            self.recorder.error = (
                f"another tracer ({owner}, e.g. coverage or a debugger) was paused while this test was traced"
            )
        sys.settrace(self._call)

    def stop(self) -> None:
        sys.settrace(self._previous)

    def _call(self, frame: Any, event: str, arg: Any) -> Any:
        if event != "call" or not self.recorder.traced(frame.f_code):
            return None
        self.recorder.enter(frame)
        return self._local

    def _local(self, frame: Any, event: str, arg: Any) -> Any:
        recorder = self.recorder
        if event == "line":
            recorder.line(frame, frame.f_lineno)
        elif event == "return":
            recorder.leave(frame, arg)  # also when an exception leaves the frame: the recorder knows
        elif event == "exception":
            recorder.exception(frame, arg[1])
        return self._local


class MonitoringBackend:
    TOOL_IDS = (3, 4)
    """Tool ids no well-known tool claims (0 debugger, 1 coverage, 2 profiler, 5 optimizer)."""

    def __init__(self, recorder: ValueRecorder) -> None:
        self.recorder = recorder
        self.tool: int | None = None
        self._local: set[Any] = set()
        self._events: list[int] = []

    def start(self) -> None:
        mon = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        for tool in self.TOOL_IDS:
            if mon.get_tool(tool) is None:
                mon.use_tool_id(tool, "mcpdebug-trace")
                self.tool = tool
                break
        else:
            self.recorder.error = "no free sys.monitoring tool id (ids 3 and 4 are in use): not traced"
            return
        events = mon.events
        callbacks = {
            events.PY_START: self._start,
            events.LINE: self._line,
            events.PY_RETURN: self._return,
            events.PY_YIELD: self._yield,
            events.RAISE: self._raise,
            events.PY_UNWIND: self._unwind,
        }
        self._events = list(callbacks)
        for event, callback in callbacks.items():
            mon.register_callback(self.tool, event, callback)
        mon.restart_events()  # lines an earlier trace in this process disabled count again
        mon.set_events(self.tool, events.PY_START | events.RAISE | events.PY_UNWIND)

    def stop(self) -> None:
        if self.tool is None:
            return
        mon = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        mon.set_events(self.tool, 0)
        for code in self._local:
            mon.set_local_events(self.tool, code, 0)
        for event in self._events:
            mon.register_callback(self.tool, event, None)
        mon.free_tool_id(self.tool)
        self.tool = None

    def _start(self, code: Any, offset: int) -> Any:
        mon = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        if not self.recorder.traced(code):
            return mon.DISABLE
        if code not in self._local:
            self._local.add(code)
            events = mon.events
            mon.set_local_events(self.tool, code, events.LINE | events.PY_RETURN | events.PY_YIELD)
        self.recorder.enter(sys._getframe(1))
        return None

    def _line(self, code: Any, line: int) -> None:
        self.recorder.line(sys._getframe(1), line)

    def _return(self, code: Any, offset: int, value: Any) -> None:
        self.recorder.leave(sys._getframe(1), value, returned=True)

    def _yield(self, code: Any, offset: int, value: Any) -> None:
        self.recorder.leave(sys._getframe(1), value, returned=False)

    def _raise(self, code: Any, offset: int, exc: BaseException) -> None:
        if self.recorder.traced(code):
            self.recorder.exception(sys._getframe(1), exc)

    def _unwind(self, code: Any, offset: int, exc: BaseException) -> None:
        if self.recorder.traced(code):
            frame = sys._getframe(1)
            self.recorder.exception(frame, exc)
            self.recorder.leave(frame, None, returned=False)
