"""Which MCP tools may run without asking: the user's own allow-list, on this machine.

The list lives in Ember's settings file only (`allowed_tools = ["calc/add"]`, each entry
`SERVER/TOOL`: the server's name in `[mcp_servers]` and the tool's name on that server). It is
never read from the environment, a conversation (an imported history can carry anything), a
model's output or an MCP server: the only way in is the user choosing "always allow" in the
TUI's confirmation dialog, or editing the settings file. A list that is malformed allows
nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ember.app.errors import ConfigError
from ember.paths import Paths

ALLOW_KEY = "allowed_tools"


def tool_key(server: str, tool: str) -> str:
    """The allow-list entry for one tool of one configured server."""
    return f"{server}/{tool}"


def allowed_tools(extra: Mapping[str, Any]) -> frozenset[str]:
    """The settings file's allow-list (its `extra` keys); ConfigError when it is not a list
    of `SERVER/TOOL` strings."""
    value = extra.get(ALLOW_KEY, [])
    if not isinstance(value, list) or not all(_valid(item) for item in value):
        raise ConfigError(f'{ALLOW_KEY}: must be a list of "SERVER/TOOL" strings')
    return frozenset(value)


def is_allowed(extra: Mapping[str, Any], key: str) -> bool:
    """The user allow-listed this tool (a malformed list allows nothing)."""
    try:
        return bool(key) and key in allowed_tools(extra)
    except ConfigError:
        return False


def allow_tool(key: str, paths: Paths | None = None) -> list[str]:
    """Add one tool to the settings file's allow-list (read back from the file itself, so
    environment overrides are not written into it); returns the new list."""
    from ember.app.config import load_settings, save_settings

    if not _valid(key):
        raise ConfigError(f"{ALLOW_KEY}: {key!r} is not SERVER/TOOL")
    on_disk = load_settings(paths, env={})
    current = sorted(allowed_tools(on_disk.extra))
    updated = current if key in current else sorted([*current, key])
    on_disk.extra[ALLOW_KEY] = updated
    save_settings(on_disk, paths)
    return updated


def _valid(item: object) -> bool:
    if not isinstance(item, str) or item.count("/") < 1 or len(item) > 300:
        return False
    server, _, tool = item.partition("/")
    return bool(server) and bool(tool) and item.isprintable()
