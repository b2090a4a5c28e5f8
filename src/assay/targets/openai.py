"""``openai:MODEL`` — a chat model behind an OpenAI-compatible server; assay runs the tool loop.

Each trial sends the case input, with the case fixture's tools, to
``POST {base}/chat/completions``; every tool call the model makes is
recorded and answered from the fixture (or by the MCP servers its ``mcp:``
names, see ``mcp_tools.py``), and the loop goes on until the model
answers without calling a tool (settled) or the step limit is reached (not
settled). With ``--agent-cache`` each model call goes through the agent
cache (``agent_cache.py``). A server that answers 429 or 503 ("not now") is
asked again after a wait (``backoff.py``), within the trial's timeout; each
wait is an ``error`` event in the trace. The provider key is not ours
(principle 10): assay passes none of its own, never reads the value of
``OPENAI_API_KEY`` (the SDK does, when the user set it for their server),
and never records or prints it.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from ..errors import HarnessFailure, UsageError
from ..install_hints import reinstall
from ..model import Event, Evidence, Status, Trace, Usage
from ..model.fixture import FixtureTool, ToolFixture
from ..model.values import one_line
from .agent_cache import FACET, ON, AgentCache
from .agent_tools import FixtureState, json_value
from .backoff import DEFAULT, REFUSALS, Backoff, Refused, Wait
from .base import (
    TargetOptions,
    TrialBroken,
    TrialRequest,
    case_facets,
    ensure_reachable,
    evidence,
)
from .chat import (
    AskedCall,
    LoopOptions,
    Reply,
    ask_tools,
    first_messages,
    output_of,
    parse_arguments,
    read_reply,
    tool_content,
    tool_spec,
    tool_specs,
)
from .conversation import Talk, conversation
from .identity import identity_digest
from .mcp_connection import ConnectionLost, ProtocolError
from .mcp_tools import McpServers, McpTool
from .prices import PriceTable, load_prices

#: Where the server is when ``--base-url`` is not given.
BASE_URL_ENV = "ASSAY_OPENAI_BASE_URL"
#: The SDK wants some key; a local server ignores it.
NO_KEY = "unused"
#: Server answers that mean the model cannot be used at all, not that one trial went wrong.
_CANNOT_USE = {401: "refused the request (a key or permission is missing)",
               403: "refused the request (a key or permission is missing)",
               404: "does not serve this model"}


def check_base_url(url: str) -> str:
    """``url`` if it is an ``http(s)://`` URL with a host; else a usage error (not quoting more)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"base URL {url!r} is not an http(s):// URL")
    return url


def sdk_client(openai: Any, base_url: str, *, api_key: str | None,
               timeout: float | None) -> Any:
    """An ``openai.AsyncOpenAI`` for ``base_url`` that never retries.

    ``api_key`` None lets the SDK read ``OPENAI_API_KEY`` itself (the target,
    when the user set it for their server); a string is sent as it is (the
    judge passes ``NO_KEY``). ``openai`` is the imported SDK module.
    """
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0,
                              timeout=timeout)


