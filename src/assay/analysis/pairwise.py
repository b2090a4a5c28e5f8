"""Pairwise: ask a judge, trial by trial, which of two stored runs' outputs is better (SPEC §9).

``pairwise(store, options)`` reads two sealed runs of one suite, pairs their
trials (``pair``: pure), asks the judge once per pair with the order of the
two outputs drawn from the seed (``judging.pairwise``), seals every opinion
as a ``judge-opinion`` ledger entry and returns the rows and the preference.
It informs; it decides nothing (docs/decisions/0032-pairwise.md).

Pairing: cases are matched as ``assay compare`` matches them (``align``: by
id, hidden cases by their stored identity, named ``holdout-N``), and within
a case, trials by index: one comparison per trial index both runs have. A
case whose content differs between the runs (its ``case`` or ``fixture``
facet) is listed but not compared, and so is a trial with no stored output
on either side (broken before it left a trace, or erased). Trials only one
run has are counted as ``unpaired``.

A ``python:module:function`` judge is imported from the working folder
(there is no suite file to stand beside) and given, besides the prompt,
``inputs`` with the criteria, the reference and the two outputs in the order
shown (``first``, ``second``); its module's digests are in the parameters
and the prompt digest (``judging.python_judge``).

Hidden content stays inside: the prompts, the outputs and the judge's raw
answers are never in a ``Row`` or anything ``to_json`` writes; a row of a
hidden case is ``holdout-N``, which run was shown first, the choice and a
reason from a fixed vocabulary.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..judging.judges import ENV_BASE_URL
from ..judging.pairwise import (
    PAIRWISE_TEMPLATE,
    Choice,
    PairwiseAnswer,
    Preference,
    Side,
    choice_for,
    pairwise_answer,
    render_pairwise,
    shown_first,
    tally,
)
from .compare import align
from .run_facts import RunFacts

if TYPE_CHECKING:
    from ..judging.client import JudgeSettings
    from ..judging.judges import JudgeRef
    from ..judging.opinion import Opinion
    from ..judging.python_judge import PythonJudge
    from ..store.database import Store, StoredRun

#: Facets that say a case is not the same case in both runs: its input, reference and
#: settings (``case``) or its fixture's bytes. Anything else (model, harness) may differ:
#: that is what two runs are compared for.
SAME_CASE = ("case", "fixture")
#: Seeds are JSON numbers in the ledger: at most 2**53 − 1.
MAX_SEED = 2**53 - 1
DEFAULT_CONCURRENCY = 8


@dataclass(frozen=True)
class PairwiseOptions:
    """What ``assay pairwise`` was asked; ``seed`` None draws a fresh one (and records it)."""

    run_a: str
    run_b: str
    criteria: str
    judge: JudgeRef
    base_url: str | None
    seed: int | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    template: str = PAIRWISE_TEMPLATE

    def check(self) -> None:
        """Refuse what could not be compared, or would compare nothing, with the reason."""
        if not self.criteria.strip():
            raise UsageError("--criteria is empty: say what makes one output better")
        if self.run_a == self.run_b:
            raise UsageError(f"RUN_A and RUN_B are the same run ({self.run_a}): "
                             "give two runs to compare")
        if self.judge.kind == "openai" and not self.base_url:
            raise UsageError(f"no judge server: give --judge-base-url URL or set "
                             f"{ENV_BASE_URL} (an OpenAI-compatible server, such as "
                             "http://127.0.0.1:8000/v1)")
        if self.seed is not None and not 0 <= self.seed <= MAX_SEED:
            raise UsageError(f"--seed must be between 0 and {MAX_SEED}, got {self.seed}")
        if self.concurrency < 1:
            raise UsageError(f"--concurrency must be 1 or more, got {self.concurrency}")
        if self.judge.kind == "python":
            self.python_judge()

    def python_judge(self) -> PythonJudge:
        """The ``python:`` judge imported from the working folder; a usage error if it cannot be."""
        from ..judging.python_judge import load

        try:
            return load(self.judge, Path.cwd())
        except ValueError as error:
            raise UsageError(f"judge {self.judge.uri}: {error}") from None


# --- what is stored -------------------------------------------------------------------

@dataclass(frozen=True)
class RunOutputs:
    """A sealed run's facts and, per (case id, trial), its output or why there is none."""

    facts: RunFacts
    outputs: Mapping[tuple[str, int], Any]
    missing: Mapping[tuple[str, int], str]
    #: Each case's ``expected`` (what ``{expected}`` fills), by case id.
    expected: Mapping[str, Any]

    def trials(self, case_id: str) -> frozenset[int]:
        """The trial indexes the run has of a case, with an output or not."""
        return self._by_case.get(case_id, frozenset())

    @cached_property
    def _by_case(self) -> dict[str, frozenset[int]]:
        # Indexed once: asking each case's trials of the whole map would be quadratic.
        found: dict[str, set[int]] = {}
        for case_id, n in (*self.outputs, *self.missing):
            found.setdefault(case_id, set()).add(n)
        return {case_id: frozenset(ns) for case_id, ns in found.items()}


