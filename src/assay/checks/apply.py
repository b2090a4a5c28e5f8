"""Turn one trace into verdicts: run each assertion, then weigh its evidence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..judging.opinion import Opinion
from ..model import DEFAULT_MINIMUM, Assertion, Evidence, Trace, Verdict
from ..model.records import PlainVerdict
from ..model.storable import storable_note
from .quality import rate_threshold, read_opinions
from .registry import Check, Judgement, lookup, reads_opinions

#: Opinions on one trace, by the position of the assertion they belong to in ``expect``.
Opinions = Mapping[int, Sequence[Opinion]]


def required_evidence(assertion: Assertion, fact: str) -> Evidence:
    """The evidence a verdict needs: the assertion's ``min_evidence`` or the fact's default."""
    return assertion.min_evidence or DEFAULT_MINIMUM.get(fact, Evidence.OBSERVED)


def grade_trace(assertions: list[Assertion], trace: Trace,
                opinions: Opinions | None = None) -> list[Verdict]:
    """One verdict per assertion, in order (SPEC §5: less evidence than needed is inconclusive).

    ``opinions`` are what judges said of this trace, by assertion position:
    a quality check's verdict is read from them (none: inconclusive).
    """
    return [found.to_model() for found in grade_trace_plain(assertions, trace, opinions)]


def grade_trace_plain(assertions: list[Assertion], trace: Trace,
                      opinions: Opinions | None = None) -> list[PlainVerdict]:
    """``grade_trace``'s verdicts as plain records (the battery's: no model per verdict)."""
    if opinions is None:
        return [verdict_plain(assertion, trace) for assertion in assertions]
    return [verdict_plain(assertion, trace, opinions.get(position, ()))
            for position, assertion in enumerate(assertions)]


def grade_facts(assertions: list[Assertion], trace: Trace) -> list[PlainVerdict | None]:
    """The verdicts of the checks that read the trace alone, in order, and None in the place
    of each check read from opinions: its verdict waits for its judges' answers."""
    return [None if reads_opinions(assertion) else verdict_plain(assertion, trace)
            for assertion in assertions]


def verdict(assertion: Assertion, trace: Trace, opinions: Sequence[Opinion] = ()) -> Verdict:
    """The verdict of one assertion on one trace (and, for a quality check, its opinions)."""
    return verdict_plain(assertion, trace, opinions).to_model()


def verdict_plain(assertion: Assertion, trace: Trace,
                  opinions: Sequence[Opinion] = ()) -> PlainVerdict:
    """``verdict`` as a plain record (``model.records``)."""
    check = lookup(assertion.check)
    if check is None:  # the loader refuses these; a stored suite could still carry one
        return PlainVerdict(assertion.label(), assertion.check, "output", "inconclusive",
                            Evidence.UNAVAILABLE,
                            storable_note(f"unknown check {assertion.check!r}"), "", None, None)
    # An assertion that reads several facts rests on the weakest, and needs each.
    # One pass over the facts (this runs for every assertion of every trial):
    # the weakest evidence (the first of equals) and the first fact short of
    # what it needs.
    have: Evidence | None = None
    short: tuple[str, Evidence, Evidence] | None = None
    for fact in check.facts(assertion.arg):
        given = trace.evidence_for(fact)
        if have is None or given.rank < have.rank:
            have = given
        if short is None:
            need = required_evidence(assertion, fact)
            if not given.satisfies(need):
                short = (fact, given, need)
    if have is None:
        raise ValueError(f"check {check.name!r} reads no facts")
    if short is not None:
        fact, weak, need = short
        judgement = Judgement(
            "inconclusive", f"{fact} evidence is {weak.value}; this check needs {need.value}"
        )
        # Evidence gates passes, not failures (SPEC §5): a breach seen at weaker
        # evidence than a pass needs still fails. Nothing is seen through unavailable.
        if check.breaches and have is not Evidence.UNAVAILABLE:
            seen = _evaluate(check, assertion, trace)
            if seen.breach and seen.outcome == "fail":
                judgement = seen
    elif check.opinions:
        judgement = read_opinions(assertion, trace, opinions)
    else:
        judgement = _evaluate(check, assertion, trace)
    if judgement.breach and judgement.outcome == "fail" and have is not Evidence.OBSERVED:
        judgement = _weak_breach(assertion, judgement, have)
    # A note may quote the agent (a grader's, a check's): stored as a model would (storable).
    score = judgement.score
    if score is not None and type(score) is not float:
        score = float(score)  # as the model's float field takes an int or a bool
    return PlainVerdict(
        assertion.label(), check.name, check.family, judgement.outcome, have,
        storable_note(judgement.note), judgement.provenance or f"check:{check.name}",
        rate_threshold(assertion) if check.family == "quality" else None, score)


def _evaluate(check: Check, assertion: Assertion, trace: Trace) -> Judgement:
    if assertion.turn == "any":  # an output check on each reply: one passing is enough
        return _any_reply(check, assertion, trace)
    if assertion.turn is not None:  # an output check on one reply of a conversation
        replies = [e for e in trace.events if e.kind == "reply"]
        if len(replies) < assertion.turn:
            return Judgement("fail", f"the conversation has no reply {assertion.turn} (the "
                             f"agent replied {len(replies)} time(s))")
        trace = trace.model_copy(update={"output": replies[assertion.turn - 1].result})
    try:
        return check.evaluate(assertion, trace)
    except Exception as exc:  # a check must not crash the battery; say what happened
        return Judgement("inconclusive", f"check failed: {type(exc).__name__}: {exc}")


def _any_reply(check: Check, assertion: Assertion, trace: Trace) -> Judgement:
    """``turn: any``: the check on each reply in turn; the first that passes decides. None
    passing: inconclusive if one was, else a failure that says how many replies there were
    (what someone had to say, anywhere in the conversation, was never said)."""
    replies = [e for e in trace.events if e.kind == "reply"]
    unsure: Judgement | None = None
    judgement = Judgement("fail", "the conversation has no reply")
    for number, reply in enumerate(replies, 1):
        try:
            judgement = check.evaluate(assertion, trace.model_copy(update={"output": reply.result}))
        except Exception as exc:  # a check must not crash the battery; say what happened
            judgement = Judgement("inconclusive", f"check failed: {type(exc).__name__}: {exc}")
        if judgement.outcome == "pass":
            return replace(judgement, note=f"reply {number}: {judgement.note}")
        if judgement.outcome == "inconclusive" and unsure is None:
            unsure = replace(judgement, note=f"reply {number}: {judgement.note}")
    if unsure is not None or not replies:
        return unsure or judgement
    return Judgement("fail", f"none of the {len(replies)} replies passes; the last: "
                     f"{judgement.note}")


def _weak_breach(assertion: Assertion, judgement: Judgement, have: Evidence) -> Judgement:
    """A breach seen at less than ``observed``: a failure whose note says the level it was
    seen at or, with ``breach_evidence: observed``, inconclusive."""
    seen = f"{judgement.note} (seen at {have.value} evidence)"
    if assertion.breach_evidence is Evidence.OBSERVED:
        return replace(judgement, outcome="inconclusive", breach=False,
                       note=f"{seen}; breach_evidence: observed asks for observed")
    return replace(judgement, note=seen)
