"""Fold verdicts into a trial, and trials into a case (SPEC §5).

The rules, in the order they bite:

- a trial is ``broken`` when it never ran (and says why), else ``fail`` if
  any verdict fails, else ``inconclusive`` if any is, else ``pass``; a trial
  with no verdicts is ``inconclusive`` ("no assertions"): silence is not a
  pass (PRINCIPLES 3); a trial stopped at its timeout (a partial trace) that
  broke no check is ``inconclusive`` too: it never finished, so what it
  would have done is unknown;
- over a case, output and structural checks are binary: one failing verdict
  in any trial fails the case (PRINCIPLES 2); quality checks are judged on
  their pass rate over the trials that ran, against their threshold;
- a case is ``fail`` > ``broken`` > ``inconclusive`` > ``pass``: it passes
  only when nothing failed, nothing broke and nothing was left undecided.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..model.records import PlainCase, PlainTrial, PlainVerdict
from ..model.result import CaseResult, Outcome, RateSummary, TrialOutcome, TrialResult, Verdict
from ..model.storable import storable_note
from ..model.suite import Case
from ..model.trace import Trace, Usage
from ..model.turns import summary
from .stats import EPSILON, pass_hat_k, straddles, wilson

#: Families whose verdicts are binary over trials: one breach is a breach.
BINARY_FAMILIES = frozenset({"output", "structural"})


#: A verdict, a trial: as the validated model or as the battery's plain record.
AnyVerdict = Verdict | PlainVerdict
AnyTrial = TrialResult | PlainTrial


def fold_trial(
    n: int,
    verdicts: list[Verdict],
    *,
    reason: str | None = None,
    broken: bool = False,
    duration_s: float = 0.0,
    usage: Usage | None = None,
    trace: Trace | None = None,
    opinions: Mapping[int, list[Any]] | None = None,
) -> TrialResult:
    """One trial's outcome from its verdicts (``fold_trial_plain``, as the model)."""
    return fold_trial_plain(n, verdicts, reason=reason, broken=broken, duration_s=duration_s,
                            usage=usage, trace=trace, opinions=opinions).to_model()


def fold_trial_plain(
    n: int,
    verdicts: Sequence[AnyVerdict],
    *,
    reason: str | None = None,
    broken: bool = False,
    duration_s: float = 0.0,
    usage: Usage | None = None,
    trace: Trace | None = None,
    opinions: Mapping[int, list[Any]] | None = None,
) -> PlainTrial:
    """One trial's outcome from its verdicts, as the battery's plain record.

    ``broken`` marks a trial that never ran (harness failure, crash, timeout
    before any output); ``reason`` must then say why, and is required. For a
    trial that ran, ``reason`` defaults to the first failing (or undecided)
    verdict's assertion and note. ``usage`` defaults to the trace's usage
    (unreported when there is no trace).
    """
    if usage is None:
        usage = trace.usage if trace is not None else Usage()
    outcome: TrialOutcome
    if broken:
        if not reason:
            raise ValueError("a broken trial must say why (reason is required)")
        outcome = "broken"
    else:
        failed = [v for v in verdicts if v.outcome == "fail"]
        undecided = [v for v in verdicts if v.outcome == "inconclusive"]
        # A trace the battery cut off at its timeout (docs/decisions/0003-folding.md).
        cut_off = trace.partial if trace is not None else False
        stopped = (trace.error if trace is not None else None) or "timed out"
        if failed:
            outcome = "fail"
            reason = reason or _verdict_reason(failed[0])
            if cut_off:
                reason += f" (then {stopped})"
        elif cut_off:
            outcome = "inconclusive"
            reason = reason or (f"{stopped} before finishing; what it recorded until then "
                                "breaks no check")
        elif not verdicts:
            outcome = "inconclusive"
            reason = reason or "no assertions"
        elif undecided:
            outcome = "inconclusive"
            reason = reason or _verdict_reason(undecided[0])
        else:
            outcome = "pass"
    return PlainTrial(
        n, outcome,
        # A broken trial's reason quotes the agent's exception (model/storable.py).
        None if reason is None else storable_note(reason),
        # A float, as the model's field makes an int given it (the JSON writes 1.0, not 1).
        duration_s if type(duration_s) is float else float(duration_s), usage, list(verdicts),
        trace.workspace.changes.files if trace is not None and trace.workspace is not None
        else None,
        summary(trace), trace, dict(opinions) if opinions else {},
    )


def fold_case(case: Case, trials: list[TrialResult], *, k: int | None = None,
              facets: Mapping[str, str] | None = None) -> CaseResult:
    """A case's outcome, rates and pass^k from its trials (``fold_case_plain``, as the model)."""
    return fold_case_plain(case, trials, k=k, facets=facets).to_model()