def load_outputs(store: Store, run_id: str) -> RunOutputs:
    """The outputs of a sealed stored run; a report file or an open run is a usage error."""
    from .run_facts import load_stored

    if Path(run_id).is_file():
        raise UsageError(f"{run_id} is a file: pairwise reads the outputs a store keeps, "
                         "give stored run ids")
    facts = load_stored(store, run_id)
    return outputs_of(facts, store.load_replay(run_id))


def outputs_of(facts: RunFacts, stored: StoredRun) -> RunOutputs:
    """Each trial's output from its stored trace, and each case's reference from the suite."""
    outputs: dict[tuple[str, int], Any] = {}
    missing: dict[tuple[str, int], str] = {}
    for trial in stored.trials:
        key = (trial.case_id, trial.n)
        if trial.trace_digest is None:
            missing[key] = "left no trace (broken)"
        elif trial.trace is None:
            missing[key] = "has its output erased"
        else:
            try:
                data = json.loads(bytes(trial.trace))
                outputs[key] = data["output"]
            except (ValueError, KeyError, TypeError, RecursionError):
                missing[key] = "has a stored trace that cannot be read"
    expected: dict[str, Any] = {}
    if stored.suite is not None:  # a run stored before suites were kept: no references
        try:
            for case in json.loads(stored.suite)["suite"]["cases"]:
                expected[str(case["id"])] = case.get("expected")
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            expected = {}
    return RunOutputs(facts, outputs, missing, expected)


# --- pairing (pure) -------------------------------------------------------------------

@dataclass(frozen=True)
class Pair:
    """One comparison to make, or one that cannot be made (``first`` None, ``note`` why).

    Holds the case's real id and both outputs: never shown, never written
    out, and kept out of its ``repr`` (an error or a log line that prints a
    pair shows its label only).
    """

    label: str
    split: str
    case_id: str = field(repr=False)
    n: int
    first: Side | None
    note: str = ""
    expected: Any = field(default=None, repr=False)
    outputs: tuple[Any, Any] = field(default=(None, None), repr=False)

    def shown(self) -> tuple[Any, Any]:
        """The two outputs in the order the judge is shown them."""
        assert self.first is not None
        a, b = self.outputs
        return (a, b) if self.first == "a" else (b, a)

    def prompt(self, template: str, criteria: str) -> str:
        """The prompt for this pair: the run shown first's output under ``OUTPUT A``."""
        first, second = self.shown()
        return render_pairwise(template, criteria=criteria, expected=self.expected,
                               first=first, second=second)

    def inputs(self, criteria: str) -> dict[str, Any]:
        """What a ``python:`` judge is given beside the prompt: the pieces it was made from."""
        from ..judging.python_judge import inputs_of

        first, second = self.shown()
        return inputs_of("pairwise", criteria=criteria, expected=self.expected, first=first,
                         second=second)


