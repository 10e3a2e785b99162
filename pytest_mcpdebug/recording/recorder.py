"""The per-process recorder: owns the sender and the reporter, and talks to the terminal.

Registered by `plugin.py` only when recording is on: in the controlling process from the options,
and in each xdist worker from what the controller put in ``workerinput``. It starts the recording's
parts at the session's start; their end (the session's finish, the closing line) is `closing`'s.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpdebug import forks
from pytest_mcpdebug.folder import (
    PARENT_RUN_ENV,
    PARENT_WORKER_ENV,
    RESUME_ENV,
    SERVER_FILE,
    ensure_dir,
    read_server_info,
    spool_dir,
)
from pytest_mcpdebug.hangs import gil_dump
from pytest_mcpdebug.hangs.timeouts import Timeouts
from pytest_mcpdebug.limits import MAX_LINE_LENGTH
from pytest_mcpdebug.options import DEFAULT_BREAK_TIMEOUT
from pytest_mcpdebug.output.tail import TICK, OutputTail
from pytest_mcpdebug.plugin_object import register
from pytest_mcpdebug.protocol.versions import HELLO_VERSION
from pytest_mcpdebug.recording import brief, ci_environment, code_version, in_child
from pytest_mcpdebug.recording import diagnosis as diagnosis_parts
from pytest_mcpdebug.recording.ci_environment import slug
from pytest_mcpdebug.recording.closing import (
    HANG_SUMMARY_PLUGIN,
    INSPECTOR_PLUGIN,
    REPORTER_PLUGIN,
    TAIL_PLUGIN,
    TIMEOUTS_PLUGIN,
    Closing,
)
from pytest_mcpdebug.recording.colocate import Colocation
from pytest_mcpdebug.recording.connection import CONNECT_TIMEOUT, HANDSHAKE_TIMEOUT, preload, split_token
from pytest_mcpdebug.recording.link import Identity
from pytest_mcpdebug.recording.reporter import ControllerProgress, Reporter, Role
from pytest_mcpdebug.recording.run_id import new_run_id
from pytest_mcpdebug.recording.sender import Sender
from pytest_mcpdebug.recording.spool import RETRIED, describe_failure, spool_file_name
from pytest_mcpdebug.recording.tally import WORKER_KEY, Tally
from pytest_mcpdebug.recording.ticker import OUTPUT_WRITTEN, Ticker
from pytest_mcpdebug.settings import DiagnosisSettings, HangSettings, Settings

if TYPE_CHECKING:
    from pytest_mcpdebug.failures.hold import Inspector
    from pytest_mcpdebug.hangs.summary import HangSummary
    from pytest_mcpdebug.output.written import WriteWatch
    from pytest_mcpdebug.recording.relay import Relays
    from pytest_mcpdebug.recording.via_controller import ChannelSpool


class Recorder(Closing):
    def __init__(
        self,
        config: pytest.Config,
        *,
        run_id: str,
        worker: str,
        directory: Path,
        url: str | None,
        token: str | None,
        max_line_length: int = MAX_LINE_LENGTH,
        break_on_failure: bool = False,
        break_timeout: float = DEFAULT_BREAK_TIMEOUT,
        hangs: HangSettings | None = None,
        session_started: float | None = None,
        resumed: dict[str, Any] | None = None,
        diagnosis: DiagnosisSettings | None = None,
        shard: str = "",
    ) -> None:
        self.config = config
        self.resumed = resumed
        """What the process this one replaces handed on (`hangs.resume`), or None."""
        self.generation = int(resumed.get("generation", 0)) if resumed else 0
        self.run_id = run_id
        self.worker = worker
        self.dir = directory
        self.url = url
        self.token = token
        self.max_line_length = max_line_length
        self.break_on_failure = break_on_failure
        self.break_timeout = break_timeout
        self.hangs = hangs or HangSettings()
        self.diagnosis = diagnosis or DiagnosisSettings()
        self._diagnosis_parts: list[tuple[Any, str]] = []
        self._code_version: threading.Thread | None = None
        self.session_started = session_started if session_started is not None else time.time()
        self.shard = shard  # a CI shard's label: in its process's and workers' names (`qualified`)
        # A replacement keeps the pid (execv): its process name must differ for the store to take it.
        suffix = f"_r{self.generation}" if self.generation else ""
        self.process = f"{worker}{suffix}-{os.getpid()}" + (f"-{slug(shard)}" if shard else "")
        self.sender = Sender(
            hello=Identity(HELLO_VERSION, run_id, self.process, self.qualified(worker), os.getpid()),
            spool_path=spool_dir(directory) / spool_file_name(run_id, self.process),
            discover=self._discover,
            interval=TICK,
        )
        self.sender.colocation = Colocation()
        try:
            ensure_dir(directory)
        except OSError as exc:  # a file in the way, no permission, a read-only or full disk
            if exc.errno not in RETRIED or not directory.is_dir():
                self.sender.spool.disable(describe_failure(exc, self.sender.spool.path))
        self.tally = Tally()
        self.reporter: Reporter | None = None
        self.tail: OutputTail | None = None
        self.inspector: Inspector | None = None
        self.timeouts: Timeouts | None = None
        self.hang_summary: HangSummary | None = None
        self._closed = self._stopped = False
        self._last_url: str | None = None
        self._warned = 0
        self._emptied = 0  # times another reader emptied pytest's capture (the output tail's count)
        self.session: pytest.Session | None = None
        self.relays: Relays | None = None  # the controller's end of its workers' channels (`relay`)
        self.channel_spool: ChannelSpool | None = None  # a worker's, when it cannot reach the store
        self.written: WriteWatch | None = None  # such a worker's watch of pytest's capture files
        self._carried_hangs: list[tuple[str, str]] = []
        # A service a test starts with `mcpdebug run` (or mcpdebug_process) is linked to this run.
        self._environ = {name: os.environ.get(name) for name in (PARENT_RUN_ENV, PARENT_WORKER_ENV)}
        os.environ[PARENT_RUN_ENV], os.environ[PARENT_WORKER_ENV] = run_id, worker
        forks.in_child(self, functools.partial(in_child.forget, self))  # a forked child: nothing of it acts

    @classmethod
    def for_controller(cls, config: pytest.Config, settings: Settings) -> Recorder:
        resumed = None
        if os.environ.get(RESUME_ENV):  # a replacement process: only then is `hangs.resume` imported
            from pytest_mcpdebug.hangs import resume

            resumed = resume.load()
        return cls(
            config,
            resumed=resumed,
            run_id=(resumed or {}).get("run_id") or settings.run_id or new_run_id(),
            worker="main",
            directory=settings.dir,
            url=settings.url,
            token=settings.token,
            max_line_length=settings.max_line_length,
            break_on_failure=settings.break_on_failure,
            break_timeout=settings.break_timeout,
            hangs=settings.hangs,
            diagnosis=settings.diagnosis,
            shard=settings.shard,
        )

    def qualified(self, worker: str) -> str:
        """A worker's name as recorded: ``linux-3:gw0`` in a shard, else as xdist names it."""
        return f"{self.shard}:{worker}" if self.shard else worker

    @classmethod
    def for_worker(cls, config: pytest.Config, shared: dict[str, Any]) -> Recorder:
        workerid = str(config.workerinput["workerid"])  # type: ignore[attr-defined]
        from pytest_mcpdebug.recording import worker_input  # xdist only

        recorder = cls(config, worker=workerid, **worker_input.options(shared))
        if shared.get("channel") is not None:  # another host's worker sends through it (`via_controller`)
            worker_input.through_controller(recorder, shared)
        return recorder

    def _discover(self) -> tuple[str, str] | None:
        if self.url:
            url, token = split_token(self.url)
            return url, self.token or token
        info = read_server_info(self.dir)
        return (info.url, info.token) if info else None

    # Hooks --------------------------------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist: hand the run id and server details to each worker, and a channel of its gateway
        for its events should it not reach the store (another host: `relay`)."""
        from pytest_mcpdebug.recording import relay, worker_input

        self.relays = self.relays or relay.Relays(self.dir, self._discover, self.sender.warnings)
        node.workerinput["mcpdebug"] = {**worker_input.shared(self), **self.relays.hand_over(node)}

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist: a worker ended; take the counts it recorded (none if it died)."""
        output = getattr(node, "workeroutput", None) or {}
        self.tally.add_worker(str(getattr(node.gateway, "id", "?")), output.get(WORKER_KEY))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        role: Role
        if self.worker != "main":
            role = "worker"
        elif self.config.pluginmanager.has_plugin("dsession"):
            role, self.worker = "controller", "controller"
        else:
            role = "main"
        if self._discover():  # preload: websockets' client, which the first attempt needs
            preload()
        self.sender.start(0.0)  # its first attempt, connecting, goes on during collection
        self.reporter = Reporter(
            sender=self.sender,
            run_id=self.run_id,
            process=self.process,
            worker=self.qualified(self.worker),
            role=role,
            shard=self.shard,
        )
        register(self.config, self.reporter, REPORTER_PLUGIN)
        numprocesses = getattr(self.config.option, "numprocesses", None)
        self.reporter.emit_start(self.config, numprocesses if isinstance(numprocesses, int) else 0)
        if role != "worker":
            self._code_version = code_version.start(Path(self.config.rootpath), self._emit_code_version)
        self._diagnosis_parts = diagnosis_parts.start(
            self.config, self.diagnosis, reporter=self.reporter, directory=self.dir, warn=self._write_line
        )
        if role != "controller":  # the controller runs no tests; its workers send their own output
            self.tail = OutputTail(
                self.config,
                emit=self.reporter.emit,
                wait_for_room=self.sender.wait_for_room,
                worker=self.qualified(self.worker),
                max_line=self.max_line_length,
            )
            register(self.config, self.tail, TAIL_PLUGIN)
            self.tail.start()
            self.reporter.tail = None if self.tail.ends_tests else self.tail
            self.tail.on_begin = self.reporter.begin
            self.sender.on_tick = self._tick
            if self.channel_spool is not None:  # pushed to the controller as written, not each tick
                from pytest_mcpdebug.output.written import WriteWatch

                self.written = self.tail.written = WriteWatch.start()
        # Every process, the controller too: it keeps the session timeout and records kills.
        dump = (
            None
            if role == "controller"
            else self.dir / "hangs" / gil_dump.dump_name(self.run_id, self.process)
        )
        self.timeouts = Timeouts(
            config=self.config,
            settings=self.hangs,
            reporter=self.reporter,
            sender=self.sender,
            tail=self.tail,
            dump_path=dump,
            session_started=self.session_started,
            directory=self.dir,
            generation=self.generation,
        )
        register(self.config, self.timeouts, TIMEOUTS_PLUGIN)
        if self.reporter.dump is not None:  # the sender thread sleeps until a test is a tick old
            written = self.written.fd if self.written is not None else None
            self.sender.start_ticker = functools.partial(
                Ticker.start, self.reporter.dump.path, self.dir / SERVER_FILE, TICK, written
            )
            if written is not None:  # the helper now, not after a first interval: the first test's lines
                self.sender.poke()
        if role != "controller":  # the controller of xdist workers runs no test
            self.sender.later = self.reporter.use_msgspec_soon
        if role == "controller":
            register(self.config, ControllerProgress(self.reporter), ControllerProgress.NAME)
        if self.resumed is not None and role == "main":
            self._resume(self.resumed, session)
        if role == "controller" or self.resumed is not None:  # crashed xdist workers; earlier hangs
            self._summarise_hangs()
        elif role == "main":
            self.timeouts.on_timed = self._summarise_hangs  # only a timed run can have hangs to list
        brief.start(self)  # what each failure adds to pytest's output, after its summary
        pauses = self.hangs.action == "pause"
        if (self.break_on_failure or pauses) and role != "controller":
            self._start_hold(session)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """Before the first test: the sender's first connection attempt (started at the session's
        start, made during collection) is over, so a failing test knows whether a server can hold it,
        and the start's warnings are said (a run that ends before this says them in its summary). A run
        that holds its failures or hangs waits for the whole attempt: it needs the server to hold."""
        if self.reporter is None:
            return
        holds = self.break_on_failure or self.hangs.action == "pause"
        self.sender.first_attempt(HANDSHAKE_TIMEOUT if holds else CONNECT_TIMEOUT)
        if "msgspec" in sys.modules:  # a connection's handshake loaded it: the faster encoder is free
            self.reporter.use_msgspec()
        if self.reporter.role != "worker":
            self._say_start_warnings()

    def _start_hold(self, session: pytest.Session) -> None:
        """The live hold of failing (--mcp-debug-break) or hung (pause action) tests."""
        from pytest_mcpdebug.failures.hold import Inspector

        assert self.reporter is not None and self.timeouts is not None
        self.inspector = Inspector(
            config=self.config,
            reporter=self.reporter,
            sender=self.sender,
            timeout=self.break_timeout,
            watchdog=self.timeouts.watchdog,
        )
        self.inspector.breaks = self.break_on_failure
        self.inspector.session = session
        self.timeouts.watchdog.on_pause = self.inspector.hold_target
        register(self.config, self.inspector, INSPECTOR_PLUGIN)

    def _say_start_warnings(self) -> None:
        self._warned = len(self.sender.warnings)
        for warning in self.sender.warnings:
            fallback = "" if self.sender.spool.problem else f"; recording to {self._spool_display()}"
            self._write_line(f"mcpdebug: warning: {warning}{fallback}")
        if self.break_on_failure and not self.sender.connected:
            serve = f"{self._program()} serve{self._dir_arg()}"
            self._write_line(
                "mcpdebug: --mcp-debug-break: no mcpdebug server is connected, so failing tests will not "
                f"be held (start `{serve}` first, or let an agent call run_tests)"
            )
        elif self.break_on_failure and self.config.getvalue("usepdb"):
            self._write_line("mcpdebug: --mcp-debug-break: --pdb takes the failures; none will be held")

    def _summarise_hangs(self) -> None:
        from pytest_mcpdebug.hangs.summary import ControllerHangSummary, HangSummary

        assert self.reporter is not None and self.timeouts is not None
        if self.hang_summary is None:
            summary = ControllerHangSummary if self.reporter.role == "controller" else HangSummary
            self.hang_summary = summary(reporter=self.reporter, directory=self.dir, leaks=self.timeouts.leaks)
            self.hang_summary.hangs.extend(self._carried_hangs)
            register(self.config, self.hang_summary, HANG_SUMMARY_PLUGIN)

    def _tick(self) -> float | None:
        """The sender thread's periodic look (`Sender.on_tick`): a test a tick old or more is announced
        and what it wrote is read; a younger one is left until it is that old (returned: seconds until
        then, see `TICK`), so quick tests cost the look no read (each a GIL hand-over)."""
        reporter, tail = self.reporter, self.tail
        if reporter is not None:
            younger = reporter.younger_than(TICK)
            if younger is None:
                reporter.announce()
            elif OUTPUT_WRITTEN not in self.sender.poked_by:  # else read: its output is pushed (`written`)
                return younger
        if tail is not None:
            tail.tick()
        return None

    def _emit_code_version(self, commit: str, changes: str, note: str) -> None:
        """In `code_version`'s thread: the code, and what the run ran in (its environment, its CI job)."""
        if self.reporter is not None and not self._closed:
            context = ci_environment.context(self.shard)
            self.reporter.emit_plain("code_version", commit=commit, changes=changes, note=note, **context)

    def _resume(self, state: dict[str, Any], session: pytest.Session) -> None:
        """This process replaces one whose test could not be stopped: leave out what it ran."""
        from pytest_mcpdebug.hangs import resume

        assert self.timeouts is not None and self.reporter is not None
        carried = resume.resume_into(self.config, state, session, self.reporter)
        self.timeouts.carried, leaks, self._carried_hangs = carried
        self.timeouts.leaks.found.extend(leaks)

    # Helpers --------------------------------------------------------------------------------------

    def _write_line(self, text: str) -> None:
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            terminal.write_line(text, yellow=True)
        else:
            print(text, file=sys.stderr)
