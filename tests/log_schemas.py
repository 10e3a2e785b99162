"""Seed 000's log entries as JSON schemas, one per type: the fields the seed names, typed as it shows them.

The seed writes ``timestamp`` twice (ISO string and epoch milliseconds); a JSON object holds one, so
``timestamp`` is the milliseconds and ``time`` the ISO string (see `mcpdebug.report.server_log`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

NULLABLE_STRING = {"type": ["string", "null"]}
COMMON: dict[str, Any] = {
    "time": {"type": "string", "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"},
    "timestamp": {"type": "integer", "minimum": 1_500_000_000_000},
    "level": {"enum": ["debug", "info", "warn", "error"]},
    "namespace": {"type": "string", "pattern": r"^debug-mcp:[a-z]+$"},
    "message": {"type": "string"},
    "sessionId": NULLABLE_STRING,
    "sessionName": NULLABLE_STRING,
}
LOCATION = {
    "type": "object",
    "required": ["file", "line", "function"],
    "properties": {
        "file": {"type": "string"},
        "line": {"type": ["integer", "null"]},
        "function": NULLABLE_STRING,
    },
}
VARIABLE = {
    "type": "object",
    "required": ["name", "type", "value"],
    "properties": {"name": {"type": "string"}, "type": {"type": "string"}, "value": {"type": "string"}},
}

SPECIFIC: dict[str, tuple[str, str, dict[str, Any]]] = {
    # message: (namespace, level, {field: schema}) -- every field listed is required
    "tool:call": ("tools", "info", {"tool": {"type": "string"}, "request": {"type": "object"}}),
    "tool:response": (
        "tools",
        "info",
        {
            "tool": {"type": "string"},
            "success": {"const": True},
            "response": {},
            "durationMs": {"type": "number", "minimum": 0},
        },
    ),
    "tool:error": (
        "tools",
        "error",
        {
            "tool": {"type": "string"},
            "success": {"const": False},
            "error": {"type": "string"},
            "durationMs": {"type": "number", "minimum": 0},
        },
    ),
    "debug:state": (
        "state",
        "info",
        {
            "event": {"enum": ["paused", "running", "stopped"]},
            "reason": NULLABLE_STRING,
            "threadId": {"type": ["integer", "null"]},
        },
    ),
    "debug:breakpoint": (
        "breakpoint",
        "info",
        {
            "event": {"enum": ["set", "verified", "hit"]},
            "breakpointId": {"type": "string"},
            "file": {"type": "string"},
            "line": {"type": "integer"},
            "verified": {"type": "boolean"},
        },
    ),
    "debug:variables": (
        "variables",
        "info",
        {
            "frameId": {"type": ["integer", "null"]},
            "scope": {"type": "string"},
            "variablesReference": {"type": ["integer", "null"]},
            "variableCount": {"type": "integer", "minimum": 0},
            "variables": {"type": "array", "maxItems": 20, "items": VARIABLE},
        },
    ),
    "session:created": (
        "session",
        "info",
        {
            "language": {"const": "python"},
            "pythonPath": NULLABLE_STRING,
            "kind": {"enum": ["run", "held", "debug", "process"]},
        },
    ),
    "session:closed": ("session", "info", {"duration": {"type": ["integer", "null"], "minimum": 0}}),
    "debug:output": (
        "output",
        None,  # info for a debugged program, debug for a run's or a process's lines
        {"category": {"type": "string"}, "output": {"type": "string", "maxLength": 215}},
    ),
}


def schema(message: str) -> dict[str, Any]:
    namespace, level, fields = SPECIFIC[message]
    properties = {**COMMON, **fields, "message": {"const": message}}
    properties["namespace"] = {"const": f"debug-mcp:{namespace}"}
    if level is not None:
        properties["level"] = {"const": level}
    if message == "debug:state":
        properties["location"] = LOCATION
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": [*COMMON, *fields],
        "properties": properties,
    }


VALIDATORS = {message: Draft202012Validator(schema(message)) for message in SPECIFIC}


def validate(entry: dict[str, Any]) -> None:
    """Raises with every problem of an entry of one of seed 000's types."""
    errors = [e.message for e in VALIDATORS[entry["message"]].iter_errors(entry)]
    assert not errors, f"{entry['message']} entry {entry}: {errors}"


def read_log(path: Path) -> list[dict[str, Any]]:
    """Every line of the log parsed (a line that is not one JSON object fails the test)."""
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        entry = json.loads(line)
        assert isinstance(entry, dict), f"line {number} is not an object: {line[:200]}"
        entries.append(entry)
    return entries