@dataclass(frozen=True)
class Pairing:
    """The pairs of two runs and how many trials one of them has alone."""

    pairs: list[Pair]
    unpaired: Mapping[str, int]


def pair(a: RunOutputs, b: RunOutputs, seed: int) -> Pairing:
    """Pair the trials of two runs of one suite; runs of two suites are a usage error."""
    if a.facts.suite_id != b.facts.suite_id:
        raise UsageError(f"run {a.facts.run_id} is of suite {a.facts.suite_id} and run "
                         f"{b.facts.run_id} of {b.facts.suite_id}: pairwise compares runs "
                         "of one suite")
    pairs: list[Pair] = []
    unpaired = {"a": 0, "b": 0}
    for row in align(a.facts, b.facts):
        left, right = row.base_case, row.cand_case
        if left is None or right is None:
            alone = left or right
            assert alone is not None
            side = "a" if left is not None else "b"
            unpaired[side] += len((a if side == "a" else b).trials(alone.id))
            continue
        mine, theirs = a.trials(left.id), b.trials(right.id)
        unpaired["a"] += len(mine - theirs)
        unpaired["b"] += len(theirs - mine)
        differs = [name for name in SAME_CASE if name in row.differs]
        for n in sorted(mine & theirs):
            keys = (left.id, n), (right.id, n)
            note = ""
            if differs:
                note = f"not compared: the case differs between the runs ({', '.join(differs)})"
            else:
                for side, run, key in (("A", a, keys[0]), ("B", b, keys[1])):
                    if key in run.missing:
                        note = f"not compared: run {side}'s trial {run.missing[key]}"
                        break
            if note:
                pairs.append(Pair(row.label, row.split, left.id, n, None, note))
                continue
            pairs.append(Pair(row.label, row.split, left.id, n,
                              shown_first(seed, row.split, row.label, n), "",
                              a.expected.get(left.id),
                              (a.outputs[keys[0]], b.outputs[keys[1]])))
    return Pairing(pairs, unpaired)


# --- the result ---------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    """One comparison as shown: the case (``holdout-N`` if hidden), who was first, the choice."""

    label: str
    split: str
    n: int
    first: Side | None
    choice: Choice | None
    note: str
    #: The ``judge-opinion`` ledger entry of this comparison (None: not compared).
    entry: int | None = None

    def to_json(self) -> dict[str, Any]:
        """A row of ``assay.pairwise/1``."""
        return {"case": self.label, "split": self.split, "n": self.n, "first": self.first,
                "choice": self.choice, "note": self.note, "entry": self.entry}


@dataclass(frozen=True)
class JudgeCost:
    """What the judge cost, apart from what the agents cost (PRINCIPLES 4, 6)."""

    calls: int
    usd: float | None
    #: Calls whose cost is unknown (no price for the model, or no token counts).
    unpriced: int
    input_tokens: int | None
    output_tokens: int | None

    def to_json(self) -> dict[str, Any]:
        """As ``assay.pairwise/1``'s ``cost``."""
        return {"judge_usd": self.usd, "judge_input_tokens": self.input_tokens,
                "judge_output_tokens": self.output_tokens, "judge_calls": self.calls,
                "judge_unpriced_calls": self.unpriced,
                "evidence": "inferred" if self.usd is not None else "unavailable"}


def judge_cost(opinions: Sequence[Opinion]) -> JudgeCost:
    """The judge's cost over its opinions: sums of what is known, None when nothing is."""
    costs = [o.cost_usd for o in opinions if o.cost_usd is not None]
    ins = [o.input_tokens for o in opinions if o.input_tokens is not None]
    outs = [o.output_tokens for o in opinions if o.output_tokens is not None]
    return JudgeCost(len(opinions), math.fsum(costs) if costs else None,
                     len(opinions) - len(costs), sum(ins) if ins else None,
                     sum(outs) if outs else None)


