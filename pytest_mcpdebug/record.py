"""`Record`: the small value classes every recorded run defines, at the cost of a plain class.

`typing.NamedTuple` builds each class's ``__new__`` by compiling source text: ~1M instructions a
class (callgrind), and a recorded run defined eight of them before its first test (~8M of a one-test
run's ~57M extra). A `Record` declares its fields as a NamedTuple does, annotations with optional
defaults, and keeps what this project used of one: construction by position or keyword, ``_fields``,
``_asdict()``, ``_replace()``, equality, hashing, a NamedTuple's repr, and read-only fields. It is
not a tuple: no indexing or unpacking (mypy says so where it is tried).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from typing_extensions import Self, dataclass_transform
else:

    def dataclass_transform(**_: Any) -> Any:
        """Tells type checkers how a subclass is built; nothing at run time."""
        return lambda cls: cls


@dataclass_transform(eq_default=True, frozen_default=True)
class Record:
    _fields: ClassVar[tuple[str, ...]] = ()
    _defaults: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The annotations are strings (`from __future__ import annotations`); ClassVars are not fields.
        own = inspect.get_annotations(cls)
        cls._fields = tuple(name for name, kind in own.items() if not str(kind).startswith("ClassVar"))
        cls._defaults = {name: cls.__dict__[name] for name in cls._fields if name in cls.__dict__}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        fields = self._fields
        name = type(self).__name__
        if len(args) > len(fields):
            raise TypeError(f"{name}() takes {len(fields)} arguments, {len(args)} given")
        values = dict(zip(fields, args, strict=False))
        for key, value in kwargs.items():
            if key not in fields:
                raise TypeError(f"{name}() has no field {key!r}; its fields: {', '.join(fields)}")
            if key in values:
                raise TypeError(f"{name}() got {key!r} twice")
            values[key] = value
        if missing := [f for f in fields if f not in values and f not in self._defaults]:
            raise TypeError(f"{name}() is missing {', '.join(map(repr, missing))}")
        self.__dict__.update(values)  # the defaults stay the class's

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only; use _replace({key}=...)")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f) for f in self._fields)

    def _asdict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self._fields}

    def _replace(self, **changes: Any) -> Self:
        return type(self)(**{**self._asdict(), **changes})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record) or type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash((type(self), self._values()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({shown})"
