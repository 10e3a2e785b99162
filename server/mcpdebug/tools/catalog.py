"""Which tools a server lists, and listing more within a session: the enable_tools tool.

A server starts with a selection of `tools.groups` (the core set by default) and imports a group's
module only when one of its tools is first listed. ``enable_tools(groups=[...])``, or a call of a
tool that is not listed yet, lists more and tells the client with ``notifications/tools/list_changed``
(the server declares ``tools.listChanged``), so the client fetches ``tools/list`` again. The listing
is the server's: over HTTP every session sees what one enabled.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from mcpdebug.replies.catalog import ToolsListed
from mcpdebug.tools.annotations import READ_ONLY
from mcpdebug.tools.args import Example
from mcpdebug.tools.context import ToolContext, ToolGroup
from mcpdebug.tools.groups import CORE, GROUPS, Selection, select

if TYPE_CHECKING:
    from mcpdebug.tools.server import ToolServer

GroupName = Literal[
    "core",
    "all",
    "runs",
    "failures",
    "hangs",
    "live",
    "output",
    "processes",
    "debug",
    "diagnosis",
    "localize",
]
"""`tools.groups.CHOICES` as a type (a test checks they agree)."""


class Catalog:
    """The tool groups of one server: which of their tools it lists, and listing more."""

    def __init__(self, server: ToolServer, context: ToolContext) -> None:
        self.server = server
        self.context = context
        self.listed: dict[str, set[str]] = {}
        """Per group touched so far, the tools considered for listing (withheld ones included)."""
        self._groups: dict[str, ToolGroup] = {}

    def enable(self, selection: Selection) -> list[str]:
        """List the tools of ``selection`` not listed yet; the names of those now listed."""
        before = set(self.server.params)
        for name, only in selection.items():
            group = self._group(name)
            wanted = {m.__name__ for m, _ in group.tools()} if only is None else set(only)
            new = wanted - self.listed[name]
            if new:
                group.register(self.server, new)
                self.listed[name] |= new
        return [t for t in self.server.params if t not in before]

    def _group(self, name: str) -> ToolGroup:
        group = self._groups.get(name)
        if group is None:
            about = GROUPS[name]
            cls: type[ToolGroup] = getattr(importlib.import_module(about.module), about.cls)
            group = self._groups[name] = cls(self.context)
            self.listed[name] = set()
            group.register_resources(self.server)
        return group

    def unlisted(self) -> dict[str, str]:
        """The tools enable_tools would list, each with its group (a withheld tool is never listed)."""
        withheld = set(self.server.withheld)
        return {
            tool: name
            for name, about in GROUPS.items()
            for tool in about.tools
            if tool not in self.listed.get(name, ()) and tool not in withheld
        }

    def not_listed(self) -> list[str]:
        """The groups of which some tool is not listed yet."""
        return [name for name, about in GROUPS.items() if set(about.tools) - self.listed.get(name, set())]

    def reply(self, added: list[str], selection: Selection) -> ToolsListed:
        asked = {t for g, only in selection.items() for t in (GROUPS[g].tools if only is None else only)}
        withheld = [t for t in self.server.withheld if t in asked]
        rest = self.not_listed()
        whole = [g for g in GROUPS if g not in rest]
        if added:
            text = f"Listed {len(added)} more tool(s): {', '.join(added)}."
            text += " The client was sent notifications/tools/list_changed: its tools/list now has them."
        else:
            text = "Nothing to add: those tools are listed already."
        if withheld:
            text += f" Not offered (read-only server): {', '.join(withheld)}."
        text += f" Groups not listed whole: {', '.join(rest)}." if rest else " Every group is listed."
        return ToolsListed(added=added, groups=whole, not_listed=rest, withheld=withheld).with_text(text)

    def register(self) -> None:
        """List enable_tools itself, its description naming every group and what it holds."""
        self.server.add_reply_tool(self.enable_tools, READ_ONLY, description())

    async def enable_tools(
        self,
        ctx: Context,
        groups: Annotated[
            list[GroupName],
            Field(
                min_length=1,
                description='Groups to list: names from this description, "core", or "all" for every tool.',
            ),
            Example('["debug"]'),
        ],
    ) -> ToolsListed:
        """List more tools in this session (see the description built by `description`)."""
        selection = select(groups)
        added = self.enable(selection)
        if added:
            await announce(ctx)
        return self.reply(added, selection)

    async def enable_for(self, tool: str, ctx: Context | None) -> bool:
        """List the group of ``tool``, a tool not listed yet; False if no group has it."""
        group = next((name for name, about in GROUPS.items() if tool in about.tools), None)
        if group is None:
            return False
        if self.enable({group: None}):
            await announce(ctx)
        return True


def description() -> str:
    """What enable_tools answers, and every group with the tools it adds (the core ones left out)."""
    groups = "; ".join(
        f"{name} ({about.about}: {', '.join(t for t in about.tools if t not in CORE)})"
        for name, about in GROUPS.items()
        if any(t not in CORE for t in about.tools)
    )
    return (
        "List more tools in this session (the client is sent notifications/tools/list_changed).\n\n"
        f"A core set is listed at first; the other groups: {groups}."
    )


async def announce(ctx: Context[Any, Any] | None) -> None:
    """Tell the client its tool list changed: on the session (the handshake protocol) and to
    ``subscriptions/listen`` subscribers (2026-07-28)."""
    if ctx is None:
        return
    await ctx.notify_tools_changed()
    request = ctx.request_context
    if request.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        await request.session.send_tool_list_changed()
