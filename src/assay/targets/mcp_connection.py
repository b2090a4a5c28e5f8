"""One MCP client session, kept alive in a task of its own.

The SDK's ``Client`` enters anyio task groups and cancel scopes, which must be
left by the task that entered them, and a transport that fails (a streamable
HTTP server that drops the socket) cancels the task that holds the client. So
the client does not live in a trial's task, nor in ``start``'s: an owner task
opens it, waits until it is told to stop, and closes it. Trials only send
requests through it, from any task, concurrently (JSON-RPC ids keep the
answers apart), and a connection that dies wakes every call still waiting on
it instead of leaving them to hang until their timeout.

The ``mcp`` SDK is imported when a connection is made, not with this module,
so that a missing SDK is reported as such (and ``assay --help`` stays fast).
"""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from ..version import __version__
from .refusal import refusal_in_text, refusal_of

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import CallToolResult, Implementation, ListToolsResult

    from ..model import Status

#: The SDK's own words for a connection that ended under a waiting request.
_CLOSED = "Connection closed"
#: Pages of ``tools/list`` read before a server's listing is taken to be endless.
_MAX_PAGES = 100

_T = TypeVar("_T")


class ConnectFailed(Exception):
    """The server could not be started or did not finish initializing.

    ``stderr`` holds the last lines the server wrote; the caller decides
    whether they may be shown (before any case ran, they cannot quote one).
    """

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr


class ConnectionLost(Exception):
    """The connection ended while (or before) a call was waiting on it."""


class ProtocolError(Exception):
    """The server answered a call with a JSON-RPC error, or with a malformed result."""


@dataclass(frozen=True)
class ToolInfo:
    """A tool as the server lists it: name, description, JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Answer:
    """What a tool call gave: the output value, the result's text, whether it is an error."""

    output: Any
    text: str
    is_error: bool

    def status(self) -> tuple[Status, str | None]:
        """The status of a trace this answer ends, and its ``error``.

        Not an error: ``ok``. An error (``isError``) whose structured content, or
        whose text read as JSON, is ``{"status": "refused", "reason": …}``:
        ``refused``, the reason as its error (SPEC §4, ``targets.refusal``).
        Any other error: ``error``, its text as the error. The MCP target and
        the MCP proxy both read an answer here.
        """
        if not self.is_error:
            return "ok", None
        refusal = refusal_of(self.output) or refusal_in_text(self.text)
        if refusal is not None:
            return "refused", refusal.reason
        return "error", self.text or "the tool reported an error"


