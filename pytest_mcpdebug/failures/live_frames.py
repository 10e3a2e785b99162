"""Answers an agent's questions about a held test's live frames: stack, scopes, variables, evaluate.

Runs in the held test's own thread, on the real frame objects of the failure's traceback, so a
value read here is the object's current value and an assignment made by `evaluate` is seen by the
code that runs after the hold. Replies are plain dicts in seed 002's shapes (the server renders
them); bad arguments raise `InspectError` with a message that says what exists.

Frame ids count from the raise point (0) outwards, as in a stored snapshot; a frame's locals are the
scope ``LOCALS_BASE + frame id`` and its globals ``GLOBALS_BASE + frame id``; smaller references
expand a container or object met on the way (numbered in the order they were shown).
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import io
import os
import sys
import textwrap
import threading
import traceback
from types import FrameType
from typing import Any, Final

from pytest_mcpdebug.redaction import REDACTED, is_secret_expression, is_secret_name, redact, reveals_nothing
from pytest_mcpdebug.values import is_library, render, render_named, type_name

LOCALS_BASE: Final = 1_000_000
GLOBALS_BASE: Final = 2_000_000
MAX_CHILDREN: Final = 500
"""Variables in one reply; the rest are counted."""
RESULT_CHARS: Final = 4_000
"""An evaluated value's repr is cut here (a variable's value follows seed 000's 200)."""
EVALUATE_TIMEOUT: Final = 10.0
_FILENAME: Final = "<mcpdebug>"
_WINDOW: Final = 512
"""Characters past a cut that are redacted with what is kept (`pytest_mcpdebug.values`)."""
_ATOMS = (str, bytes, int, float, complex, bool, type(None))


class InspectError(Exception):
    """A request that cannot be answered as asked; the message says what to ask instead."""


class EvaluationTimeout(BaseException):
    """Raised inside a runaway expression by the time limit (a BaseException: ``except Exception``
    in the expression's own code must not swallow it)."""


