"""McpHub against a real MCP server (tests/tui/mcp_server.py) over stdio and streamable HTTP;
the settings' [mcp_servers.NAME] tables and their one-line errors."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.app.errors import ConfigError
from ember.app.mcp.config import McpServerConfig, mcp_servers
from ember.app.mcp.hub import McpError, McpHub
from tests.waiting import wait_until

SERVER = Path(__file__).resolve().parents[2] / "tui" / "mcp_server.py"


def stdio_config(name: str = "tools", calls: Path | None = None) -> McpServerConfig:
    env = {"EMBER_MCP_CALLS": str(calls)} if calls else {}
    return McpServerConfig(name, command=sys.executable, args=(str(SERVER),), env=env)


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[McpHub]:
    made = McpHub([stdio_config(calls=tmp_path / "calls.txt")], tmp_path / "logs")
    yield made
    made.close()


def test_stdio_server_tools_and_calls(hub: McpHub, tmp_path: Path) -> None:
    tools = {t.name: t for t in hub.tools()}
    assert set(tools) == {"add", "capital", "broken"}
    assert tools["add"].description == "Add two integers and return the sum."
    assert tools["add"].input_schema["properties"]["a"]["type"] == "integer"
    assert hub.call("add", {"a": 2, "b": 40}).text == "42"
    assert (tmp_path / "calls.txt").read_text() == "add 2 40\n"
    failed = hub.call("broken", {"reason": "boom"})
    assert failed.is_error and "broken" in failed.text
    with pytest.raises(McpError, match="no MCP tool named 'nope'"):
        hub.call("nope", {})
    assert hub.errors == {}


def test_same_names_get_the_server_name_and_a_dead_server_is_left_out(tmp_path: Path) -> None:
    bad = McpServerConfig("gone", command=str(tmp_path / "no-such-program"))
    hub = McpHub([stdio_config("one"), bad, stdio_config("two")], tmp_path / "logs")
    try:
        names = {t.name: (t.server, t.remote_name) for t in hub.tools()}
        assert names["add"] == ("one", "add")
        assert names["two_add"] == ("two", "add")
        assert {server for server, _ in names.values()} == {"one", "two"}
        assert hub.errors["gone"].startswith("MCP server gone: ")
        assert hub.call("two_add", {"a": 1, "b": 1}).text == "2"
    finally:
        hub.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_http_server(tmp_path: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    hub = McpHub([McpServerConfig("web", url=f"http://127.0.0.1:{port}/mcp")], tmp_path)
    try:
        wait_until(lambda: _listening(port), "the MCP server listens", 60, interval_s=0.1,
                   gone=lambda: proc.poll() is not None)  # fmt: skip
        assert hub.call("capital", {"country": "France"}).text == "Paris"
    finally:
        hub.close()
        proc.terminate()
        proc.wait(timeout=10)


def test_settings_tables() -> None:
    servers = mcp_servers(
        {
            "mcp_servers": {
                "files": {"command": "python", "args": ["-m", "x"], "env": {"A": "1"}},
                "web": {"url": "https://example.org/mcp", "timeout_s": 5, "enabled": False},
            }
        }
    )
    assert [(s.name, s.transport, s.enabled) for s in servers] == [
        ("files", "stdio", True),
        ("web", "http", False),
    ]
    assert mcp_servers({}) == []
    for table, reason in [
        ({"x": {"command": "a", "url": "http://b"}}, "mcp_servers.x: give either command"),
        ({"x": {}}, "mcp_servers.x: give either command"),
        ({"x": {"url": "ftp://b"}}, "mcp_servers.x.url: 'ftp://b' must start with http"),
        ({"x": {"command": "a", "args": "b"}}, "mcp_servers.x.args: must be a list of strings"),
        ({"x": {"command": "a", "colour": 1}}, "mcp_servers.x.colour: unknown key"),
        ({"x": {"command": "a", "timeout_s": 0}}, "mcp_servers.x.timeout_s"),
        ({"x y": {"command": "a"}}, "mcp_servers.x y: a server name is"),
        ({"x": "python"}, "mcp_servers.x: must be a table"),
    ]:
        with pytest.raises(ConfigError, match=None) as info:
            mcp_servers({"mcp_servers": table})
        assert reason in str(info.value)


def test_saving_the_settings_keeps_the_server_tables(ember_home: Path) -> None:
    from ember.app.config import load_settings, save_settings
    from ember.paths import get_paths

    paths = get_paths()
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text(
        'model = "m"\n\n[mcp_servers.files]\ncommand = "python"\nargs = ["-m", "x y"]\n'
        '[mcp_servers.files.env]\n"A B" = "1"\n\n[mcp_servers.web]\nurl = "http://h/mcp"\n'
    )
    settings = load_settings(paths, env={})
    save_settings(settings, paths)
    again = load_settings(paths, env={})
    assert again.extra == settings.extra
    assert [s.name for s in mcp_servers(again.extra)] == ["files", "web"]
    assert mcp_servers(again.extra)[0].env == {"A B": "1"}


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True
