"""What every reply is: a `Report` (the whole text beside key fields) or `Data` (typed fields)."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import BaseModel, Field, PrivateAttr
from pydantic_core import to_jsonable_python
from typing_extensions import Self


class Reply(BaseModel):
    """What every reply shares: the text content is ``render()`` (also its ``str()``, so a reply put
    into a larger text by mistake reads as the reply, not as the model's fields)."""

    def __str__(self) -> str:
        return self.render()

    def render(self) -> str:
        return json.dumps(self.structured(), indent=1, ensure_ascii=False)

    keeps_none: ClassVar[bool] = False
    """Seed 004's replies list every field, null or not; the others leave out what does not apply."""

    def structured(self) -> dict[str, Any]:
        """The ``structuredContent``: the model's JSON, without the optional fields that do not apply
        (a field declared ``X | None`` without a default stays, as null)."""
        if self.keeps_none:
            return self.model_dump(mode="json", by_alias=True)
        return _compact(self)


def _compact(model: BaseModel) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        if value is None and not field.is_required():
            continue
        out[field.alias or name] = _jsonable(value)
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return _compact(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return to_jsonable_python(value)


class Report(Reply):
    text: str = Field(description="The complete report; the other fields repeat its key facts.")

    def render(self) -> str:
        return self.text


class Data(Reply):
    _text: str | None = PrivateAttr(default=None)

    def with_text(self, text: str) -> Self:
        """Render as ``text`` (a readable form of the same data) instead of JSON."""
        self._text = text
        return self

    def render(self) -> str:
        return self._text if self._text is not None else super().render()
