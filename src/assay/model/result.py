"""Verdicts, trial and case results, scores and the report (SPEC §5, §6)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_serializer,
)

from .changes import FileChange
from .evidence import Evidence
from .storable import storable_note
from .trace import Trace, Usage
from .turns import TurnSummary

Outcome = Literal["pass", "fail", "inconclusive"]
TrialOutcome = Literal["pass", "fail", "inconclusive", "broken"]
Family = Literal["output", "structural", "quality"]


class Verdict(BaseModel):
    """What one assertion said of one trace, and what it rests on."""

    model_config = ConfigDict(extra="forbid")

    assertion: str
    check: str
    family: Family = "output"
    outcome: Outcome
    evidence: Evidence
    note: str = ""
    provenance: str = ""
    threshold: float | None = None
    #: The number an opinion gave (a rubric's weighted mean, a similarity); absent otherwise.
    score: float | None = Field(default=None, exclude_if=lambda value: value is None)

    @field_validator("note")
    @classmethod
    def _storable_note(cls, value: str) -> str:
        # A note may quote the agent (a grader's, a check's) (model/storable.py).
        return storable_note(value)


class TrialResult(BaseModel):
    """One execution of one case: its trace and the verdicts on it."""

    model_config = ConfigDict(extra="forbid")

    n: int
    outcome: TrialOutcome
    reason: str | None = None
    duration_s: float = 0.0
    usage: Usage = Field(default_factory=Usage)
    verdicts: list[Verdict] = Field(default_factory=list)
    #: What the agent changed in its workspace (SPEC §14), when the case has one: the
    #: paths with size and digest (the diff stays in the trace).
    changes: list[FileChange] | None = Field(default=None,
                                              exclude_if=lambda value: value is None)
    #: A conversation's turns (SPEC §16), each its user message, the tools called and the
    #: reply, texts cut (``model.turns``; the trace has them whole); absent otherwise.
    turns: list[TurnSummary] | None = Field(default=None,
                                            exclude_if=lambda value: value is None)
    trace: Trace | None = Field(default=None, exclude=True)
    #: What judges said of the trace (``judging.Opinion`` s), by assertion position;
    #: kept in the store and the ledger, never in the report.
    opinions: dict[int, list[Any]] = Field(default_factory=dict, exclude=True)

    @field_validator("reason")
    @classmethod
    def _storable_reason(cls, value: str | None) -> str | None:
        # A broken trial's reason quotes the agent's exception (model/storable.py).
        return value if value is None else storable_note(value)


class RateSummary(BaseModel):
    """A quality check over trials: pass rate with its Wilson 95% interval."""

    model_config = ConfigDict(extra="forbid")

    assertion: str
    passed: int
    trials: int
    rate: float
    low: float
    high: float
    threshold: float
    outcome: Outcome
    straddles: bool
    #: A number for the check over its trials: the mean of what its opinions scored
    #: (a rubric's weighted means, similarities), or, for a ``judge``, its pass rate over
    #: the answers that decided (None when none did).
    score: float | None = Field(default=None, exclude_if=lambda value: value is None)


class CaseResult(BaseModel):
    """A case over its trials."""

    model_config = ConfigDict(extra="forbid")

    id: str
    split: Literal["public", "hidden"] = "public"
    outcome: TrialOutcome
    reason: str | None = None
    pass_at_1: float
    pass_hat_k: float
    k: int
    pass_hat: dict[str, float] = Field(default_factory=dict)
    synthetic: bool = False
    tags: list[str] = Field(default_factory=list)
    quality: list[RateSummary] = Field(default_factory=list)
    #: The case's number where opinions give one (SPEC §9): the mean of its quality
    #: checks' scores, beside the outcome. Absent for a case without quality checks.
    score: float | None = Field(default=None, exclude_if=lambda value: value is None)
    trials: list[TrialResult] = Field(default_factory=list)
    #: What the case was and what served it, as ``assay compare`` aligns runs on
    #: (``suites.facets``; ``model``: the models the trials say answered). Absent
    #: from reports made before it existed, and then not written back.
    facets: dict[str, str] = Field(default_factory=dict, exclude_if=lambda value: not value)


class HoldoutResult(BaseModel):
    """A hidden case as every outward surface shows it: a name and an outcome."""

    model_config = ConfigDict(extra="forbid")

    id: str
    split: Literal["hidden"] = "hidden"
    outcome: TrialOutcome


class SplitCounts(BaseModel):
    """How many cases of one split ended which way."""

    model_config = ConfigDict(extra="forbid")

    total: int = 0
    passed: int = 0
    failed: int = 0
    inconclusive: int = 0
    broken: int = 0


class Reliability(BaseModel):
    """pass@1 over a split with its standard error clustered by case."""

    model_config = ConfigDict(extra="forbid")

    pass_at_1: float | None
    se: float | None
    cases: int


class Scores(BaseModel):
    """The headline numbers; public and hidden are never blended."""

    model_config = ConfigDict(extra="forbid")

    public: float | None
    hidden: float | None
    overall: float | None
    synthetic: float | None = None
    pass_mark: float
    passed: bool
    flags: list[str] = Field(default_factory=list)


class Cost(BaseModel):
    """What the agent spent over the run (judges are counted apart).

    A figure no trial reported is ``None`` ("unavailable"), never 0. The sums
    cover the trials that reported each fact; ``unreported`` counts, per fact
    (``tokens``, ``cost``), the ``trials`` that did not, so a sum over part of
    the run reads as a lower bound. ``evidence`` is, per fact, the weakest
    evidence among the trials that reported it (docs/decisions/0001).
    """

    model_config = ConfigDict(extra="forbid")

    usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    trials: int = 0
    unreported: dict[str, int] = Field(default_factory=dict)
    evidence: dict[str, Evidence] = Field(default_factory=dict)
    #: What the judges cost, apart from the agent (SPEC §9): present when a check
    #: was judged. Answers served from the judge cache cost nothing here
    #: (``judge_cached`` counts them); a sum over answers some of which had no
    #: price is a lower bound, None when none had one.
    judge_usd: float | None = None
    judge_input_tokens: int | None = None
    judge_output_tokens: int | None = None
    judge_calls: int | None = None
    judge_cached: int | None = None
    #: What the simulated users cost, apart from the agent and the judges (SPEC §16):
    #: present when a trial had one, summed as the judges' figures are.
    simulator_usd: float | None = None
    simulator_input_tokens: int | None = None
    simulator_output_tokens: int | None = None
    simulator_calls: int | None = None
    simulator_cached: int | None = None

    @model_serializer(mode="wrap")
    def _as_stored(self, handler: SerializerFunctionWrapHandler) -> Any:
        # A report stored before these keys existed is written back as it was:
        # its bytes are what its seal hashes (docs/decisions/0017-recording.md).
        data = handler(self)
        if isinstance(data, dict):
            for key in _LATER_COST_KEYS - self.model_fields_set:
                data.pop(key, None)
        return data


#: Keys the report's ``cost`` gained after reports were first sealed.
_LATER_COST_KEYS = frozenset({"trials", "unreported", "evidence", "judge_usd",
                              "judge_input_tokens", "judge_output_tokens", "judge_calls",
                              "judge_cached", "simulator_usd", "simulator_input_tokens",
                              "simulator_output_tokens", "simulator_calls",
                              "simulator_cached"})


class SuiteRef(BaseModel):
    """Which suite, by id and digest, and which hidden set, by digest only."""

    model_config = ConfigDict(extra="forbid")

    id: str
    digest: str
    hidden_set: str | None = None
    #: Where the hidden cases came from: the suite's samples or a private folder.
    hidden_source: Literal["samples", "private"] | None = None


class TargetRef(BaseModel):
    """Which agent, by URI, digest and facets."""

    model_config = ConfigDict(extra="forbid")

    uri: str
    digest: str
    facets: dict[str, str] = Field(default_factory=dict)
    evidence: dict[str, Evidence] = Field(default_factory=dict)


class Adaptive(BaseModel):
    """How an ``--adaptive`` run chose its trials (SPEC §9): present on such runs only.

    A case with quality checks started at its configured trials (at least 3,
    at most ``max_trials``) and added one trial at a time while a check's
    interval straddled its threshold, up to ``max_trials``; each case's
    ``trials`` are what it ran (docs/decisions/0036-adaptive-runs.md).
    """

    model_config = ConfigDict(extra="forbid")

    max_trials: int


class Report(BaseModel):
    """The folded result of one run: what reporters, the store and gates read."""

    model_config = ConfigDict(extra="forbid")

    schema_: str = Field(default="assay.report/1", alias="schema")
    run_id: str
    suite: SuiteRef
    target: TargetRef
    started_at: str
    finished_at: str
    trials_per_case: int
    #: Left out of runs that were not adaptive, so that their reports keep their bytes.
    adaptive: Adaptive | None = Field(default=None, exclude_if=lambda value: value is None)
    evidence: Literal["smoke", "reliability"]
    scores: Scores
    counts: dict[str, SplitCounts]
    cost: Cost
    reliability: dict[str, Reliability] = Field(default_factory=dict)
    cases: list[CaseResult | HoldoutResult]
    interrupted: bool = False
    seed: int | None = None
    #: ``assay rejudge``: the run whose recorded outputs this one judged again (the
    #: agent was not called; ``cost.usd`` is what those outputs cost then).
    rejudge_of: str | None = Field(default=None, exclude_if=lambda value: value is None)
    seal: dict[str, Any] | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_serializer("cases", mode="wrap")
    def _listed(self, cases: Any, handler: SerializerFunctionWrapHandler) -> Any:
        # A battery's report reads its cases back from its spool (``engine.spool``) as
        # they are asked for; the writers of its bytes stream them (store.runs.documents),
        # and anything else that serialises the whole report gets them as a list.
        return handler(cases if isinstance(cases, list) else list(cases))

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON form of SPEC §6."""
        return self.model_dump(mode="json", by_alias=True)


