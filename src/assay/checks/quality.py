"""Quality checks: ``judge``, ``rubric``, ``similar`` (SPEC §3, §9).

Their verdicts rest on opinions, which somebody else gives: a judge model,
or a local embedding model. This module only declares the checks (their
arguments, validated at load) and reads opinions into judgements; asking
for the opinions is the battery's (``engine.judging``), and the reading is
pure, so replay reads the stored opinions into the same verdicts.

Arguments (normalised by ``prepare``):

- ``judge: {criteria, model?, template?, threshold?}`` (or ``judge: TEXT``,
  the criteria alone): one opinion, ``pass``/``fail``. A ``model:`` that is
  a ``python:module:function`` judge is imported at load, beside the suite
  file, so that one that cannot be is refused at its line. ``threshold`` is the
  pass rate over trials the case needs (the ``threshold`` modifier, said
  in the argument; default 1.0).
- ``rubric: {criteria: [{name, description?, weight?}], pass_at, model?,
  template?, threshold?}``: one opinion per criterion, a score 0–10; the
  weighted mean of the scores on 0..1 passes at ``pass_at``.
- ``similar: {to, threshold}``: cosine similarity of local sentence
  embeddings of the output and ``to``; a trial passes at ``threshold``. Its
  pass rate over trials is the ``threshold`` modifier's, as for any check.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..judging.answers import fold_rubric
from ..judging.opinion import OPINION_CHECKS, Opinion, judge_opinion, score_answer
from ..judging.templates import check_template
from ..model import Assertion, Trace
from ..model.values import select
from .registry import Check, Judgement, LoadContext, register

#: What the checks below read: the final output (a ``path`` selects within it).
FACT = "output"


def _unknown(arg: Mapping[str, Any], allowed: Sequence[str], name: str) -> None:
    extra = [str(k) for k in arg if k not in allowed]
    if extra:
        raise ValueError(f"unknown key{'s' if len(extra) > 1 else ''} {', '.join(extra)} "
                         f"(a {name} takes {', '.join(allowed)})")


def _fraction(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or not 0 <= value <= 1:
        raise ValueError(f"{what} is a number from 0 to 1, not {value!r}")
    return float(value)


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} is non-empty text")
    return value


def _common(arg: Mapping[str, Any], out: dict[str, Any], kind: str, ctx: LoadContext) -> None:
    if "model" in arg:
        from ..judging.judges import parse_judge

        out["model"] = _text(arg["model"], "model")
        judge = parse_judge(out["model"], default_kind="openai")  # raises with the reason
        if judge.kind == "python":
            # Imported now, from beside the suite file, as a grader is: a judge that
            # cannot be loaded is a mistake at this line, not a run of inconclusives.
            from ..judging.python_judge import check

            try:
                check(judge, ctx.base_dir)
            except ValueError as exc:
                raise ValueError(f"model {judge.uri}: {exc}") from None
    if "template" in arg:
        out["template"] = check_template(arg["template"], kind)  # type: ignore[arg-type]
    if "threshold" in arg:
        out["threshold"] = _fraction(arg["threshold"], "threshold")


def prepare_judge(arg: Any, ctx: LoadContext) -> dict[str, Any]:
    """``judge``'s argument, normalised to a mapping; ``ValueError`` naming what is wrong."""
    if isinstance(arg, str):
        arg = {"criteria": arg}
    if not isinstance(arg, dict):
        raise ValueError("judge takes {criteria, model, template, threshold} or the criteria text")
    _unknown(arg, ("criteria", "model", "template", "threshold"), "judge")
    if "criteria" not in arg:
        raise ValueError("judge needs criteria: what the answer must do to pass")
    out: dict[str, Any] = {"criteria": _text(arg["criteria"], "criteria")}
    _common(arg, out, "judge", ctx)
    return out


def prepare_rubric(arg: Any, ctx: LoadContext) -> dict[str, Any]:
    """``rubric``'s argument: named, weighted criteria and ``pass_at``."""
    if not isinstance(arg, dict):
        raise ValueError("rubric takes {criteria: [{name, description, weight}], pass_at}")
    _unknown(arg, ("criteria", "pass_at", "model", "template", "threshold"), "rubric")
    criteria = arg.get("criteria")
    if not isinstance(criteria, list) or not criteria:
        raise ValueError("rubric needs criteria: a list of {name, description, weight}")
    seen: set[str] = set()
    normal: list[dict[str, Any]] = []
    for index, item in enumerate(criteria, 1):
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict):
            raise ValueError(f"criterion {index} is {{name, description, weight}}")
        _unknown(item, ("name", "description", "weight"), "criterion")
        name = _text(item.get("name"), f"criterion {index}'s name")
        if name in seen:
            raise ValueError(f"criterion {name!r} is named twice")
        seen.add(name)
        weight = item.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, int | float) \
                or not math.isfinite(weight) or weight <= 0:
            raise ValueError(f"criterion {name!r}: weight is a number > 0, not {weight!r}")
        description = item.get("description", "")
        if not isinstance(description, str):
            raise ValueError(f"criterion {name!r}: description is text")
        normal.append({"name": name, "description": description, "weight": weight})
    if "pass_at" not in arg:
        raise ValueError("rubric needs pass_at: the weighted score (0 to 1) a trial passes at")
    out: dict[str, Any] = {"criteria": normal, "pass_at": _fraction(arg["pass_at"], "pass_at")}
    _common(arg, out, "rubric", ctx)
    return out