def fold_case_plain(case: Case, trials: Sequence[AnyTrial],
                    *, k: int | None = None,
                    facets: Mapping[str, str] | None = None) -> PlainCase:
    """A case's outcome, rates and pass^k from its trials, as the battery's plain record.

    ``facets`` (what the case was, as digests: ``LoadedSuite.case_facets``)
    are kept with the result, with ``model`` added: the models the trials'
    traces say answered, sorted and joined by ``, `` (a model behind an alias
    that moved shows here, not in the URI).

    Quality verdicts are grouped across trials by their position in the
    trial's verdict list together with their assertion label (every trial
    that ran grades the same ``case.expect`` in the same order). ``k``
    defaults to the number of trials; a ``k`` outside 1..n raises
    ``ValueError`` (pass^k cannot be estimated from fewer than k trials).
    """
    n = len(trials)
    if k is None:
        k = n
    if n and not 1 <= k <= n:
        raise ValueError(f"case {case.id!r}: k must be in 1..{n}, got {k}")
    if not n:
        k = 0

    if n and _plainly_passed(trials):
        # Most cases: every trial and verdict passed and none is a quality verdict, so
        # there is no rate to take and every pass^k is C(n,k)/C(n,k) = 1.
        return PlainCase(case.id, case.split, "pass", None, 1.0, 1.0, k,
                         {str(j): 1.0 for j in range(1, n + 1)}, case.synthetic,
                         list(case.tags), [], None, list(trials), _served(facets, trials))
    return _by_the_rules(case, trials, k, facets)


def _by_the_rules(case: Case, trials: Sequence[AnyTrial], k: int,
                  facets: Mapping[str, str] | None) -> PlainCase:
    """``fold_case_plain`` with every rule applied (no shortcut for a case that passed)."""
    n = len(trials)
    quality = _quality(trials)
    outcome, reason = _case_outcome(trials, quality)

    c = sum(1 for t in trials if t.outcome == "pass")
    return PlainCase(
        case.id, case.split, outcome, reason,
        c / n if n else 0.0,
        # No trials is no evidence of success: pass^k is 0, not the empty 1.0.
        pass_hat_k(c, n, k) if n else 0.0,
        k,
        {str(j): pass_hat_k(c, n, j) for j in range(1, n + 1)},
        case.synthetic, list(case.tags), quality, _score(quality), list(trials),
        _served(facets, trials),
    )


def _plainly_passed(trials: Sequence[AnyTrial]) -> bool:
    """Every trial passed with every verdict passing, none of them a quality check's."""
    for trial in trials:
        if trial.outcome != "pass":
            return False
        for verdict in trial.verdicts:
            if verdict.outcome != "pass" or verdict.family == "quality":
                return False
    return True


def _score(quality: list[RateSummary]) -> float | None:
    """The case's number: the mean of its quality checks' (None without any)."""
    scores = [q.score for q in quality if q.score is not None]
    return sum(scores) / len(scores) if scores else None


def _served(facets: Mapping[str, str] | None, trials: Sequence[AnyTrial]) -> dict[str, str]:
    found = dict(facets) if facets else {}
    models = {t.trace.facets["model"] for t in trials
              if t.trace is not None and "model" in t.trace.facets}
    if models:
        found["model"] = ", ".join(sorted(models))
    return found


@dataclass
class _Tally:
    """Quality verdicts of one check gathered across trials."""

    assertion: str
    threshold: float
    passed: int = 0
    failed: int = 0
    scores: list[float] | None = None


def _quality(trials: Sequence[AnyTrial]) -> list[RateSummary]:
    """Rate summaries of the quality checks over the trials that ran."""
    ran = [t for t in trials if t.outcome != "broken"]
    tallies: dict[tuple[int, str], _Tally] = {}
    for trial in ran:
        for index, verdict in enumerate(trial.verdicts):
            if verdict.family != "quality":
                continue
            key = (index, verdict.assertion)
            threshold = 1.0 if verdict.threshold is None else verdict.threshold
            tally = tallies.get(key)
            if tally is None:
                tally = tallies[key] = _Tally(verdict.assertion, threshold)
            # Should trials disagree on the bar, the stricter one holds.
            tally.threshold = max(tally.threshold, threshold)
            if verdict.outcome == "pass":
                tally.passed += 1
            elif verdict.outcome == "fail":
                tally.failed += 1
            if verdict.score is not None:
                tally.scores = [*(tally.scores or []), verdict.score]
    summaries = []
    for tally in tallies.values():
        # A trial that ran but left no verdict for this check counts as
        # undecided, like an inconclusive verdict: it is neither pass nor fail.
        total = len(ran)
        undecided = total - tally.passed - tally.failed
        low, high = wilson(tally.passed, total)
        rate = tally.passed / total if total else 0.0
        outcome: Outcome
        if total and rate >= tally.threshold - EPSILON:
            outcome = "pass"
        elif total and (tally.passed + undecided) / total < tally.threshold - EPSILON:
            outcome = "fail"
        else:
            outcome = "inconclusive"
        summaries.append(
            RateSummary(
                assertion=tally.assertion,
                passed=tally.passed,
                trials=total,
                rate=rate,
                low=low,
                high=high,
                threshold=tally.threshold,
                outcome=outcome,
                straddles=straddles(low, high, tally.threshold),
                # What the opinions gave: their scores, else (a judge) the pass rate
                # over the answers that decided; none when no answer decided.
                score=(sum(tally.scores) / len(tally.scores) if tally.scores
                       else tally.passed / (tally.passed + tally.failed)
                       if tally.passed + tally.failed else None),
            )
        )
    return summaries


