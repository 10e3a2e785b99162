"""The reply of enable_tools: which tools a session lists now."""

from __future__ import annotations

from pydantic import Field

from mcpdebug.replies.base import Data


class ToolsListed(Data):
    added: list[str] = Field(description="tools listed now that were not before")
    groups: list[str] = Field(description="groups now listed whole")
    not_listed: list[str] = Field(description="groups of which some tools are still not listed")
    withheld: list[str] = Field(default_factory=list, description="tools a read-only server does not offer")