@dataclass(frozen=True)
class PairwiseResult:
    """What ``assay pairwise`` found: rows, the preference, the judge's cost, the seal."""

    a: RunFacts
    b: RunFacts
    criteria: str
    judge: JudgeRef
    prompt_digest: str
    parameters: Mapping[str, Any]
    seed: int
    rows: list[Row]
    preference: Preference
    cost: JudgeCost
    unpaired: Mapping[str, int]
    #: The models the server says answered (usually one: the judge's, maybe a snapshot).
    answered_by: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """``assay.pairwise/1``: hidden cases as holdout-N, no output or answer text."""
        entries = [r.entry for r in self.rows if r.entry is not None]
        return {
            "schema": "assay.pairwise/1",
            "a": _side(self.a), "b": _side(self.b),
            "criteria": self.criteria,
            "judge": {"uri": self.judge.uri, "model": self.judge.model,
                      "answered_by": list(self.answered_by),
                      "prompt_digest": self.prompt_digest,
                      "parameters": dict(self.parameters)},
            "seed": self.seed,
            "rows": [r.to_json() for r in self.rows],
            "preference": self.preference.to_json(),
            "unpaired": dict(self.unpaired),
            "cost": self.cost.to_json(),
            "seal": {"entries": len(entries), "first": min(entries, default=None),
                     "last": max(entries, default=None)},
        }


def _side(run: RunFacts) -> dict[str, Any]:
    return {"run_id": run.run_id, "suite": run.suite_id,
            "target": {"uri": run.target_uri, "digest": run.target_digest},
            "seal": dict(run.seal) if run.seal else None}


def _note(answer: PairwiseAnswer, choice: Choice | None) -> str:
    """A row's note: empty for a choice, else why there is none. Never quotes the answer."""
    return "" if choice is not None else answer.why


def entry_content(p: Pair, answer: PairwiseAnswer, choice: Choice | None, opinion: Opinion,
                  raw_digest: str | None, result_sides: tuple[RunFacts, RunFacts],
                  seed: int, criteria: str) -> dict[str, Any]:
    """What one ``judge-opinion`` entry records; the raw answer by digest only.

    The case by its real id (the store's own record, as trial-verdict entries
    name it), never shown by any command; the runs by their seals.
    """
    from ..model.storable import storable_json

    body = opinion.to_json()
    body.pop("raw")
    a, b = result_sides
    content: dict[str, Any] = storable_json({
        "opinion": "pairwise",
        "a": {"run_id": a.run_id, "seal": dict(a.seal) if a.seal else None},
        "b": {"run_id": b.run_id, "seal": dict(b.seal) if b.seal else None},
        "case_id": p.case_id, "split": p.split, "n": p.n,
        "seed": seed, "criteria": criteria,
        "first": p.first, "shown": answer.shown, "choice": choice, "why": answer.why,
        **body, "raw_digest": raw_digest,
    })
    return content


# --- asking -------------------------------------------------------------------------

async def ask_all(prompts: Sequence[str], settings: JudgeSettings, digest: str,
                  concurrency: int, kind: str = "openai", *,
                  python: PythonJudge | None = None,
                  inputs: Sequence[Mapping[str, Any]] = ()) -> list[Opinion]:
    """One opinion per prompt, in order, at most ``concurrency`` calls at once. Never raises
    but on cancellation (``client.ask``, ``ask_claude`` and a python judge's caller make
    every failure an opinion).

    ``kind`` ``claude``: the installed ``claude`` CLI answers, pinned to the model;
    ``python``: ``python`` is called, given each prompt with its ``inputs``.
    """
    from ..judging.claude_grader import ClaudeJudgeSettings, ask_claude
    from ..judging.client import ask, make_client
    from ..targets.prices import load_prices

    gate = asyncio.Semaphore(concurrency)
    if kind == "python":
        from ..judging.python_judge import Caller

        assert python is not None and len(inputs) == len(prompts)
        caller = Caller(concurrency)

        async def by_callable(prompt: str, given: Mapping[str, Any]) -> Opinion:
            async with gate:
                return await caller.ask(python, prompt, given, prompt_digest=digest,
                                        timeout_s=settings.timeout_s)

        try:
            return list(await asyncio.gather(*(by_callable(p, i)
                                               for p, i in zip(prompts, inputs, strict=True))))
        finally:
            caller.close()
    if kind == "claude":
        host = ClaudeJudgeSettings(model=settings.model, timeout_s=settings.timeout_s)

        async def by_host(prompt: str) -> Opinion:
            async with gate:
                return await ask_claude(host, prompt, prompt_digest=digest)

        return list(await asyncio.gather(*(by_host(p) for p in prompts)))
    prices = load_prices()
    client = make_client(settings)

    async def one(prompt: str) -> Opinion:
        async with gate:
            return await ask(client, settings, prompt, prompt_digest=digest, prices=prices)

    try:
        return list(await asyncio.gather(*(one(p) for p in prompts)))
    finally:
        await client.close()


