"""MCP servers from the settings file: one `[mcp_servers.NAME]` table each.

    [mcp_servers.files]                 # a server Ember starts (stdio)
    command = "python"
    args = ["-m", "my_mcp_server"]
    env = { ROOT = "/home/me/notes" }   # optional; cwd = "..." optional

    [mcp_servers.search]                # a server that is already running (streamable HTTP)
    url = "http://127.0.0.1:8000/mcp"
    headers = { Authorization = "Bearer ..." }   # optional

`timeout_s` (default 60) bounds each tool call. `enabled = false` keeps a server configured
but unused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ember.app.errors import ConfigError

SETTINGS_KEY = "mcp_servers"
_KEYS = {"command", "args", "env", "cwd", "url", "headers", "timeout_s", "enabled"}


@dataclass(frozen=True)
class McpServerConfig:
    """How to reach one MCP server: a command to start (stdio) or a URL (streamable HTTP)."""

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str = ""
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 60.0
    enabled: bool = True

    def __post_init__(self) -> None:
        where = f"{SETTINGS_KEY}.{self.name}"
        if not self.name or not all(c.isalnum() or c in "_-" for c in self.name):
            raise ConfigError(f"{where}: a server name is letters, digits, _ or -")
        if bool(self.command) == bool(self.url):
            raise ConfigError(f"{where}: give either command (stdio) or url (HTTP), not both")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"{where}.url: {self.url!r} must start with http:// or https://")
        if not 0 < self.timeout_s <= 3600:
            raise ConfigError(f"{where}.timeout_s: {self.timeout_s} must be in (0, 3600]")

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"


def mcp_servers(extra: Mapping[str, Any]) -> list[McpServerConfig]:
    """The configured servers, from the settings file's `mcp_servers` table (the Settings'
    `extra`); ConfigError naming the key that is wrong."""
    table = extra.get(SETTINGS_KEY, {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"{SETTINGS_KEY}: must be a table of [{SETTINGS_KEY}.NAME] tables")
    return [_server(str(name), value) for name, value in table.items()]


def _server(name: str, value: Any) -> McpServerConfig:
    where = f"{SETTINGS_KEY}.{name}"
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: must be a table (command = ... or url = ...)")
    unknown = sorted(set(value) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key (known: {', '.join(sorted(_KEYS))})")
    timeout = value.get("timeout_s", 60.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise ConfigError(f"{where}.timeout_s: must be a number of seconds")
    enabled = value.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{where}.enabled: must be true or false")
    return McpServerConfig(
        name=name,
        command=_string(value, "command", where),
        args=tuple(_strings(value, "args", where)),
        env=_string_table(value, "env", where),
        cwd=_string(value, "cwd", where),
        url=_string(value, "url", where),
        headers=_string_table(value, "headers", where),
        timeout_s=float(timeout),
        enabled=enabled,
    )


def _string(value: Mapping[str, Any], key: str, where: str) -> str:
    item = value.get(key, "")
    if not isinstance(item, str):
        raise ConfigError(f"{where}.{key}: must be a string")
    return item


def _strings(value: Mapping[str, Any], key: str, where: str) -> list[str]:
    items = value.get(key, [])
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        raise ConfigError(f"{where}.{key}: must be a list of strings")
    return list(items)


def _string_table(value: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    items = value.get(key, {})
    if not isinstance(items, Mapping) or not all(isinstance(v, str) for v in items.values()):
        raise ConfigError(f"{where}.{key}: must be a table of strings")
    return {str(k): v for k, v in items.items()}
