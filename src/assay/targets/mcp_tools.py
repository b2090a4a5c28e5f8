"""The MCP servers a tool fixture names (``mcp:``), whose tools a chat model is offered.

Each distinct server (its URI; for stdio, also the fixture's folder, which is
its working folder and where a relative command resolves) is connected once,
at the first trial that needs it, through ``mcp_connection`` — the client the
MCP target uses — and its tools are listed once per connection. Every trial
shares it; ``close()`` stops them all. A server that cannot be reached the
first time is a harness failure; one lost later is reconnected by the next
trial (and if that fails, that trial is broken). See
``docs/decisions/0010-openai-target.md``.
"""

from __future__ import annotations

import asyncio
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import HarnessFailure
from ..install_hints import reinstall
from ..mcp_uri import parse_mcp_uri, resolve_command
from ..model.fixture import ToolFixture
from .base import TrialBroken
from .mcp import START_TIMEOUT_S
from .mcp_connection import (
    Answer,
    ConnectFailed,
    Connection,
    ConnectionLost,
    ProtocolError,
    ToolInfo,
    http_connection,
    mute_sdk_logs,
    stdio_connection,
)


class McpServer:
    """One server a fixture names: its connection (made when first needed) and tool list."""

    def __init__(self, uri: str, base_dir: Path, command: list[str], url: str) -> None:
        self.uri = uri
        self.base_dir = base_dir
        self.command = command
        self.url = url
        self.connection: Connection | None = None
        self.tools: list[ToolInfo] = []
        self.connected_once = False
        self.all_connections: set[Connection] = set()
        self._lock = asyncio.Lock()

    def _live(self) -> bool:
        return self.connection is not None and not self.connection.lost

    async def listing(self, failure_prefix: str) -> list[ToolInfo]:
        """The server's tools, connecting (or reconnecting) first if need be."""
        if self._live():
            return self.tools
        async with self._lock:  # one (re)connection, however many trials need it
            if self._live():
                return self.tools
            if self.connection is not None:
                old, self.connection = self.connection, None
                await old.close()
                self.all_connections.discard(old)
            if self.command:
                connection = stdio_connection(self.command[0], self.command[1:], self.base_dir)
            else:
                connection = http_connection(self.url)
            self.all_connections.add(connection)  # closed by close(), even if a timeout hits
            try:
                await connection.open(START_TIMEOUT_S)
                tools = await connection.list_tools()
            except (ConnectFailed, ConnectionLost, ProtocolError) as exc:
                await connection.close()
                self.all_connections.discard(connection)
                raise self._failure(failure_prefix, exc) from None
            self.connection, self.tools, self.connected_once = connection, tools, True
            return tools

    def _failure(self, prefix: str, exc: Exception) -> Exception:
        if self.connected_once:
            again = "restarted" if self.command else "reached again"
            return TrialBroken(f"the MCP server {self.uri} could not be {again}: {exc}")
        what = "did not start" if self.command else f"cannot be reached at {self.url}"
        message = f"{prefix}: the MCP server {self.uri} {what}: {exc}"
        stderr = exc.stderr if isinstance(exc, ConnectFailed) else ""
        if stderr:  # it was never sent a case: its stderr cannot quote one
            message += "\nits stderr ends with:\n" + textwrap.indent(stderr, "  ")
        return HarnessFailure(message)

    async def call(self, name: str, arguments: dict[str, Any]) -> Answer:
        """Forward a call; ``ConnectionLost`` breaks the trial, ``ProtocolError`` is an answer."""
        connection = self.connection
        if connection is None:
            raise ConnectionLost("the server is not connected")
        return await connection.call(name, arguments)


@dataclass(frozen=True)
class McpTool:
    """A tool a fixture's MCP server lists, and the server that answers it."""

    server: McpServer
    info: ToolInfo


class McpServers:
    """The servers of every fixture an ``openai:`` target has seen, shared across trials."""

    def __init__(self, target_uri: str) -> None:
        self.target_uri = target_uri
        self._servers: dict[tuple[str, Path | None], McpServer] = {}

    def _server(self, uri: str, base_dir: Path, prefix: str) -> McpServer:
        address = parse_mcp_uri(uri)  # checked when the fixture loaded
        key = (uri, base_dir if address.stdio else None)
        server = self._servers.get(key)
        if server is None:
            command: list[str] = []
            if address.stdio:
                try:
                    command = resolve_command(address.argv, base_dir)
                except ValueError as exc:
                    raise HarnessFailure(f"{prefix}: MCP server {uri}: {exc}") from None
            server = self._servers[key] = McpServer(uri, base_dir, command, address.url)
        return server

    async def tools_for(self, fixture: ToolFixture, path: Path | None,
                        base_dir: Path) -> dict[str, McpTool]:
        """The tools of the fixture's servers by name; a name given twice is a harness failure."""
        if not fixture.mcp:
            return {}
        prefix = f"target {self.target_uri}: tool fixture {path or '(unnamed)'}"
        try:
            import mcp  # noqa: F401 - only to say so when it is missing
        except ImportError:
            raise HarnessFailure(f"{prefix} names MCP servers, and {reinstall('mcp')}") from None
        mute_sdk_logs()
        taken = {tool.name: "a tool of its `tools:`" for tool in fixture.tools}
        taken.update((name, "an ask tool of its `answers:`") for name in fixture.answers
                     if name not in taken)
        found: dict[str, McpTool] = {}
        for uri in dict.fromkeys(fixture.mcp):
            server = self._server(uri, base_dir, prefix)
            for info in await server.listing(prefix):
                if info.name in taken:
                    raise HarnessFailure(f"{prefix}: the MCP server {uri} lists a tool "
                                         f"{info.name!r}, and so does {taken[info.name]}; "
                                         "a model must be offered each name once")
                taken[info.name] = f"the MCP server {uri}"
                found[info.name] = McpTool(server, info)
        return found

    async def close(self) -> None:
        """Stop every server started (close every session opened)."""
        connections = [c for s in self._servers.values() for c in s.all_connections]
        self._servers.clear()
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)
