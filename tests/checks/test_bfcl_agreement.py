"""Argument matching checked on an outside corpus: the Berkeley Function Calling Leaderboard.

The ``bfcl-eval`` wheel ships BFCL's questions and possible answers as JSON-lines data
files. They are read from the installed package at test time (nothing is copied here);
its Python modules pull in vendor SDKs and are never imported.

Each possible answer becomes a ``calls`` assertion (docs/decisions/0008). The ground-truth
call must pass; mutated calls (wrong value, wrong type, missing argument, extra argument
under ``strict``, a parallel call dropped) must fail. Probes where BFCL's rules differ
from ours on purpose (its looser strings, its Python type check, its greedy pairing of
parallel calls) are counted and reported, never bent to agree.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from assay.checks import LoadContext, lookup, verdict
from assay.checks.arguments import Call, call_matches
from assay.model import Assertion, Event, Evidence, Trace

INSTALL = "pip install --no-deps 'bfcl-eval>=2026.3.23'  (make test's venv does this)"
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple",
              "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
MUTATIONS = ("wrong_value", "wrong_type", "missing_argument", "extra_argument", "dropped_call")
#: Probe kinds where BFCL and assay differ by rule, with the side each takes.
DIFFERENCES = {
    "loose_string": "BFCL ignores case, spaces and ,./-_*^ in strings; assay compares exactly",
    "integer_as_float": "BFCL's Python type check rejects 5.0 for an integer; numbers compare "
                        "as numbers in assay (SPEC §3)",
    "greedy_order": "BFCL pairs parallel calls greedily and rejects some correct orders; assay "
                    "finds a one-to-one assignment",
}
UNEXPECTED = "zz_unexpected"


def data_dir() -> Path:
    """bfcl-eval's data folder, found without importing the package."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail(f"bfcl-eval is not installed; this test reads its data files: {INSTALL}")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def category_files(category: str) -> tuple[Path, Path]:
    """The newest ``BFCL_v*_<category>.json`` question file and its possible answers."""
    folder = data_dir()
    name = re.compile(rf"BFCL_v(\d+)_{category}\.json")
    found = sorted((p for p in folder.glob("BFCL_v*.json") if name.fullmatch(p.name)),
                   key=lambda p: int(name.fullmatch(p.name)[1]))  # type: ignore[index]
    if not found:
        pytest.fail(f"no BFCL_v*_{category}.json in {folder}; reinstall: {INSTALL}")
    return found[-1], folder / "possible_answer" / found[-1].name


# --- BFCL's own rules, transcribed from eval_checker/ast_eval/ast_checker.py --------------


def standardize(text: str) -> str:
    """BFCL's string rule: drop spaces and ,./-_*^, lower-case, ' becomes \"."""
    return re.sub(r"[ \,\.\/\-\_\*\^]", "", text).lower().replace("'", '"')


def bfcl_value_ok(value: Any, accepted: list[Any]) -> bool:
    """Whether BFCL could accept ``value`` among ``accepted`` (erring towards yes)."""
    if isinstance(value, str):
        return standardize(value) in {standardize(a) for a in accepted if isinstance(a, str)}
    if isinstance(value, list):
        def norm(items: list[Any]) -> list[Any]:
            return [standardize(x) if isinstance(x, str) else x for x in items]
        return any(norm(value) == norm(a) for a in accepted if isinstance(a, list))
    return value in [a for a in accepted if a != ""]


# --- translation: a possible answer becomes a pattern, a ground truth and mutations --------

ABSENT = {"absent": True}


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


LEFT_OUT = object()