class OpenAITarget:
    """A chat model driven through the official ``openai`` SDK; see the module docstring."""

    def __init__(self, uri: str, options: TargetOptions) -> None:
        self.uri = uri
        self.model = uri.removeprefix("openai:")
        if not self.model:
            raise UsageError(f"target {uri!r}: name the model, e.g. openai:qwen2.5:7b")
        self.options = options
        self.base_url = options.base_url or os.environ.get(BASE_URL_ENV) or None
        if self.base_url is not None:
            check_base_url(self.base_url)
        self.prices: PriceTable = load_prices()
        priced = self.prices.lookup(self.model) is not None
        # Tokens are the server's own figures; cost is derived from a price table.
        self.evidence = evidence(output="observed", tool_calls="observed", asks="observed",
                                 steps="observed", tokens="observed",
                                 cost="inferred" if priced else "unavailable")
        self.facets = {"harness": "openai", "model": self.model}
        #: ``--agent-cache``: replies kept and served by key; the run says so in its facets.
        self.cache = AgentCache() if options.agent_cache else None
        if self.cache is not None:
            self.facets[FACET] = ON
        self._client: Any = None
        self._reported: str | None = None
        #: The MCP servers tool fixtures name (``mcp:``), connected when a trial first needs one.
        self.mcp = McpServers(uri)
        #: How a 429 or 503 is waited out (``backoff.py``); a test gives one with a seeded rng.
        self.backoff: Backoff = DEFAULT

    async def start(self) -> None:
        """Check the server takes connections, make the client; refused is a harness failure."""
        if self.base_url is None:
            raise HarnessFailure(
                f"target {self.uri}: no server to talk to; give --base-url URL or set "
                f"{BASE_URL_ENV} (e.g. http://127.0.0.1:11434/v1 for Ollama, "
                "http://127.0.0.1:8000/v1 for vLLM)")
        try:
            import openai
        except ImportError:
            raise HarnessFailure(f"target {self.uri}: {reinstall('openai')}") from None
        await ensure_reachable(self.uri, self.base_url)
        # With OPENAI_API_KEY set the SDK reads it itself; its value never passes through us.
        key = None if "OPENAI_API_KEY" in os.environ else NO_KEY
        # No retries by the SDK: a server error is reported as a broken trial, not hidden by
        # a retry. A 429 or 503 is asked again by ``complete``, each wait written in the trace.
        # No client timeout: the battery's per-trial timeout is the one that counts.
        self._client = sdk_client(openai, self.base_url, api_key=key, timeout=None)

    async def run(self, request: TrialRequest) -> Trace:
        """One conversation: model turns and tool calls until an answer or the step limit."""
        try:
            loop = LoopOptions.from_call(request.call)
        except ValueError as exc:
            raise TrialBroken(str(exc)) from None
        return await _Conversation(self, request, loop).run()

    def body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
             loop: LoopOptions, model: str | None = None,
             effort: str | None = None) -> dict[str, Any]:
        """The request of one model call (``model``: a case's pin, else the URI's;
        ``effort``: a pinned ``reasoning_effort``)."""
        body: dict[str, Any] = {"model": model or self.model, "messages": messages}
        if tools:
            body["tools"] = tools
        if effort is not None:
            body["reasoning_effort"] = effort
        return {**body, **loop.sampling()}

    async def ask(self, case_id: str, n: int, body: dict[str, Any], *, deadline: float,
                  on_wait: Callable[[Wait], None]) -> tuple[Reply, bool]:
        """One model call of trial ``n`` of a case: the reply, and whether the cache served it.

        Without the cache this is ``complete``. With it, the reply kept under
        the case, trial, model and request digest (the server's address
        included) is served; else the server is called and its reply kept.
        ``deadline`` and ``on_wait`` are ``complete``'s.
        """
        if self.cache is None:
            return await self.complete(body, deadline=deadline, on_wait=on_wait), False
        request = {**body, "server": self.identity().get("base_url")}
        key = self.cache.key(case_id, n, body["model"], request)
        kept = self.cache.get(key) if key is not None else None
        if kept is not None:
            self._note(kept, body["model"])
            return kept, True
        reply = await self.complete(body, deadline=deadline, on_wait=on_wait)
        if key is not None:
            self.cache.put(key, reply)
        return reply, False

    async def complete(self, body: dict[str, Any], *, deadline: float,
                       on_wait: Callable[[Wait], None]) -> Reply:
        """Send one request (``body``); server trouble breaks the trial, an unusable model
        the run.

        A 429 or 503 is asked again after a wait (``self.backoff``), each wait
        told to ``on_wait`` first; none reaches ``deadline`` (the event loop's
        clock: the trial's end). A refusal that stands breaks the trial as
        any other status does, saying why it was not asked again.
        """
        try:
            reply = await self.backoff.call(lambda: self._send(body), deadline=deadline,
                                            on_wait=on_wait)
        except Refused as refused:
            raise TrialBroken(f"the server answered HTTP {refused.status}: "
                              f"{one_line(refused.message, 200)} ({refused.stopped})") from None
        read = read_reply(reply)
        self._note(read, body["model"])
        return read

    async def _send(self, body: dict[str, Any]) -> Any:
        """One request; the SDK's reply. ``Refused`` for a 429 or 503, else as ``complete``."""
        import openai

        assert self._client is not None, "start() first"
        asked = body["model"]
        try:
            reply = await self._client.chat.completions.create(**body)
        except openai.APIStatusError as exc:
            if exc.status_code in REFUSALS:
                raise Refused(exc.status_code, exc.response.headers, exc.message) from None
            if exc.status_code in _CANNOT_USE and (asked == self.model
                                                   or exc.status_code != 404):
                # The server's own text is left out: a 401 may quote part of the key.
                raise HarnessFailure(f"target {self.uri}: the server at {self.base_url} "
                                     f"{_CANNOT_USE[exc.status_code]} "
                                     f"(HTTP {exc.status_code})") from None
            if exc.status_code == 404:  # a model a case pins: that case cannot run
                raise TrialBroken("the server does not serve the model this case pins "
                                  "(HTTP 404)") from None
            raise TrialBroken(f"the server answered HTTP {exc.status_code}: "
                              f"{one_line(exc.message, 200)}") from None
        except openai.APIConnectionError as exc:
            raise TrialBroken(f"lost the server: {one_line(str(exc), 200)}"
                              f"{_cause(exc)}") from None
        except openai.OpenAIError as exc:
            raise TrialBroken(f"bad reply from the server: {type(exc).__name__}: "
                              f"{one_line(str(exc), 200)}") from None
        if not getattr(reply, "choices", None):
            raise TrialBroken("the server's reply has no choices")
        return reply

    def _note(self, reply: Reply, asked: str) -> None:
        """The run's ``model`` facet: the name the first reply to the URI's model reports."""
        if reply.model and self._reported is None and asked == self.model:
            # The run's facet names the URI's model; a case's pin is that trial's alone.
            self._reported = self.facets["model"] = reply.model

    async def close(self) -> None:
        """Close the SDK's connection pool, stop the fixtures' MCP servers, close the cache."""
        await self.mcp.close()
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self.cache is not None:
            self.cache.close()

    def identity(self) -> dict[str, str]:
        """The model the URI names and the server it is served from (no user:password part)."""
        identity = {"uri": self.uri, "model": self.uri.removeprefix("openai:")}
        if self.base_url is not None:
            parts = urlsplit(self.base_url)
            identity["base_url"] = f"{parts.scheme}://{parts.hostname}:{parts.port}{parts.path}"
        return identity

    def digest(self) -> str:
        """The agent version: the digest of ``identity()``."""
        return identity_digest(self.identity())