def pairwise(store: Store, options: PairwiseOptions) -> PairwiseResult:
    """Compare two stored runs pairwise, seal every opinion, and return what was found."""
    from ..judging.client import JudgeSettings
    from ..judging.templates import prompt_digest
    from ..model.storable import storable_text
    from ..store.ledger.opinions import raw_blob, seal_opinions

    options.check()
    python = options.python_judge() if options.judge.kind == "python" else None
    try:
        # A claude judge has no server: the settings only carry its model and timeout.
        settings = JudgeSettings(model=options.judge.model,
                                 base_url=options.base_url or "http://127.0.0.1/unused")
    except ValueError as error:
        raise UsageError(str(error)) from None
    seed = options.seed if options.seed is not None else random.SystemRandom().getrandbits(32)
    criteria = storable_text(options.criteria)
    a, b = load_outputs(store, options.run_a), load_outputs(store, options.run_b)
    pairing = pair(a, b, seed)
    shaping = dict(python.parameters) if python is not None else settings.sampling()
    parameters = {"kind": "pairwise", "model": options.judge.uri, "criteria": criteria,
                  **shaping}
    digest = prompt_digest(options.template, parameters)
    asked = [p for p in pairing.pairs if p.first is not None]
    opinions = asyncio.run(ask_all([p.prompt(options.template, criteria) for p in asked],
                                   settings, digest, options.concurrency, options.judge.kind,
                                   python=python,
                                   inputs=[p.inputs(criteria) for p in asked] if python else ()))

    contents: list[dict[str, Any]] = []
    raws: dict[str, bytes] = {}
    decided: dict[int, tuple[Choice | None, str]] = {}
    for index, (p, opinion) in enumerate(zip(asked, opinions, strict=True)):
        answer = pairwise_answer(opinion)
        assert p.first is not None
        choice = choice_for(answer.shown, p.first)
        raw_digest = None
        if opinion.raw is not None:
            raw_digest, body = raw_blob(storable_text(opinion.raw))
            raws[raw_digest] = body
        contents.append(entry_content(p, answer, choice, opinion, raw_digest,
                                      (a.facts, b.facts), seed, criteria))
        decided[index] = (choice, _note(answer, choice))
    entries = seal_opinions(store, contents, raws)

    rows: list[Row] = []
    position = 0
    for p in pairing.pairs:
        if p.first is None:
            rows.append(Row(p.label, p.split, p.n, None, None, p.note))
            continue
        choice, note = decided[position]
        rows.append(Row(p.label, p.split, p.n, p.first, choice, note, entries[position].index))
        position += 1
    return PairwiseResult(
        a.facts, b.facts, criteria, options.judge, digest, parameters, seed, rows,
        tally((r.first, r.choice) for r in rows), judge_cost(opinions), pairing.unpaired,
        tuple(sorted({o.model for o in opinions if o.raw is not None})))


__all__ = ["DEFAULT_CONCURRENCY", "JudgeCost", "Pair", "Pairing", "PairwiseOptions",
           "PairwiseResult", "Row", "RunOutputs", "load_outputs", "outputs_of",
           "pair", "pairwise"]
