"""Code run only to *show* a failure is not code the test ran.

When an assertion fails, pytest's rewritten ``assert`` calls ``repr``, ``==`` and ``len`` on the
compared objects to explain it, unittest formats its message (``safe_repr``, ``pprint``), and pytest
then builds the report (the traceback's reprs, this plugin's snapshot of the locals). All of that
runs the project's ``__repr__``, ``__eq__`` and ``__len__`` in failing tests only, so a spectrum
ranking would put them first.

So while a failure is rendered the coverage context is ``<node id>|render``: kept apart (the data
reader leaves it out of the test's lines), never mixed into the test's. Two kinds of moment:

- the helpers the rewritten ``assert`` and unittest's assert methods call to explain a failure
  (wrapped while coverage is recorded): render for the length of the call, then back, so a test
  that catches the ``AssertionError`` or a ``subTest`` that goes on still counts what it runs;
- the report of a failed phase (``pytest_runtest_makereport`` and everything up to the next phase:
  the traceback, ``pytest_exception_interact``'s snapshot): render until the next phase starts.
"""

from __future__ import annotations

import contextlib
import functools
import types
from collections.abc import Callable, Iterator
from typing import Any, Final

RENDER_SUFFIX: Final = "|render"

_REWRITE_HELPERS: Final = (
    "_saferepr",
    "_format_assertmsg",
    "_format_boolop",
    "_call_reprcompare",
    "_format_explanation",
)
"""What ``@pytest_ar.<name>`` calls in a rewritten assert's failure branch (never when it passes)."""
_UNITTEST_HELPERS: Final = ("safe_repr", "_common_shorten_repr")


class Rendering:
    """Switches the context of a recorder around failure rendering.

    ``switch(context)`` makes ``context`` current and returns the one it replaced (coverage.py's
    ``Coverage.switch_context`` does, and so does this package's own line recorder).
    """

    def __init__(self, switch: Callable[[str], str | None]) -> None:
        self._switch = switch
        self.test: str | None = None
        """The running test's own context; None between tests (nothing to keep apart)."""
        self._depth = 0
        self._reporting: str | None = None
        """The context to go back to when the next phase starts (a failed phase is being reported)."""
        self._patched: list[tuple[Any, str, Any]] = []

    # The test's context -------------------------------------------------------------------------------

    def begin(self, context: str) -> None:
        self.test = context
        self._reporting = None
        self._depth = 0

    def end(self) -> None:
        self.test = None
        self._reporting = None

    def report_failure(self) -> None:
        """A phase failed: what runs until the next phase is the report."""
        if self.test is None or self._reporting is not None:
            return
        previous = self._switch(self.test + RENDER_SUFFIX)
        self._reporting = previous if previous else self.test

    def next_phase(self) -> None:
        if self._reporting is not None:
            self._switch(self._reporting)
            self._reporting = None

    @contextlib.contextmanager
    def showing(self) -> Iterator[None]:
        """While an assertion explains itself."""
        if self.test is None or self._reporting is not None or self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._depth += 1
        previous = self._switch(self.test + RENDER_SUFFIX)
        try:
            yield
        finally:
            self._depth -= 1
            self._switch(previous if previous else self.test)

    # The helpers --------------------------------------------------------------------------------------

    def install(self) -> None:
        """Wrap the helpers (undone by `uninstall`): only while coverage is recorded."""
        from _pytest.assertion import rewrite

        for name in _REWRITE_HELPERS:
            self._wrap(rewrite, name)
        import unittest.case as case

        for name in _UNITTEST_HELPERS:
            self._wrap(case, name)
        self._wrap(case.TestCase, "_formatMessage", method=True)
        pprint = getattr(case, "pprint", None)
        if isinstance(pprint, types.ModuleType) and callable(getattr(pprint, "pformat", None)):
            # unittest's diffs call `pprint.pformat`: a stand-in for its name in unittest.case only
            stand_in = types.SimpleNamespace(**vars(pprint))
            stand_in.pformat = self._wrapped(pprint.pformat)
            self._patched.append((case, "pprint", pprint))
            setattr(case, "pprint", stand_in)  # noqa: B010 - not an attribute unittest.case declares

    def uninstall(self) -> None:
        while self._patched:
            owner, name, original = self._patched.pop()
            setattr(owner, name, original)

    def _wrap(self, owner: Any, name: str, *, method: bool = False) -> None:
        original = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
        if not callable(original):
            return
        self._patched.append((owner, name, original))
        setattr(owner, name, self._wrapped(original))

    def _wrapped(self, function: Callable[..., Any]) -> Callable[..., Any]:
        showing = self.showing

        @functools.wraps(function)
        def explaining(*args: Any, **kwargs: Any) -> Any:
            with showing():
                return function(*args, **kwargs)

        return explaining


def is_rendering(context: str) -> bool:
    return context.endswith(RENDER_SUFFIX)
