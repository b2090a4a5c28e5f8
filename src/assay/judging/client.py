"""One judge call: a rendered prompt to a model behind an OpenAI-compatible server (SPEC §9).

``ask`` sends one chat completion through an ``openai.AsyncOpenAI`` client
handed in (``make_client`` builds one the way the ``openai:`` target does)
and returns an ``Opinion`` — the raw answer, the model that gave it, tokens,
cost and latency — and never raises: a timeout, an HTTP error, a refused
connection or a reply without choices is an opinion with ``error`` set, and
its verdict is ``inconclusive`` (PRINCIPLES 3). Only cancellation goes
through. The choices made here (no retries, the timeout twice, a placeholder
key, the prompt as one user message) are in docs/decisions/0030.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
    """An ``openai.AsyncOpenAI`` for the judge's server; the caller closes it.

    The key is always the placeholder, given explicitly so that the SDK does
    not read ``OPENAI_API_KEY``: a user's key is never sent to the judge's
    server, loopback or not (PRINCIPLES 10). No retries; the SDK's own timeout
    is the judge's.
    """
    import openai

    from ..targets.openai import NO_KEY, sdk_client

    return sdk_client(openai, settings.base_url, api_key=NO_KEY, timeout=settings.timeout_s)


async def ask(
    client: Any,
    settings: JudgeSettings,
    prompt: str,
    *,
    prompt_digest: str,
    clock: Callable[[], float] = time.perf_counter,
    prices: PriceTable | None = None,
) -> Opinion:
    """Ask the judge once: ``prompt`` as the only (user) message. Never raises but on cancel.

    ``prices`` defaults to the shipped table (the battery passes the user's,
    ``load_prices()``); a model it does not know costs None.
    """
    import openai

    parameters = settings.sampling()
    asked = settings.model
    start = clock()

    def failed(error: str, raw: str | None = None, model: str = asked) -> Opinion:
        return Opinion(raw=raw, model=model, prompt_digest=prompt_digest, parameters=parameters,
                       latency_s=round(clock() - start, 6), error=error)

    try:
        async with asyncio.timeout(settings.timeout_s):
            reply = await client.chat.completions.create(
                model=asked, messages=[{"role": "user", "content": prompt}], **parameters)
    except (TimeoutError, openai.APITimeoutError):
        return failed(f"timed out after {settings.timeout_s:g}s")
    except openai.APIStatusError as exc:
        reason = _REASONS.get(exc.status_code)
        return failed(f"HTTP {exc.status_code}" + (f" ({reason})" if reason else ""))
    except openai.APIConnectionError as exc:
        return failed("refused connection" if _refused(exc) else "lost the connection")
    except Exception as exc:  # anything else the SDK or a strange reply throws: an answer too
        return failed(f"unexpected {type(exc).__name__}")

    reported = getattr(reply, "model", None)
    model = str(reported) if isinstance(reported, str) and reported else asked
    choices = getattr(reply, "choices", None)
    if not isinstance(choices, list) or not choices:
        return failed("no choices", model=model)
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    refusal = getattr(message, "refusal", None)
    usage = getattr(reply, "usage", None)
    tokens_in = getattr(usage, "prompt_tokens", None)
    tokens_out = getattr(usage, "completion_tokens", None)
    counted = isinstance(tokens_in, int) and isinstance(tokens_out, int)
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
        latency_s=round(clock() - start, 6), error=error)


def _refused(exc: BaseException) -> bool:
    """Whether a connection error was the server's port refusing (nothing listening)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionRefusedError) or "refused" in str(cause).lower():
            return True
        cause = cause.__cause__ or cause.__context__
    return False


__all__ = ["DEFAULT_TIMEOUT_S", "JudgeSettings", "Opinion", "ask", "judge_answer", "judge_opinion",
           "make_client", "score_answer"]
