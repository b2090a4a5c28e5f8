"""Judge calibration: how far a judge agrees with the people who reviewed the same trials.

Pure: no clock, no database. ``store.reviews.calibration.reviewed_trials`` reads the
decided review items that name a trial of a stored run, with the opinions
the run's judges gave on that trial; this module turns both into labels,
pairs them per judge and criterion, and counts (SPEC §10, ``assay judges``).
The rules, and why, are in docs/decisions/0038-judge-calibration.md:

- a person's label: ``approved`` is ``pass``; ``rejected`` and ``needs-fix``
  are ``fail`` (needs-fix: the output is not acceptable as it stands);
- a ``judge`` check's label: its answer's ``pass`` or ``fail``;
- a ``rubric``'s label, per criterion: ``pass`` when that criterion's own
  score, on 0..1, reaches the rubric's ``pass_at``, else ``fail``;
- an opinion that errored, was refused, was out of form or whose stored
  answer is gone gives no label: it is *excluded*, counted with its reason,
  and never turned into a pass or a fail (PRINCIPLES 3).

Agreement is Cohen's kappa (``agreement``). A hidden case's criterion is
hidden content: its rows and disagreements name it ``hidden criterion N``
and the case ``holdout-N``, and its text is dropped as soon as it is read
(``_criterion``), so no later step can print it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..judging.opinion import Opinion
    from ..store.reviews.calibration import ReviewedTrial

#: The shape of ``assay judges --json``.
FORMAT = "assay.judges/1"

Label = Literal["pass", "fail"]

#: A person's decision as a label: needs-fix is a fail (the output must change to pass).
HUMAN_LABELS: dict[str, Label] = {"approved": "pass", "rejected": "fail", "needs-fix": "fail"}

#: The checks whose opinions are a judge's: ``similar`` is a measurement, not a judge.
JUDGED_CHECKS = ("judge", "rubric")

#: Landis & Koch (1977), "The measurement of observer agreement for categorical data",
#: Biometrics 33(1):159-174, table on p. 165: each band's upper end and its name.
#: Their bands are written to two decimals (0.21-0.40 …); here each band runs up to
#: and including its upper end, so 0.205 is "fair", not a gap.
BANDS: tuple[tuple[Fraction, str], ...] = (
    (Fraction(0), "poor"),  # below 0 only: 0 itself is "slight" (their 0.00-0.20)
    (Fraction(1, 5), "slight"),
    (Fraction(2, 5), "fair"),
    (Fraction(3, 5), "moderate"),
    (Fraction(4, 5), "substantial"),
    (Fraction(1), "almost perfect"),
)

NO_PAIRS = "no labelled pair: nothing to compare"
ONE_LABEL = ("undefined: the judge and the people gave every trial the same one label, "
             "so chance alone explains all the agreement (p_e = 1)")


@dataclass(frozen=True)
class Agreement:
    """Cohen's kappa for one judge and criterion, from its 2x2 table.

    The table counts trials by (judge's label, people's label):
    ``both_pass``, ``judge_pass_human_fail``, ``judge_fail_human_pass``,
    ``both_fail``. ``observed``, ``expected`` and ``kappa`` are None when
    they cannot be computed, and ``why`` then says why.
    """

    both_pass: int
    judge_pass_human_fail: int
    judge_fail_human_pass: int
    both_fail: int
    observed: float | None
    expected: float | None
    kappa: float | None
    reading: str | None
    why: str | None

    @property
    def n(self) -> int:
        """How many labelled pairs."""
        return (self.both_pass + self.judge_pass_human_fail + self.judge_fail_human_pass
                + self.both_fail)

    @property
    def agreed(self) -> int:
        """Pairs where the judge and the people said the same."""
        return self.both_pass + self.both_fail


def agreement(both_pass: int, judge_pass_human_fail: int, judge_fail_human_pass: int,
              both_fail: int) -> Agreement:
    """Cohen's kappa from the 2x2 table of (judge's label, people's label) counts.

    Cohen, J. (1960), "A coefficient of agreement for nominal scales",
    Educational and Psychological Measurement 20(1):37-46. With ``n`` pairs,
    ``a`` = both pass, ``b`` = judge pass / people fail, ``c`` = judge fail /
    people pass, ``d`` = both fail::

        p_o = (a + d) / n                                  observed agreement
        p_j = (a + b) / n,   p_h = (a + c) / n             each side's pass rate
        p_e = p_j·p_h + (1 − p_j)(1 − p_h)                 agreement expected by chance
        κ   = (p_o − p_e) / (1 − p_e)

    κ is 1 for perfect agreement, 0 for what chance alone would give, below
    0 for worse than chance. Computed in exact fractions, so a band edge is
    met exactly (0.6 is "moderate", not a float's 0.6000000000000001).
    No pairs leaves everything None; ``p_e = 1`` — both sides gave every
    pair one and the same label — leaves κ None (0/0): there is no
    agreement beyond chance to measure, and ``why`` says so. A count below
    zero raises ``ValueError``.
    """
    counts = (both_pass, judge_pass_human_fail, judge_fail_human_pass, both_fail)
    if any(count < 0 for count in counts):
        raise ValueError(f"agreement: counts are never negative, got {counts}")
    n = sum(counts)
    if n == 0:
        return Agreement(*counts, observed=None, expected=None, kappa=None, reading=None,
                         why=NO_PAIRS)
    p_o = Fraction(both_pass + both_fail, n)
    p_j = Fraction(both_pass + judge_pass_human_fail, n)
    p_h = Fraction(both_pass + judge_fail_human_pass, n)
    p_e = p_j * p_h + (1 - p_j) * (1 - p_h)
    if p_e == 1:
        return Agreement(*counts, observed=float(p_o), expected=1.0, kappa=None, reading=None,
                         why=ONE_LABEL)
    kappa = (p_o - p_e) / (1 - p_e)
    return Agreement(*counts, observed=float(p_o), expected=float(p_e), kappa=float(kappa),
                     reading=reading(kappa), why=None)


def reading(kappa: Fraction | float) -> str:
    """Landis & Koch's (1977) name for a kappa: poor, slight, fair, moderate, substantial,
    almost perfect (``BANDS``). Their bands are a convention, not a test."""
    exact = kappa if isinstance(kappa, Fraction) else Fraction(repr(float(kappa)))
    if exact < 0:
        return BANDS[0][1]
    for upper, name in BANDS[1:]:
        if exact <= upper:
            return name
    return BANDS[-1][1]


def human_label(verdict: str) -> Label:
    """A person's decision as a label (``HUMAN_LABELS``); ``ValueError`` for anything else."""
    try:
        return HUMAN_LABELS[verdict]
    except KeyError:
        raise ValueError(f"not a review decision: {verdict!r}") from None


def judge_label(opinion: Opinion) -> tuple[Label | None, str]:
    """A ``judge`` check's label from its opinion, or None and why there is none."""
    from ..judging.opinion import judge_answer

    answer = judge_answer(opinion)
    if answer.outcome == "pass" or answer.outcome == "fail":
        return answer.outcome, ""
    return None, answer.why or "no answer"


def criterion_label(opinion: Opinion, pass_at: float) -> tuple[Label | None, str]:
    """A rubric criterion's label: its own score (0..1) against ``pass_at``, or None and why.

    Exactly, as the rubric's fold compares (``judging.answers.fold_rubric``):
    a score of 7 at ``pass_at: 0.7`` passes.
    """
    from ..judging.opinion import score_answer

    answer = score_answer(opinion)
    if answer.points is None:
        return None, answer.why or "no answer"
    reached = Fraction(repr(float(answer.points))) >= 10 * Fraction(repr(float(pass_at)))
    return ("pass" if reached else "fail"), ""


@dataclass(frozen=True)
class Row:
    """One judge and criterion: its agreement with the people, and what was left out.

    ``criterion`` is what may be shown: a ``judge`` check's criteria text or a
    rubric criterion's name; ``hidden criterion N`` for a hidden case's.
    ``excluded`` counts opinions that gave no label, by reason.
    """

    judge: str
    check: str
    criterion: str
    hidden: bool
    agreement: Agreement
    excluded: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        a = self.agreement
        return {
            "judge": self.judge, "check": self.check, "criterion": self.criterion,
            "hidden": self.hidden, "n": a.n, "agreed": a.agreed,
            "observed_agreement": a.observed, "expected_agreement": a.expected,
            "kappa": a.kappa, "reading": a.reading, "kappa_undefined": a.why,
            "table": {"both_pass": a.both_pass,
                      "judge_pass_human_fail": a.judge_pass_human_fail,
                      "judge_fail_human_pass": a.judge_fail_human_pass,
                      "both_fail": a.both_fail},
            "excluded": sum(self.excluded.values()),
            "excluded_why": dict(sorted(self.excluded.items())),
        }


@dataclass(frozen=True)
class Disagreement:
    """One trial where a judge and the reviewer differed; ``case`` is ``holdout-N`` if hidden."""

    item: int
    run_id: str
    case: str
    hidden: bool
    trial: int
    judge: str
    check: str
    criterion: str
    judge_said: Label
    human_said: str
    reviewer: str | None

    def to_json(self) -> dict[str, Any]:
        return {"item": self.item, "run_id": self.run_id, "case": self.case,
                "hidden": self.hidden, "trial": self.trial, "judge": self.judge,
                "check": self.check, "criterion": self.criterion,
                "judge_said": self.judge_said, "human_said": self.human_said,
                "human_label": HUMAN_LABELS[self.human_said], "reviewer": self.reviewer}


@dataclass(frozen=True)
class Calibration:
    """Every judge and criterion against the reviews, and the disagreements.

    ``reviewed``: decided items that name a trial of a stored run; ``judged``:
    those with at least one judge's opinion read here; ``elsewhere``: decided
    items with no run trial (an online sample, a proxied call), which have
    no judge's opinion to compare; ``unreadable``: opinions whose check the
    run's stored suite does not describe; ``unknown_verdicts``: decided items
    whose decision is none of ``HUMAN_LABELS`` (left out, never guessed).
    """

    reviewed: int
    judged: int
    elsewhere: int
    rows: list[Row]
    disagreements: list[Disagreement]
    unreadable: int = 0
    unknown_verdicts: int = 0
    judge: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "judge": self.judge,
                "reviews": {"reviewed": self.reviewed, "judged": self.judged,
                            "elsewhere": self.elsewhere, "unreadable": self.unreadable,
                            "unknown_verdicts": self.unknown_verdicts},
                "rows": [row.to_json() for row in self.rows],
                "disagreements": [d.to_json() for d in self.disagreements]}


