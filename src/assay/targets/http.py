"""``http://…`` / ``https://…`` — a JSON endpoint: POST the input, the reply is the output.

The reply's body is the output, whatever its status; the status says how
the trial ended: ``ok``, ``error`` or ``refused`` (``reply_status``).
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
        """One POST; connection errors and non-JSON success replies break the trial."""
        import httpx

        started = time.perf_counter()
        try:
            reply = await self._client.post(self.uri, json=request.case.input)
        except httpx.HTTPError as exc:
            raise TrialBroken(f"request failed: {type(exc).__name__}: {exc}") from None
        body = reply.content
        events: list[Event] = []
        try:
            output = json.loads(body) if body else None
        except RecursionError:
            # JSON nested deeper than Python's parser goes: kept whole, as text,
            # so text checks still read every word (a path check cannot).
            output = reply.text
            events.append(Event(kind="error", text="the reply's JSON is nested too deeply to "
                                "parse; its text is the output"))
        except ValueError:
            if reply.is_success:
                raise TrialBroken(f"reply {reply.status_code} is not JSON "
                                  f"({len(body)} bytes)") from None
            output = reply.text
        status, error = reply_status(reply.status_code, reply.is_success, output)
        return Trace(
            output=output, status=status, events=events, error=error,
            duration_s=time.perf_counter() - started, steps=1,
            facets={**self.facets, **case_facets(request.case, "http", unpinnable=UNPINNABLE)},
            evidence=dict(self.evidence),
        )

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
