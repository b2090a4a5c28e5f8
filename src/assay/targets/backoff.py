"""Asking a model server again after it said "not now" (HTTP 429 or 503), and how long to wait.

A server that is rate limiting (429) or briefly overloaded (503) has not
said anything about the agent or the answer: the same request a little
later is the honest next step. Every other status keeps its meaning (a 500
breaks the trial, a 400 is the request's fault) and is never asked again.

How long: the server's own word when it gives one — ``retry-after-ms``
(milliseconds, a header some OpenAI-compatible servers send) before
``Retry-After`` (seconds, or an HTTP date, RFC 9110 §10.2.3) — else
``base_s · 2^k`` seconds with full jitter (a uniform draw from zero to
that bound; k counts the waits so far), so that many trials refused at
once do not all come back at the same moment. Each wait is capped
(``cap_s``). A wait that would end at or past the deadline of what is being
asked (a trial's timeout, a judge call's) is not taken: the refusal stands
and the caller fails as it would have without a retry, sooner rather than at
its timeout. After ``tries`` requests in all, the last refusal stands too.

Nothing is hidden: the loop hands each ``Wait`` to the caller before
sleeping, and the caller writes it where a reader looks (a trace event, an
opinion's ``waits``). The jitter comes from ``Backoff.rng``, which a test
seeds; it decides only when a request is sent, never what is sent or how
it is graded, and the wait it drew is recorded. docs/decisions/0049-backoff.md.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

#: The statuses that mean "not now": asked again after a wait.
REFUSALS = frozenset({429, 503})
#: Requests in all, the first included, before a refusal stands.
TRIES = 6
#: The bound of the first back-off draw, doubled for each later one.
BASE_S = 0.5
#: The longest single wait, whatever the server asks.
CAP_S = 30.0
#: Whence a wait's length came: the server's header, or our own back-off.
AFTER_MS = "retry-after-ms"
AFTER = "Retry-After"
BACKED_OFF = "back-off"

_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]+)?")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Wait:
    """One wait before asking again: after which status, how long, on whose word."""

    status: int
    seconds: float
    #: ``retry-after-ms``, ``Retry-After`` or ``back-off``.
    after: str

    def note(self) -> str:
        """What a reader of the trace or the opinion is told, e.g. ``waited 0.2 s after …``."""
        return f"waited {self.seconds:.3g} s after HTTP {self.status} ({self.after})"

    def to_json(self) -> dict[str, Any]:
        """The wait as JSON data (a trace event's ``result``, an opinion's ``waits``)."""
        return {"status": self.status, "waited_s": round(self.seconds, 6), "after": self.after}

    @classmethod
    def from_json(cls, data: Any) -> Wait:
        """The inverse of ``to_json``; ``ValueError`` when ``data`` is not of that form."""
        if not isinstance(data, Mapping):
            raise ValueError("not a wait")
        status, seconds, after = data.get("status"), data.get("waited_s"), data.get("after")
        if not isinstance(status, int) or isinstance(status, bool) \
                or isinstance(seconds, bool) or not isinstance(seconds, int | float) \
                or not math.isfinite(seconds) or not isinstance(after, str):
            raise ValueError("not a wait")
        return cls(status, float(seconds), after)


class Refused(Exception):
    """A 429 or 503: the status, the answer's header fields (for the wait) and its message.

    The retry loop raises the last one when it stops asking, with
    ``stopped`` saying why (out of tries, or a wait past the deadline) and
    ``waits`` the waits it made; ``message`` is the server's text, which the
    caller shortens or leaves out as it does for any other error.
    """

    def __init__(self, status: int, headers: Mapping[str, str] | None = None,
                 message: str = "") -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.headers: Mapping[str, str] = headers if headers is not None else {}
        self.message = message
        self.stopped = ""
        self.waits: tuple[Wait, ...] = ()


def asked_wait(headers: Mapping[str, str], now: float | None = None) -> tuple[float, str] | None:
    """How long the server asked to be left alone, and by which header; None if it did not say.

    ``headers.get`` is asked for ``retry-after-ms`` and ``retry-after``
    (httpx's headers ignore case; the judge's wire gives lower-case names).
    ``retry-after-ms`` is a decimal number of milliseconds. ``Retry-After``
    is a decimal number of seconds (RFC 9110 says a whole number; servers
    send fractions too) or an HTTP date, read against ``now`` (seconds since
    the epoch; the machine's clock unless given), a date already past
    meaning "now". Anything else — negative, not a number, an unreadable
    date — is as if the header were absent.
    """
    millis = _decimal(headers.get(AFTER_MS))
    if millis is not None:
        return millis / 1000, AFTER_MS
    value = headers.get("retry-after")
    seconds = _decimal(value)
    if seconds is not None:
        return seconds, AFTER
    date = _http_date(value)
    if date is None:
        return None
    return max(0.0, date - (time.time() if now is None else now)), AFTER


def _decimal(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    value = value.strip()
    return float(value) if _DECIMAL.fullmatch(value) else None


def _http_date(value: Any) -> float | None:
    if not isinstance(value, str) or not value.strip() or len(value) > 64:
        return None
    from email.utils import parsedate_to_datetime

    try:
        moment = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:  # "-0000": a time in UTC whose zone was not said
        from datetime import UTC

        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


@dataclass(frozen=True)
class Backoff:
    """The rule for waiting: ``tries`` requests in all, waits capped at ``cap_s``.

    ``rng`` draws the jitter; give a seeded ``random.Random`` for waits that
    repeat. The default draws from an unseeded one (see the module docstring).
    """

    tries: int = TRIES
    base_s: float = BASE_S
    cap_s: float = CAP_S
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.tries < 1 or not (self.base_s >= 0 and self.cap_s >= 0) \
                or not math.isfinite(self.base_s + self.cap_s):
            raise ValueError("a back-off needs tries ≥ 1 and finite, non-negative waits")

    def wait(self, refused: Refused, waited: int, now: float | None = None
             ) -> tuple[Wait, float]:
        """The wait after ``refused`` when ``waited`` waits came before it, and the time needed.

        The wait is what the server asked, capped at ``cap_s``, else a
        back-off draw from ``[0, min(cap_s, base_s·2^waited)]``. The time
        needed is what the server asked, uncapped (or the draw): a deadline
        nearer than that is not worth waiting for.
        """
        asked = asked_wait(refused.headers, now)
        if asked is not None:
            seconds, after = asked
            return Wait(refused.status, min(seconds, self.cap_s), after), seconds
        bound = min(self.cap_s, self.base_s * 2.0 ** min(waited, 64))
        drawn = self.rng.uniform(0.0, bound)
        return Wait(refused.status, drawn, BACKED_OFF), drawn

    async def call(self, attempt: Callable[[], Awaitable[T]], *, deadline: float,
                   on_wait: Callable[[Wait], None], first: Refused | None = None) -> T:
        """``attempt()`` until it returns; after each ``Refused`` it raises, wait and ask again.

        ``deadline`` is on the event loop's clock (``loop.time()``, the one
        ``asyncio.timeout`` reads). ``on_wait`` is told of each wait before
        it starts. ``first`` is a refusal the caller already had (the first
        request was its own). When a refusal stands — no tries left, or its
        wait would reach the deadline — it is raised, with ``stopped`` and
        ``waits`` set. Cancellation goes through, mid-wait or mid-request.
        """
        loop = asyncio.get_running_loop()
        waits: list[Wait] = []
        refused = first
        tries = 0 if first is None else 1
        while True:
            if refused is None:
                try:
                    return await attempt()
                except Refused as exc:
                    refused = exc
                tries += 1
            if tries >= self.tries:
                raise _stands(refused, waits, f"gave up after {tries} tries")
            wait, needed = self.wait(refused, len(waits))
            if needed >= deadline - loop.time():
                raise _stands(refused, waits, f"did not wait {needed:.3g} s ({wait.after}): "
                                              "past the timeout")
            waits.append(wait)
            on_wait(wait)
            await asyncio.sleep(wait.seconds)
            refused = None


def _stands(refused: Refused, waits: list[Wait], why: str) -> Refused:
    refused.stopped = why
    refused.waits = tuple(waits)
    return refused


#: The rule the judge client and the ``openai:`` target use unless given another.
DEFAULT = Backoff()
