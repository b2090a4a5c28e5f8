"""``http://…`` / ``https://…`` — a JSON endpoint: POST the input, the reply is the output.

The reply's body is the output, whatever its status; the status says how
the trial ended: ``ok``, ``error`` or ``refused`` (``reply_status``).

A conversation (SPEC §16) POSTs ``{"messages": [...]}`` once per turn: the
whole conversation so far as chat messages (``role``, ``content``), the
case's ``input`` first as the ``system`` message when it gives one, the
agent's earlier replies as it gave them. See ``HttpTarget._converse``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..model import Event, Status, Trace
from .base import (
    TargetOptions,
    TrialBroken,
    TrialRequest,
    case_facets,
    ensure_reachable,
    evidence,
)
from .conversation import Talk, conversation
from .identity import identity_digest
from .refusal import reason_text, refusal_of

#: Why a case's model or effort pin does not reach an HTTP endpoint.
UNPINNABLE = "an HTTP endpoint picks its own model and effort"


#: The HTTP statuses a refusal may come as, with a JSON reason: Forbidden, and
#: Unavailable For Legal Reasons.
REFUSING = (403, 451)


def reply_status(code: int, success: bool, body: Any) -> tuple[Status, str | None]:
    """The status and ``error`` a reply gives, from its HTTP status and its body (parsed).

    A 2xx body ``{"status": "refused", "reason": …}`` and a 403 or 451 whose
    body is an object with a ``reason`` (or ``"status": "refused"``) are
    refusals, the reason as the error (SPEC §4, ``targets.refusal``). Any
    other 2xx is ``ok``; any other status is ``error``, ``HTTP <code>``.
    """
    if success:
        refusal = refusal_of(body)
        return ("ok", None) if refusal is None else ("refused", refusal.reason)
    if code in REFUSING and isinstance(body, dict):
        refusal = refusal_of(body)
        if refusal is not None:
            return "refused", refusal.reason
        if body.get("reason") is not None:
            return "refused", reason_text(body["reason"])
    return "error", f"HTTP {code}"


class HttpTarget:
    """POSTs the case input as JSON; 2xx JSON is ``ok``, other statuses are ``error``,
    and a refusal is ``refused`` (``reply_status``)."""

    evidence = evidence(output="observed")

    def __init__(self, uri: str, options: TargetOptions) -> None:
        self.uri = uri
        self.options = options
        self.facets = {"harness": "http"}
        self._client: Any = None

    async def start(self) -> None:
        """Check the server accepts connections: refused is a harness failure."""
        import httpx

        await ensure_reachable(self.uri, self.uri)
        limits = httpx.Limits(max_connections=max(1, self.options.concurrency))
        self._client = httpx.AsyncClient(limits=limits, timeout=None)

    async def run(self, request: TrialRequest) -> Trace:
        """One POST; connection errors and non-JSON success replies break the trial. A
        conversation (SPEC §16) is one POST per turn (``_converse``)."""
        talk = conversation(request)
        if talk is not None:
            return await self._converse(request, talk)
        started = time.perf_counter()
        output, status, error, events = await self._post(request.case.input)
        return Trace(
            output=output, status=status, events=events, error=error,
            duration_s=time.perf_counter() - started, steps=1,
            facets=self._facets(request), evidence=dict(self.evidence),
        )

    async def _post(self, body: Any) -> tuple[Any, Status, str | None, list[Event]]:
        """One POST of ``body``: the reply's body (parsed), the status and error it gives
        (``reply_status``), and notes on how it was read. ``TrialBroken`` when the request
        fails or a success is not JSON."""
        import httpx

        try:
            reply = await self._client.post(self.uri, json=body)
        except httpx.HTTPError as exc:
            raise TrialBroken(f"request failed: {type(exc).__name__}: {exc}") from None
        content = reply.content
        events: list[Event] = []
        try:
            output = json.loads(content) if content else None
        except RecursionError:
            # JSON nested deeper than Python's parser goes: kept whole, as text,
            # so text checks still read every word (a path check cannot).
            output = reply.text
            events.append(Event(kind="error", text="the reply's JSON is nested too deeply to "
                                "parse; its text is the output"))
        except ValueError:
            if reply.is_success:
                raise TrialBroken(f"reply {reply.status_code} is not JSON "
                                  f"({len(content)} bytes)") from None
            output = reply.text
        status, error = reply_status(reply.status_code, reply.is_success, output)
        return output, status, error, events

    async def _converse(self, request: TrialRequest, talk: Talk) -> Trace:
        """Turns (SPEC §16): each user message appended to the messages and the whole POSTed
        (``{"messages": [{"role", "content"}, …]}``, the system message first when the case
        gives one); the reply's body is the turn's reply, read as a single reply is.

        A refusal or an error status ends the conversation in its turn. A turn whose
        request fails, whose reply is not JSON or is empty breaks the trial when it is the
        first; after a reply it ends the conversation with status ``error``, the turns so
        far kept (a breach made in them still fails the case). Stopped at its timeout, the
        trial keeps every turn so far.
        """
        started = time.perf_counter()
        messages: list[dict[str, Any]] = [{"role": "system", "content": talk.system}] \
            if talk.system else []
        events: list[Event] = []
        posts = 0

        def trace(status: Status, output: Any = None, error: str | None = None, *,
                  settled: bool = False) -> Trace:
            return Trace(output=output, status=status, error=error, events=list(events),
                         duration_s=time.perf_counter() - started, steps=posts,
                         settled=settled, facets=self._facets(request),
                         evidence=dict(self.evidence))

        request.partial.keep(lambda: trace("timeout") if events else None)
        output: Any = None
        message = await talk.next()
        while message is not None:
            messages.append({"role": "user", "content": message})
            events.append(_timed(talk.opened(), started))
            try:
                posts += 1
                output, status, error, notes = await self._post({"messages": messages})
                if status == "ok" and output is None:
                    raise TrialBroken("the endpoint replied with nothing")
            except TrialBroken as broken:
                if posts == 1:  # nothing answered yet: no record to keep
                    raise
                return trace("error", error=f"turn {talk.turn}: {broken}")
            events.extend(_timed(note, started) for note in notes)
            if status != "ok":  # a refusal or an error ends it in its turn
                talk.stamp(events, 0)
                return trace(status, output, error, settled=status == "refused")
            messages.append({"role": "assistant", "content": output})
            events.append(_timed(talk.replied(output), started))
            talk.stamp(events, 0)
            message = await talk.next()
        return trace("ok", output, settled=talk.settled)

    def _facets(self, request: TrialRequest) -> dict[str, str]:
        return {**self.facets, **case_facets(request.case, "http", unpinnable=UNPINNABLE)}

    async def close(self) -> None:
        """Close the connection pool."""
        if self._client is not None:
            await self._client.aclose()

    def identity(self) -> dict[str, str]:
        """Only the URI: what answers behind it is not ours to see."""
        return {"uri": self.uri}

    def digest(self) -> str:
        """The agent version: the digest of ``identity()``."""
        return identity_digest(self.identity())


def _timed(event: Event, started: float) -> Event:
    """``event`` timed from the trial's start."""
    event.t = round(time.perf_counter() - started, 6)
    return event
