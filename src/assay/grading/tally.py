"""The run's numbers, a case at a time: what a report says of its cases, without the cases.

A battery of a hundred thousand cases cannot keep every ``CaseResult`` (its
trials, verdicts and traces) until its report is made. Each case, once it is
final, leaves here the few numbers the report's summary needs — its group,
outcome, pass@1, mean trial score and trial count by its place in the
report, and its trials' usage, evidence and judges' cost as running figures
— and can then be dropped. The figures come out bit for bit as the list
would give them: sums that depend on order are taken in report order, and
the rest are exact (integer counts, ``math.fsum``).

``scores.py`` and ``report.build_report`` read a list through a tally too,
so there is one way to score a run, whichever way its cases arrive.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from typing import Literal

from ..model.evidence import Evidence
from ..model.records import PlainCase
from ..model.result import CaseResult, Cost, Reliability, Scores, SplitCounts
from .stats import EPSILON, clustered_se_of_means

#: How much better public must do than hidden to flag ``possibly-tuned``.
TUNING_GAP = 0.2

#: Trials per case from which a figure is reliability, not smoke (SPEC §5).
RELIABILITY_TRIALS = 3

#: Where a case is reported (its group code is its position here).
GROUPS = ("public", "hidden", "synthetic")
_OUTCOMES = ("pass", "fail", "inconclusive", "broken")
_EMPTY = -1


class Tally:
    """What the report's summary needs of ``size`` cases, added one at a time by position.

    ``add`` each case once, when it is final (an adaptive case after its
    last trial); the summaries read every position added so far, in order.
    """

    def __init__(self, size: int) -> None:
        self._group = array("b", [_EMPTY]) * size
        self._outcome = array("b", [0]) * size
        self._pass_at_1 = array("d", [0.0]) * size
        self._mean = array("d", [0.0]) * size
        self._trial_count = array("l", [0]) * size
        self.cases = 0
        # The agent's usage over every trial.
        self.trials = 0
        self._priced = array("d")
        self._tokens = 0
        self._input_tokens = 0
        self._output_tokens = 0
        #: Per fact, the weakest evidence of the trials that reported it with a trace,
        #: and whether one reported it without (its evidence is then the target's).
        self._weakest: dict[str, Evidence | None] = {"tokens": None, "cost": None}
        self._untraced = {"tokens": False, "cost": False}
        # The judges' answers over every trial.
        self._opinions = 0
        self._asked = 0
        self._judge_priced = array("d")
        self._judge_counted = 0
        self._judge_input = 0
        self._judge_output = 0
        # The simulated users' calls over every trial that had one (SPEC §16).
        self._simulated = 0
        self._user_calls = 0
        self._user_cached = 0
        self._user_priced = array("d")
        self._user_counted = 0
        self._user_input = 0
        self._user_output = 0

    @classmethod
    def of(cls, cases: list[CaseResult]) -> Tally:
        """A tally of a whole list, in its order."""
        tally = cls(len(cases))
        for index, case in enumerate(cases):
            tally.add(index, case)
        return tally

    def add(self, index: int, case: CaseResult | PlainCase) -> None:
        """Count one final case at its place in the report (its trials' traces still on)."""
        if self._group[index] != _EMPTY:
            raise ValueError(f"case {index} is counted already")
        self._group[index] = 2 if case.synthetic else GROUPS.index(case.split)
        self._outcome[index] = _OUTCOMES.index(case.outcome)
        self._pass_at_1[index] = case.pass_at_1
        trials = case.trials
        # The case's mean trial score, as clustered_se takes it: a trial scores 1 when
        # it passed; a case that ran no trials scores one 0.
        passed = math.fsum(1.0 if t.outcome == "pass" else 0.0 for t in trials)
        self._mean[index] = passed / len(trials) if trials else 0.0
        self._trial_count[index] = len(trials)
        self.cases += 1
        for trial in trials:
            self.trials += 1
            usage = trial.usage
            if usage.tokens is not None:
                self._tokens += 1
                self._input_tokens += usage.input_tokens or 0
                self._output_tokens += usage.output_tokens or 0
                self._saw("tokens", trial.trace)
            if usage.cost_usd is not None:
                self._priced.append(usage.cost_usd)
                self._saw("cost", trial.trace)
            for answers in trial.opinions.values():
                for opinion in answers:
                    self._opinion(opinion)
            simulator = getattr(trial.trace, "simulator", None)
            if simulator is not None:
                self._simulator(simulator)

    def _saw(self, fact: str, trace: object) -> None:
        if trace is None:
            self._untraced[fact] = True
            return
        found = trace.evidence_for(fact)  # type: ignore[attr-defined]
        held = self._weakest[fact]
        if held is None or found.rank < held.rank:
            self._weakest[fact] = found

    def _opinion(self, opinion: object) -> None:
        self._opinions += 1
        if getattr(opinion, "cached", False):
            return
        self._asked += 1
        cost = getattr(opinion, "cost_usd", None)
        if cost is not None:
            self._judge_priced.append(cost)
        tokens_in = getattr(opinion, "input_tokens", None)
        tokens_out = getattr(opinion, "output_tokens", None)
        if tokens_in is not None and tokens_out is not None:
            self._judge_counted += 1
            self._judge_input += tokens_in
            self._judge_output += tokens_out

    def _simulator(self, use: object) -> None:
        """One trial's simulated user: its calls and, where they were reported, their cost."""
        self._simulated += 1
        self._user_calls += getattr(use, "calls", 0)
        self._user_cached += getattr(use, "cached", 0)
        cost = getattr(use, "cost_usd", None)
        if cost is not None:
            self._user_priced.append(cost)
        tokens_in = getattr(use, "input_tokens", None)
        tokens_out = getattr(use, "output_tokens", None)
        if tokens_in is not None and tokens_out is not None:
            self._user_counted += 1
            self._user_input += tokens_in
            self._user_output += tokens_out

    # -- the summaries -----------------------------------------------------------------

    def _filled(self) -> Iterable[int]:
        group = self._group
        return (i for i in range(len(group)) if group[i] != _EMPTY)

    def _members(self) -> dict[int, list[int]]:
        """Each group's positions, in report order."""
        members: dict[int, list[int]] = {0: [], 1: [], 2: []}
        for index in self._filled():
            members[self._group[index]].append(index)
        return members

    def _rate(self, positions: list[int]) -> float | None:
        if not positions:
            return None
        return sum(1 for i in positions if self._outcome[i] == 0) / len(positions)

    def split_counts(self) -> dict[str, SplitCounts]:
        """How many cases of each split passed, failed, were inconclusive or broke."""
        counts: dict[str, SplitCounts] = {}
        for code, positions in self._members().items():
            if code == 2 and not positions:
                continue
            tally = [0, 0, 0, 0]
            for i in positions:
                tally[self._outcome[i]] += 1
            counts[GROUPS[code]] = SplitCounts(total=len(positions), passed=tally[0],
                                               failed=tally[1], inconclusive=tally[2],
                                               broken=tally[3])
        return counts

    def scores(self, pass_mark: float) -> Scores:
        """The scores and whether the run passed (``scores.score``)."""
        members = self._members()
        observed = sorted(members[0] + members[1])
        public, hidden = self._rate(members[0]), self._rate(members[1])
        overall = self._rate(observed)
        flags: list[str] = []
        if not self.cases:
            flags.append("no-cases")
        elif not observed:
            flags.append("no-observed-cases")
        if public is not None and hidden is not None and public - hidden > TUNING_GAP + EPSILON:
            flags.append("possibly-tuned")
        undecided = any(self._outcome[i] >= 2 for i in observed)
        passed = overall is not None and overall >= pass_mark - EPSILON and not undecided
        return Scores(public=public, hidden=hidden, overall=overall,
                      synthetic=self._rate(members[2]), pass_mark=pass_mark, passed=passed,
                      flags=flags)

    def reliability(self) -> dict[str, Reliability]:
        """pass@1 per split with its standard error clustered by case (``scores.reliability``)."""
        result: dict[str, Reliability] = {}
        for code, positions in self._members().items():
            if not positions:
                continue
            result[GROUPS[code]] = Reliability(
                pass_at_1=sum(self._pass_at_1[i] for i in positions) / len(positions),
                se=clustered_se_of_means([self._mean[i] for i in positions]),
                cases=len(positions),
            )
        return result

    def evidence_level(self) -> Literal["smoke", "reliability"]:
        """``reliability`` when every case ran at least 3 trials, else ``smoke``."""
        if self.cases and all(self._trial_count[i] >= RELIABILITY_TRIALS
                              for i in self._filled()):
            return "reliability"
        return "smoke"

    def cost(self, evidence: dict[str, Evidence]) -> Cost:
        """What the trials reported spending (``report.spent``); ``evidence``: the target's map."""
        judged: dict[str, float | int | None] = {}
        if self._opinions:
            asked = self._asked
            judged = {
                "judge_usd": math.fsum(self._judge_priced) if self._judge_priced or not asked
                else None,
                "judge_input_tokens": self._judge_input if self._judge_counted or not asked
                else None,
                "judge_output_tokens": self._judge_output if self._judge_counted or not asked
                else None,
                "judge_calls": asked,
                "judge_cached": self._opinions - asked,
            }
        if self._simulated:
            # A trial whose calls were all served from the cache reports 0 (spent nothing
            # now); one that asked and learnt no figure reports none, and a sum without it
            # is a lower bound, None when no trial had the figure.
            judged.update({
                "simulator_usd": math.fsum(self._user_priced) if self._user_priced else None,
                "simulator_input_tokens": self._user_input if self._user_counted else None,
                "simulator_output_tokens": self._user_output if self._user_counted else None,
                "simulator_calls": self._user_calls,
                "simulator_cached": self._user_cached,
            })
        return Cost(**judged,  # type: ignore[arg-type]
                    usd=math.fsum(self._priced) if self._priced else None,
                    input_tokens=self._input_tokens if self._tokens else None,
                    output_tokens=self._output_tokens if self._tokens else None,
                    trials=self.trials,
                    unreported={"tokens": self.trials - self._tokens,
                                "cost": self.trials - len(self._priced)},
                    evidence={"tokens": self._weakest_of("tokens", evidence),
                              "cost": self._weakest_of("cost", evidence)})

    def _weakest_of(self, fact: str, evidence: dict[str, Evidence]) -> Evidence:
        seen = [found] if (found := self._weakest[fact]) is not None else []
        if self._untraced[fact]:
            seen.append(evidence.get(fact, Evidence.UNAVAILABLE))
        return min(seen, key=lambda e: e.rank, default=Evidence.UNAVAILABLE)
