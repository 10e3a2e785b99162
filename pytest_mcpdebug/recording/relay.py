"""The controller's end of its workers' channels: a remote worker's events delivered as its own.

xdist gives the controller each worker's execnet gateway before the worker starts
(``pytest_configure_node``); `Relays.open` opens a channel on it, handed to the worker in
``workerinput``. A worker that cannot reach the store sends its spool lines there
(`via_controller`); execnet calls `Relay.receive` with each message in its receiving thread, in the
order they were sent. The lines go to a `Sender` of the worker's identity (its run, process and
pid), the same one a local worker has: streamed to the server when one is connected, else appended
to the spool file the worker would have written, here, in the controller's store; each message pokes
that sender (`Sender.poke`), so it is delivered as it arrives, not at the sender's next wake-up.
Nothing is opened until a worker says hello: a run whose workers all reach the store pays for the
channels only.

What execnet delivered is the controller's: a worker killed mid-run loses only what it had not sent.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from pathlib import Path, PurePosixPath
from typing import Any, Final

from pytest_mcpdebug.folder import COVERAGE_DIR, spool_dir
from pytest_mcpdebug.protocol.plain import Encoded
from pytest_mcpdebug.protocol.versions import HELLO_VERSION
from pytest_mcpdebug.recording.link import Discover, Identity
from pytest_mcpdebug.recording.sender import RECONNECT_INTERVAL, Sender
from pytest_mcpdebug.recording.spool import spool_file_name
from pytest_mcpdebug.recording.tally import Tally
from pytest_mcpdebug.recording.via_controller import EVENTS, FILE, HELLO, controller_side

INTERVAL: Final = RECONNECT_INTERVAL / 4
"""How often a relay's sender wakes by itself (to look for a server started mid-run): each message
that arrives pokes it (`Sender.poke`), so a remote worker's lines are delivered as they come, and a
flood of them wakes it no more than the messages do."""
_END: Final = object()


class Relays:
    """Every worker's channel of one controller, and the relays of those that used it."""

    def __init__(self, directory: Path, discover: Discover, warnings: list[str]) -> None:
        self.dir = directory
        self.discover = discover
        self.warnings = warnings
        self._relays: list[Relay] = []
        self._lock = threading.Lock()

    def hand_over(self, node: Any) -> dict[str, Any]:
        """What the worker gets in ``workerinput["mcpdebug"]`` besides the settings: its channel and
        what tells it whether it reaches the store itself (`via_controller.reaches_store`)."""
        given = controller_side(self.dir)
        try:
            given["channel"] = self.open(node)
        except Exception as exc:  # no channel: the worker records as a local one would
            gateway = getattr(getattr(node, "gateway", None), "id", "?")
            self.warnings.append(f"no channel to worker {gateway} ({type(exc).__name__}: {exc})")
        return given

    def open(self, node: Any) -> Any:
        """A channel on the worker's gateway, to hand to it (None: no gateway to open one on)."""
        gateway = getattr(node, "gateway", None)
        if gateway is None:
            return None
        channel = gateway.newchannel()
        relay = Relay(self, str(getattr(gateway, "id", "?")), channel)
        with self._lock:
            self._relays.append(relay)
        channel.setcallback(relay.receive, endmarker=_END)
        return channel

    def senders(self) -> list[Sender]:
        with self._lock:
            return [r.sender for r in self._relays if r.sender is not None]

    def problems(self) -> list[str]:
        with self._lock:
            return [r.problem for r in self._relays if r.problem]

    def close(self, tally: Tally) -> None:
        """Every relayed event delivered (acknowledged by the server, or spooled), and counted."""
        for sender in self.senders():
            sender.close()
            problem = sender.spool.problem
            tally.add_relayed(
                sent=sender.acked, spooled=sender.spooled, dropped=sender.dropped, problem=problem
            )
        tally.notes += self.problems()


class Relay:
    """One worker's channel: its hello, its lines, its files."""

    def __init__(self, relays: Relays, gateway_id: str, channel: Any) -> None:
        self.relays = relays
        self.gateway_id = gateway_id
        self.channel = channel
        self.sender: Sender | None = None
        self.problem: str | None = None

    def receive(self, message: Any) -> None:
        """In execnet's receiving thread: never raises (a bad message closes the channel, so the
        worker spools at home and says where)."""
        try:
            if message is _END:  # the worker closed it, or died: its sender ends with the run
                return
            kind = message[0]
            if kind == EVENTS and self.sender is not None:
                self._events(message[1])
            elif kind == HELLO and self.sender is None:
                self._hello(message[1])
            elif kind == FILE:
                self._file(message[1], message[2])
            else:
                raise ValueError(f"unexpected message {str(kind)[:40]!r}")
        except Exception as exc:
            self.problem = f"the channel of worker {self.gateway_id} failed ({type(exc).__name__}: {exc})"
            with contextlib.suppress(Exception):
                self.channel.close(self.problem)

    def _hello(self, hello: dict[str, Any]) -> None:
        run_id, process = str(hello["run_id"]), str(hello["process"])
        self.sender = Sender(
            hello=Identity(HELLO_VERSION, run_id, process, str(hello["worker"]), int(hello["pid"])),
            spool_path=spool_dir(self.relays.dir) / spool_file_name(run_id, process),
            discover=self.relays.discover,
            interval=INTERVAL,
        )
        self.sender.start(0.0)

    def _events(self, data: bytes) -> None:
        sender = self.sender
        assert sender is not None
        for line in data.split(b"\n"):
            if line:
                sender.send(Encoded(_seq(line), line))
        sender.poke()

    def _file(self, name: str, data: bytes) -> None:
        """A worker's file of the store (its coverage data), at the same place in this one."""
        path = PurePosixPath(name)
        if path.is_absolute() or ".." in path.parts or not path.parts or path.parts[0] != COVERAGE_DIR:
            raise ValueError(f"a file outside the store's {COVERAGE_DIR}/ folder: {name[:200]!r}")
        target = self.relays.dir.joinpath(*path.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        partial.write_bytes(data)
        partial.replace(target)


def _seq(line: bytes) -> int:
    """An event line's ``seq`` (what the server acknowledges): a frame's field, or a quiet pass's
    short record's third item."""
    if line[:1] == b"[":
        from pytest_mcpdebug import protocol

        return int(protocol.quick_event(line).seq)
    return int(_probe().decode(line).seq)


@functools.cache
def _probe() -> Any:
    import msgspec

    class SeqProbe(msgspec.Struct):
        seq: int = 0

    return msgspec.json.Decoder(SeqProbe)
