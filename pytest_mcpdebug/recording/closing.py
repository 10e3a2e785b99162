"""The recording's end: the run's last events delivered and counted, its plugins gone, the closing line.

A mixin of `recorder.Recorder`, which owns the state (declared here) and starts the recording. At the
session's finish the run's end is emitted and the recording's plugins leave pytest (the environment
the recorder set is restored). Connected to a server, the sender delivers the last events while pytest
writes its summary and `close`, at the summary's end, waits for them; spooling, it closes at once.
`close` counts what was sent, spooled or dropped, for the closing line (`tally`) or, in an xdist
worker (closed at its session's finish), for its controller.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpdebug import forks
from pytest_mcpdebug.folder import coverage_parts, dir_arg, display, spool_dir
from pytest_mcpdebug.hangs.leaks import exit_now
from pytest_mcpdebug.plugin_object import PluginObject
from pytest_mcpdebug.recording import code_version
from pytest_mcpdebug.recording import diagnosis as diagnosis_parts
from pytest_mcpdebug.recording.tally import WORKER_KEY, Tally

if TYPE_CHECKING:
    from pytest_mcpdebug.failures.hold import Inspector
    from pytest_mcpdebug.hangs.timeouts import Timeouts
    from pytest_mcpdebug.output.tail import OutputTail
    from pytest_mcpdebug.output.written import WriteWatch
    from pytest_mcpdebug.recording.relay import Relays
    from pytest_mcpdebug.recording.reporter import Reporter
    from pytest_mcpdebug.recording.sender import Sender
    from pytest_mcpdebug.recording.via_controller import ChannelSpool
    from pytest_mcpdebug.settings import DiagnosisSettings

# The names the recorder registers its parts under (`in_child.PREFIX`), and unregisters them by here.
REPORTER_PLUGIN = "mcpdebug-reporter"
TAIL_PLUGIN = "mcpdebug-output"
INSPECTOR_PLUGIN = "mcpdebug-inspector"
TIMEOUTS_PLUGIN = "mcpdebug-timeouts"
HANG_SUMMARY_PLUGIN = "mcpdebug-hangs"


class Closing(PluginObject):
    """The end of a recording (a mixin of `recorder.Recorder`, which sets these)."""

    config: pytest.Config
    run_id: str
    process: str
    dir: Path
    diagnosis: DiagnosisSettings
    sender: Sender
    tally: Tally
    reporter: Reporter | None
    tail: OutputTail | None
    inspector: Inspector | None
    timeouts: Timeouts | None
    session: pytest.Session | None
    relays: Relays | None
    channel_spool: ChannelSpool | None
    written: WriteWatch | None
    _code_version: threading.Thread | None
    _diagnosis_parts: list[tuple[Any, str]]
    _environ: dict[str, str | None]
    _closed: bool
    _stopped: bool
    _last_url: str | None
    _warned: int
    _emptied: int

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.reporter is None:
            return
        if self.tail is not None:
            self.tail.stop()
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if self._code_version is not None:
            self._code_version.join(code_version.GIT_TIMEOUT + 1.0)
        self.reporter.emit_finish(exitstatus, getattr(terminal, "stats", None))
        self.session = session
        if self.reporter.role == "worker":  # xdist sends its counts to the controller after this hook
            if self.channel_spool is not None and self.diagnosis.coverage:  # to the controller's store
                self.channel_spool.ship(coverage_parts(self.dir, self.run_id) / f"{self.process}.coverage")
            self.close()
            return
        self._stop_recording()
        if self.sender.connected:
            # The sender thread delivers the last events, and the server stores them, while pytest
            # writes its summary: the wait for the end comes at the summary's end (`close`).
            self.sender.finish()
        else:  # spooling: nothing to wait for, and a thread finishing beside the summary takes its GIL
            self.close()

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.reporter is None or self.reporter.role == "worker":
            return
        self.close()
        for line, warn in self.tally.summary(
            self.run_id,
            warnings=self.sender.warnings[self._warned :],
            emptied=self._emptied,
            url=self.sender.connected_url or self._last_url,
            spool=self._spool_display(),
            dir_arg=self._dir_arg(),
            program=self._program(),
        ):
            terminalreporter.write_line(line, yellow=warn)

    def close(self) -> None:
        """Everything recorded reaches the server (acknowledged) or the spool, counted for the closing
        line; the recording's plugins go. Called by the summary, the HTML report and unconfigure."""
        if self._closed:
            return
        self._closed = True
        forks.forget(self)
        self._stop_recording()
        self._last_url = self.sender.connected_url
        sender = self.sender
        sender.close()
        if self.written is not None:  # after the ticker: the helper read it
            self.written.close()
        counts = {"sent": sender.acked, "spooled": sender.spooled, "dropped": sender.dropped}
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            broken = self.channel_spool.broken if self.channel_spool is not None else None
            workeroutput[WORKER_KEY] = {**counts, "problem": sender.spool.problem, "note": broken}
        self.tally.add(**counts, problem=sender.spool.problem)
        if self.relays is not None:  # remote workers' events, delivered here
            self.relays.close(self.tally)

    def _stop_recording(self) -> None:
        """At session finish: the recording's plugins go (not the sender), the environment is restored."""
        if self._stopped:
            return
        self._stopped = True
        for name, value in self._environ.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if self.tail is not None:
            self.tail.stop()
            self._emptied = self.tail.emptied
            self.config.pluginmanager.unregister(name=TAIL_PLUGIN)
            self.tail = None
            if self.reporter is not None:
                self.reporter.tail = None
        if self.inspector is not None:
            self.config.pluginmanager.unregister(name=INSPECTOR_PLUGIN)
        if self.timeouts is not None:
            self.timeouts.close()
            self.config.pluginmanager.unregister(name=TIMEOUTS_PLUGIN)
        diagnosis_parts.stop(self.config, self._diagnosis_parts)
        if self.reporter is not None:
            self.config.pluginmanager.unregister(name=REPORTER_PLUGIN)

    def exit_if_stuck(self) -> None:
        """After the session: end the processes hung tests left running (they would hold the exit, or
        the run's output pipe); then, if threads they leaked would hold the interpreter at exit (non-
        daemon, still blocked), end the process now with pytest's exit status (not an xdist worker)."""
        timeouts, session, reporter = self.timeouts, self.session, self.reporter
        if timeouts is None or session is None or reporter is None:
            return
        if ended := timeouts.leaks.end_processes():
            message = f"mcpdebug: ended what hung tests left running: {'; '.join(ended)}\n"
            with contextlib.suppress(OSError):
                os.write(2, message.encode("utf-8", "replace"))
        if reporter.role != "main":
            return
        if stuck := timeouts.leaks.stuck():
            exit_now(int(session.exitstatus), stuck, 2)

    # What the closing line (and `Recorder`'s start warnings) name ---------------------------------

    def _spool_display(self) -> str:
        return display(spool_dir(self.dir), Path(self.config.invocation_params.dir)) + "/"

    def _dir_arg(self) -> str:
        """`` --dir X`` when a `mcpdebug` command started where pytest was would not find the store."""
        return dir_arg(self.dir, Path(self.config.invocation_params.dir))

    def _program(self) -> str:
        """`mcpdebug`, or the path that runs it from where pytest was started (a `.venv/` not on PATH)."""
        from pytest_mcpdebug.commands import program

        return program("mcpdebug", Path(self.config.invocation_params.dir))
