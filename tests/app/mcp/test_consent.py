"""The tool allow-list: only this machine's settings file grants it; a malformed list grants
nothing; writing it keeps the file's other keys and never writes environment overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.app.config import load_settings
from ember.app.errors import ConfigError
from ember.app.mcp.consent import ALLOW_KEY, allow_tool, allowed_tools, is_allowed, tool_key
from ember.paths import get_paths


def test_allow_tool_writes_the_settings_file_only(ember_home: Path, monkeypatch) -> None:
    cfg = get_paths().config_file
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text('temperature = 0.3\n\n[mcp_servers.calc]\ncommand = "x"\n', encoding="utf-8")
    monkeypatch.setenv("EMBER_MODEL", "from-the-environment")
    assert allow_tool(tool_key("calc", "add")) == ["calc/add"]
    assert allow_tool("calc/add") == ["calc/add"]  # once
    assert allow_tool("files/read") == ["calc/add", "files/read"]
    on_disk = load_settings(env={})
    assert on_disk.extra[ALLOW_KEY] == ["calc/add", "files/read"]
    assert on_disk.temperature == 0.3 and on_disk.extra["mcp_servers"]["calc"]["command"] == "x"
    assert "from-the-environment" not in cfg.read_text(encoding="utf-8")
    assert is_allowed(on_disk.extra, "calc/add") and not is_allowed(on_disk.extra, "evil/add")


@pytest.mark.parametrize(
    "value", ["calc/add", ["add"], [1], ["/add"], ["calc/"], ["calc/a\x1bdd"], {"calc/add": True}]
)
def test_a_malformed_list_allows_nothing(value: object) -> None:
    with pytest.raises(ConfigError, match=ALLOW_KEY):
        allowed_tools({ALLOW_KEY: value})
    assert not is_allowed({ALLOW_KEY: value}, "calc/add")


def test_an_unknown_tool_is_never_allowed() -> None:
    assert not is_allowed({ALLOW_KEY: ["calc/add"]}, "")
    with pytest.raises(ConfigError):
        allow_tool("")
