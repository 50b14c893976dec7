"""McpHub: the configured MCP servers, connected through the `mcp` package, as tools to offer a
model and to call.

The MCP client is asyncio code that must enter and leave each connection in one task, and the
chat app calls from thread workers; so the hub runs its own event loop on a daemon thread, one
long-lived task per server (connect, list tools, then serve calls from a queue until closed), and
its public methods block the calling worker until the answer comes (never the UI thread). A
server that cannot start or answer is reported in `errors` and left out; the others go on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.app.mcp.config import McpServerConfig
from ember.errors import EmberError

CONNECT_TIMEOUT_S = 60.0
MAX_RESULT_CHARS = 32_000  # what goes back to the model from one call (the rest is cut)
_VALID_NAME = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


class McpError(EmberError):
    """An MCP server could not be reached, or a call could not be made."""


@dataclass(frozen=True)
class McpTool:
    """A tool as the model sees it (`name`, unique across servers) and where it lives."""

    name: str
    server: str
    remote_name: str  # the tool's name on its server
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolOutcome:
    """What a call returned, as the text the model reads; is_error when the tool failed."""

    text: str
    is_error: bool = False


class _Server:
    """One server's task: its connection, its tools, its queue of calls."""

    def __init__(self, config: McpServerConfig, log_dir: Path) -> None:
        self.config = config
        self.log_dir = log_dir
        self.tools: concurrent.futures.Future[list[Any]] = concurrent.futures.Future()
        self.dead = ""  # why the connection ended ("" while it lives)
        self.calls: asyncio.Queue[tuple[str, dict[str, Any], concurrent.futures.Future[Any]] | None]

    def _transport(self, stack: Any) -> Any:
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client

        config = self.config
        if config.command:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            # the server's stderr goes to a log: in the terminal it would break the chat screen
            errlog = stack.enter_context(
                open(self.log_dir / f"mcp-{config.name}.log", "a", encoding="utf-8")  # noqa: SIM115
            )
            params = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                env=dict(config.env) or None,
                cwd=config.cwd or None,
            )
            return stdio_client(params, errlog=errlog)
        import httpx2

        http = httpx2.AsyncClient(headers=dict(config.headers), timeout=config.timeout_s)
        return streamable_http_client(config.url, http_client=http), http

    async def run(self) -> None:
        from contextlib import AsyncExitStack, ExitStack

        from mcp import Client

        self.calls = asyncio.Queue()
        try:
            with ExitStack() as files:
                transport = self._transport(files)
                async with AsyncExitStack() as stack:
                    if isinstance(transport, tuple):
                        transport, http = transport
                        await stack.enter_async_context(http)
                    client = await stack.enter_async_context(
                        Client(transport, read_timeout_seconds=self.config.timeout_s)
                    )
                    self.tools.set_result(await _all_tools(client))
                    await self._serve(client)
            self.dead = "closed"
        except BaseException as exc:  # noqa: BLE001 - any failure is this server's one line
            reason = _reason(exc)
            self.dead = reason or "the connection ended"
            if not self.tools.done():
                self.tools.set_exception(McpError(f"MCP server {self.config.name}: {reason}"))
            self._fail_pending(reason)
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def _serve(self, client: Any) -> None:
        while (item := await self.calls.get()) is not None:
            name, arguments, answer = item
            try:
                answer.set_result(await client.call_tool(name, arguments))
            except Exception as exc:  # noqa: BLE001 - the call failed; the connection may live
                answer.set_exception(McpError(f"{self.config.name}/{name}: {_reason(exc)}"))

    def _fail_pending(self, reason: str) -> None:
        while not self.calls.empty():
            item = self.calls.get_nowait()
            if item is not None and not item[2].done():
                item[2].set_exception(McpError(f"MCP server {self.config.name}: {reason}"))