class LiveFrames:
    """The frames of one held failure, innermost (the raise point) first."""

    def __init__(
        self,
        frames: list[tuple[FrameType, int]],
        *,
        test_frame: int | None = None,
        threads: list[str] | None = None,
    ) -> None:
        self.frames = frames
        self.test_frame = test_frame
        """Index of the test function's frame: the default of `locals` and `evaluate`."""
        self.threads = threads
        """A hung process's frames come from all its threads: the thread of each frame. Those frames
        are running in their own threads, so an evaluation's assignments are not written back."""
        self._refs: dict[int, Any] = {}
        self._ref_of: dict[int, int] = {}  # id(object) -> ref; the object is kept alive in _refs

    # Requests -------------------------------------------------------------------------------------

    def handle(self, command: str, arguments: dict[str, Any]) -> dict[str, Any]:
        handler = getattr(self, f"_cmd_{command}", None)
        if handler is None:
            raise InspectError(f"unknown request {command!r}")
        try:
            result: dict[str, Any] = handler(**arguments)
        except TypeError as exc:
            raise InspectError(f"bad arguments for {command}: {exc}") from None
        return result

    def _cmd_stack(self, include_library: bool = False) -> dict[str, Any]:
        frames = [
            {**self._describe(i), "column": 1, "library": is_library(self._file(i))}
            for i in range(len(self.frames))
        ]
        shown = [f for f in frames if include_library or not f["library"]]
        return {
            "stackFrames": shown,
            "count": len(shown),
            **({"libraryFramesHidden": len(frames) - len(shown)} if len(shown) < len(frames) else {}),
        }

    def _cmd_scopes(self, frame_id: int) -> dict[str, Any]:
        frame = self._frame(frame_id)
        module_level = frame.f_locals is frame.f_globals
        scopes = [] if module_level else [self._scope("Locals", LOCALS_BASE + frame_id, frame.f_locals)]
        scopes.append(self._scope("Globals", GLOBALS_BASE + frame_id, frame.f_globals))
        return {"scopes": scopes, "frame": self._describe(frame_id)}

    def _cmd_variables(self, variables_reference: int) -> dict[str, Any]:
        ref = variables_reference
        if GLOBALS_BASE <= ref < GLOBALS_BASE + len(self.frames):
            pairs = _names(self._frame(ref - GLOBALS_BASE).f_globals, special=False, globals_=True)
        elif LOCALS_BASE <= ref < LOCALS_BASE + len(self.frames):
            pairs = _names(self._frame(ref - LOCALS_BASE).f_locals, special=True)
        elif ref in self._refs:
            pairs = _children(self._refs[ref])
        else:
            known = f"1-{len(self._refs)}" if self._refs else "none yet"
            raise InspectError(
                f"No variablesReference {ref} in this session: expandable values shown so far are {known}; "
                f"a frame's locals are {LOCALS_BASE} + frame id and its globals {GLOBALS_BASE} + frame id "
                "(get_scopes)."
            )
        return self._variables(pairs)

    def _cmd_locals(self, frame_id: int | None = None, include_special: bool = False) -> dict[str, Any]:
        index = self._default(frame_id)
        pairs = _names(self._frame(index).f_locals, special=include_special)
        return {**self._variables(pairs), "frame": self._describe(index), "scopeName": "Locals"}

    def _cmd_evaluate(
        self, expression: str, frame_id: int | None = None, timeout: float = EVALUATE_TIMEOUT
    ) -> dict[str, Any]:
        if not isinstance(expression, str) or not expression.strip():
            raise InspectError("The expression is empty: give Python code, e.g. len(items).")
        index = self._default(frame_id)
        printed = io.StringIO()  # what the expression prints is part of its answer
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            value, error = evaluate(self._frame(index), expression, timeout, write_back=self.threads is None)
        output = printed.getvalue()
        if error is not None:  # (an exception as the value, e.g. `excinfo.value`, is not an error)
            raise InspectError(
                _format_error(error) + (f"\nPrinted before it:\n{output[-2000:]}" if output else "")
            )
        secret = is_secret_expression(expression) and not reveals_nothing(value)
        return {
            "result": REDACTED if secret else _long(value),
            "type": type_name(value),
            "variablesReference": 0 if secret else self._ref(value),
            "frame": self._describe(index),
            **({"output": redact(output[-RESULT_CHARS:])} if output else {}),
        }

    # Helpers --------------------------------------------------------------------------------------

    def _default(self, frame_id: int | None) -> int:
        if frame_id is not None:
            self._frame(frame_id)
            return frame_id
        return self.test_frame if self.test_frame is not None else 0

    def _frame(self, frame_id: int) -> FrameType:
        if not isinstance(frame_id, int) or not 0 <= frame_id < len(self.frames):
            raise InspectError(
                f"No frame {frame_id}: this stop has frames 0-{len(self.frames) - 1} (0 is where it was "
                "raised); get_stack_trace lists them."
            )
        return self.frames[frame_id][0]

    def _file(self, frame_id: int) -> str:
        name = self.frames[frame_id][0].f_code.co_filename
        return name if name.startswith("<") else os.path.abspath(name)  # "<frozen runpy>" stays as is

    def _describe(self, frame_id: int) -> dict[str, Any]:
        frame, line = self.frames[frame_id]
        if self.threads is not None:
            line = frame.f_lineno  # a running thread's frame: where it is now
        described = {"id": frame_id, "name": frame.f_code.co_name, "file": self._file(frame_id), "line": line}
        if self.threads is not None:
            described["thread"] = self.threads[frame_id]
        return described

    def _scope(self, name: str, ref: int, namespace: Any) -> dict[str, Any]:
        count = len(_names(namespace, special=False, globals_=name == "Globals"))
        return {"name": name, "variablesReference": ref if count else 0, "expensive": False, "count": count}

    def _variables(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        shown = pairs[:MAX_CHILDREN]
        variables = [self._var(name, value) for name, value in shown]
        more = len(pairs) - len(shown)
        return {"variables": variables, "count": len(pairs), **({"notShown": more} if more else {})}

    def _var(self, name: str, value: Any) -> dict[str, Any]:
        if is_secret_name(name) and not reveals_nothing(value):
            return {
                "name": name,
                "value": render_named(name, value),
                "type": type_name(value),
                "variablesReference": 0,
            }
        return {
            "name": name,
            "value": render(value),
            "type": type_name(value),
            "variablesReference": self._ref(value),
        }

    def _ref(self, value: Any) -> int:
        """A number to expand ``value`` by, or 0 if it has nothing to show."""
        if isinstance(value, _ATOMS) or not _expandable(value):
            return 0
        ref = self._ref_of.get(id(value))
        if ref is None or self._refs.get(ref) is not value:
            ref = len(self._refs) + 1
            self._refs[ref] = value
            self._ref_of[id(value)] = ref
        return ref


def _names(namespace: Any, *, special: bool, globals_: bool = False) -> list[tuple[str, Any]]:
    try:
        items = list(namespace.items())
    except Exception:
        return []
    out = []
    for name, value in items:
        if not isinstance(name, str) or name.startswith("@"):  # pytest's "@py_assert1" temporaries
            continue
        if not special and name.startswith("__"):
            continue
        if globals_ and type(value).__name__ == "module":
            continue
        out.append((name, value))
    return out


def _expandable(value: Any) -> bool:
    try:
        if isinstance(value, (dict, list, tuple, set, frozenset)):
            return len(value) > 0
        if isinstance(value, type) or (callable(value) and not hasattr(value, "__dict__")):
            return False
        attrs = getattr(value, "__dict__", None)
        return isinstance(attrs, dict) and any(not k.startswith("__") for k in attrs)
    except Exception:
        return False


def _children(value: Any) -> list[tuple[str, Any]]:
    try:
        if isinstance(value, dict):
            return [(render(k), v) for k, v in list(value.items())]
        if isinstance(value, (list, tuple)):
            return [(f"[{i}]", v) for i, v in enumerate(value)]
        if isinstance(value, (set, frozenset)):
            return [(f"<{i}>", v) for i, v in enumerate(value)]
        attrs = getattr(value, "__dict__", None)
        if isinstance(attrs, dict):
            return [(k, v) for k, v in list(attrs.items()) if not k.startswith("__")]
    except Exception:
        return []
    return []


def _long(value: Any) -> str:
    """An evaluated value: its repr (the agent asked for it) up to `RESULT_CHARS`, secrets redacted."""
    if isinstance(value, str):
        kept = redact(value[: RESULT_CHARS + _WINDOW])
        if len(value) <= RESULT_CHARS:
            return repr(kept)
        return repr(kept[:RESULT_CHARS]) + f"... (truncated; {len(value)} characters)"
    try:
        text = repr(value)
    except Exception as exc:
        return f"<{type(value).__name__} object; repr() failed: {type(exc).__name__}: {exc}>"
    if len(text) <= RESULT_CHARS:
        return redact(text)
    return redact(text[: RESULT_CHARS + _WINDOW])[:RESULT_CHARS] + f"... (truncated; {len(text)} characters)"


# Evaluation -----------------------------------------------------------------------------------------


def evaluate(
    frame: FrameType, source: str, timeout: float = EVALUATE_TIMEOUT, *, write_back: bool = True
) -> tuple[Any, BaseException | None]:
    """Run ``source`` (an expression, or statements whose last may be an expression) in ``frame``.

    Returns ``(value, None)`` with the value of the last expression (None after a statement), or
    ``(None, exception)`` with the exception it raised.
    Names resolve as in the frame's code, and nested scopes (comprehensions, generator expressions,
    lambdas) see the frame's locals too, because everything runs in one namespace merged from the
    frame's globals and locals; assignments are written back to the frame's locals afterwards.
    """
    source = textwrap.dedent(source).strip("\n")  # a pasted indented line is still one line of code
    try:
        tree = ast.parse(source, _FILENAME, "exec")
    except SyntaxError as exc:
        return None, exc
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    if last is not None:
        tree.body.pop()
    try:
        statements = compile(tree, _FILENAME, "exec") if tree.body else None
        expression = compile(ast.Expression(last.value), _FILENAME, "eval") if last is not None else None
    except (SyntaxError, ValueError) as exc:
        return None, exc
    f_globals = frame.f_globals
    module_level = frame.f_locals is f_globals
    f_locals = frame.f_locals
    namespace = f_globals if module_level else {**f_globals, **f_locals}
    before = None if module_level else dict(namespace)

    def run() -> Any:
        if statements is not None:
            exec(statements, namespace)
        return eval(expression, namespace) if expression is not None else None

    outcome = run_limited(run, timeout)
    if before is not None and write_back:
        _write_back(frame, f_locals, f_globals, before, namespace)
    return outcome


def _write_back(
    frame: FrameType, f_locals: Any, f_globals: dict[str, Any], before: dict[str, Any], after: dict[str, Any]
) -> None:
    """Assignments made in the merged namespace become the frame's locals (as pdb's do)."""
    changed = False
    for name, value in after.items():
        if name == "__builtins__" or (name in before and before[name] is value):
            continue
        f_locals[name] = value
        changed = True
    if changed and sys.version_info < (3, 13):  # 3.13's f_locals writes through (PEP 667)
        ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))


