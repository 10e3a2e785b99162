"""Debug sessions: the server as a DAP client of debugpy, for scripts and for pytest runs.

`dap` speaks the protocol, `debuggee` starts, attaches to and ends the debugged process, `session` is
one session (its state, stops, execution; `changes` wakes its waiters), `stops` is what a stop holds,
`inspect` reads a paused debuggee, `breakpoints` and `watches` are what an agent sets, `output` stores
a script's output, and `manager` holds every session.
"""


class DebugError(Exception):
    """What a debug tool cannot do now; the message says why and what to call instead."""
