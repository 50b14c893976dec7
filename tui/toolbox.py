"""Toolbox: the tools a chat offers its model and how a confirmed call runs (MCP servers from the
settings, through app/mcp). Blocking calls: thread workers only."""

from __future__ import annotations

from typing import Any, Protocol

from ember.app.mcp.consent import tool_key
from ember.app.mcp.hub import McpHub, ToolOutcome
from ember.engine.api import EngineError, ToolSpec


class Toolbox(Protocol):
    """What ChatSession needs from the tools."""

    errors: dict[str, str]  # server -> why its tools are missing

    def specs(self) -> tuple[ToolSpec, ...]: ...

    def server_of(self, name: str) -> str: ...

    def key_of(self, name: str) -> str: ...

    def description_of(self, name: str) -> str: ...

    def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome: ...

    def close(self) -> None: ...


class McpToolbox:
    """The configured MCP servers' tools (connected on first use)."""

    def __init__(self, hub: McpHub) -> None:
        self.hub = hub
        self.errors = hub.errors
        self._specs: tuple[ToolSpec, ...] | None = None

    def specs(self) -> tuple[ToolSpec, ...]:
        if self._specs is None:
            specs = []
            for tool in self.hub.tools():
                try:
                    specs.append(ToolSpec(tool.name, tool.description, tool.input_schema or None))
                except EngineError as exc:  # a name or schema the engine cannot offer
                    self.errors[tool.server] = f"{tool.server}/{tool.remote_name}: {exc}"
            self._specs = tuple(specs)
        return self._specs

    def server_of(self, name: str) -> str:
        return next((t.server for t in self.hub.tools() if t.name == name), "")

    def key_of(self, name: str) -> str:
        """The tool's allow-list entry (SERVER/TOOL as the server names it); "" if unknown."""
        tool = next((t for t in self.hub.tools() if t.name == name), None)
        return tool_key(tool.server, tool.remote_name) if tool is not None else ""

    def description_of(self, name: str) -> str:
        """What the tool's server says it does (its text, shown as plain text)."""
        return next((t.description for t in self.hub.tools() if t.name == name), "")

    def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        return self.hub.call(name, arguments)

    def close(self) -> None:
        self.hub.close()