class McpHub:
    """The servers of `configs` (enabled ones), connected on first use."""

    def __init__(self, configs: list[McpServerConfig], log_dir: Path) -> None:
        self.configs = [c for c in configs if c.enabled]
        self.log_dir = log_dir
        self.errors: dict[str, str] = {}  # server name -> why it is left out
        self._servers: dict[str, _Server] = {}
        self._tools: dict[str, McpTool] | None = None
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _start(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=loop.run_forever, name="mcp", daemon=True)
            self._thread.start()
            self._loop = loop
        return self._loop

    def _submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self._start())

    def tools(self) -> list[McpTool]:
        """Every tool of every server that answers (blocking: connects on the first call)."""
        with self._lock:
            if self._tools is None:
                self._tools = self._connect()
            return list(self._tools.values())

    def _connect(self) -> dict[str, McpTool]:
        for config in self.configs:
            server = _Server(config, self.log_dir)
            self._servers[config.name] = server
            self._submit(server.run())
        tools: dict[str, McpTool] = {}
        for name, server in self._servers.items():
            try:
                listed = server.tools.result(timeout=CONNECT_TIMEOUT_S)
            except concurrent.futures.TimeoutError:
                self.errors[name] = f"MCP server {name}: no answer in {CONNECT_TIMEOUT_S:.0f} s"
                continue
            except McpError as exc:
                self.errors[name] = str(exc)
                continue
            for tool in listed:
                offered = _offered_name(tool.name, name, tools)
                tools[offered] = McpTool(
                    offered, name, tool.name, tool.description or "", dict(tool.input_schema or {})
                )
        return tools

    def call(self, tool_name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Run a tool (blocking, bounded by its server's timeout_s); a failing tool is an
        outcome with is_error, an unreachable server an McpError."""
        tool = {t.name: t for t in self.tools()}.get(tool_name)
        if tool is None:
            raise McpError(f"no MCP tool named {tool_name!r}")
        server = self._servers[tool.server]
        if server.dead:
            raise McpError(f"MCP server {tool.server}: {server.dead}")
        answer: concurrent.futures.Future[Any] = concurrent.futures.Future()
        loop = self._start()
        loop.call_soon_threadsafe(server.calls.put_nowait, (tool.remote_name, arguments, answer))
        timeout = server.config.timeout_s + 5.0  # the client's own read timeout comes first
        try:
            result = answer.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            raise McpError(
                f"{tool.server}/{tool.remote_name}: no answer in {timeout:.0f} s"
            ) from None
        return _outcome(result)

    def close(self) -> None:
        """End every connection (stdio servers are stopped) and the loop thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        for server in self._servers.values():
            if hasattr(server, "calls"):
                loop.call_soon_threadsafe(server.calls.put_nowait, None)

        async def _drain() -> None:
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            await asyncio.wait(pending, timeout=10.0)

        try:
            asyncio.run_coroutine_threadsafe(_drain(), loop).result(timeout=15.0)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5.0)
        self._loop = self._thread = None


async def _all_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    for _ in range(100):  # a server whose pages never end cannot hang the chat
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _offered_name(name: str, server: str, taken: dict[str, McpTool]) -> str:
    """The tool's own name when it is free and valid, else server_name (cleaned, <= 64)."""
    if name not in taken and name and len(name) <= 64 and set(name) <= _VALID_NAME:
        return name
    base = "".join(c if c in _VALID_NAME else "_" for c in f"{server}_{name}")[:60] or "tool"
    offered, n = base, 2
    while offered in taken:
        offered, n = f"{base}_{n}", n + 1
    return offered


def _outcome(result: Any) -> ToolOutcome:
    """A CallToolResult as text: its text blocks, else its structured content, else a note of
    what came back that is not text."""
    texts: list[str] = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)
        elif kind == "resource" and hasattr(getattr(block, "resource", None), "text"):
            texts.append(block.resource.text)
        else:
            texts.append(f"[{kind or 'content'} {getattr(block, 'mime_type', '') or ''}]".strip())
    if not texts and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(texts)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n… (cut: {len(text)} characters in all)"
    return ToolOutcome(text, bool(result.is_error))


def _reason(exc: BaseException) -> str:
    """One line for an exception (task groups wrap the real one)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