def run_limited(fn: Any, timeout: float) -> tuple[Any, BaseException | None]:
    """``(fn()'s value, None)`` or ``(None, the exception it raised)``; a runaway is interrupted
    after ``timeout`` s.

    The interruption is an asynchronous exception raised in this thread at its next Python
    instruction, so a loop in Python code stops; a single C call that never returns (a sleep, a
    blocking read) cannot be interrupted this way and is waited for.
    """
    thread = threading.get_ident()
    lock = threading.Lock()
    state = {"done": False, "fired": False}

    def fire() -> None:
        with lock:
            if not state["done"]:
                state["fired"] = True
                _async_raise(thread, EvaluationTimeout)

    timer = threading.Timer(timeout, fire)
    timer.daemon = True
    try:
        try:
            timer.start()
            return fn(), None
        except EvaluationTimeout:
            raise
        except BaseException as exc:  # exit(), pytest.skip()/fail(), KeyboardInterrupt: they end nothing
            return None, exc
        finally:
            with lock:
                state["done"] = True
            timer.cancel()
            if state["fired"]:
                _async_raise(thread, None)  # not yet delivered: withdraw it
    except EvaluationTimeout:
        message = f"the expression did not finish within {timeout:g} s and was interrupted"
        return None, EvaluationTimeout(message)


def _async_raise(thread: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(exc) if exc else None)


def _format_error(exc: BaseException) -> str:
    if isinstance(exc, EvaluationTimeout):
        return f"Timed out: {exc}"
    if isinstance(exc, SyntaxError) and exc.filename == _FILENAME:
        return "Syntax error: " + "".join(traceback.format_exception_only(type(exc), exc)).strip()
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != _FILENAME:  # skip this module's frames
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    kind = "Name not found" if isinstance(exc, NameError) else "Error"
    return f"{kind}: {text.strip()[-4000:]}"
