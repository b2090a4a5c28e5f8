"""One judge call: a rendered prompt to a model behind an OpenAI-compatible server (SPEC §9).

``ask`` sends one chat completion (``POST {base}/chat/completions``)
through the client handed in — ``make_client`` gives a ``wire.JudgeClient``,
a lean HTTP/1.1 client rather than the ``openai`` SDK (``wire`` says why) —
and returns an ``Opinion``: the raw answer, the model that gave it, tokens,
cost and latency. It never raises: a timeout, an HTTP error, a refused
connection or a reply without choices is an opinion with ``error`` set, and
its verdict is ``inconclusive`` (PRINCIPLES 3). Only cancellation goes
through. The choices made here (a placeholder key, the prompt as one user
message) are in docs/decisions/0030; it asks again only after a 429 or 503,
within the call's timeout, and the opinion lists those waits
(``targets/backoff.py``, docs/decisions/0049).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..targets.backoff import DEFAULT, Backoff, Refused, Wait
from ..targets.prices import SHIPPED, PriceTable
from .answers import REFUSED
from .opinion import Opinion, judge_answer, judge_opinion, score_answer

#: SPEC §9 ``judge_timeout_s``.
DEFAULT_TIMEOUT_S = 60.0
#: A judge answers in a line and a short justification; the cap bounds what a runaway costs.
DEFAULT_MAX_TOKENS = 1024

_REASONS = {401: "a key or permission is missing", 403: "a key or permission is missing",
            404: "the server does not serve this model", 429: "rate limited"}


@dataclass(frozen=True, slots=True)
class JudgeSettings:
    """Which model judges, where, how long it may take and how it samples.

    ``temperature`` is 0 by default: the same prompt should get the same
    opinion as far as the server allows. ``top_p`` and ``seed`` are sent only
    when set. A bad value is a mistake in the configuration: ``ValueError``.
    """

    model: str
    base_url: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    temperature: float | None = 0.0
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int | None = DEFAULT_MAX_TOKENS

    def __post_init__(self) -> None:
        from ..errors import UsageError
        from ..targets.openai import check_base_url

        if not self.model:
            raise ValueError("the judge needs a model")
        try:
            check_base_url(self.base_url)
        except UsageError as exc:
            raise ValueError(f"judge: {exc}") from None
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise ValueError(f"judge_timeout_s must be > 0, not {self.timeout_s!r}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"the judge's max_tokens must be ≥ 1, not {self.max_tokens!r}")

    def sampling(self) -> dict[str, Any]:
        """The sampling parameters sent with each call (and recorded in each opinion)."""
        given = {"temperature": self.temperature, "top_p": self.top_p, "seed": self.seed,
                 "max_tokens": self.max_tokens}
        return {name: value for name, value in given.items() if value is not None}


def make_client(settings: JudgeSettings) -> Any:
    """The client for the judge's server (``wire.JudgeClient``); the caller closes it.

    It sends no one's key: the ``Authorization`` header is a placeholder, and
    nothing reads ``OPENAI_API_KEY`` (PRINCIPLES 10). It never retries by
    itself; ``ask`` asks again after a 429 or 503.
    """
    from .wire import JudgeClient

    return JudgeClient(settings.base_url)


async def ask(
    client: Any,
    settings: JudgeSettings,
    prompt: str,
    *,
    prompt_digest: str,
    clock: Callable[[], float] = time.perf_counter,
    prices: PriceTable | None = None,
    backoff: Backoff = DEFAULT,
) -> Opinion:
    """Ask the judge: ``prompt`` as the only (user) message. Never raises but on cancel.

    ``POST {base}/chat/completions`` of the OpenAI chat API, read as JSON.
    ``prices`` defaults to the shipped table (the battery passes the user's,
    ``load_prices()``); a model it does not know costs None. A 429 or 503 is
    asked again by ``backoff``'s rule within ``settings.timeout_s``, which
    bounds the call, waits included; the opinion's ``waits`` lists them.
    """
    return await ask_chat(client, settings, [{"role": "user", "content": prompt}],
                          prompt_digest=prompt_digest, clock=clock, prices=prices,
                          backoff=backoff)


async def ask_chat(
    client: Any,
    settings: JudgeSettings,
    messages: list[dict[str, str]],
    *,
    prompt_digest: str,
    clock: Callable[[], float] = time.perf_counter,
    prices: PriceTable | None = None,
    backoff: Backoff = DEFAULT,
) -> Opinion:
    """``ask`` with the chat's messages as given (a simulated user's conversation so far,
    ``simulated_user``): the same call, answer and errors. Never raises but on cancel."""
    from .wire import WireError

    parameters = settings.sampling()
    asked = settings.model
    start = clock()
    waits: list[Wait] | None = None  # made only when the judge says "not now"

    def failed(error: str, raw: str | None = None, model: str = asked) -> Opinion:
        return Opinion(raw=raw, model=model, prompt_digest=prompt_digest, parameters=parameters,
                       latency_s=round(clock() - start, 6), error=error,
                       waits=tuple(waits) if waits else ())

    body = {"model": asked, "messages": messages, **parameters}
    stopped = ""
    try:
        async with asyncio.timeout(settings.timeout_s) as scope:
            status, data, hints = await client.post("chat/completions", body)
            if hints is not None:  # 429 or 503: the rare path, off the usual one
                waits = []
                status, data, stopped = await _again(client, body, Refused(status, hints),
                                                     backoff, scope.when(), waits)
    except TimeoutError:
        return failed(f"timed out after {settings.timeout_s:g}s")
    except WireError as exc:
        return failed("refused connection" if exc.refused else str(exc))
    except Exception as exc:  # anything else a strange exchange throws: an answer too
        return failed(f"unexpected {type(exc).__name__}")
    if status != 200:
        reason = _REASONS.get(status)
        return failed(f"HTTP {status}" + (f" ({reason})" if reason else "")
                      + (f"; {stopped}" if stopped else ""))
    try:
        reply = json.loads(data)
    except (ValueError, RecursionError):
        return failed("the answer is not JSON")
    if not isinstance(reply, dict):
        return failed("the answer is not a JSON object")
    reported = reply.get("model")
    model = reported if isinstance(reported, str) and reported else asked
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return failed("no choices", model=model)
    message = choices[0].get("message")
    message = message if isinstance(message, dict) else {}
    content, refusal = message.get("content"), message.get("refusal")
    usage = reply.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    tokens_in, tokens_out = usage.get("prompt_tokens"), usage.get("completion_tokens")
    counted = all(isinstance(t, int) and not isinstance(t, bool) and t >= 0
                  for t in (tokens_in, tokens_out))
    if not counted:
        tokens_in = tokens_out = None
    price = (prices or PriceTable(SHIPPED)).lookup(model, asked)
    cost = (price.cost(tokens_in, tokens_out)
            if price is not None and tokens_in is not None and tokens_out is not None else None)
    error: str | None = None
    raw = content if isinstance(content, str) else None
    if raw is None and isinstance(refusal, str) and refusal:
        raw, error = refusal, REFUSED
    elif raw is None:
        error = "no text in the answer"
    return Opinion(
        raw=raw, model=model, prompt_digest=prompt_digest, parameters=parameters,
        input_tokens=tokens_in, output_tokens=tokens_out, cost_usd=cost,
        latency_s=round(clock() - start, 6), error=error, waits=tuple(waits) if waits else ())


async def _again(client: Any, body: dict[str, Any], first: Refused, backoff: Backoff,
                 deadline: float | None, waits: list[Wait]) -> tuple[int, bytes, str]:
    """After a 429 or 503: wait and ask again by ``backoff``'s rule, each wait kept in ``waits``.

    The answer that ended it — a 200, another status, or the refusal that
    stood (its body is not read) — and why a refusal stood (else "").
    """

    async def attempt() -> tuple[int, bytes]:
        status, data, hints = await client.post("chat/completions", body)
        if hints is not None:
            raise Refused(status, hints)
        return status, data

    try:
        status, data = await backoff.call(
            attempt, deadline=deadline if deadline is not None else math.inf,
            on_wait=waits.append, first=first)
    except Refused as last:
        return last.status, b"", last.stopped
    return status, data, ""


__all__ = ["DEFAULT_TIMEOUT_S", "JudgeSettings", "Opinion", "ask", "ask_chat", "judge_answer",
           "judge_opinion", "make_client", "score_answer"]