def describe(exc: BaseException) -> str:
    """``Type: message`` of an error, looking inside exception groups (anyio wraps in them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def mute_sdk_logs() -> None:
    """Keep the SDK's log records out of assay's stderr.

    Without a handler, Python prints warnings to stderr; the SDK logs a
    server's unparsable output (which may quote a hidden case) that way.
    """
    logger = logging.getLogger("mcp")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    logger.propagate = False


def _no_constant(name: str) -> Any:
    raise ValueError(name)  # NaN and Infinity are not JSON: such a text stays text


def _value(text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_no_constant)
    except ValueError:
        return text


def answer_of(result: CallToolResult) -> Answer:
    """Structured content when there is some, else the text (decoded when it is JSON)."""
    from mcp.types import TextContent

    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    text = "\n".join(texts)
    if result.structured_content is not None:
        output: Any = result.structured_content
    elif not texts:
        output = None
    elif len(texts) == 1:
        output = _value(texts[0])
    else:
        output = [_value(t) for t in texts]
    return Answer(output=output, text=text, is_error=result.is_error)


def _client_info() -> Implementation:
    from mcp.types import Implementation

    return Implementation(name="assay", version=__version__)


def stdio_connection(command: str, args: list[str], cwd: Path,
                     env: dict[str, str] | None = None) -> Connection:
    """A server started as ``command args`` in ``cwd``, with the SDK's minimal environment
    (and ``env`` added to it).

    Its stderr goes to a temporary file, not to assay's: it may quote a case.
    """
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    log = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
    params = StdioServerParameters(command=command, args=args, cwd=cwd, env=env)
    info = _client_info()
    return Connection(lambda: Client(stdio_client(params, errlog=log), client_info=info,
                                     cache=None), log)


def http_connection(url: str) -> Connection:
    """A session with a server over streamable HTTP."""
    from mcp import Client

    info = _client_info()
    return Connection(lambda: Client(url, client_info=info, cache=None))


def _handshake_failure(failure: BaseException | None) -> str:
    from mcp import MCPError
    from mcp.types import CONNECTION_CLOSED

    if failure is None:
        return "the handshake was cancelled"
    if isinstance(failure, MCPError) and failure.code == CONNECTION_CLOSED:
        return "the server closed the connection during the handshake (did it exit?)"
    return describe(failure)


class Connection:
    """An opened ``mcp.Client`` that any task may call tools through.

    ``make_client`` builds the (not yet entered) client; ``log`` is the file
    the server's stderr goes to (stdio), closed with the connection.
    """

    def __init__(self, make_client: Callable[[], Client], log: IO[str] | None = None) -> None:
        self._make_client = make_client
        self.log = log
        self.client: Client | None = None
        self.server_name = ""
        self.server_version = ""
        self.protocol_version = ""
        #: Set once the connection can carry no more calls.
        self.lost = False
        self.failure: BaseException | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._waiting: set[asyncio.Task[Any]] = set()
        self._abandoned: set[asyncio.Task[Any]] = set()

    async def open(self, timeout_s: float) -> None:
        """Start the owner task and wait for the handshake; ``ConnectFailed`` says why not."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        self._task = asyncio.create_task(self._own(ready), name="assay-mcp-connection")
        try:
            done, _ = await asyncio.wait({ready}, timeout=timeout_s)
        except asyncio.CancelledError:
            ready.cancel()  # nobody will read what it would have held
            self._task.cancel()
            raise
        if not done:
            stderr = self.stderr_tail()
            self._task.cancel()  # it waits on the handshake, not on the stop signal
            await self.close()
            raise ConnectFailed(f"no answer to the MCP handshake within {timeout_s:g}s", stderr)
        if ready.cancelled() or ready.exception() is not None:
            failure = None if ready.cancelled() else ready.exception()
            stderr = self.stderr_tail()
            await self.close()
            raise ConnectFailed(_handshake_failure(failure), stderr)

    async def _own(self, ready: asyncio.Future[None]) -> None:
        try:
            async with self._make_client() as client:
                self.client = client
                info = client.server_info
                if info is not None:
                    self.server_name, self.server_version = info.name, info.version
                self.protocol_version = client.protocol_version
                if not ready.done():
                    ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on us
            self.failure = exc
            if not ready.done():
                if isinstance(exc, asyncio.CancelledError):
                    ready.cancel()
                else:
                    ready.set_exception(exc)
        finally:
            self.lost = True
            self._abandon()

    async def call(self, name: str, arguments: dict[str, Any]) -> Answer:
        """Call a tool. ``ProtocolError`` is the server's answer; ``ConnectionLost``
        means the connection is gone and must be replaced."""
        return answer_of(await self._request(lambda client: client.call_tool(name, arguments)))

    async def list_tools(self) -> list[ToolInfo]:
        """Every tool the server lists (all pages); errors as for ``call``."""
        tools: list[ToolInfo] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            async def one_page(client: Client, at: str | None = cursor) -> ListToolsResult:
                return await client.list_tools(cursor=at)

            page = await self._request(one_page)
            tools.extend(ToolInfo(name=t.name, description=t.description or "",
                                  parameters=dict(t.input_schema)) for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools
        raise ProtocolError(f"the tool list goes on past {_MAX_PAGES} pages")

    async def send(self, send: Callable[[Client], Awaitable[_T]]) -> _T:
        """Any request, its result as the SDK returns it (the MCP proxy forwards results
        unchanged); errors as for ``call``."""
        return await self._request(send)

    async def _request(self, send: Callable[[Client], Awaitable[_T]]) -> _T:
        """Send one request through the client, mapping what goes wrong (see ``call``)."""
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED

        task = asyncio.current_task()
        if self.lost or self.client is None or task is None:
            raise ConnectionLost(self.why_lost())
        # Awaited in the caller's own task (no task per call): if the owner
        # task ends first, it cancels the callers still waiting (``_abandon``).
        self._waiting.add(task)
        try:
            return await send(self.client)
        except asyncio.CancelledError:
            if task not in self._abandoned:
                raise  # the caller's own cancellation: a timeout, an interrupt
            raise ConnectionLost(self.why_lost()) from None
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED and exc.message == _CLOSED:
                self.lost = True
                raise ConnectionLost(self.why_lost()) from None
            raise ProtocolError(f"{exc.message} (JSON-RPC {exc.code})") from None
        except ValidationError as exc:
            raise ProtocolError(f"the server's result does not conform to the protocol "
                                f"({exc.error_count()} problem(s))") from None
        except Exception as exc:  # a transport fault: this connection is not to be trusted
            self.lost = True
            raise ConnectionLost(describe(exc)) from None
        finally:
            self._waiting.discard(task)
            if task in self._abandoned:  # take back the cancellation _abandon asked for
                self._abandoned.discard(task)
                task.uncancel()

    def _abandon(self) -> None:
        """The connection is gone: wake every caller still waiting on it."""
        for task in self._waiting:
            self._abandoned.add(task)
            task.cancel()
        self._waiting.clear()

    def why_lost(self) -> str:
        """A short reason for a lost connection."""
        if self.failure is not None and not isinstance(self.failure, asyncio.CancelledError):
            return f"the connection failed: {describe(self.failure)}"
        return "the server closed the connection"

    def stderr_tail(self, lines: int = 6, chars: int = 800) -> str:
        """The last lines the server wrote to stderr (to show only before any case ran)."""
        if self.log is None or self.log.closed:
            return ""
        try:
            self.log.flush()
            self.log.seek(0)
            text = self.log.read()
        except (OSError, ValueError):
            return ""
        tail = [line for line in text.splitlines() if line.strip()][-lines:]
        return "\n".join(tail)[-chars:]

    async def close(self, timeout_s: float = 10.0) -> None:
        """Stop the owner task: the SDK closes the session and stops the server process."""
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            done, _ = await asyncio.wait({task}, timeout=timeout_s)
            if not done:
                task.cancel()
                await asyncio.wait({task}, timeout=timeout_s)
        if self.log is not None and (task is None or task.done()):
            self.log.close()
