"""An opinion as data: what one judge call (or one local model) said, and reading it (SPEC §9).

Pure: no I/O. ``client.ask`` makes opinions from model calls, ``similarity``
from a local embedding model; the checks (``checks.quality``) read them into
verdicts, and the store keeps them whole, so that replay reads the same
opinions again rather than asking anyone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..targets.backoff import Wait
from .answers import REFUSED, JudgeAnswer, ScoreAnswer, read_judge, read_score

if TYPE_CHECKING:
    from ..model import Case
    from ..model.result import Outcome

#: The checks whose verdicts are read from opinions: what a panel asks judges (or the
#: local model) about. ``checks.quality`` declares these names and no others.
OPINION_CHECKS = frozenset({"judge", "rubric", "similar"})


# Here, not in ``panel``: a run asks these of every suite, and a suite nobody judges
# should not import the panel's clients and caches to learn that.
def asks_opinions(case: Case) -> bool:
    """Whether any of the case's assertions is read from opinions."""
    return any(a.check in OPINION_CHECKS for a in case.expect)


def suite_asks_opinions(cases: Sequence[Case]) -> bool:
    """Whether any case asks opinions (packed cases are read by their check names only)."""
    from ..model.packed import PackedCases

    if not isinstance(cases, PackedCases):
        return any(asks_opinions(case) for case in cases)
    return not OPINION_CHECKS.isdisjoint(cases.check_names())


@dataclass(frozen=True, slots=True)
class Opinion:
    """One judge call as it went: what the judge said, or why it said nothing.

    ``raw`` is the answer's text (None when there was none); ``model`` the
    model the server says answered, else the one asked; ``cost_usd`` is
    inferred from the tokens and the price table, None when either is
    unknown (never 0 for unknown) — or, with ``cost_observed``, what the
    host reported it cost (the ``claude`` grader). ``error`` is None or a
    short reason that never quotes the prompt or the server's text, either
    of which may hold a hidden case. ``stream`` is the host's raw event
    stream, kept whole where there is one (None for a chat completion), or
    what a ``python:`` judge printed and the exception it raised, if any.
    ``waits`` are the waits after a 429 or 503 ("not now") before the judge
    answered or the call gave up (``targets/backoff.py``); ``latency_s``
    includes them.
    """

    raw: str | None
    model: str
    prompt_digest: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    latency_s: float = 0.0
    error: str | None = None
    cost_observed: bool = False
    stream: str | None = None
    #: Served from the judge cache: asked in an earlier run, not paid for again in this one.
    cached: bool = False
    waits: tuple[Wait, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The opinion as the ``judge-opinion`` ledger entry will hold it (``stream`` if any)."""
        record: dict[str, Any] = {
            "model": self.model,
            "prompt_digest": self.prompt_digest,
            "parameters": dict(self.parameters),
            "raw": self.raw,
            "error": self.error,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "cost_evidence": ("unavailable" if self.cost_usd is None
                              else "observed" if self.cost_observed else "inferred"),
            "latency_s": self.latency_s,
        }
        if self.stream is not None:
            record["stream"] = self.stream
        if self.cached:
            record["cached"] = True
        if self.waits:  # only when there were any: every other opinion's record is unchanged
            record["waits"] = [wait.to_json() for wait in self.waits]
        return record

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Opinion:
        """The inverse of ``to_json`` (a stored or cached opinion); ``ValueError`` if malformed."""
        try:
            raw, model, digest = data["raw"], data["model"], data["prompt_digest"]
            parameters = data.get("parameters") or {}
            if not (raw is None or isinstance(raw, str)) or not isinstance(model, str) \
                    or not isinstance(digest, str) or not isinstance(parameters, dict):
                raise TypeError
            error, stream = data.get("error"), data.get("stream")
            if not (stream is None or isinstance(stream, str)):
                raise TypeError
            waits = data.get("waits") or []
            if not isinstance(waits, list):
                raise TypeError
            return cls(raw=raw, model=model, prompt_digest=digest, parameters=parameters,
                       input_tokens=_count(data.get("input_tokens")),
                       output_tokens=_count(data.get("output_tokens")),
                       cost_usd=_number(data.get("cost_usd")),
                       latency_s=float(_number(data.get("latency_s")) or 0.0),
                       error=error if isinstance(error, str) else None,
                       cost_observed=data.get("cost_evidence") == "observed",
                       stream=stream, cached=data.get("cached") is True,
                       waits=tuple(Wait.from_json(wait) for wait in waits))
        except (KeyError, TypeError):
            raise ValueError("not a stored opinion") from None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def judge_answer(opinion: Opinion) -> JudgeAnswer:
    """The ``judge`` reading of an opinion: an error is inconclusive, its raw text kept."""
    if opinion.error is not None:
        why = opinion.error if opinion.error == REFUSED else f"judge error: {opinion.error}"
        return JudgeAnswer("inconclusive", "", opinion.raw or "", why)
    return read_judge(opinion.raw or "")


def score_answer(opinion: Opinion) -> ScoreAnswer:
    """The ``rubric`` reading of an opinion: an error is inconclusive, its raw text kept."""
    if opinion.error is not None:
        why = opinion.error if opinion.error == REFUSED else f"judge error: {opinion.error}"
        return ScoreAnswer(None, None, "", opinion.raw or "", why)
    return read_score(opinion.raw or "")


def judge_opinion(opinion: Opinion) -> tuple[Outcome, str]:
    """The outcome of a ``judge`` opinion and a note that never quotes the answer.

    Pass and fail say which model said so (the justification stays in the
    opinion's raw answer, which may quote a hidden case); inconclusive says
    why: the call's error, a refusal, an answer out of form.
    """
    answer = judge_answer(opinion)
    if answer.outcome == "inconclusive":
        return "inconclusive", answer.why
    return answer.outcome, f"the judge ({opinion.model}) said {answer.outcome}"
