"""Tools over processes (seed 004): start_process, control_process, send_stdin.

A process session is any process or log source recorded beside the test runs: one this server
started (`start_process`), a command wrapped by `mcpdebug run`, or a source read by `mcpdebug
forward`. `list_sessions` lists them, `get_logs` reads them with test runs merged in time order,
`get_output` and `search_output` take a session's label as ``run_id``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal, TypeVar

import anyio.to_thread
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from mcpdebug.processes.managed import ProcessError, ProcessManager
from mcpdebug.replies import ProcessControl, ProcessSession, StartedProcess, StdinSent
from mcpdebug.store.output_query import OutputError
from mcpdebug.tools.annotations import RUNS_CODE
from mcpdebug.tools.args import Example
from mcpdebug.tools.context import ToolContext, ToolGroup, tool
from mcpdebug.views import lookup
from mcpdebug.views import processes as processes_view

T = TypeVar("T")
Restart = Literal["no", "on-failure", "always"]
SignalName = Literal["SIGTERM", "SIGKILL", "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2"]
Label = Annotated[
    str,
    Field(
        min_length=1,
        description="A process session's label, as start_process or list_sessions gives it (its newest "
        "session with that label), or its run id.",
    ),
    Example('"web"'),
]


class ProcessTools(ToolGroup):
    group: ClassVar[str] = "processes"

    def __init__(self, context: ToolContext) -> None:
        super().__init__(context)
        self.processes: ProcessManager = context.processes

    # All three run code here: a restart runs the command again, stdin may feed a shell.
    @tool(RUNS_CODE)
    async def start_process(
        self,
        command: Annotated[
            str | list[str],
            Field(
                description='The command: a string, split as a shell would but run without one ("python '
                'server.py --port 8000"), or a list of arguments.'
            ),
            Example('"python server.py --port 8000"'),
        ],
        label: Annotated[
            str | None,
            Field(
                min_length=1,
                description="The session's name in get_logs and control_process. Default: the program's name "
                "(server for python server.py); a name in use gets -2, -3, ...",
            ),
            Example('"web"'),
        ] = None,
        cwd: Annotated[
            str | None,
            Field(
                min_length=1,
                description="Its working folder. Default: the project (the .mcpdebug folder's parent).",
            ),
            Example('"services/api"'),
        ] = None,
        env: Annotated[
            dict[str, str] | None,
            Field(
                description="Variables added to the server's environment (PYTHONUNBUFFERED=1 is set "
                "unless given)."
            ),
            Example('{"PORT": "8000"}'),
        ] = None,
        restart: Annotated[
            Restart,
            Field(
                description="Start it again when it exits: on-failure after a non-zero status or a crash, "
                "always after any exit (not after control_process stops it). Default: no."
            ),
            Example('"on-failure"'),
        ] = "no",
        startup_seconds: Annotated[
            float,
            Field(
                ge=0, le=60, description="How long to collect its first output before replying. Default: 2."
            ),
            Example("5"),
        ] = 2.0,
    ) -> StartedProcess:
        """Start a process (a service a test talks to) as a managed session: its output is recorded live.

        Replies with its label, pid, status and the output of its first seconds. It stops when this
        server stops. Read more with get_logs(labels=[label]); restart or signal it with
        control_process, write to its stdin with send_stdin.
        """
        try:
            session = await self.processes.start(
                command, label=label, cwd=cwd, env=env, restart=restart, startup_seconds=startup_seconds
            )
        except ProcessError as exc:
            raise ToolError(str(exc)) from None
        connected = self.sessions.connected_runs()

        def build() -> StartedProcess:
            output = processes_view.startup_output(self.store, session)
            state = processes_view.status(session, connected)
            headline = f"Started {session['label']}: {state}" + (
                f", pid {session['pid']}" if state == "running" else f" ({session['message']})"
            )
            text = processes_view.report(session, connected, output, headline)
            return StartedProcess(session=_session(session, connected), output=output, text=text)

        return await self._build(build)

    @tool(RUNS_CODE)
    async def control_process(
        self,
        label: Label,
        action: Annotated[
            Literal["restart", "signal"],
            Field(
                description="restart: stop it (SIGTERM, then SIGKILL after 5 s) and start it again; "
                "signal: send `signal`."
            ),
            Example('"restart"'),
        ],
        signal: Annotated[
            SignalName,
            Field(
                description="The signal for action=signal, sent to its process group. SIGTERM, SIGINT "
                "and SIGKILL stop it for good (whatever its restart policy). Default: SIGTERM."
            ),
            Example('"SIGUSR1"'),
        ] = "SIGTERM",
    ) -> ProcessControl:
        """Restart a process session's process, or send it a signal; replies with the acknowledgment.

        Works on managed processes and `mcpdebug run` sessions while their runner is connected.
        """
        session = await self._find(label)
        arguments: dict[str, Any] = {"signal": signal} if action == "signal" else {}
        try:
            result = await self.processes.control(session, action, arguments)
            after = await self.processes.settled(
                session["run_id"],
                new_pid=result.get("pid") if action == "restart" else None,
                signal_name=signal if action == "signal" else "",
            )
        except ProcessError as exc:
            raise ToolError(str(exc)) from None
        connected = self.sessions.connected_runs()
        state = processes_view.status(after, connected)
        message = f"{session['label']}: {result.get('message', action)}; now {state}"
        if state in ("stopped", "crashed") and after["message"]:
            message += f" ({after['message']})"
        return ProcessControl(
            success=True,
            message=message,
            action=action,
            signal=signal if action == "signal" else None,
            pid=result.get("pid"),
            old_pid=result.get("old_pid"),
            session=_session(after, connected),
        )

    @tool(RUNS_CODE)
    async def send_stdin(
        self,
        label: Label,
        input: Annotated[
            str,
            Field(
                description='Text written to its stdin as given (end a line with "\\n" for a line reader).'
            ),
            Example('"yes\\n"'),
        ],
    ) -> StdinSent:
        """Write text to a process session's stdin; replies with the bytes sent.

        Its answer shows in get_logs(labels=[label]) as it prints it.
        """
        session = await self._find(label)
        try:
            result = await self.processes.control(session, "stdin", {"input": input})
        except ProcessError as exc:
            raise ToolError(str(exc)) from None
        sent = int(result.get("bytes", 0))
        return StdinSent(
            success=True,
            message=f"{sent} bytes written to the stdin of {session['label']} (pid {result.get('pid')})",
            bytes_sent=sent,
            label=session["label"],
            pid=result.get("pid"),
        )

    async def _find(self, label: str) -> dict[str, Any]:
        return await self._build(lambda: processes_view.find(self.store, label))

    async def _build(self, fn: Callable[[], T]) -> T:
        def call() -> T:
            lookup.refresh(self.store)
            try:
                return fn()
            except (lookup.NotFound, OutputError) as exc:
                raise ToolError(str(exc)) from None

        return await anyio.to_thread.run_sync(call)


def _session(session: dict[str, Any], connected: set[str]) -> ProcessSession:
    return ProcessSession(**processes_view.row(session, connected))
