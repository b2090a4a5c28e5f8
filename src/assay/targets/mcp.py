"""``mcp+stdio:COMMAND ARGS…`` and ``mcp+http://HOST:PORT/PATH`` — a tool of an MCP server.

Each trial calls the tool the suite's ``call.tool`` names, with the case
input as its arguments, through the official ``mcp`` SDK (SPEC §4). One
server (one session) serves every trial unless the suite asks for
``call: {tool: …, fresh: true}``; see ``docs/decisions/0009-mcp-servers.md``.

What the trace says:

- the output is the result's structured content when there is some, else
  its text (decoded when it is JSON); ``is_error`` gives status ``error``,
  or ``refused`` when the result says ``{"status": "refused", "reason": …}``
  (``Answer.status``);
- an error the server answers at the protocol level (unknown tool, invalid
  params: a JSON-RPC error) gives status ``error`` with ``protocol error: …``
  and an ``error`` event, apart from a tool's own ``is_error``;
- a connection that breaks (the server died, the socket dropped) breaks the
  trial; a stdio server is restarted, an HTTP session reopened, for the next.
"""

from __future__ import annotations

import asyncio
import difflib
import os
import textwrap
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import HarnessFailure, UsageError
from ..install_hints import reinstall
from ..mcp_uri import parse_mcp_uri, resolve_command
from ..model import Event, Status, Trace
from .base import Partial, TargetOptions, TrialBroken, TrialRequest, case_facets, evidence
from .identity import file_entries, identity_digest
from .mcp_connection import (
    Answer,
    ConnectFailed,
    Connection,
    ConnectionLost,
    ProtocolError,
    http_connection,
    mute_sdk_logs,
    stdio_connection,
)

#: How long a server may take to start and answer the handshake.
START_TIMEOUT_S = 60.0

#: Why a case's model or effort pin does not reach an MCP server.
UNPINNABLE = "an MCP server picks its own model and effort"

#: How many of a server's tool names a refused ``call.tool`` lists.
OFFERED_SHOWN = 40

#: The keys of a suite's ``call:`` mapping an MCP target reads.
CALL_KEYS = ("tool", "fresh")


@dataclass(frozen=True)
class CallOptions:
    """The suite's ``call:``: which tool each case input goes to, and the server's lifetime."""

    tool: str
    fresh: bool = False


def call_options(call: dict[str, Any] | None, uri: str) -> CallOptions:
    """Read ``call:``; a missing tool or a bad value is a harness failure (nothing can run).

    Keys other targets read (``max_steps`` …) are left alone, so one suite
    can run against several; a key that looks like a misspelt ``tool`` or
    ``fresh`` is refused rather than silently ignored.
    """
    call = call or {}
    for key in sorted(set(call) - set(CALL_KEYS)):
        meant = difflib.get_close_matches(key, [k for k in CALL_KEYS if k not in call], n=1,
                                          cutoff=0.7)
        if meant:
            raise HarnessFailure(f"target {uri}: the suite's `call` has {key!r}; "
                                 f"did you mean {meant[0]!r}?")
    tool = call.get("tool")
    if not isinstance(tool, str) or not tool:
        raise HarnessFailure(f"target {uri}: the suite's `call` names no tool; an MCP target "
                             "calls `call.tool` with each case input (add `call: {tool: NAME}`)")
    fresh = call.get("fresh", False)
    if not isinstance(fresh, bool):
        raise HarnessFailure(f"target {uri}: `call.fresh` must be true or false")
    return CallOptions(tool=tool, fresh=fresh)


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "a list" if isinstance(value, list) else "a string"


