"""``assay proxy``: an MCP server that forwards to another and samples what passes through.

A host (Claude Desktop, an IDE, an agent) launches the proxy as its server
command; the proxy starts the real server (``--upstream mcp+stdio:…``) and
forwards the host's requests to it, answering with the upstream's results
unchanged — tool errors and JSON-RPC errors too. A seeded K% of the
``tools/call`` requests are recorded as traces (``sampling.proxy_calls``) and
handed to a bounded buffer (``sampling.buffer``) whose thread grades
them with the suite's reference-free checks and queues the failures for
review. A full buffer drops the sample and counts it; the call itself never
waits on grading.

Forwarded: ``tools/list`` and ``tools/call``; ``resources/list``,
``resources/templates/list``, ``resources/read``, ``prompts/list`` and
``prompts/get`` when the upstream offers them. Not forwarded: notifications
(progress, list changes, logs), completions, subscriptions, and the
upstream's own requests to the host (sampling, elicitation, roots): the
upstream is answered as by a client that lacks those capabilities.

The ``mcp`` SDK is imported when the proxy starts, not with this module.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import HarnessFailure
from ..targets.mcp_connection import (
    ConnectFailed,
    Connection,
    ConnectionLost,
    ProtocolError,
    answer_of,
    mute_sdk_logs,
)
from .buffer import Handled, SampleBuffer, Sampler, Tally
from .proxy_calls import ProxiedCall, ProxyChecks, call_trace, grade_call, queue_row

if TYPE_CHECKING:
    from mcp import Client, MCPError
    from mcp.server import Server

    from ..store.database import Store

#: How long the upstream server may take to start and answer the handshake.
START_TIMEOUT_S = 60.0
#: How long closing the upstream server may take before it is left to the SDK's kill.
CLOSE_TIMEOUT_S = 5.0
#: How long the error that found the upstream gone may take to reach the host.
ANSWER_GRACE_S = 1.0

_T = TypeVar("_T")


def utc_now() -> str:
    """Now, in UTC, ISO 8601 to the microsecond (the queue's ``added_at``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class ProxyOptions:
    """What ``assay proxy`` was asked to do.

    ``command``: the upstream server's command line, resolved; ``cwd``: where
    it runs. ``sample``: the percentage of tool calls sampled, drawn from
    ``seed``. ``buffer``: how many samples may wait for the grader.
    ``checks`` and ``store`` are needed when ``sample`` is above 0.
    """

    upstream: str
    command: tuple[str, ...]
    cwd: Path
    sample: float
    seed: int
    buffer: int
    checks: ProxyChecks | None = None
    store: Store | None = None
    #: Names this proxy session in the facets of the traces it keeps.
    session: str = ""
    now: Callable[[], str] = field(default=utc_now)


@dataclass(frozen=True)
class Summary:
    """How a proxy session went: the calls it forwarded and what became of the samples.

    ``stopped``: why it ended before the host closed its input (a signal, the
    upstream server gone), else None. ``stuck``: the host's input is still
    open, so the thread reading it cannot be joined (the process must end).
    """

    calls: int
    tally: Tally
    sample: float
    seed: int
    stopped: str | None = None
    stuck: bool = False

    def line(self) -> str:
        """One line for stderr: calls, sampled, graded, failed, queued, dropped (and more
        when there is more to say)."""
        t = self.tally
        text = (f"proxy: {self.calls} call(s), {t.sampled} sampled ({self.sample:g}%, "
                f"seed {self.seed}), {t.graded} graded, {t.failed} failed, "
                f"{t.inconclusive} inconclusive, {t.queued} queued, {t.dropped} dropped")
        if t.abandoned:
            text += f", {t.abandoned} abandoned at exit"
        if t.lost:
            text += f", {t.lost} lost (grading or the store failed)"
        if self.stopped:
            text += f"; stopped: {self.stopped}"
        return text


@dataclass(frozen=True)
class _Sample:
    """A sampled call as it left the hot path: the SDK's result, not yet read."""

    number: int
    tool: str
    arguments: dict[str, Any] | None
    result: Any  # the upstream's CallToolResult; None when it answered with an error
    error: str | None
    duration_s: float
    at: str

    def call(self) -> ProxiedCall:
        """The call with its result read as an ``Answer`` (in the grader's thread)."""
        answer = None if self.result is None else answer_of(self.result)
        return ProxiedCall(self.number, self.tool, self.arguments, answer, self.error,
                           self.duration_s, self.at)


class _Refused:
    """The upstream's JSON-RPC error, carried out of the connection to be sent on as it is."""

    def __init__(self, error: MCPError) -> None:
        self.error = error


class Proxy:
    """One proxy session: the upstream connection, the forwarding server, the sampler."""

    def __init__(self, options: ProxyOptions) -> None:
        self.options = options
        self._connection: Connection | None = None
        self._sampler = Sampler(options.sample, options.seed)
        self._buffer: SampleBuffer[_Sample] | None = None
        self._calls = 0
        self._stop = asyncio.Event()
        self._stopped: str | None = None
        self._facets: dict[str, str] = {}
        self._closing: asyncio.Task[None] | None = None
        self._upstream_gone = False

    # ------------------------------------------------------------------ the upstream

    async def start(self) -> None:
        """Start the upstream server and shake hands; ``HarnessFailure`` says why not."""
        mute_sdk_logs()
        connection = _upstream(self.options.command, self.options.cwd)
        try:
            await connection.open(START_TIMEOUT_S)
        except ConnectFailed as exc:
            message = f"--upstream {self.options.upstream}: the MCP server did not start: {exc}"
            if exc.stderr:  # nothing was forwarded yet: its stderr quotes no host's call
                message += "\nits stderr ends with:\n" + "\n".join(
                    "  " + line for line in exc.stderr.splitlines())
            raise HarnessFailure(message) from None
        self._connection = connection
        self._facets = {"harness": "mcp-proxy", "proxy_session": self.options.session,
                        "sample_seed": str(self.options.seed),
                        "sample_percent": f"{self.options.sample:g}"}
        if connection.server_name:
            self._facets["server"] = f"{connection.server_name}/{connection.server_version}"
        if self.options.sample > 0:
            self._buffer = SampleBuffer(self.options.buffer, self._grade)

    async def close(self) -> None:
        """Stop the upstream server (once, however often asked)."""
        closing = self._begin_closing()
        if closing is not None:
            await closing

    def _begin_closing(self) -> asyncio.Task[None] | None:
        if self._connection is not None and self._closing is None:
            self._closing = asyncio.create_task(self._connection.close(CLOSE_TIMEOUT_S))
        return self._closing

    # ------------------------------------------------------------------ serving

    async def serve(self) -> Summary:
        """Serve the host on stdio until it closes its input (or a signal, or the upstream
        going away, stops it); then grade what was sampled and say how it went."""
        loop = asyncio.get_running_loop()
        for number in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(number, self._halt, f"signal {signal.Signals(number).name}")
        try:
            serving = asyncio.create_task(self._serve_stdio(self._server()),
                                          name="assay-proxy-serve")
            halted = asyncio.create_task(self._stop.wait())
            await asyncio.wait({serving, halted}, return_when=asyncio.FIRST_COMPLETED)
            if not serving.done() and self._upstream_gone:
                # The answer that found the upstream gone is on its way to the host:
                # let it out before the session is cut.
                await asyncio.wait({serving}, timeout=ANSWER_GRACE_S)
            stuck = not serving.done()
            if stuck:  # its stdin reader is a thread blocked on the host's open pipe
                serving.cancel()
            elif serving.exception() is not None and self._stopped is None:
                self._stopped = "the host session failed"
            self._begin_closing()  # the host has gone: stop the upstream while grading
            await self._drain(halted)
        finally:
            for number in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(number)
        tally = self._buffer.tally() if self._buffer is not None else Tally()
        return Summary(calls=self._calls, tally=tally, sample=self.options.sample,
                       seed=self.options.seed, stopped=self._stopped, stuck=stuck)

    async def _drain(self, halted: asyncio.Task[Any]) -> None:
        """Wait until every waiting sample is graded, unless told to stop (then abandon them)."""
        buffer = self._buffer
        if buffer is None:
            halted.cancel()
            return
        if not self._stop.is_set():
            loop = asyncio.get_running_loop()
            drained: asyncio.Future[None] = loop.create_future()

            def finished() -> None:
                loop.call_soon_threadsafe(_settle, drained)

            buffer.close(finished)
            await asyncio.wait({drained, halted}, return_when=asyncio.FIRST_COMPLETED)
        halted.cancel()
        if self._stop.is_set():
            buffer.abandon()

    def _halt(self, why: str) -> None:
        if self._stopped is None:
            self._stopped = why
        self._stop.set()

    async def _serve_stdio(self, server: Server[Any]) -> None:
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    def _server(self) -> Server[Any]:
        """The host-facing server: the upstream's name and instructions, its kinds of request."""
        from mcp.server import Server

        connection = self._connection
        assert connection is not None and connection.client is not None, "start() first"
        client = connection.client
        handlers: dict[str, Any] = {"on_list_tools": self._list_tools,
                                    "on_call_tool": self._call_tool}
        offered = client.server_capabilities
        if offered.resources is not None:
            handlers.update(on_list_resources=self._list_resources,
                            on_list_resource_templates=self._list_resource_templates,
                            on_read_resource=self._read_resource)
        if offered.prompts is not None:
            handlers.update(on_list_prompts=self._list_prompts, on_get_prompt=self._get_prompt)
        info = client.server_info  # the host is shown the upstream's identity, whole
        if info is None:
            return Server("assay-proxy", instructions=client.instructions, **handlers)
        return Server(info.name, version=info.version, title=info.title,
                      description=info.description, website_url=info.website_url,
                      icons=info.icons, instructions=client.instructions, **handlers)

    # ------------------------------------------------------------------ forwarding

    async def _forward(self, send: Callable[[Client], Awaitable[_T]]) -> _T:
        """Send one request upstream; its result, or its JSON-RPC error raised unchanged."""
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED, INTERNAL_ERROR

        async def keep_refusal(client: Client) -> _T | _Refused:
            try:
                return await send(client)
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:
                    raise  # the connection's to report as lost
                return _Refused(exc)

        assert self._connection is not None, "start() first"
        try:
            got = await self._connection.send(keep_refusal)
        except ConnectionLost as lost:
            self._upstream_gone = True
            self._halt(f"the upstream server went away ({lost})")
            raise MCPError(INTERNAL_ERROR, f"assay proxy: the upstream server is gone ({lost})"
                           ) from None
        except ProtocolError as exc:
            raise MCPError(INTERNAL_ERROR, f"assay proxy: {exc}") from None
        if isinstance(got, _Refused):
            raise got.error
        return got

    async def _list_tools(self, ctx: Any, params: Any) -> Any:
        cursor = params.cursor if params is not None else None
        return await self._forward(lambda client: client.list_tools(cursor=cursor))

    async def _call_tool(self, ctx: Any, params: Any) -> Any:
        from mcp import MCPError

        self._calls += 1
        number = self._calls
        sampled = self._buffer is not None and self._sampler.take()
        name: str = params.name
        arguments: dict[str, Any] | None = params.arguments
        at = self.options.now() if sampled else ""
        started = time.perf_counter()
        try:
            result = await self._forward(lambda client: client.call_tool(name, arguments))
        except MCPError as refused:
            if sampled:
                self._offer(_Sample(number, name, arguments, None,
                                        f"{refused.message} (JSON-RPC {refused.code})",
                                        time.perf_counter() - started, at))
            raise
        if sampled:
            self._offer(_Sample(number, name, arguments, result, None,
                                    time.perf_counter() - started, at))
        return result

    def _offer(self, sample: _Sample) -> None:
        """Hand a sample to the grader; a full buffer drops it (and counts it)."""
        assert self._buffer is not None
        self._buffer.offer(sample)

    async def _list_resources(self, ctx: Any, params: Any) -> Any:
        cursor = params.cursor if params is not None else None
        return await self._forward(lambda client: client.list_resources(cursor=cursor))

    async def _list_resource_templates(self, ctx: Any, params: Any) -> Any:
        cursor = params.cursor if params is not None else None
        return await self._forward(lambda client: client.list_resource_templates(cursor=cursor))

    async def _read_resource(self, ctx: Any, params: Any) -> Any:
        uri = str(params.uri)
        return await self._forward(lambda client: client.read_resource(uri))

    async def _list_prompts(self, ctx: Any, params: Any) -> Any:
        cursor = params.cursor if params is not None else None
        return await self._forward(lambda client: client.list_prompts(cursor=cursor))

    async def _get_prompt(self, ctx: Any, params: Any) -> Any:
        name, arguments = params.name, params.arguments
        return await self._forward(lambda client: client.get_prompt(name, arguments))

    # ------------------------------------------------------------------ grading (worker thread)

    def _grade(self, sample: _Sample) -> Handled:
        """Grade one sample and queue it when it failed; runs in the buffer's thread."""
        from ..store.reviews.items import add_item

        checks, store = self.options.checks, self.options.store
        assert checks is not None, "sampling needs checks"
        call = sample.call()
        trace = call_trace(call, self._facets)
        trial = grade_call(checks, call, trace)
        if trial.outcome != "fail" or store is None:
            # fold_trial says broken only of a trial that never ran; a forwarded call ran.
            return Handled("pass" if trial.outcome == "pass" else "inconclusive")
        try:
            add_item(store, queue_row(checks, call, trial),
                     trace.model_dump_json(fallback=repr).encode())
        except Exception:  # noqa: BLE001 - the store's trouble costs this sample, not the proxy
            return Handled("fail", lost=True)
        return Handled("fail", queued=True)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _upstream(command: tuple[str, ...], cwd: Path) -> Connection:
    """The upstream server, started with the proxy's own environment.

    The host configured the environment for the server it meant to start
    (tokens, paths); the proxy stands in its place, so the upstream gets it
    whole rather than the SDK's minimal default. Its stderr goes to a
    temporary file: only its tail is shown, and only if it fails to start.
    """
    import tempfile

    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.types import Implementation

    from ..version import __version__

    log = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
    params = StdioServerParameters(command=command[0], args=list(command[1:]),
                                   env=dict(os.environ), cwd=cwd)
    info = Implementation(name="assay-proxy", version=__version__)
    return Connection(lambda: Client(stdio_client(params, errlog=log), client_info=info,
                                     cache=None), log)
