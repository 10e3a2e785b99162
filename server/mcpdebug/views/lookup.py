"""Resolving what a caller named (a run id, a test) with errors that list what exists.

Shared by the MCP tools and the CLI, so both say the same helpful thing when an id is wrong.
"""

from __future__ import annotations

import sqlite3
import unicodedata
import warnings
from collections.abc import Callable
from typing import Any, Final, TypeVar

from mcpdebug.ingest import recovery
from mcpdebug.ingest.hang_dumps import attribute_hang_dumps
from mcpdebug.ingest.spool import ingest_spool
from mcpdebug.store import FINAL_OUTCOMES, Store
from mcpdebug.views.calls import call

QUOTE_CHARS: Final = 200
"""Most characters of a caller's input an error quotes (a 50,000-character id is not echoed back)."""
LISTED: Final = 20
"""Most valid ids an error lists."""

T = TypeVar("T")


class NotFound(LookupError):
    """What was asked for does not exist; the message lists what does and what to try."""


def quoted(value: object, limit: int = QUOTE_CHARS) -> str:
    """``repr(value)``, cut to ``limit`` characters with how many more there were."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def listing(items: list[str], limit: int = LISTED) -> str:
    """``a, b, c``, at most ``limit`` of them and how many more."""
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def refresh(store: Store) -> None:
    """Take in spool files written since the last look, and the hang dumps of processes that died
    (cheap when there are none). A store file deleted or corrupted meanwhile is replaced and rebuilt
    first; a read-only store is read as it is."""
    if store.read_only:
        return
    store.check()
    try:
        _take_in(store)
    except sqlite3.DatabaseError as exc:
        if not store.recover(exc):
            raise
        _take_in(store)


def reading(store: Store, read: Callable[[], T]) -> T:
    """``read()`` after a refresh; if it finds the store corrupted, once more on the rebuilt store."""
    refresh(store)
    try:
        return read()
    except sqlite3.DatabaseError as exc:
        if not store.recover(exc):
            raise
        refresh(store)
        return read()


def _take_in(store: Store) -> None:
    recovery.rebuild(store)
    ingest_spool(store)
    attribute_hang_dumps(store)


def run(store: Store, run_id: str | None) -> dict[str, Any]:
    resolved = store.resolve_run(run_id)
    found = store.run(resolved) if resolved else None
    if found is not None:
        return found
    recent = store.run_ids(10)
    if not recent:
        raise NotFound(
            f"No runs recorded yet in {store.dir}. Run `pytest --mcp-debug` in the project "
            "(or call run_tests), then list_sessions."
        )
    raise NotFound(
        f"Unknown run {quoted(run_id)}. Recorded runs, newest first: {', '.join(recent)}. "
        f'Use run_id="latest" for the newest, or {call("list_sessions")} for details.'
    )


def test(store: Store, run_row: dict[str, Any], query: str) -> dict[str, Any]:
    """A test by exact node id, or by a part of it that matches exactly one test."""
    rid = run_row["run_id"]
    if not query:
        raise NotFound(f"Name a test: a node id from {call('list_tests', run_id=rid)}.")
    others = spellings(query)
    for spelling in (query, *others):
        exact = store.test(rid, spelling)
        if exact is not None:
            return exact
    matches: list[str] = []
    for spelling in (query, *others):
        matches = matches or store.find_tests(rid, spelling)
    if len(matches) > 1:  # "test_total" names test_x.py::test_total, not also test_total_tax
        named = [m for m in matches if m.endswith("::" + query) or m.split("::")[-1].split("[")[0] == query]
        if len(named) == 1:
            matches = named
    if len(matches) == 1:
        found = store.test(rid, matches[0])
        assert found is not None
        return found
    if matches:
        shown = "\n".join(f"  {m}" for m in matches[:LISTED])
        more = f"\n  ... and {len(matches) - LISTED} more" if len(matches) > LISTED else ""
        raise NotFound(
            f"{quoted(query)} matches several tests of run {rid} ({len(matches)}); "
            f"give one of:\n{shown}{more}"
        )
    failed = [t["nodeid"] for t in store.tests(rid, ("failed", "error"))]
    total = sum(run_row["counts"].values())
    hint = f" Failed or errored tests: {listing(failed, 10)}." if failed else ""
    raise NotFound(
        f"No test matching {quoted(query)} in run {rid} ({total} tests).{hint} "
        f"{call('list_tests', run_id=rid)} lists them all."
    )


def spellings(query: str) -> list[str]:
    """Other ways pytest may have written the test the caller named.

    pytest escapes what is not ASCII in parameter ids (``test_odd[ü ñ]`` is shown as
    ``test_odd[\\xfc \\xf1]``) unless told not to, and people type either form: both are tried,
    the typed text also in its composed Unicode form (NFC). Only the part from the first ``[`` is
    respelled (pytest never escapes paths and names); a part of an id without ``[`` is respelled whole.
    """
    cut = query.find("[")
    head, params = (query[:cut], query[cut:]) if cut >= 0 else ("", query)
    plain = _unescape(params)
    forms = [plain, unicodedata.normalize("NFC", plain)] if plain is not None else []
    forms += [f.encode("unicode_escape").decode("ascii") for f in [params, *forms]]
    return list(dict.fromkeys(head + f for f in forms if f != params))


def _unescape(text: str) -> str | None:
    """``\\xfc`` as ``ü``: the inverse of pytest's escaping, or None if ``text`` has a bad escape."""
    if "\\" not in text:
        return text
    try:
        with warnings.catch_warnings():  # "invalid escape sequence": kept as typed
            warnings.simplefilter("ignore")
            return text.encode("ascii", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:
        return None


def outcomes(value: str | None) -> list[str] | None:
    """Parse an outcome filter such as ``failed`` or ``failed,error``."""
    if not value:
        return None
    wanted = [v.strip().lower() for v in value.split(",") if v.strip()]
    valid = (*FINAL_OUTCOMES, "running")
    bad = [v for v in wanted if v not in valid]
    if bad:
        raise NotFound(
            f"Unknown outcome {', '.join(map(quoted, bad[:5]))}; use one or more of "
            f"{', '.join(valid)} (comma-separated)."
        )
    return wanted
