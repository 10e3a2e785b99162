"""What an entry of seed 000's log says, as `mcpdebug tui` shows it: one line in its table, and whole.

No textual here. Every function takes an entry as `log_reader` gives it (its common fields of the
right types) and any other field of any shape: what no server writes is shown as it is, never raised.
"""

from __future__ import annotations

import json
from typing import Any, Final

_COMMON: Final = ("time", "level", "namespace", "message", "sessionId", "sessionName", "timestamp")


def time_of(entry: dict[str, Any]) -> str:
    """HH:MM:SS.mmm of the entry's ISO time (UTC, as logged)."""
    text = entry["time"] or ""
    return text[11:23] if len(text) >= 23 else text


def describe(entry: dict[str, Any]) -> str:
    """What an entry is about, on one line (a call with its answer when it has one); output and the
    server's messages keep their lines."""
    try:
        return _describe(entry)
    except Exception:  # a field of a shape no server writes: the entry as it is
        return _short({k: v for k, v in entry.items() if not k.startswith("_")}, 300)


def _describe(entry: dict[str, Any]) -> str:
    message = entry["message"]
    if message == "tool:call":
        request = entry.get("request") or {}
        args = ", ".join(f"{k}={_short(v)}" for k, v in request.items()) if isinstance(request, dict) else ""
        text = f"{entry['tool'] or '?'}({args})"
        answer = entry.get("_answer")
        if answer is None:
            return f"{text}  … {entry.get('_orphan') or 'waiting'}"
        took = _ms_text(answer.get("durationMs"))
        if answer["message"] == "tool:error":
            return f"{text}  ✗ {took}: {_short(answer.get('error'), 160)}"
        return f"{text}  ✓ {took}: {_short(answer.get('response'), 160)}"
    if message in ("tool:response", "tool:error"):  # its call was not in the log (rotated away)
        what = entry.get("response") if message == "tool:response" else entry.get("error")
        return f"{entry['tool'] or '?'} answered {_short(what, 160)}"
    if message == "debug:state":
        where = entry.get("location")
        at = ""
        if isinstance(where, dict) and where:
            file, line, function = (text_of(where.get(k)) for k in ("file", "line", "function"))
            at = f" at {file}:{line} in {function}"
        reason = f" ({text_of(entry['reason'])})" if entry.get("reason") else ""
        return f"{text_of(entry.get('event'))}{reason}{at}"
    if message == "debug:breakpoint":
        return (
            f"breakpoint {text_of(entry.get('breakpointId'))} {text_of(entry.get('event'))} at "
            f"{text_of(entry.get('file'))}:{text_of(entry.get('line'))}"
            + ("" if entry.get("verified") else " (not verified)")
        )
    if message == "debug:variables":
        found = entry.get("variables")
        shown = ", ".join(
            f"{text_of(v.get('name'))}={text_of(v.get('value'))}" if isinstance(v, dict) else _short(v)
            for v in (found if isinstance(found, list) else [])
        )
        return f"{text_of(entry.get('scope'))} ({text_of(entry.get('variableCount'))}): {shown}"
    if message == "session:created":
        kind = text_of(entry.get("kind")) or "session"
        return f"{kind} created: {entry['sessionName'] or entry['sessionId']}"
    if message == "session:closed":
        return closed_text(entry, with_duration=True)
    if message == "debug:output":
        return f"[{text_of(entry.get('category'))}] {text_of(entry.get('output')).rstrip()}"
    return text_of(entry.get("text")) or message


def closed_text(entry: dict[str, Any], *, with_duration: bool = False) -> str:
    """``closed (finished) after 6.2 s: exit status 1; 1 failed, 1 error, 3 passed``: a run's
    session closes with its exit status and its tests' outcomes."""
    from mcpdebug.views.runs import counts_text

    text = f"closed ({text_of(entry.get('reason')) or 'ended'})"
    duration = entry.get("duration")
    if with_duration and isinstance(duration, (int, float)):
        text += f" after {duration / 1000:.1f} s"
    parts = []
    for key in ("exitStatus", "exitCode"):
        if isinstance(entry.get(key), int):
            parts.append(f"exit status {entry[key]}")
    counts = entry.get("counts")
    if isinstance(counts, dict) and counts:
        parts.append(counts_text({str(k): v for k, v in counts.items() if isinstance(v, int)}))
    return text + (": " + "; ".join(parts) if parts else "")


def detail(entry: dict[str, Any], session_name: str = "") -> str:
    """Everything an entry holds, for a person to read: what it is, then each field in full (a
    call's request and its answer)."""
    who = entry["sessionId"]
    namespace = text_of(entry.get("namespace"))
    lines = [
        f"{entry['message']} at {entry['time'] or '?'} ({entry['level'] or '?'}, {namespace})",
        f"Session: {session_name or entry['sessionName'] or who} ({who})" if who else "Session: none",
        "",
        describe(entry),
    ]
    fields = {k: v for k, v in entry.items() if k not in _COMMON and not k.startswith("_")}
    if fields:
        lines += ["", "Fields:", *_pretty(fields)]
    answer = entry.get("_answer")
    if isinstance(answer, dict):
        took = _ms_text(answer.get("durationMs"))
        lines += [
            "",
            f"Answer: {answer['message']} at {answer['time'] or '?'} after {took}",
            *_pretty({k: v for k, v in answer.items() if k not in _COMMON and not k.startswith("_")}),
        ]
    elif entry.get("_orphan"):
        lines += ["", f"Answer: {entry['_orphan']}"]
    return "\n".join(lines)


def _pretty(fields: dict[str, Any]) -> list[str]:
    """The fields as JSON, but a text of several lines (a report's ``text``) as its lines below."""
    texts: list[tuple[str, str]] = []

    def lift(value: Any, path: str, depth: int) -> Any:
        if isinstance(value, str) and "\n" in value:
            texts.append((path, value))
            return f"(its {value.count(chr(10)) + 1} lines below)"
        if isinstance(value, dict) and depth < 4:
            return {k: lift(v, f"{path}.{k}" if path else str(k), depth + 1) for k, v in value.items()}
        return value

    lines = [json.dumps(lift(fields, "", 0), indent=2, ensure_ascii=False, default=str)]
    for path, text in texts:
        lines += ["", f"{path}:", text]
    return lines


def _ms_text(value: Any) -> str:
    return f"{value:.1f} ms" if isinstance(value, (int, float)) and not isinstance(value, bool) else "? ms"


def text_of(value: Any) -> str:
    """A field's value as text: a string as it is, anything else as JSON, nothing as nothing."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _short(value: Any, limit: int = 40) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
