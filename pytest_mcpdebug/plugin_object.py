"""The base of the recording's plugin objects: pytest is shown their hooks only, and they keep
attribute reads fast once registered.

pytest and pluggy look at every name ``dir()`` gives an object registered as a plugin: pluggy for
hook implementations, pytest's fixture manager for fixtures (each name read through
``inspect.getattr_static`` and unwrapped, ~200 bytecodes a name). Our plugin objects carry 60-80
names of state and helpers each, registered in every recorded run, and only the ``pytest_*`` methods
matter to either: so that is all `dir` lists (a few hundred microseconds of every recorded run's
start, and of its end, where pluggy walks every hook to unregister one).

Registering reads the object's ``__dict__`` (pluggy looks there for hooks without calling
descriptors). On CPython 3.11 and 3.12 that read turns the instance's attributes into a *split*
dict, one that shares its keys with the class, and the interpreter's specialised attribute reads
give up on those: every ``self.x`` in the object's methods then takes the generic lookup, about
four times slower, for the rest of the run. The reporter and the output tail read ~60 attributes
a test that way (callgrind: ~20K instructions of a quiet pass's ~80K). `register` hands the
object a plain dict of its own afterwards, which they read at full speed (3.13 is fast either way).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import pytest


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


def register(config: pytest.Config, plugin: object, name: str) -> None:
    """Register ``plugin`` under ``name``, then give it an ordinary ``__dict__`` (see the module's
    docstring): the same attributes, in a dict that specialised attribute reads can use. An object
    with ``__slots__`` only has no dict to split, and is left as it is."""
    config.pluginmanager.register(plugin, name)
    attributes = getattr(plugin, "__dict__", None)
    if type(attributes) is dict:
        plugin.__dict__ = dict(attributes)