def _case_outcome(
    trials: Sequence[AnyTrial], quality: list[RateSummary]
) -> tuple[TrialOutcome, str | None]:
    """fail > broken > inconclusive > pass, with a short reason."""
    n = len(trials)
    if not n:
        return "inconclusive", "no trials ran"
    # Most cases pass outright: every trial and verdict passed, every rate
    # reached its bar. Each rule below would find nothing to say about them.
    if all(t.outcome == "pass" and all(v.outcome == "pass" for v in t.verdicts)
           for t in trials) and all(q.outcome == "pass" for q in quality):
        return "pass", None

    # Binary breaches count in every trial, broken ones included: a breach
    # the trace recorded before the trial broke still happened.
    breaches: dict[str, int] = {}
    first_note: dict[str, str] = {}
    for trial in trials:
        # dict.fromkeys, not a set: the first breach named must not depend
        # on string hashing, or the same trials would give another reason.
        failing = [v for v in trial.verdicts if _binary_fail(v)]
        for label in dict.fromkeys(v.assertion for v in failing):
            breaches[label] = breaches.get(label, 0) + 1
        for v in failing:
            first_note.setdefault(v.assertion, v.note)
    if breaches:
        label, count = next(iter(breaches.items()))
        note = f": {first_note[label]}" if first_note.get(label) else ""
        return "fail", _more(f"{label} failed in {count} of {n} trials{note}", len(breaches))
    failed_quality = [q for q in quality if q.outcome == "fail"]
    if failed_quality:
        q = failed_quality[0]
        return "fail", _more(
            f"{q.assertion} passed {q.passed} of {q.trials} trials, "
            f"under its threshold {q.threshold:g}",
            len(failed_quality),
        )
    # A trial that failed with no failing verdict on record cannot be
    # explained by a quality rate; it fails the case rather than vanish.
    unexplained = [
        t
        for t in trials
        if t.outcome == "fail" and not any(v.outcome == "fail" for v in t.verdicts)
    ]
    if unexplained:
        return "fail", _count(unexplained, n, "failed")

    broken = [t for t in trials if t.outcome == "broken"]
    if broken:
        return "broken", _count(broken, n, "broken")

    undecided = [
        t
        for t in trials
        if t.outcome == "inconclusive" or any(v.outcome == "inconclusive" for v in t.verdicts)
    ]
    if undecided:
        return "inconclusive", _count(undecided, n, "inconclusive")
    open_quality = [q for q in quality if q.outcome != "pass"]
    if open_quality:
        q = open_quality[0]
        return "inconclusive", _more(
            f"{q.assertion} passed {q.passed} of {q.trials} trials; "
            f"its threshold {q.threshold:g} is neither reached nor missed",
            len(open_quality),
        )
    return "pass", None


def _binary_fail(verdict: AnyVerdict) -> bool:
    return verdict.family in BINARY_FAMILIES and verdict.outcome == "fail"


def _verdict_reason(verdict: AnyVerdict) -> str:
    if verdict.note:
        return f"{verdict.assertion}: {verdict.note}"
    return f"{verdict.assertion} {verdict.outcome}"


def _count(trials: Sequence[AnyTrial], n: int, word: str) -> str:
    """"2 of 5 trials broken: <first reason>" (or just the reason for 1 of 1)."""
    first = trials[0].reason
    if n == 1:
        return first or f"the trial {word}"
    head = f"{len(trials)} of {n} trials {word}"
    return f"{head}: {first}" if first else head


def _more(reason: str, how_many: int) -> str:
    return reason if how_many == 1 else f"{reason} (and {how_many - 1} more)"
