"""The MCP server class: typed replies in both forms, and errors an agent can act on.

`ToolServer` adds three things to the SDK's `MCPServer`, for every tool alike:

- `add_reply_tool` registers a tool method that returns a `replies.Reply`: the SDK derives the
  ``outputSchema`` from the return annotation, the reply becomes ``structuredContent`` and its
  ``render()`` the text content (the SDK alone would put the JSON there).
- a wrong, missing or unknown argument is answered with one line per argument: its name, what it
  must be, an example, no library text; inputs are quoted to at most `QUOTE_CHARS` characters and
  every error reply is cut to at most `MAX_ERROR_CHARS`.
- schemas are listed without pydantic's generated titles (context an agent pays for, for nothing),
  and output schemas without descriptions and defaults: their fields' meaning is in the reply's
  text, and every session pays for a schema's words before its first question.
- the tool list can grow within a session (`tools.catalog`): the server declares
  ``tools.listChanged``, and a call of a tool not listed yet lists its group first.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, get_args, get_origin

import annotated_types
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent, Tool, ToolAnnotations
from pydantic import ValidationError
from pydantic.fields import FieldInfo

from mcpdebug.replies import Reply
from mcpdebug.report import entries
from mcpdebug.tools.annotations import side_effect
from mcpdebug.tools.args import Example
from mcpdebug.views import calls
from mcpdebug.views.lookup import quoted

if TYPE_CHECKING:
    from mcpdebug.tools.catalog import Catalog

MAX_ERROR_CHARS: Final = 2_000
SDK_PREFIX: Final = "Error executing tool "


@dataclass(frozen=True)
class Param:
    """What an error about one argument says: what it must be, what it is, an example."""

    must_be: str
    description: str
    example: str | None


class ToolServer(MCPServer):
    """The server of every tool; a ``read_only`` one does not add a tool whose annotations say it
    runs code or changes a process (neither listed nor callable), and every other such tool's
    description begins with what it does (`side_effect`)."""

    def __init__(self, name: str, *, read_only: bool = False, **options: Any) -> None:
        super().__init__(name, **options)
        self.read_only = read_only
        self.withheld: list[str] = []
        self.params: dict[str, dict[str, Param]] = {}
        self.catalog: Catalog | None = None
        """The tool groups this server can list more of (set by `mcpdebug.app.build_server`)."""
        self._calls = itertools.count(1)
        # Every transport (stdio, HTTP, in-memory) asks the lowlevel server for its initialize
        # options without notification options; the tool list grows within a session, so say so.
        lowlevel = self._lowlevel_server
        lowlevel.create_initialization_options = functools.partial(  # type: ignore[method-assign]
            lowlevel.create_initialization_options, NotificationOptions(tools_changed=True)
        )

    @property
    def lowlevel(self) -> Any:
        """The SDK's lowlevel server under this one (what `mcpdebug.stdio_start` hands requests to)."""
        return self._lowlevel_server

    def add_reply_tool(
        self, method: Callable[..., Any], annotations: ToolAnnotations, description: str
    ) -> None:
        """Register ``method`` (returning a `Reply`) as a tool named after it."""
        if inspect.iscoroutinefunction(method):

            @functools.wraps(method)
            async def call(*args: Any, **kwargs: Any) -> Any:
                return _result(await method(*args, **kwargs))

        else:

            @functools.wraps(method)
            def call(*args: Any, **kwargs: Any) -> Any:
                return _result(method(*args, **kwargs))

        self.add_tool(call, name=method.__name__, description=description, annotations=annotations)

    def add_tool(  # type: ignore[override]
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        **options: Any,
    ) -> None:
        """Any tool, however added: left out of a read-only server if its annotations say it runs
        code or changes a process, else described as doing so first."""
        name = name or fn.__name__
        effect = side_effect(annotations)
        if effect is not None and self.read_only:
            self.withheld.append(name)
            return
        text = description or inspect.cleandoc(fn.__doc__ or "")
        if effect is not None and not text.startswith(f"[{effect}]"):
            text = f"[{effect}] {text}"
        self.params[name] = _params(fn)
        super().add_tool(fn, name=name, title=title, description=text, annotations=annotations, **options)

    async def list_tools(self) -> list[Tool]:
        return [
            tool.model_copy(
                update={
                    "input_schema": _untitled(tool.input_schema),
                    "output_schema": _bare(_untitled(tool.output_schema)) if tool.output_schema else None,
                }
            )
            for tool in await super().list_tools()
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        """The call, between seed 000's tool:call and its tool:response or tool:error log entry."""
        call, started = next(self._calls), time.perf_counter()
        entries.tool_call(call, name, arguments)
        try:
            result = await self._answer(name, arguments, context)
        except BaseException as exc:  # cancelled too: the client went away, or the server is stopping
            why = str(exc) or type(exc).__name__
            why = why if isinstance(exc, Exception) else f"cancelled ({why})"
            entries.tool_error(call, name, arguments, why, time.perf_counter() - started)
            raise
        seconds = time.perf_counter() - started
        if isinstance(result, CallToolResult) and result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            entries.tool_error(call, name, arguments, text, seconds)
        else:
            entries.tool_response(call, name, arguments, _logged(result), seconds)
        return result

    async def _answer(self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None) -> Any:
        params = self.params.get(name)
        catalog = self.catalog
        if (
            params is None
            and name not in self.withheld
            and catalog
            and await catalog.enable_for(name, context)
        ):
            params = self.params.get(name)  # a tool of a group not listed yet, listed now
        if name in self.withheld:
            raise ToolError(
                f"{name} is not offered: this server is read-only (mcpdebug serve --read-only) and "
                f"{name} runs code or changes a process; the tools listed by tools/list read recorded runs."
            )
        if params is None:
            raise ToolError(f"No tool {quoted(name)}; the tools are {', '.join(sorted(self.params))}.")
        unknown = [key for key in arguments if key not in params]
        if unknown:
            valid = ", ".join(params) or "none"
            raise ToolError(
                f"{name} has no argument {', '.join(quoted(k) for k in unknown[:5])}; its arguments: {valid}."
            )
        hidden = calls.unlisted(catalog.unlisted() if catalog is not None else {})
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(_invalid(name, exc.__cause__, params)) from exc.__cause__
            raise ToolError(bounded(str(exc).removeprefix(f"{SDK_PREFIX}{name}: "))) from exc
        finally:
            calls.listed_again(hidden)


def _logged(result: Any) -> Any:
    """What a tool answered, for the log: its structured content, else its text (cleaned and cut
    by the log's writer thread)."""
    if isinstance(result, CallToolResult):
        if result.structured_content is not None:
            return result.structured_content
        return {"text": " ".join(getattr(c, "text", "") for c in result.content)}
    return {"inputRequired": True}


def bounded(message: str, limit: int = MAX_ERROR_CHARS) -> str:
    """An error reply cut to ``limit`` characters (the listing it ends with is what gets cut)."""
    if len(message) <= limit:
        return message
    note = f" [... cut: {len(message) - limit + 40} more characters]"
    return message[: limit - len(note)] + note


def _result(reply: Reply | CallToolResult) -> CallToolResult:
    if isinstance(reply, CallToolResult):  # a tool that builds its own (its annotation names the model)
        return reply
    return CallToolResult(
        content=[TextContent(type="text", text=reply.render())], structured_content=reply.structured()
    )


def _untitled(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as compact as it can be said: no generated ``title`` keys (a property named "title"
    stays: its value is a dict), and ``{"anyOf": [{"type": "string"}, {"type": "null"}]}`` written
    ``{"type": ["string", "null"]}``."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if isinstance(value, dict):
            value = _untitled(value)
        elif isinstance(value, list):
            value = [_untitled(v) if isinstance(v, dict) else v for v in value]
        out[key] = value
    options = out.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        other = options[0] if options[1] == {"type": "null"} else options[1]
        if isinstance(other.get("type"), str) and "anyOf" not in other and "$ref" not in other:
            del out["anyOf"]
            out = {**other, **out, "type": [other["type"], "null"]}
    return out


def _bare(schema: dict[str, Any]) -> dict[str, Any]:
    """An output schema without the words: no ``description`` or ``default`` of any (sub)schema.

    Keywords are dropped only where they are keywords: a property named "description" stays."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("description", "default"):
            continue
        if key in ("properties", "$defs", "patternProperties") and isinstance(value, dict):
            value = {name: _bare(sub) if isinstance(sub, dict) else sub for name, sub in value.items()}
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
            value = [_bare(sub) if isinstance(sub, dict) else sub for sub in value]
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            value = _bare(value)
        out[key] = value
    return out


# Argument errors -----------------------------------------------------------------------------------


def _params(method: Callable[..., Any]) -> dict[str, Param]:
    hints = typing.get_type_hints(method, include_extras=True)
    params: dict[str, Param] = {}
    for name in inspect.signature(method).parameters:
        hint = hints.get(name, Any)
        if _is_context(hint):
            continue
        base, meta = hint, []
        if get_origin(hint) is typing.Annotated:
            base, *meta = get_args(hint)
        field = next((m for m in meta if isinstance(m, FieldInfo)), None)
        example = next((m.value for m in meta if isinstance(m, Example)), None)
        constraints = [c for m in meta if isinstance(m, FieldInfo) for c in m.metadata]
        params[name] = Param(
            must_be=_kind(base) + _range(constraints),
            description=(field.description or "") if field else "",
            example=example,
        )
    return params


def _is_context(hint: Any) -> bool:
    return inspect.isclass(hint) and issubclass(hint, Context)


def _kind(hint: Any) -> str:
    args = [a for a in get_args(hint) if a is not type(None)]
    origin = get_origin(hint)
    if origin is Literal:
        return "one of " + ", ".join(f'"{a}"' for a in get_args(hint))
    if args and origin not in (list, dict):  # X | None
        return _kind(args[0]) if len(args) == 1 else " or ".join(_kind(a) for a in args)
    if origin is list:
        return f"a list of {_kind(args[0]).removeprefix('a ')}s" if args else "a list"
    if origin is dict:
        return "an object of names to strings"
    return {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}.get(
        hint, "a value"
    )


def _range(constraints: list[Any]) -> str:
    low = next((f"at least {c.ge}" for c in constraints if isinstance(c, annotated_types.Ge)), None)
    low = low or next((f"above {c.gt}" for c in constraints if isinstance(c, annotated_types.Gt)), None)
    high = next((f"at most {c.le}" for c in constraints if isinstance(c, annotated_types.Le)), None)
    low = low or next(("not empty" for c in constraints if isinstance(c, annotated_types.MinLen)), None)
    size = next(
        (f"{c.max_length} characters at most" for c in constraints if isinstance(c, annotated_types.MaxLen)),
        None,
    )
    parts = [p for p in (low, high, size) if p]
    return f" ({' and '.join(parts)})" if parts else ""


def _invalid(tool: str, error: ValidationError, params: dict[str, Param]) -> str:
    lines: list[str] = []
    seen: set[str] = set()
    for item in error.errors():
        name = str(item["loc"][0]) if item["loc"] else "?"
        if name in seen:
            continue
        seen.add(name)
        param = params.get(name, Param("valid", "", None))
        problem = (
            "is required"
            if item["type"] == "missing"
            else f"must be {param.must_be}, not {quoted(item.get('input'))}"
        )
        example = f" e.g. {name}={param.example}." if param.example else ""
        about = f" {name}: {param.description}" if param.description else ""
        lines.append(f"{tool}: argument {name} {problem}.{about}{example}")
    return bounded("\n".join(lines[:5]))
