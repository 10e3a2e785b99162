"""`Record`, the value classes' base: what the project used of a NamedTuple, without compiling one."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from pytest_mcpdebug.folder import ServerInfo, read_server_info, write_server_info
from pytest_mcpdebug.limits import Limits, describe
from pytest_mcpdebug.settings import HangSettings, Settings


def test_fields_defaults_and_keywords() -> None:
    assert Limits._fields == ("max_line_length", "max_test_output", "max_runs", "max_store_size", "max_age")
    limits = Limits(max_runs=3)
    assert limits.max_runs == 3 and limits.max_age == 7 * 86400.0
    assert limits == Limits(Limits().max_line_length, Limits().max_test_output, 3)
    assert limits._asdict()["max_runs"] == 3 and "max_runs=3" in describe(limits)
    assert limits._replace(max_runs=4) == Limits(max_runs=4) and limits.max_runs == 3
    assert repr(HangSettings(timeout=2.0)).startswith("HangSettings(timeout=2.0, func_only=False, ")


def test_equal_records_hash_alike_and_survive_pickling() -> None:
    settings = Settings(Path("/tmp/x"), None, None, hangs=HangSettings(timeout=5.0))
    twin = pickle.loads(pickle.dumps(settings))
    assert twin == settings and hash(twin) == hash(settings) and {settings: 1}[twin] == 1
    assert settings != Settings(Path("/tmp/x"), None, None) and settings != tuple(settings._asdict().values())


def test_a_record_is_read_only() -> None:
    limits = Limits()
    with pytest.raises(AttributeError, match=r"read-only; use _replace\(max_runs=...\)"):
        limits.max_runs = 3  # type: ignore[misc]
    with pytest.raises(AttributeError, match="read-only"):
        del limits.max_runs  # type: ignore[misc]


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: Limits(1, 2, 3, 4, 5.0, 6), r"takes 5 arguments, 6 given"),
        (lambda: Limits(max_run=1), r"no field 'max_run'; its fields: max_line_length, "),
        (lambda: Limits(1, max_line_length=2), r"got 'max_line_length' twice"),
        (lambda: ServerInfo(url="ws://x"), r"missing 'token', 'pid'"),
    ],
)
def test_a_wrong_construction_says_what_is_wrong(make: object, says: str) -> None:
    with pytest.raises(TypeError, match=says):
        make()  # type: ignore[operator]


def test_server_json_round_trips(tmp_path: Path) -> None:
    info = ServerInfo(url="ws://127.0.0.1:1/", token="t", pid=os.getpid(), mcp_url="http://x/mcp")
    write_server_info(tmp_path, info)
    assert read_server_info(tmp_path) == info
