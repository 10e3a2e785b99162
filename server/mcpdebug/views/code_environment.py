"""The environment variables a failure's code reads, as its run had them.

A failure seen only in CI, or on one machine, usually comes from a variable set otherwise there, and
neither the traceback nor the frames' locals say so when the value was read far from where it broke.
The failing frames' own files say which variables the code reads: a string literal that names one
the run had (``"INVOICEKIT_VAT_RATES"``) or a prefix of some (``PREFIX = "INVOICEKIT_"``), and a
literal on an ``environ``/``getenv`` line that the run did not have (shown "not set"). For a run
recorded in CI or on another host, the variables that change any program's behaviour (time zone,
locale, terminal, proxies, certificates) are added where they differ from this process's, after what
its machine gave it otherwise than this process has (`machine_facts.differing`: one usable CPU, an
ASCII preferred encoding, another uid), which no variable says.

Values are as recorded: the test process hid secrets before they left it (`redaction`).
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from mcpdebug.views import machine_facts
from mcpdebug.views.calls import call

MAX_SHOWN: Final = 8
MAX_FILE_BYTES: Final = 1_000_000
MAX_VALUE_CHARS: Final = 200

_LITERAL: Final = re.compile(r"""["']([A-Z][A-Z0-9_]{2,})["']""")
_READS_ENVIRONMENT: Final = re.compile(r"environ|getenv")
_PROCESS_WIDE: Final = re.compile(
    r"TZ|LANG|LANGUAGE|LC_[A-Z]+|PYTHON(?:HASHSEED|IOENCODING|UTF8|WARNINGS|DEVMODE|ASYNCIODEBUG|OPTIMIZE)"
    r"|COLUMNS|LINES|TERM|SSH_AUTH_SOCK"
    r"|NO_COLOR|FORCE_COLOR|(?i:(?:https?|all|no)_proxy)|REQUESTS_CA_BUNDLE|SSL_CERT_(?:FILE|DIR)"
    r"|CURL_CA_BUNDLE|XDG_(?:CONFIG|DATA|CACHE|STATE)_(?:HOME|DIRS)|TMPDIR"
)
"""Variables that change how any program behaves; compared with this process's for a CI run."""
_NOT_PACKAGES: Final = frozenset({"src", "lib", "tests", "test", "testing", "python"})


def lines(
    run: dict[str, Any],
    shards: list[dict[str, Any]],
    frame_files: Iterable[str],
    local_root: Path,
    here: Mapping[str, str] | None = None,
    here_machine: Mapping[str, str] | None = None,
) -> list[str]:
    """The section's lines (empty when the run recorded no environment or nothing is relevant);
    ``here`` and ``here_machine``: the reader's variables and machine (this process's by default)."""
    environment = _recorded(shards)
    machine: dict[str, str] = next((s["machine"] for s in shards if s.get("machine")), {})
    if not environment and not machine:
        return []
    named, sources = _read_by(frame_files, run["rootdir"], local_root, environment)
    elsewhere = _elsewhere(shards)
    differing = _differing(environment, named, os.environ if here is None else here) if elsewhere else []
    machine_lines = machine_facts.differing(machine, _here(here_machine)) if elsewhere else []
    if not named and not differing and not machine_lines:
        return []
    out: list[str] = []
    if named:
        out += [
            "",
            f"Environment variables the failing code reads ({'; '.join(sources)}), as the run had them:",
        ]
        out += [f"  {k}={_value(v)}" if v is not None else f"  {k} (not set)" for k, v in named.items()][
            :MAX_SHOWN
        ]
    room = MAX_SHOWN - min(len(named), MAX_SHOWN)
    if machine_lines or (differing and room):
        where = "in CI" if any(s["ci"] for s in shards) else "on its host"
        out += [
            "",
            f"Where the run's environment {where} differs from here (machine, time zone, locale, ...):",
        ]
        out += [f"  {line}" for line in machine_lines]
        out += [
            f"  {k}={_value(v)} (here: {_value(m) if m is not None else 'not set'})"
            for k, (v, m) in differing
        ][:room]
    left = len(named) + len(differing) - min(len(named) + len(differing), MAX_SHOWN)
    every = call("get_environment", run_id=run["run_id"])
    out.append(
        f"  ... and {left} more; {every} lists every variable." if left else f"  ({every} lists every one.)"
    )
    return out


def _read_by(
    frame_files: Iterable[str], rootdir: str | None, local_root: Path, environment: Mapping[str, str]
) -> tuple[dict[str, str | None], list[str]]:
    """The variables the failing files name, or that are named after their package, and why."""
    named: dict[str, str | None] = {}
    sources: list[str] = []
    files = list(dict.fromkeys(frame_files))
    for recorded in files:
        text = _source(recorded, rootdir, local_root)
        found = _named(text, environment) if text is not None else {}
        if found:
            sources.append(f"named in {_short(recorded, rootdir)}")
            named.update({k: v for k, v in found.items() if k not in named})
    for package in _packages(_short(f, rootdir) for f in files):
        prefix = package.upper() + "_"
        found = {k: v for k, v in sorted(environment.items()) if k.startswith(prefix) and k not in named}
        if found:
            sources.append(f"{prefix}*, named after its package {package}")
            named.update(found)
    return named, sources


def _elsewhere(shards: list[dict[str, Any]]) -> bool:
    """Whether the run was recorded in CI or on another host (its machine and variables are compared)."""
    here = socket.gethostname()
    return any(s["ci"] for s in shards) or any(s["host"] and s["host"] != here for s in shards)


def _here(machine: Mapping[str, str] | None) -> Mapping[str, str]:
    """The reader's machine: this process's, read as the plugin reads a run's."""
    if machine is not None:
        return machine
    from pytest_mcpdebug.recording.machine import facts

    return facts()


def _differing(
    environment: Mapping[str, str], named: Mapping[str, str | None], here: Mapping[str, str]
) -> list[tuple[str, tuple[str, str | None]]]:
    """The process-wide variables set otherwise here (for a run recorded in CI or on another host)."""
    return [
        (k, (v, here.get(k)))
        for k, v in sorted(environment.items())
        if k not in named and _PROCESS_WIDE.fullmatch(k) and here.get(k) != v
    ]


def _packages(relative: Iterable[str]) -> list[str]:
    """The project's packages the failing files are in (``src/invoicekit/x.py``: invoicekit), whose
    name is the usual prefix of the variables that configure them (``INVOICEKIT_AUDIT_LOG``)."""
    found: dict[str, None] = {}
    for path in relative:
        for part in Path(path).parts[:-1]:
            if part not in _NOT_PACKAGES and part.isidentifier():
                found[part] = None
                break
    return list(found)


def _recorded(shards: list[dict[str, Any]]) -> dict[str, str]:
    """One value per variable: a shard's (a merged run's shards mostly agree; the first one wins)."""
    environment: dict[str, str] = {}
    for shard in shards:
        for key, value in (shard["environment"] or {}).items():
            environment.setdefault(key, value)
    return environment


def _named(text: str, environment: Mapping[str, str]) -> dict[str, str | None]:
    """Variables the source names: those the run had (by name or a prefix), and unset ones it reads."""
    found: dict[str, str | None] = {}
    for line in text.splitlines():
        for literal in _LITERAL.findall(line):
            if literal in environment:
                found.setdefault(literal, environment[literal])
            elif literal.endswith("_") and len(literal) >= 4:
                for key in sorted(environment):
                    if key.startswith(literal):
                        found.setdefault(key, environment[key])
            elif _READS_ENVIRONMENT.search(line):
                found.setdefault(literal, None)
    return found


def _source(recorded: str, rootdir: str | None, local_root: Path) -> str | None:
    """The file's text here: at its recorded path, or (a run recorded elsewhere, as CI's artifacts
    are) at the same place under this project's folder."""
    candidates = [Path(recorded)]
    if rootdir and recorded.startswith(rootdir.rstrip("/") + "/"):
        candidates.append(local_root / recorded[len(rootdir.rstrip("/")) + 1 :])
    for path in candidates:
        try:
            if path.is_file() and path.stat().st_size <= MAX_FILE_BYTES:
                return path.read_text(errors="replace")
        except OSError:
            continue
    return None


def _short(path: str, rootdir: str | None) -> str:
    root = (rootdir or "").rstrip("/") + "/"
    return path[len(root) :] if rootdir and path.startswith(root) else os.path.basename(path)


def _value(value: str) -> str:
    return repr(value if len(value) <= MAX_VALUE_CHARS else value[:MAX_VALUE_CHARS] + "...")
