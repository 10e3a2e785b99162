"""A child forked by a test is the test's, not the recorder's.

A test that forks without exec (a `multiprocessing` fork pool or process, ``os.fork``, a daemonizing
helper) copies the test process whole: the recorder's signal handlers, its descriptors (the server's
socket, the helpers' pipes, the spool, the write-ahead copy, the dump file), its plugins and the hooks
it stands in (logging, warnings, pytest's capture), faulthandler's redirection and timer, a tracer,
a coverage collector, and its locks in whatever state the recorder's threads had them. None of that
may act in the child: it must run as it would without the plugin.

Python runs the hooks given to ``os.register_at_fork`` around every such fork (not around
`subprocess`'s fork-exec, which runs nothing of the interpreter's in the child). The parts of the
recorder say here what the child must lose (`restore_signal`, `own`, `in_child`, `around`), and
the hooks registered once a process put it right in every child, first thing. A descriptor is opened
and said to be the recorder's under `owning`, which a fork waits for: the recorder's threads open
files while the test runs (the spool at its first batch), and a fork between the open and the `own`
would copy a descriptor the child does not know to let go.

Signals are blocked across the fork, and this is why: CPython clears every signal that arrives in a
child before its own after-fork work (so that one sent to the parent just before the fork is not
handled twice). A pool's worker that has not run yet when its pool terminates it (on a busy machine,
routinely) receives the SIGTERM on the parent's Python handler, which only notes it; the note is
cleared, the signal is lost, and the worker lives on, waiting for a lock its dead sibling held: the
pool joins it for ever. Blocked in the forking thread before the fork, the signal stays pending in
the child (which inherits the mask) until its handler is the one it had before the recorder; then
unblocked, it takes effect as it would have without the plugin.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

Work = Callable[[], None]

_signals: dict[int, Any] = {}
"""Each signal the recorder handles, and the handler the process had before (what a child gets)."""
_fds: dict[int, tuple[int, int]] = {}
"""The recorder's descriptors, each with the identity (device, inode) of what it is open on."""
_in_child: dict[object, Work] = {}
"""What each part of the recorder undoes in a child, by the part (insertion order: first in, first)."""
_around: dict[object, tuple[Work, Work]] = {}
"""Work done in the parent just before a fork and just after it (a timer cancelled and re-armed)."""
_masks = threading.local()
_registered = False
_opening = threading.RLock()
"""Held while a descriptor of the recorder's is opened and owned (`owning`), and across a fork."""


def restore_signal(signum: int, previous: Any) -> None:
    """The recorder handles ``signum`` now; a child gets ``previous`` back (None: the default)."""
    _signals[signum] = signal.SIG_DFL if previous is None else previous
    _register()


def forget_signal(signum: int) -> None:
    """The recorder gave ``signum`` its handler back."""
    _signals.pop(signum, None)


def own(fd: int) -> None:
    """``fd`` is the recorder's: a child gets /dev/null in its place (it must neither write to the
    recorder's files nor hold its sockets and pipes open: a server, a helper waiting for the end of a
    pipe, would wait for the child too)."""
    try:
        st = os.fstat(fd)
    except OSError:
        return
    _fds[fd] = (st.st_dev, st.st_ino)
    _register()


@contextlib.contextmanager
def owning() -> Iterator[None]:
    """Open descriptors and `own` them inside this block: a fork (from any thread) waits for its end,
    so no child is made between the two. Keep it to the opening: a fork waits as long as it lasts."""
    _register()
    with _opening:
        yield


def disown(fd: int) -> None:
    """``fd`` is about to be closed (or was): it is no longer the recorder's."""
    _fds.pop(fd, None)


def in_child(part: object, work: Work) -> None:
    """In a child, undo what ``part`` does to the process (once a part: a second call replaces it)."""
    _in_child[part] = work
    _register()


def around(part: object, before: Work, after_in_parent: Work) -> None:
    """``before`` just before a fork, ``after_in_parent`` in the parent just after it (both in the
    forking thread): for state the child must not inherit that only the parent can undo."""
    _around[part] = (before, after_in_parent)
    _register()


def forget(part: object) -> None:
    """``part`` is done with the process: nothing of it to undo in later children."""
    _in_child.pop(part, None)
    _around.pop(part, None)


# The hooks -----------------------------------------------------------------------------------------


def _register() -> None:
    """Once a process (and it cannot be undone: with nothing registered the hooks do nothing)."""
    global _registered
    if not _registered:
        _registered = True
        os.register_at_fork(before=_before, after_in_parent=_after_in_parent, after_in_child=_after_in_child)


def _before() -> None:
    _opening.acquire()  # reentrant: a fork made inside `owning` (a helper started there) goes on
    if _signals:
        with contextlib.suppress(ValueError, OSError):
            _masks.previous = signal.pthread_sigmask(signal.SIG_BLOCK, _signals)
    for before, _ in list(_around.values()):
        with contextlib.suppress(Exception):
            before()


def _after_in_parent() -> None:
    for _, after in list(_around.values()):
        with contextlib.suppress(Exception):
            after()
    _unblock()
    _opening.release()


def _after_in_child() -> None:
    """The child: the process as it was before the recorder. The signals' handlers come first and
    their mask last, so a signal that arrived since the fork takes effect on the handler it had."""
    signals, fds, work = dict(_signals), dict(_fds), list(_in_child.values())
    _signals.clear()
    _fds.clear()
    _in_child.clear()
    _around.clear()
    for signum, previous in signals.items():
        with contextlib.suppress(ValueError, OSError, TypeError):
            signal.signal(signum, previous)
    for undo in work:
        with contextlib.suppress(Exception):
            undo()
    if fds:
        _blank(fds)
    _unblock()
    _opening.release()  # the forking thread's hold, copied: the child's one thread is that thread


def _unblock() -> None:
    previous = getattr(_masks, "previous", None)
    if previous is not None:
        _masks.previous = None
        with contextlib.suppress(ValueError, OSError):
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _blank(fds: dict[int, tuple[int, int]]) -> None:
    """/dev/null in place of every descriptor open on what the recorder's are open on (theirs, and the
    copies an `mmap` keeps of them): the numbers stay taken (the recorder's objects in the child would
    close them one day; closed now, one could be the child's own file by then), what they were open
    on is let go."""
    identities = set(fds.values())
    try:
        candidates = [int(name) for name in os.listdir(_FD_DIR)]
    except (OSError, ValueError):
        candidates = list(fds)
    try:
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return
    try:
        for fd in candidates:
            try:
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) in identities:  # not a number the test has reused since
                    os.dup2(null, fd, inheritable=False)
            except OSError:
                continue
    finally:
        os.close(null)


_FD_DIR = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"
