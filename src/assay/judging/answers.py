"""Reading a judge's answer, strictly, and folding a rubric's scores (SPEC §9).

The first non-empty line decides; the rest is the justification, and the raw
answer is always kept whole. Accepted first lines, after surrounding
whitespace (and a byte-order mark or zero-width space) is trimmed:

- ``judge``: the word ``pass`` or ``fail`` alone, in any ASCII case;
- ``rubric``: a number from 0 to 10 alone, ``7`` or ``7.5`` (ASCII digits,
  a point for decimals), optionally written ``7/10``;

either may be wrapped in one markdown emphasis or code mark (``*``, ``**``,
``***``, ``_``, ``__``, ``___``, a backtick, the same on both sides) and
followed by one period or colon (inside the mark or outside it). Anything
else — ``Verdict: pass``, ``pass or fail``, ``yes``, ``PASS!``, ``8 out of
10``, a refusal, nothing at all — is out of form, and an answer out of form is
``inconclusive``: a judge that did not answer has not passed anything
(PRINCIPLES 3). Nothing here raises on any string (docs/decisions/0030).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..model.result import Outcome

_MARK = r"(?P<mark>\*{1,3}|_{1,3}|`|)"
# One period or colon, inside the mark or outside it, not both.
_END = r"(?P<stop>[.:])?(?P=mark)(?(stop)|[.:]?)"
# re.ASCII: with IGNORECASE alone, "ſ" (long s) would match "s" and "paſſ" would pass.
_VERDICT = re.compile(_MARK + r"(?P<word>pass|fail)" + _END, re.IGNORECASE | re.ASCII)
_SCORE = re.compile(_MARK + r"(?P<number>\d+(?:\.\d+)?)(?:\s*/\s*10)?" + _END, re.ASCII)

_INVISIBLE = "\ufeff\u200b\u2060"
_REFUSALS = (
    "i can't", "i can’t", "i cannot", "i won't", "i won’t", "i will not", "i'm sorry",
    "i’m sorry", "i am sorry", "sorry", "i'm unable", "i’m unable", "i am unable",
    "i'm not able", "i’m not able", "i am not able", "as an ai",
)

EMPTY = "empty: the judge's answer has no text"
REFUSED = "refused: the judge declined to answer"
OUT_OF_FORM_JUDGE = "out of form: the first line is not `pass` or `fail` alone"
OUT_OF_FORM_SCORE = "out of form: the first line is not a score from 0 to 10 alone"
OUT_OF_RANGE = "out of range: the score is not between 0 and 10"


@dataclass(frozen=True, slots=True)
class JudgeAnswer:
    """What a ``judge`` said: its outcome, its justification and the answer as it came.

    ``why`` says why an inconclusive answer is one (``empty``, ``refused``,
    ``out of form``); it never quotes the answer, which may quote a hidden case.
    """

    outcome: Outcome
    justification: str
    raw: str
    why: str = ""


@dataclass(frozen=True, slots=True)
class ScoreAnswer:
    """What a ``rubric`` judge said of one criterion.

    ``points`` is the score as written (0..10) and ``value`` the same on 0..1;
    both are ``None`` when the answer is inconclusive, and ``why`` says why.
    """

    points: float | None
    value: float | None
    justification: str
    raw: str
    why: str = ""

    @property
    def conclusive(self) -> bool:
        """Whether the judge gave a score."""
        return self.points is not None


def _trim(text: str) -> str:
    return text.strip().strip(_INVISIBLE).strip()


def _split(raw: str) -> tuple[str, str] | None:
    """The first non-empty line, trimmed, and the rest (the justification), or None."""
    lines = raw.splitlines()
    for index, line in enumerate(lines):
        first = _trim(line)
        if first:
            return first, "\n".join(lines[index + 1:]).strip()
    return None


def _declined(line: str) -> bool:
    opening = line[:40].lstrip("*_`\"'“ ").casefold()
    return opening.startswith(_REFUSALS)


def read_judge(raw: str) -> JudgeAnswer:
    """Read a ``judge`` answer: ``pass`` or ``fail`` on the first line, else inconclusive."""
    split = _split(raw)
    if split is None:
        return JudgeAnswer("inconclusive", "", raw, EMPTY)
    first, rest = split
    match = _VERDICT.fullmatch(first)
    if match is None:
        why = REFUSED if _declined(first) else OUT_OF_FORM_JUDGE
        return JudgeAnswer("inconclusive", rest, raw, why)
    return JudgeAnswer("pass" if match["word"].lower() == "pass" else "fail", rest, raw)


def read_score(raw: str) -> ScoreAnswer:
    """Read a ``rubric`` answer: a score 0–10 on the first line, else inconclusive."""
    split = _split(raw)
    if split is None:
        return ScoreAnswer(None, None, "", raw, EMPTY)
    first, rest = split
    match = _SCORE.fullmatch(first)
    if match is None:
        why = REFUSED if _declined(first) else OUT_OF_FORM_SCORE
        return ScoreAnswer(None, None, rest, raw, why)
    points = float(match["number"])  # ASCII digits: never raises; a huge one is inf
    if not 0 <= points <= 10:
        return ScoreAnswer(None, None, rest, raw, OUT_OF_RANGE)
    return ScoreAnswer(points, points / 10, rest, raw)


def _exact(number: float) -> Fraction:
    """The decimal a float was written as (its shortest repr), exactly.

    ``pass_at: 0.7`` and a weighted mean of exactly 7/10 then compare equal,
    which binary floats would leave to rounding.
    """
    return Fraction(repr(float(number)))


def fold_rubric(
    scores: Sequence[tuple[float, ScoreAnswer]], pass_at: float
) -> tuple[Outcome, float | None]:
    """A rubric's outcome and value from its ``(weight, answer)`` pairs.

    The value is the weighted mean of the normalised scores; it passes when at
    least ``pass_at``. Any inconclusive criterion leaves the whole rubric
    inconclusive with no value: a criterion nobody scored is not a zero and
    not a pass (PRINCIPLES 3). Weights must be finite and > 0, ``pass_at``
    within 0..1, and there must be a criterion: anything else is a mistake in
    the check and raises ``ValueError``.
    """
    if not scores:
        raise ValueError("a rubric needs at least one criterion")
    if not (math.isfinite(pass_at) and 0 <= pass_at <= 1):
        raise ValueError(f"pass_at must be between 0 and 1, not {pass_at!r}")
    for weight, _ in scores:
        if not (math.isfinite(weight) and weight > 0):
            raise ValueError(f"a criterion's weight must be > 0, not {weight!r}")
    if not all(answer.conclusive for _, answer in scores):
        return "inconclusive", None
    total = sum((_exact(weight) for weight, _ in scores), Fraction(0))
    points = sum(
        (_exact(weight) * _exact(answer.points or 0.0) for weight, answer in scores), Fraction(0)
    )
    mean = points / (10 * total)
    return ("pass" if mean >= _exact(pass_at) else "fail"), float(mean)