def prepare_similar(arg: Any, ctx: LoadContext) -> dict[str, Any]:
    """``similar``'s argument: the text to be close to and how close."""
    if not isinstance(arg, dict):
        raise ValueError("similar takes {to, threshold}")
    _unknown(arg, ("to", "threshold"), "similar")
    if "to" not in arg:
        raise ValueError("similar needs to: the text the output should be close to")
    if "threshold" not in arg:
        raise ValueError("similar needs threshold: the similarity (0 to 1) a trial passes at")
    return {"to": _text(arg["to"], "to"), "threshold": _fraction(arg["threshold"], "threshold")}


def rate_threshold(assertion: Assertion) -> float | None:
    """The pass rate over trials a quality assertion needs, when one is written.

    The ``threshold`` modifier, else (``judge``, ``rubric``) the argument's
    ``threshold``; ``similar``'s argument threshold is a similarity, not a rate.
    """
    if assertion.threshold is not None:
        return assertion.threshold
    if assertion.check in ("judge", "rubric") and isinstance(assertion.arg, dict):
        value = assertion.arg.get("threshold")
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


#: Why a quality check has no opinion: none was asked (a deterministic check had
#: failed the trial already) or none came back (the run stopped first).
NOT_JUDGED = "not judged: a deterministic check failed first, or the run stopped before"


def read_opinions(assertion: Assertion, trace: Trace | None,
                  opinions: Sequence[Opinion]) -> Judgement:
    """The judgement a quality assertion's opinions give. Pure; never raises on any answer.

    ``judge`` reads one opinion, ``rubric`` one per criterion in order,
    ``similar`` one whose raw answer is the similarity. A ``path`` that
    selects nothing in the output, or too few opinions, is inconclusive.
    """
    arg = assertion.arg if isinstance(assertion.arg, dict) else {}
    if assertion.path is not None and trace is not None \
            and not select(trace.output, assertion.path)[0]:
        return Judgement("inconclusive", f"{assertion.path} selects nothing in the output")
    if assertion.check == "judge":
        if not opinions:
            return Judgement("inconclusive", NOT_JUDGED)
        opinion = opinions[0]
        outcome, note = judge_opinion(opinion)
        return Judgement(outcome, note, provenance=_provenance("judge", opinion))
    if assertion.check == "rubric":
        criteria = arg.get("criteria") or []
        if len(opinions) < len(criteria) or not criteria:
            return Judgement("inconclusive", NOT_JUDGED)
        answers = [(float(c["weight"]), score_answer(o)) for c, o in zip(criteria, opinions,
                                                                          strict=False)]
        outcome, value = fold_rubric(answers, float(arg.get("pass_at", 1.0)))
        provenance = _provenance("rubric", opinions[0])
        if value is None:
            name, why = next((c["name"], a.why) for c, (_, a) in zip(criteria, answers,
                                                                     strict=False)
                             if not a.conclusive)
            return Judgement("inconclusive", f"criterion {name}: {why}", provenance)
        return Judgement(outcome, f"scored {value:.3f} (passes at {arg.get('pass_at'):g}) "
                         f"by {opinions[0].model}", provenance, score=value)
    if assertion.check == "similar":
        if not opinions:
            return Judgement("inconclusive", NOT_JUDGED)
        opinion = opinions[0]
        provenance = f"similar:{opinion.model}"
        if opinion.error is not None:
            return Judgement("inconclusive", f"similarity not measured: {opinion.error}",
                             provenance)
        try:
            value = float(opinion.raw or "")
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and -1 <= value <= 1):
            return Judgement("inconclusive", "similarity not measured: no number recorded",
                             provenance)
        cut = float(arg.get("threshold", 1.0))
        outcome = "pass" if value >= cut else "fail"
        return Judgement(outcome, f"similarity {value:.3f} (passes at {cut:g})", provenance,
                         score=value)
    return Judgement("inconclusive", f"{assertion.check} gives no opinion")


def _provenance(check: str, opinion: Opinion) -> str:
    return f"{check}:{opinion.model} prompt {opinion.prompt_digest}"


def _unasked(assertion: Assertion, trace: Trace) -> Judgement:
    # Called only when the battery asked nobody (a quality check graded without opinions).
    return read_opinions(assertion, trace, ())


_PREPARE = {"judge": prepare_judge, "rubric": prepare_rubric, "similar": prepare_similar}
# The judging room asks opinions for these names; a check read from opinions that it
# did not know would never be asked about, so the two lists are one.
if set(_PREPARE) != OPINION_CHECKS:
    raise ImportError("checks.quality and judging.opinion.OPINION_CHECKS name different checks")
for _name, _prepare in _PREPARE.items():
    register(Check(name=_name, family="quality", fact=FACT, evaluate=_unasked, prepare=_prepare,
                   opinions=True))
