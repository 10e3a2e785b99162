"""The base of the recording's plugin objects: pytest is shown their hooks only.

pytest and pluggy look at every name ``dir()`` gives an object registered as a plugin: pluggy for
hook implementations, pytest's fixture manager for fixtures (each name read through
``inspect.getattr_static`` and unwrapped, ~200 bytecodes a name). Our plugin objects carry 60-80
names of state and helpers each, registered in every recorded run, and only the ``pytest_*`` methods
matter to either: so that is all `dir` lists (a few hundred microseconds of every recorded run's
start, and of its end, where pluggy walks every hook to unregister one).
"""

from __future__ import annotations

from typing import ClassVar


class PluginObject:
    _hooks: ClassVar[dict[type, list[str]]] = {}

    def __dir__(self) -> list[str]:
        cls = type(self)
        names = PluginObject._hooks.get(cls)
        if names is None:
            names = PluginObject._hooks[cls] = [
                name for name in object.__dir__(self) if name.startswith("pytest_")
            ]
        return list(names)