class NoSuchJudge(ValueError):
    """``--judge`` names no judge that gave an opinion on a reviewed trial."""

    def __init__(self, wanted: str, seen: Sequence[str]) -> None:
        known = ", ".join(seen) if seen else "none"
        super().__init__(f"no judge {wanted} gave an opinion on a reviewed trial "
                         f"(judges seen: {known})")
        self.wanted, self.seen = wanted, list(seen)


# (judge, check, hidden, criterion key): a hidden criterion's key is never shown.
_Key = tuple[str, str, bool, str]


@dataclass
class _Tally:
    cells: Counter[tuple[Label, Label]] = field(default_factory=Counter)
    excluded: Counter[str] = field(default_factory=Counter)


def calibrate(trials: Iterable[ReviewedTrial], *, elsewhere: int = 0,
              judge: str | None = None) -> Calibration:
    """Pair each reviewed trial's judge labels with its reviewer's, per judge and criterion.

    ``trials`` oldest first (their item numbers); rows come out by judge,
    check, public before hidden, then criterion; disagreements by item.
    ``judge``: only that judge's opinions (``NoSuchJudge`` when none gave any).
    """
    tallies: dict[_Key, _Tally] = {}
    hidden_names: dict[str, str] = {}
    disagreements: list[Disagreement] = []
    seen: set[str] = set()
    reviewed = judged = unreadable = unknown = 0
    for trial in trials:
        if trial.verdict not in HUMAN_LABELS:  # a decision this version does not know
            unknown += 1
            continue
        reviewed += 1
        human = HUMAN_LABELS[trial.verdict]
        hidden = trial.split == "hidden"
        labelled = False
        for judged_check in trial.assertions:
            if judged_check.check is None:
                unreadable += len(judged_check.opinions)
                continue
            if judged_check.check not in JUDGED_CHECKS:
                continue
            for index, opinion in enumerate(judged_check.opinions):
                read = _read(judged_check.check, judged_check.arg, index, opinion, hidden)
                if read is None:  # an answer beyond the rubric's criteria: not one of its
                    unreadable += 1
                    continue
                key_text, label, why = read
                seen.add(opinion.model)
                if hidden and key_text not in hidden_names:  # numbered whoever is shown
                    hidden_names[key_text] = f"hidden criterion {len(hidden_names) + 1}"
                if judge is not None and opinion.model != judge:
                    continue
                labelled = True
                key: _Key = (opinion.model, judged_check.check, hidden, key_text)
                tally = tallies.setdefault(key, _Tally())
                if label is None:
                    tally.excluded[why] += 1
                    continue
                tally.cells[(label, human)] += 1
                if label != human:
                    disagreements.append(Disagreement(
                        item=trial.item, run_id=trial.run_id,
                        case=trial.label if hidden else trial.case_id, hidden=hidden,
                        trial=trial.n, judge=opinion.model, check=judged_check.check,
                        criterion=hidden_names[key_text] if hidden else key_text,
                        judge_said=label, human_said=trial.verdict, reviewer=trial.reviewer))
        judged += labelled
    if judge is not None and judge not in seen:
        raise NoSuchJudge(judge, sorted(seen))
    rows = [Row(judge=key[0], check=key[1],
                criterion=hidden_names[key[3]] if key[2] else key[3], hidden=key[2],
                agreement=agreement(t.cells[("pass", "pass")], t.cells[("pass", "fail")],
                                    t.cells[("fail", "pass")], t.cells[("fail", "fail")]),
                excluded=dict(t.excluded))
            for key, t in tallies.items()]
    rows.sort(key=lambda r: (r.judge, r.check, r.hidden, _natural(r.criterion)))
    return Calibration(reviewed=reviewed, judged=judged, elsewhere=elsewhere, rows=rows,
                       disagreements=disagreements, unreadable=unreadable,
                       unknown_verdicts=unknown, judge=judge)