def expand_dict(answer: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """BFCL's nested object answer (each key: acceptable values, "" = may be left out).

    Nested objects compare exactly in assay, so the answer becomes every object it allows.
    """
    per_key = [[(k, v) for v in values if v != ""] + ([(k, LEFT_OUT)] if "" in values else [])
               for k, values in answer.items()]
    out = [{k: v for k, v in combo if v is not LEFT_OUT} for combo in itertools.product(*per_key)]
    assert len(out) <= 4096, "nested answer too large to expand"
    return out


def options_for(values: list[Any], ptype: str | None, required: bool) -> list[Any]:
    """Our any_of items for one argument's list of acceptable BFCL values."""
    out: list[Any] = []
    for value in values:
        if value == "":
            if not required:
                out.append(ABSENT)  # "" marks the argument as optional ...
            if ptype == "string":
                out.append("")  # ... and, for a string, BFCL also accepts an empty one
        elif ptype == "dict" and isinstance(value, dict):
            out.extend({"equals": d} for d in expand_dict(value))
        elif isinstance(value, dict):
            out.append({"equals": value})
        else:
            out.append(value)
    return out


def first_value(values: list[Any], ptype: str | None) -> Any:
    value = next(v for v in values if v != "")
    return expand_dict(value)[0] if ptype == "dict" and isinstance(value, dict) else value


@dataclass
class Expected:
    """One expected call: its pattern, its ground-truth arguments, its function's schema."""

    tool: str
    pattern: dict[str, Any]
    truth: dict[str, Any]
    answer: dict[str, list[Any]]
    types: dict[str, str | None]
    required: set[str]


def translate(name: str, answer: dict[str, list[Any]], doc: dict[str, Any]) -> Expected | None:
    props = doc["parameters"].get("properties", {})
    required = set(doc["parameters"].get("required", []))
    args: dict[str, Any] = {}
    truth: dict[str, Any] = {}
    types: dict[str, str | None] = {}
    for param, values in answer.items():
        ptype = props.get(param, {}).get("type")
        types[param] = ptype
        options = options_for(values, ptype, param in required)
        args[param] = options[0] if len(options) == 1 else {"any_of": options}
        optional = "" in values and param not in required
        if not optional:
            if param not in props or all(v == "" for v in values):
                return None  # BFCL itself could not accept any value here
            truth[param] = first_value(values, ptype)
    pattern = {"tool": glob_escape(name), "args": args, "strict": True}
    return Expected(name, pattern, truth, answer, types, required)


# --- the run -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One verdict of ours next to BFCL's on the same calls."""

    case: str
    category: str
    kind: str
    ours: bool
    bfcl: bool


OBSERVED = {"tool_calls": Evidence.OBSERVED}


def passes(assertion: Assertion, calls: list[tuple[str, dict[str, Any]]]) -> bool:
    events = [Event(kind="tool_call", name=n, arguments=a) for n, a in calls]
    outcome = verdict(assertion, Trace(events=events, evidence=OBSERVED)).outcome
    assert outcome != "inconclusive"
    return outcome == "pass"


def mutate(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + "zz"
    if isinstance(value, list):
        return [*value, value[-1]] if value else ["zz"]
    return "zz"


def retype(value: Any) -> Any:
    return [value] if isinstance(value, str) else json.dumps(value)


def type_order(item: tuple[str, Any]) -> int:
    """Wrong-type mutations prefer a number given as a string, then a bool, then the rest."""
    value = item[1]
    return 0 if isinstance(value, int | float) and not isinstance(value, bool) else (
        1 if isinstance(value, bool) else 2)


def one_argument(e: Expected, change: Callable[[Any], Any],
                 order: Callable[[tuple[str, Any]], int] = lambda item: 0) -> dict[str, Any] | None:
    """The ground truth with one scalar or list argument changed to a value both rules refuse."""
    for param, value in sorted(e.truth.items(), key=order):
        if isinstance(value, dict):
            continue
        new = change(value)
        args = {**e.truth, param: new}
        if not bfcl_value_ok(new, e.answer[param]) and we_refuse(e, args):
            return args
    return None


def we_refuse(e: Expected, args: dict[str, Any]) -> bool:
    return not call_matches(e.pattern, Call(1, 0, Event(kind="tool_call", name=e.tool,
                                                             arguments=args)))


def probe_string(e: Expected) -> tuple[dict[str, Any], bool] | None:
    for param, value in e.truth.items():
        if e.types[param] != "string" or not isinstance(value, str):
            continue
        for variant in (value.upper(), value.lower(), value.replace(" ", "")):
            if variant != value and standardize(variant) == standardize(value):
                return {**e.truth, param: variant}, True  # BFCL accepts it
    return None


def probe_integer_as_float(e: Expected) -> tuple[dict[str, Any], bool] | None:
    for param, value in e.truth.items():
        first = next(v for v in e.answer[param] if v != "")
        if e.types[param] == "integer" and type(value) is int and type(first) is int:
            return {**e.truth, param: float(value)}, False  # BFCL's type check refuses it
    return None


def probe_float_as_integer(e: Expected) -> tuple[dict[str, Any], bool] | None:
    for param, value in e.truth.items():
        if e.types[param] == "float" and type(value) is float and value.is_integer():
            return {**e.truth, param: int(value)}, True  # BFCL converts int to float
    return None


def greedy_defeated(expected: list[Expected]) -> tuple[int, ...] | None:
    """An order of the correct calls that BFCL's greedy pairing rejects, if there is one."""
    n = len(expected)
    fit = [[call_matches(e.pattern, Call(1, 0, Event(kind="tool_call", name=a.tool,
                                                    arguments=a.truth)))
            for a in expected] for e in expected]
    orders = itertools.permutations(range(n)) if n <= 5 else [tuple(reversed(range(n)))]
    for order in orders:
        free = list(order)
        for i in range(n):
            j = next((j for j in free if fit[i][j]), None)
            if j is None:
                return order
            free.remove(j)
    return None


def rows_for(case_id: str, category: str, answer: list[dict[str, Any]],
             docs: dict[str, dict[str, Any]]) -> Iterator[Row]:
    expected = []
    for item in answer:
        ((name, params),) = item.items()
        e = translate(name, params, docs[name])
        if e is None:
            return
        expected.append(e)
    parallel = "parallel" in category
    spec: Any = [e.pattern for e in expected] if parallel else {**expected[0].pattern, "times": 1}
    check = lookup("calls")
    assert check is not None
    assertion = Assertion(check="calls", arg=check.prepare(spec, LoadContext(base_dir=Path("."))))
    truth = [(e.tool, e.truth) for e in expected]

    def row(kind: str, calls: list[tuple[str, dict[str, Any]]], bfcl: bool) -> Row:
        return Row(case_id, category, kind, passes(assertion, calls), bfcl)

    yield row("ground_truth", truth, True)
    for k, e in enumerate(expected):
        def swap(args: dict[str, Any], k: int = k) -> list[tuple[str, dict[str, Any]]]:
            return [*truth[:k], (expected[k].tool, args), *truth[k + 1:]]

        if k == 0 or parallel:
            if (args := one_argument(e, mutate)) is not None:
                yield row("wrong_value", swap(args), False)
            if (args := one_argument(e, retype, type_order)) is not None:
                yield row("wrong_type", swap(args), False)
            present = sorted(e.truth, key=lambda p: p not in e.required)
            if present:
                yield row("missing_argument",
                          swap({p: v for p, v in e.truth.items() if p != present[0]}), False)
            yield row("extra_argument", swap({**e.truth, UNEXPECTED: 1}), False)
            for kind, probe in (("loose_string", probe_string),
                                ("integer_as_float", probe_integer_as_float),
                                ("float_as_integer", probe_float_as_integer)):
                if (found := probe(e)) is not None:
                    yield row(kind, swap(found[0]), found[1])
        if parallel:
            yield row("dropped_call", truth[:k] + truth[k + 1:], False)
    if parallel and (order := greedy_defeated(expected)) is not None:
        yield row("greedy_order", [truth[j] for j in order], False)


@cache
def corpus() -> tuple[tuple[Row, ...], Counter[str]]:
    rows: list[Row] = []
    skipped: Counter[str] = Counter()
    for category in CATEGORIES:
        questions, answers = category_files(category)
        docs_of = {q["id"]: {f["name"]: f for f in q["function"]} for q in read_lines(questions)}
        for entry in read_lines(answers):
            found = list(rows_for(entry["id"], category, entry["ground_truth"],
                                  docs_of[entry["id"]]))
            if not found:
                skipped[category] += 1
            rows.extend(found)
    return tuple(rows), skipped


# --- the tests -----------------------------------------------------------------------------


def test_bfcl_eval_data_is_installed() -> None:
    for category in CATEGORIES:
        questions, answers = category_files(category)
        assert questions.is_file() and answers.is_file(), INSTALL


def test_every_ground_truth_passes_and_every_mutation_fails() -> None:
    rows, _ = corpus()
    cases = {(r.category, r.case) for r in rows}
    assert len(cases) >= 200
    assert {c for c, _ in cases} == set(CATEGORIES)
    wrong = [r for r in rows if r.kind == "ground_truth" and not r.ours]
    wrong += [r for r in rows if r.kind in MUTATIONS and r.ours]
    assert wrong == []
    kinds = Counter(r.kind for r in rows)
    assert all(kinds[m] >= 100 for m in MUTATIONS), kinds


def test_we_disagree_with_bfcl_only_where_the_rules_differ_on_purpose() -> None:
    rows, _ = corpus()
    disagree = Counter(r.kind for r in rows if r.ours != r.bfcl)
    assert set(disagree) <= set(DIFFERENCES), disagree
    # Each difference goes the way its rule says.
    for r in rows:
        if r.kind == "loose_string" and r.ours != r.bfcl:
            assert (r.ours, r.bfcl) == (False, True)
        if r.kind in ("integer_as_float", "greedy_order"):
            assert (r.ours, r.bfcl) == (True, False), r
    assert all(r.ours for r in rows if r.kind == "float_as_integer")


def test_agreement_figure(record_property: Callable[[str, object], None]) -> None:
    rows, skipped = corpus()
    by_case: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        by_case.setdefault((r.category, r.case), []).append(r)
    checked = [r for r in rows if r.kind == "ground_truth" or r.kind in MUTATIONS]
    right = sum(1 for r in checked if r.ours == (r.kind == "ground_truth"))
    cases_right = sum(all(r.ours == (r.kind == "ground_truth") for r in case
                          if r.kind == "ground_truth" or r.kind in MUTATIONS)
                      for case in by_case.values())
    same = sum(1 for r in rows if r.ours == r.bfcl)
    lines = [
        "BFCL agreement (bfcl-eval data, " + ", ".join(
            f"{c}: {sum(1 for k in by_case if k[0] == c)} cases" for c in CATEGORIES) + ")",
        f"  skipped (answers BFCL itself can never accept: an empty list, a required argument "
        f"marked optional, an argument not in the schema): {dict(skipped)}",
        "  traces: " + ", ".join(f"{k} {n}" for k, n in sorted(Counter(r.kind for r in rows)
                                                              .items())),
        f"  ground truth + mutations right: {right}/{len(checked)} traces, "
        f"{cases_right}/{len(by_case)} cases = {cases_right / len(by_case):.3f}",
        f"  same verdict as BFCL on all traces incl. probes: {same}/{len(rows)}",
        "  documented differences: " + ", ".join(
            f"{k} {sum(1 for r in rows if r.kind == k and r.ours != r.bfcl)}/"
            f"{sum(1 for r in rows if r.kind == k)}" for k in DIFFERENCES),
    ]
    print("\n" + "\n".join(lines))
    record_property("bfcl_agreement", cases_right / len(by_case))
    record_property("bfcl_report", "\n".join(lines))
    assert right == len(checked)
    assert cases_right == len(by_case)