@runtime_checkable
class KeptCases(Protocol):
    """Cases a report reads back as they are asked for (a battery's spool, ``engine.spool``).

    Besides being a sequence of case results, they give each case's JSON as
    kept (what the report's bytes hold, so writing a report copies it) and
    their redacted view.
    """

    def __len__(self) -> int: ...

    def raws(self) -> Iterator[bytes]:
        """Each case's JSON as the report writes it, in order."""

    def redacted(self) -> Sequence[CaseResult | HoldoutResult]:
        """The cases as they may leave the harness (``grading.report.redact``)."""

    def outcomes(self) -> list[str]:
        """Each case's outcome, in order, without reading the cases."""

    def splits(self) -> list[str]:
        """Each case's split, in order, without reading the cases."""

    def scored(self) -> bool:
        """Whether a case shows a number from opinions (a ``score``)."""

    def trial_outcomes(self, index: int) -> set[str]:
        """The outcomes of one case's trials, without reading it."""


#: Where a report's cases go in its JSON: ``cases`` is followed by ``interrupted``,
#: which is never left out.
_CASES_AT = b',"cases":[],"interrupted":'


def report_json(report: Report) -> Iterator[bytes]:
    """``report.model_dump_json(by_alias=True)``, encoded, in pieces: a case at a time.

    What a report of a hundred thousand cases is written as (the store's
    bytes, ``--json``) without holding its text, or its cases, at once. The
    pieces join to exactly the bytes pydantic gives for the whole report.
    """
    cases = report.cases
    if isinstance(cases, list) and len(cases) < 64:
        yield report.model_dump_json(by_alias=True).encode()
        return
    shell = report.model_copy(update={"cases": []}).model_dump_json(by_alias=True).encode()
    at = shell.find(_CASES_AT)
    if at < 0 or shell.find(_CASES_AT, at + 1) >= 0:
        raise ValueError("a report's JSON does not have its cases where they belong")
    yield shell[:at] + b',"cases":['
    raws = cases.raws() if isinstance(cases, KeptCases) else \
        (case.__pydantic_serializer__.to_json(case, by_alias=True) for case in cases)
    for index, raw in enumerate(raws):
        yield raw if index == 0 else b"," + raw
    yield b"]" + shell[at + len(b',"cases":[]'):]
