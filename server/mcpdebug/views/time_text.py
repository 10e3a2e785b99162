"""How a moment and a duration read in every view: shared by run, process and flaky views alike."""

from __future__ import annotations

import time


def when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}s" if value < 60 else f"{int(value // 60)}m{value % 60:04.1f}s"