class McpTarget:
    """A tool of an MCP server, over stdio (a subprocess) or streamable HTTP."""

    evidence = evidence(output="observed", tool_calls="observed")

    def __init__(self, uri: str, options: TargetOptions) -> None:
        self.uri = uri
        self.options = options
        try:
            self._address = parse_mcp_uri(uri)
        except ValueError as exc:
            raise UsageError(f"target {uri!r}: {exc}") from None
        self._argv = list(self._address.argv)
        self._url = self._address.url
        self.facets = {"harness": "mcp+stdio" if self._argv else "mcp+http"}
        self._command: list[str] = []
        self._shared: Connection | None = None
        self._lock = asyncio.Lock()
        self._connections: set[Connection] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._server = ""
        #: The names of the tools the server listed at start (None: not listed yet).
        self._offered: list[str] | None = None

    @property
    def stdio(self) -> bool:
        """True for a server started as a subprocess."""
        return bool(self._argv)

    # ------------------------------------------------------------------ connections

    def _resolve_command(self) -> list[str]:
        try:
            return resolve_command(self._address.argv, self.options.base_dir)
        except ValueError as exc:
            raise HarnessFailure(f"target {self.uri}: {exc}") from None

    async def _connect(self, workspace: Path | None = None) -> Connection:
        if self.stdio and workspace is not None:
            # A case with a workspace: its own server, started in the trial's copy (SPEC §14).
            # The command and its arguments that name files beside the suite still name
            # them from there: it starts elsewhere.
            base = self.options.base_dir.resolve()
            command, *rest = self._command
            if os.sep in command and not os.path.isabs(command):
                command = str(base / command)
            args = [str(base / arg) if not os.path.isabs(arg) and (base / arg).exists() else arg
                    for arg in rest]
            connection = stdio_connection(command, args, workspace,
                                          {"ASSAY_WORKSPACE": str(workspace)})
        elif self.stdio:
            connection = stdio_connection(self._command[0], self._command[1:],
                                          self.options.base_dir)
        else:
            connection = http_connection(self._url)
        self._connections.add(connection)
        try:
            await connection.open(START_TIMEOUT_S)
        except ConnectFailed:
            self._connections.discard(connection)
            raise
        return connection

    async def _release(self, connection: Connection) -> None:
        await connection.close()
        self._connections.discard(connection)

    def _later(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ------------------------------------------------------------------ the protocol

    async def start(self) -> None:
        """Start (or reach) the server and shake hands; failing that is a harness failure."""
        try:
            import mcp  # noqa: F401 - only to say so when it is missing
        except ImportError:
            raise HarnessFailure(f"target {self.uri}: {reinstall('mcp')}") from None
        mute_sdk_logs()
        if self.stdio:
            self._command = self._resolve_command()
        try:
            connection = await self._connect()
        except ConnectFailed as exc:
            what = "did not start" if self.stdio else f"cannot be reached at {self._url}"
            message = f"target {self.uri}: the MCP server {what}: {exc}"
            if exc.stderr:  # no case has run yet: its stderr cannot quote one
                message += "\nits stderr ends with:\n" + textwrap.indent(exc.stderr, "  ")
            raise HarnessFailure(message) from None
        self._shared = connection
        if connection.server_name:
            self._server = f"{connection.server_name}/{connection.server_version}"
            self.facets["server"] = self._server
        if connection.protocol_version:
            self.facets["mcp_protocol"] = connection.protocol_version
        try:
            try:
                self._offered = [tool.name for tool in await connection.list_tools()]
            except (ProtocolError, ConnectionLost) as exc:
                raise HarnessFailure(f"target {self.uri}: the MCP server did not list its "
                                     f"tools: {exc}") from None
            if self.options.call is not None:
                self._check_offered(call_options(self.options.call, self.uri).tool)
        except HarnessFailure:
            await self.close()  # a failed start is not closed by its caller
            raise

    def _check_offered(self, tool: str) -> None:
        """A ``call.tool`` the server does not offer is the suite's mistake, not the agent's.

        Called, it would be an error answer (a server may answer "unknown tool"
        as a tool error, not a protocol error), and a case expecting
        ``status: error`` would pass on a misspelt name.
        """
        if self._offered is None or tool in self._offered:
            return
        names = sorted(self._offered)
        offered = ", ".join(names[:OFFERED_SHOWN]) or "no tools"
        if len(names) > OFFERED_SHOWN:
            offered += f" and {len(names) - OFFERED_SHOWN} more"
        close = difflib.get_close_matches(tool, self._offered, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise HarnessFailure(f"target {self.uri}: the suite's call.tool {tool!r} is not a tool "
                             f"of this MCP server{hint}; it offers: {offered}")

    async def run(self, request: TrialRequest) -> Trace:
        """Call ``call.tool`` with the case input as its arguments."""
        call = call_options(request.call, self.uri)
        self._check_offered(call.tool)
        arguments = request.case.input
        if not isinstance(arguments, dict):
            raise TrialBroken(f"the case input is {_json_kind(arguments)}; an MCP tool takes "
                              "an object of named arguments")
        if call.fresh or request.workspace is not None:
            trace = await self._run_fresh(call.tool, arguments, request.partial,
                                          request.workspace)
        else:
            trace = await self._call(await self._shared_connection(), call.tool, arguments,
                                     request.partial)
        trace.facets.update(case_facets(request.case, self.facets["harness"],
                                        unpinnable=UNPINNABLE))
        return trace

    async def _shared_connection(self) -> Connection:
        connection = self._shared
        if connection is not None and not connection.lost:
            return connection
        async with self._lock:  # one restart, however many trials find the server gone
            connection = self._shared
            if connection is not None and not connection.lost:
                return connection
            if connection is not None:
                self._shared = None
                await self._release(connection)
            try:
                self._shared = await self._connect()
            except ConnectFailed as exc:
                again = "restarted" if self.stdio else "reached again"
                raise TrialBroken(f"the MCP server could not be {again}: {exc}") from None
            return self._shared

    async def _run_fresh(self, tool: str, arguments: dict[str, Any], partial: Partial,
                         workspace: Path | None = None) -> Trace:
        if self._shared is not None:  # the server start() checked serves no trial here
            connection, self._shared = self._shared, None
            self._later(self._release(connection))
        try:
            connection = await self._connect(workspace)
        except ConnectFailed as exc:
            raise TrialBroken(f"the MCP server did not start: {exc}") from None
        try:
            trace = await self._call(connection, tool, arguments, partial)
        except asyncio.CancelledError:  # a timeout: stop the server without holding the trial
            self._later(self._release(connection))
            raise
        except BaseException:
            await self._release(connection)
            raise
        await self._release(connection)
        return trace

    async def _call(self, connection: Connection, tool: str, arguments: dict[str, Any],
                    partial: Partial) -> Trace:
        started = time.perf_counter()
        # Should the tool hang, the call that was made is the trial's record.
        partial.keep(lambda: self._trace(tool, arguments, started, None, None))
        try:
            answer = await connection.call(tool, arguments)
        except ConnectionLost as lost:
            after = "it is restarted" if self.stdio else "the next trial reconnects"
            raise TrialBroken(f"MCP server connection lost ({lost}); {after}") from None
        except ProtocolError as exc:
            return self._trace(tool, arguments, started, None, f"protocol error: {exc}")
        return self._trace(tool, arguments, started, answer, None)

    def _trace(self, tool: str, arguments: dict[str, Any], started: float,
               answer: Answer | None, error: str | None) -> Trace:
        """The trace of one call: of its answer, of a protocol ``error``, or (with
        neither) of a call still waiting."""
        duration = time.perf_counter() - started
        status: Status = "error"
        if answer is not None:
            status, error = answer.status()
        elif error is None:
            status = "ok"
        events = [Event(kind="tool_call", name=tool, arguments=arguments, call_id="call-1", t=0.0)]
        if answer is not None:
            events.append(Event(kind="tool_result", name=tool, call_id="call-1",
                                result=answer.output, is_error=answer.is_error, t=duration))
        elif error is not None:  # a protocol error: the call got no result at all
            events.append(Event(kind="error", name=tool, call_id="call-1", text=error,
                                is_error=True, t=duration))
        return Trace(
            output=answer.output if answer is not None else None,
            status=status, error=error, events=events, steps=1,
            # A refusal is the tool's final word, as an answer is; an error is not.
            settled=answer is not None and status != "error", duration_s=duration,
            facets=dict(self.facets), evidence=dict(self.evidence),
        )

    async def close(self) -> None:
        """Stop every server this target started (or close every session it opened)."""
        if self._background:
            await asyncio.wait(set(self._background), timeout=30)
        self._shared = None
        connections = list(self._connections)
        self._connections.clear()
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    def identity(self) -> dict[str, str]:
        """The URI (its command), the server's name and version from the handshake, and the
        content of the script files the command names."""
        identity = {"uri": self.uri, "server": self._server}
        base = self.options.base_dir
        identity.update(file_entries((base / arg for arg in self._argv[1:]), base))
        return identity

    def digest(self) -> str:
        """The agent version: the digest of ``identity()``."""
        return identity_digest(self.identity())