def _read(check: str, arg: Any, index: int, opinion: Opinion,
          hidden: bool) -> tuple[str, Label | None, str] | None:
    """The criterion's key, the label and why there is none; None: no criterion ``index``."""
    arg = arg if isinstance(arg, dict) else {}
    if check == "judge":
        if index > 0:
            return None
        label, why = judge_label(opinion)
        return _criterion(arg.get("criteria"), hidden), label, why
    criteria = arg.get("criteria")
    if not isinstance(criteria, list) or index >= len(criteria) \
            or not isinstance(criteria[index], dict):
        return None
    pass_at = arg.get("pass_at")
    if isinstance(pass_at, bool) or not isinstance(pass_at, int | float):
        return None
    label, why = criterion_label(opinion, float(pass_at))
    return _criterion(criteria[index].get("name"), hidden), label, why


def _criterion(text: Any, hidden: bool) -> str:
    """A criterion's key: its text for a public case; for a hidden one, a digest of it.

    The digest only tells equal hidden criteria apart within this process;
    it is never shown (a digest of a short, guessable text would confirm a
    guess), so the text itself is gone from here on.
    """
    name = text if isinstance(text, str) else "(unnamed)"
    if not hidden:
        return name
    from ..canonical import digest

    return digest({"hidden criterion": name})


def _natural(text: str) -> tuple[Any, ...]:
    """Sort key that puts ``hidden criterion 2`` before ``hidden criterion 10``."""
    head, _, tail = text.rpartition(" ")
    return (head, int(tail)) if tail.isdigit() else (text, 0)