class _Conversation:
    """One trial's loop and what it recorded."""

    def __init__(self, target: OpenAITarget, request: TrialRequest, loop: LoopOptions) -> None:
        self.target = target
        self.loop = loop
        self.case = request.case
        self.n = request.n
        #: The model asked for: the case's pin, else the URI's.
        self.asked = request.case.model_for("openai") or target.model
        self.effort = request.case.effort_for("openai")
        self.fixture: ToolFixture | None = request.tools
        self.fixture_path = request.fixture
        self.base_dir = request.fixture.parent if request.fixture is not None else None
        self.asks = ask_tools(self.fixture)
        self.tools = tool_specs(self.fixture)
        #: The trial's copy of the fixture's state, which handlers change (SPEC §14).
        self.state = FixtureState(self.fixture)
        self.mcp: dict[str, McpTool] = {}
        #: The conversation's user (SPEC §16), None for a single question.
        self.talk = conversation(request)
        self._stamped = 0
        if self.talk is not None:
            self.talk.system = self.talk.system or loop.system
            self.messages: list[dict[str, Any]] = [
                {"role": "system", "content": self.talk.system}] if self.talk.system else []
        else:
            self.messages = first_messages(request.case.input, loop.system)
        self.events: list[Event] = []
        #: Summed over the replies; ``counted``/``priced`` turn False at the first
        #: reply without token counts (or without a price), and the sum is dropped.
        self.usage = Usage(input_tokens=0, output_tokens=0, cost_usd=0.0)
        self.counted = True
        self.priced = True
        self.model: str | None = None
        self.steps = 0
        #: Model calls the agent cache answered (``--agent-cache``), not the server.
        self.served = 0
        self._start = time.perf_counter()
        #: When the battery stops the trial (its timeout), on the event loop's clock:
        #: no wait after a 429 or 503 reaches it.
        self.deadline = asyncio.get_running_loop().time() + request.timeout_s
        self._calls = 0
        # Should the server hang, the steps and calls so far are the trial's record; before
        # the first answer there is none (waits alone are not the agent's doing).
        request.partial.keep(lambda: self._trace("timeout", None, self.steps, settled=False)
                             if self.steps else None)

    def _t(self) -> float:
        return round(time.perf_counter() - self._start, 6)

    async def run(self) -> Trace:
        if self.fixture is not None and self.fixture.mcp:
            self.mcp = await self.target.mcp.tools_for(
                self.fixture, self.fixture_path, self.base_dir or self.target.options.base_dir)
            self.tools.extend(tool_spec(t.info.name, t.info.description, t.info.parameters)
                              for t in self.mcp.values())
        if self.talk is not None:
            return await self._converse(self.talk)
        status, output, _ = await self._until_answer()
        return self._finish(status, output)

    async def _until_answer(self) -> tuple[Status, Any, str | None]:
        """Model calls and tool calls until the model answers, refuses or the step limit
        (of this turn) is reached: the status, the output and the answer's text."""
        limit = self.steps + self.loop.max_steps
        while self.steps < limit:
            body = self.target.body(self.messages, self.tools, self.loop, self.asked,
                                    self.effort)
            reply, served = await self.target.ask(self.case.id, self.n, body,
                                                  deadline=self.deadline, on_wait=self._waited)
            self.steps += 1
            self.served += served
            self._count(reply)
            text, refusal, calls = reply.content, reply.refusal, reply.calls
            if text is not None:
                self.events.append(Event(kind="message", text=text, t=self._t()))
            if refusal is not None:
                self.events.append(Event(kind="message", text=refusal, t=self._t()))
                return "refused", refusal, refusal
            if not calls:
                return "ok", output_of(text), text
            await self._tool_turn(text, calls)
        return "timeout", None, None

    def _finish(self, status: Status, output: Any) -> Trace:
        """The trace of an answer (settled), a refusal (settled) or the step limit (not)."""
        if status == "timeout":
            error = f"step limit: {self.loop.max_steps} model calls without a final answer"
            return self._trace("timeout", None, self.steps, settled=False, error=error)
        return self._trace(status, output, self.steps, settled=True)

    async def _converse(self, talk: Talk) -> Trace:
        """Turns (SPEC §16): each user message, then model and tool calls to the answer."""
        message = await talk.next()
        output: Any = None
        while message is not None:
            self.messages.append({"role": "user", "content": message})
            self.events.append(talk.opened())
            status, output, text = await self._until_answer()
            if status != "ok":  # a refusal ends the conversation; the step limit cuts it
                return self._finish(status, output)
            self.messages.append({"role": "assistant", "content": text or ""})
            self.events.append(talk.replied(output))
            talk.stamp(self.events, self._stamped)
            self._stamped = len(self.events)
            message = await talk.next()
        return self._trace("ok", output, self.steps, settled=talk.settled)

    def _waited(self, wait: Wait) -> None:
        """A 429 or 503 and the wait before asking again, as the trace shows it."""
        self.events.append(Event(kind="error", text=f"model server: {wait.note()}, then asked "
                                                    "again", result=wait.to_json(), t=self._t()))

    def _count(self, reply: Reply) -> None:
        model = reply.model
        self.model = self.model or model
        tokens_in, tokens_out = reply.input_tokens, reply.output_tokens
        if tokens_in is None or tokens_out is None:
            # The server said nothing of tokens: the trial's count is unknown, no cost either.
            self.counted = self.priced = False
            return
        price = self.target.prices.lookup(model, self.asked)
        if price is None:
            self.priced = False
        cost = price.cost(tokens_in, tokens_out) if price is not None else 0.0
        self.usage = self.usage.add(Usage(input_tokens=tokens_in, output_tokens=tokens_out,
                                          cost_usd=cost))

    async def _tool_turn(self, text: str | None, calls: tuple[AskedCall, ...]) -> None:
        said: list[dict[str, Any]] = []
        answers: list[dict[str, Any]] = []
        for call in calls:
            self._calls += 1
            name, raw = call.name, call.arguments
            call_id = call.id or f"call-{self._calls}"
            said.append({"id": call_id, "type": "function",
                         "function": {"name": name, "arguments": raw or ""}})
            content = await self._answer(call_id, name, raw)
            answers.append({"role": "tool", "tool_call_id": call_id, "content": content})
        self.messages.append({"role": "assistant", "content": text, "tool_calls": said})
        self.messages.extend(answers)

    async def _answer(self, call_id: str, name: str, raw: str | None) -> str:
        """Record one tool call and what it answered; return the tool message's content."""
        ok, arguments = parse_arguments(raw)
        if ok and name in self.asks and self.fixture is not None:
            question = arguments.get("question") if isinstance(arguments, dict) else None
            text = question if isinstance(question, str) else tool_content(arguments)
            answer = self.fixture.answers.get(name)
            self.events.append(Event(kind="ask", name=name, text=text, call_id=call_id,
                                     t=self._t()))
            self.events.append(Event(kind="answer", name=name, result=answer, call_id=call_id,
                                     t=self._t()))
            return tool_content(answer)
        self.events.append(Event(kind="tool_call", name=name, arguments=arguments if ok else raw,
                                 call_id=call_id, t=self._t()))
        if not ok:
            return self._error(call_id, name, arguments)
        local = self.fixture.tool(name) if self.fixture is not None else None
        tool: FixtureTool | McpTool | None = local if local is not None else self.mcp.get(name)
        if tool is None:
            known = ", ".join(t["function"]["name"] for t in self.tools) or "none"
            return self._error(call_id, name, f"there is no tool {name!r} (tools: {known})")
        if not isinstance(arguments, dict):
            return self._error(call_id, name, "arguments must be a JSON object")
        if isinstance(tool, McpTool):
            return await self._forward(call_id, name, tool, arguments)
        try:
            if tool.handler is not None:  # user code: keep it off the event loop
                result = await asyncio.to_thread(self.state.answer, tool, arguments,
                                                 self.base_dir)
            else:
                result = self.state.answer(tool, arguments, self.base_dir)
            result = json_value(result, f"the result of tool {name!r}")
        except Exception as exc:  # a failing tool is news for the model, as it would be live
            if self.state.broken is not None:
                raise TrialBroken(self.state.broken) from None
            return self._error(call_id, name, f"{type(exc).__name__}: {exc}")
        if self.state.broken is not None:
            raise TrialBroken(self.state.broken)
        self.events.append(Event(kind="tool_result", name=name, call_id=call_id, result=result,
                                 t=self._t()))
        return tool_content(result)

    async def _forward(self, call_id: str, name: str, tool: McpTool,
                       arguments: dict[str, Any]) -> str:
        """A call of an MCP server's tool: the server answers, the model is told."""
        try:
            answer = await tool.server.call(name, arguments)
        except ConnectionLost as lost:
            raise TrialBroken(f"MCP server {tool.server.uri}: connection lost ({lost}); "
                              "the next trial reconnects") from None
        except ProtocolError as exc:  # the server's answer, if not a tool's: the model hears it
            return self._error(call_id, name, f"protocol error: {exc}")
        self.events.append(Event(kind="tool_result", name=name, call_id=call_id,
                                 result=answer.output, is_error=answer.is_error, t=self._t()))
        if answer.is_error:
            return f"error: {answer.text or 'the tool reported an error'}"
        return tool_content(answer.output)

    def _error(self, call_id: str, name: str, why: str) -> str:
        self.events.append(Event(kind="tool_result", name=name, call_id=call_id, result=why,
                                 is_error=True, t=self._t()))
        return f"error: {why}"

    def _trace(self, status: Status, output: Any, steps: int, *, settled: bool,
               error: str | None = None) -> Trace:
        if self.talk is not None:  # what the turn cut short did, in its turn
            self.talk.stamp(self.events, self._stamped)
        given = dict(self.target.evidence)
        counted = self.counted and steps > 0
        priced = counted and self.priced
        # A turn served from the agent cache spent nothing now: its tokens are the
        # recorded call's, reported as the agent's usage but no longer observed.
        given["tokens"] = (Evidence.UNAVAILABLE if not counted
                           else Evidence.INFERRED if self.served else Evidence.OBSERVED)
        given["cost"] = Evidence.INFERRED if priced else Evidence.UNAVAILABLE
        usage = Usage(input_tokens=self.usage.input_tokens if counted else None,
                      output_tokens=self.usage.output_tokens if counted else None,
                      cost_usd=self.usage.cost_usd if priced else None)
        facets = {"harness": "openai", "model": self.model or self.asked,
                  **case_facets(self.case, "openai")}
        if self.effort is not None:
            facets["effort"] = self.effort
        if self.target.cache is not None:
            facets[FACET] = f"served {self.served} of {steps} model calls"
        if self.state.present:  # the final state is a fact assay saw (SPEC §14)
            given["state"] = Evidence.OBSERVED
        return Trace(output=output, status=status, error=error, events=list(self.events),
                     usage=usage, steps=steps, settled=settled,
                     duration_s=time.perf_counter() - self._start, facets=facets,
                     evidence=given, state=self.state.value)


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    return f" ({one_line(str(cause), 120)})" if cause is not None and str(cause) else ""
