"""What the xdist controller hands each worker (``workerinput["mcpdebug"]``), and back into settings.

Plain values only: xdist sends ``workerinput`` through execnet, which carries no objects of ours.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_mcpdebug.limits import MAX_LINE_LENGTH
from pytest_mcpdebug.options import DEFAULT_BREAK_TIMEOUT
from pytest_mcpdebug.recording import diagnosis as diagnosis_parts
from pytest_mcpdebug.settings import DiagnosisSettings, HangSettings

if TYPE_CHECKING:
    from pytest_mcpdebug.recording.sender import Sender
    from pytest_mcpdebug.recording.via_controller import ChannelSpool


class Remote(Protocol):
    """What `through_controller` changes of a worker's recorder."""

    dir: Path
    url: str | None
    sender: Sender
    channel_spool: ChannelSpool | None


class Shared(Protocol):
    """What of the controller's recorder its workers share."""

    run_id: str
    dir: Path
    url: str | None
    token: str | None
    max_line_length: int
    break_on_failure: bool
    break_timeout: float
    hangs: HangSettings
    session_started: float
    diagnosis: DiagnosisSettings
    shard: str


def shared(recorder: Shared) -> dict[str, Any]:
    return {
        "run_id": recorder.run_id,
        "dir": str(recorder.dir),
        "url": recorder.url,
        "token": recorder.token,
        "max_line_length": recorder.max_line_length,
        "break": recorder.break_on_failure,
        "break_timeout": recorder.break_timeout,
        "hangs": recorder.hangs._asdict(),
        "session_started": recorder.session_started,
        "diagnosis": recorder.diagnosis._asdict(),
        "shard": recorder.shard,
    }


def options(shared: dict[str, Any]) -> dict[str, Any]:
    """A worker's `Recorder` keyword arguments from what its controller shared."""
    return {
        "run_id": shared["run_id"],
        "directory": Path(shared["dir"]),
        "url": shared.get("url"),
        "token": shared.get("token"),
        "max_line_length": int(shared.get("max_line_length", MAX_LINE_LENGTH)),
        "break_on_failure": bool(shared.get("break", False)),
        "break_timeout": float(shared.get("break_timeout", DEFAULT_BREAK_TIMEOUT)),
        "hangs": HangSettings(**shared["hangs"]) if shared.get("hangs") else None,
        "session_started": shared.get("session_started"),
        "diagnosis": diagnosis_parts.shared(shared.get("diagnosis")),
        "shard": str(shared.get("shard") or ""),
    }


def through_controller(recorder: Remote, shared: dict[str, Any]) -> None:
    """A worker that cannot reach the store itself (another host's) spools into the channel to its
    controller (`via_controller`), and leaves its controller's loopback server to the controller."""
    from pytest_mcpdebug.recording import via_controller

    if via_controller.reaches_store(shared, recorder.dir):
        return
    recorder.channel_spool = via_controller.send_through(recorder.sender, shared["channel"])
    recorder.url = via_controller.reachable(recorder.url)
