"""Watch expressions: evaluated in the top frame at every stop, reported when their value changes.

A watch's value is the text debugpy shows for it (its repr, cut as values are), or the error its
evaluation raised: a name that comes into scope changes from an error to a value, and that is a
change worth reporting too. Comparing the text keeps the rule simple and the same for every type.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from mcpdebug.views.lookup import quoted


@dataclass
class Watch:
    id: str
    expression: str
    value: str | None = None
    """Its text at the last stop (None until evaluated)."""
    changed_at: int = 0
    """The stop (numbered by the session) at which the value last changed."""


@dataclass
class Change:
    watch: Watch
    old: str | None
    new: str


class WatchError(LookupError):
    pass


@dataclass
class Watches:
    _items: dict[str, Watch] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def add(self, expression: str) -> Watch:
        if not expression.strip():
            raise WatchError("The expression is empty: give Python code, e.g. total or len(items).")
        for watch in self._items.values():
            if watch.expression == expression:
                return watch
        watch = Watch(id=f"w{next(self._ids)}", expression=expression)
        self._items[watch.id] = watch
        return watch

    def remove(self, watch_id: str) -> Watch:
        watch = self._items.pop(watch_id, None)
        if watch is None:
            known = ", ".join(f"{w.id} ({w.expression})" for w in self._items.values()) or "none"
            raise WatchError(f"No watch {quoted(watch_id)} in this session. Its watches: {known}.")
        return watch

    def all(self) -> list[Watch]:
        return list(self._items.values())

    def record(self, values: dict[str, str], stop: int) -> list[Change]:
        """Take the values of a stop (watch id -> text); returns the watches whose value changed.

        A watch's first value is not a change (there is nothing to compare it with)."""
        changes = []
        for watch_id, new in values.items():
            watch = self._items.get(watch_id)
            if watch is None:
                continue
            if watch.value is not None and new != watch.value:
                changes.append(Change(watch, watch.value, new))
                watch.changed_at = stop
            watch.value = new
        return changes
