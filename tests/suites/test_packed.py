"""A loaded suite holds its cases packed, built a block at a time, with its digests of old."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from assay.canonical import digest, file_digest
from assay.errors import SuiteError
from assay.judging.opinion import suite_asks_opinions
from assay.model import Assertion, Case, Suite
from assay.model.packed import PackedCases, row_of
from assay.store.runs.documents import stored_suite_json, stored_suite_pieces
from assay.suites import LoadedSuite, load_suite_file
from assay.suites import loader as suite_loader
from assay.suites.build import Problem, make_cases
from assay.suites.cache import FOLDER

from .test_many_cases import cases as case_items

N = 3000  # three blocks of 1,024 and a part


def _fingerprint(case: Case) -> Any:
    return (case.model_dump(mode="json"), case.line, case.file, case.model_fields_set,
            [(a.model_dump(mode="json"), a.line, a.file, a.model_fields_set) for a in case.expect])


@settings(max_examples=80, deadline=None)
@given(st.lists(case_items, max_size=6))
def test_a_packed_case_reads_back_as_it_was(items: list[Any]) -> None:
    problem = Problem("s.suite.yaml", lambda loc: len(loc), secret=False)
    try:
        cases = make_cases(items, problem, ["cases"], split="public", base_dir=Path("."))
    except SuiteError:
        return
    cases += [Case(id="h", split="hidden", expect=[Assertion(check="settles")])]
    packed = PackedCases(cases)
    assert len(packed) == len(cases)
    assert [_fingerprint(c) for c in packed] == [_fingerprint(c) for c in cases]
    assert [_fingerprint(packed[i]) for i in range(-len(cases), len(cases))] == \
        [_fingerprint(c) for c in cases * 2]
    assert packed == cases and list(packed[1:]) == cases[1:]
    assert list(packed.of_split("hidden")) == [c for c in cases if c.split == "hidden"]
    assert packed.get(0) is not packed.get(0)
    with pytest.raises(IndexError):
        packed[len(cases)]
    # The checks a suite names, kept as it is packed: from cases, and from rows (the
    # validated-case cache's way in); whether it is judged is read from them.
    named = {a.check for c in cases for a in c.expect}
    from_rows = PackedCases()
    for case in cases:
        from_rows.append_row(row_of(case))  # type: ignore[arg-type]
    assert packed.check_names() == from_rows.check_names() == named
    assert suite_asks_opinions(packed) == suite_asks_opinions(cases) \
        == bool(named & {"judge", "rubric", "similar"})


def test_a_value_pickle_keeps_but_json_does_not_reads_back_exactly() -> None:
    import datetime

    when = datetime.datetime(2024, 1, 1, 3, 4, tzinfo=datetime.UTC)
    case = Case(id="d", input={"when": datetime.date(2024, 1, 31), 1: b"x"}, expect=[
        Assertion(check="equals", arg=when, min_evidence="inferred")])
    [back] = PackedCases([case])
    assert _fingerprint(back) == _fingerprint(case) and back.input == case.input


def _suite_text(n: int, *, fixture: bool = False) -> str:
    lines = ["suite: demo/packed@1", "trials: 2", "hidden: hidden", "cases:"]
    for i in range(n):
        extra = ", fixture: fx.yaml" if fixture and i % 1000 == 7 else ""
        extra += ", tags: [t]" if i % 3 == 0 else ""
        lines.append(f"  - {{id: c{i}, input: i{i}{extra}, expect: [{{path: $.echo, "
                     f"equals: i{i}}}, settles]}}")
    lines.append("title: written after the cases")
    return "\n".join(lines) + "\n"


def _write_suite(folder: Path, n: int = N) -> Path:
    (folder / "hidden").mkdir(exist_ok=True)
    (folder / "hidden" / "h.yaml").write_text(
        "- id: h1\n  input: secret\n  expect: [{equals: s}]\n- id: h2\n  fixture: ../fx.yaml\n")
    (folder / "fx.yaml").write_text("tools: []\n")
    path = folder / "big.suite.yaml"
    path.write_text(_suite_text(n, fixture=True), encoding="utf-8")
    return path


_CASES: TypeAdapter[list[Case]] = TypeAdapter(list[Case])


def _old_way(loaded: LoadedSuite) -> tuple[str, str | None, list[dict[str, str]]]:
    """The digests and facets as the loader computed them before it packed cases: all at once."""
    from assay.suites.facets import case_facets

    cases = list(loaded.suite.cases)
    identities = _CASE_LIST_DUMP(cases, loaded.path)
    public = [i for c, i in zip(cases, identities, strict=True) if c.split == "public"]
    secret = [i for c, i in zip(cases, identities, strict=True) if c.split == "hidden"]
    body = loaded.suite.model_dump(mode="json", by_alias=True, exclude={"cases", "source"},
                                   exclude_defaults=True)
    facets = case_facets(cases, {c.id: i for c, i in zip(cases, identities, strict=True)}, {})
    return (digest({"suite": body, "cases": public}), digest(secret) if secret else None,
            [facets[c.id] for c in cases])


def _CASE_LIST_DUMP(cases: list[Case], path: Path) -> list[dict[str, Any]]:  # noqa: N802
    found: list[dict[str, Any]] = _CASES.dump_python(cases, mode="json", exclude_defaults=True)
    for case, data in zip(cases, found, strict=True):
        if case.fixture is not None and case.file is not None:
            data["fixture_digest"] = file_digest(Path(case.file).parent / case.fixture)
    return found


# The values every way of loading must give for _write_suite's suite (and gave before cases
# were packed: checked against the old loader when this test was written).
PINNED_DIGEST = "sha256:bd80d9469b66b99796100a6ca48261ac1db1f58e4502970cf50ab353e4286489"
PINNED_HIDDEN = "sha256:ba957d9006032716875491be3d16d06cc5b301de1aef6f6056e5f02d186ed916"


@pytest.mark.parametrize("way", ["no cache", "first load", "from the cache"])
def test_a_large_suite_loads_with_the_digests_and_facets_of_old(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str) -> None:
    monkeypatch.chdir(tmp_path)
    path = _write_suite(tmp_path)
    if way != "no cache":
        (tmp_path / ".assay").mkdir()
    if way == "from the cache":
        load_suite_file(path)
        assert len(list(FOLDER.glob("*.json"))) == 1
    loaded = load_suite_file(path)
    cases = loaded.suite.cases
    assert isinstance(cases, PackedCases) and len(cases) == N + 2
    assert loaded.suite.title == "written after the cases"
    assert (cases[2500].id, cases[2500].line, [a.line for a in cases[2500].expect]) == \
        ("c2500", 2505, [2505, 2505])
    assert [c.id for c in loaded.suite.hidden_cases()] == ["h1", "h2"]
    assert len(loaded.suite.public_cases()) == N
    assert sorted(loaded.fixtures) == [str((tmp_path / "fx.yaml").resolve())]
    old_digest, old_hidden, old_facets = _old_way(loaded)
    assert (loaded.digest, loaded.hidden_digest) == (old_digest, old_hidden)
    assert [loaded.case_facets(c) for c in cases] == old_facets
    assert (loaded.digest, loaded.hidden_digest) == (PINNED_DIGEST, PINNED_HIDDEN)


@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize(("change", "line", "message"), [
    ("  - {id: c1100, expect: [{equalz: 1}]}", 1105,
     "unknown assertion 'equalz' (did you mean 'equals'?)"),
    ("  - {id: c5, input: again}", 1105, "duplicate case id 'c5'"),
    ("  - {id: c1100, colour: red}", 1105, "unknown key 'colour'"),
])
def test_an_error_in_a_later_block_has_its_exact_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cached: bool, change: str,
        line: int, message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".assay").mkdir()
    path = _write_suite(tmp_path, 1200)  # the error in the second block
    if cached:
        load_suite_file(path)
    text = path.read_text().splitlines()
    text[line - 1] = change
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(SuiteError) as error:
        load_suite_file(path)
    assert (error.value.line, error.value.message) == (line, message)


def test_a_suite_without_its_key_is_refused_as_before(tmp_path: Path) -> None:
    path = tmp_path / "s.suite.yaml"
    path.write_text(_suite_text(1500).replace("suite: demo/packed@1\n", ""))
    with pytest.raises(SuiteError) as error:
        load_suite_file(path)
    assert error.value.message == "missing required key 'suite' (namespace/name@major)"


def test_the_stored_suite_in_pieces_is_the_text_of_old(tmp_path: Path) -> None:
    loaded = load_suite_file(_write_suite(tmp_path, 2500))
    listed = loaded.suite.model_copy(update={"cases": list(loaded.suite.cases)})
    files = {c.id: [a.file for a in c.expect] for c in listed.cases}
    old = (f'{{"suite":{listed.model_dump_json(by_alias=True, fallback=repr)},'
           f'"files":{json.dumps(files, ensure_ascii=False)}}}')
    pieces = list(stored_suite_pieces(loaded.suite))
    assert "".join(pieces) == old == stored_suite_json(loaded.suite)
    assert max(len(p) for p in pieces) < len(old) / 2
    small = Suite.model_validate({"suite": "a/b@1"})
    assert stored_suite_json(small) == \
        f'{{"suite":{small.model_dump_json(by_alias=True)},"files":{{}}}}'
    assert json.loads(stored_suite_json(small)) == {"suite": json.loads(
        small.model_dump_json(by_alias=True)), "files": {}}


def test_loading_holds_a_few_bytes_a_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cases packed, nothing else kept per case; at most a block of models at a time."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".assay").mkdir()
    path = tmp_path / "s.suite.yaml"
    n = 4000
    path.write_text(yaml.safe_dump({"suite": "demo/m@1", "cases": [
        {"id": f"c{i}", "input": f"i{i}", "expect": [{"path": "$.echo", "equals": f"i{i}"}]}
        for i in range(n)]}, default_flow_style=None, width=200))
    for _ in ("first load", "from the cache"):
        tracemalloc.start()
        try:
            loaded = load_suite_file(path)
            held, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(loaded.suite.cases) == n
        # ~100 bytes a case packed and 64 of its facet digests; a Case model alone is ~2,500
        assert held < 200 * n, held
        assert peak < 6_000_000, peak  # a block's models and data, not all of them


def test_the_whole_parse_packs_what_the_stream_declines(tmp_path: Path) -> None:
    """Anchors and aliases are left to the whole parse: the cases are packed all the same."""
    path = tmp_path / "s.suite.yaml"
    text = "suite: demo/a@1\ncases:\n" + "".join(
        f"  - {{id: c{i}, expect: &e{i} [settles]}}\n  - {{id: d{i}, expect: *e{i}}}\n"
        for i in range(700))
    path.write_text(text)
    loaded = load_suite_file(path)
    assert isinstance(loaded.suite.cases, PackedCases) and len(loaded.suite.cases) == 1400
    assert (loaded.suite.cases[1201].id, loaded.suite.cases[1201].expect[0].line) == ("d600", 1203)
    assert suite_loader.BLOCK < 1400


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8)
_assertions = st.fixed_dictionaries(
    {"check": st.sampled_from(["equals", "contains", "judge", "settles"]), "arg": _json_values},
    optional={"path": st.just("$.a"), "threshold": st.floats(0, 1),
              "min_evidence": st.sampled_from(["observed", "inferred"]),
              "breach_evidence": st.sampled_from(["observed", "inferred"]),
              "turn": st.sampled_from([1, 3, "any"]), "line": st.integers(1, 99),
              "file": st.sampled_from(["a.suite.yaml", "b.yaml"])})
_cases = st.fixed_dictionaries(
    {"id": st.sampled_from(["a", "b", "ü ☃", "<c>"]), "expect": st.lists(_assertions, max_size=3)},
    optional={"input": _json_values, "expected": _json_values,
              "split": st.sampled_from(["public", "hidden"]),
              "tags": st.lists(st.text(max_size=3), max_size=2), "trials": st.integers(1, 5),
              "timeout_s": st.floats(min_value=1e-9, allow_infinity=False) | st.integers(1, 9),
              "model": st.sampled_from(["m", {"claude": "opus"}]), "effort": st.just("low"),
              "synthetic": st.booleans(), "fixture": st.just("tools.yaml"),
              "workspace": st.just("ws"),
              "invocation": st.sampled_from(["explicit", {"mode": "none", "skill": "greet"}]),
              "turns": st.lists(st.text(min_size=1, max_size=3), min_size=1, max_size=2),
              "user": st.just({"instructions": "be terse", "max_turns": 3}),
              "line": st.integers(1, 99), "file": st.sampled_from(["a.suite.yaml", "b.yaml"])})


def _made(data: list[dict[str, Any]]) -> list[Case]:
    return [Case.model_validate({**item, "expect": [Assertion.model_validate(a)
                                                    for a in item["expect"]]})
            for item in data]


@settings(max_examples=300, deadline=None)
@given(st.lists(_cases, max_size=4))
def test_packed_cases_dump_to_the_bytes_pydantic_writes(data: list[dict[str, Any]]) -> None:
    """The stored suite's cases, written by orjson from packed values, are pydantic's bytes;
    whatever orjson would write otherwise is left to pydantic."""
    from assay.model.compact import fast_json

    cases = _made(data)
    packed = PackedCases(cases)
    dumped = packed.dumped(0, len(cases))
    assert dumped is not None
    fast = fast_json(dumped)
    if fast is not None:
        assert fast == _CASES.dump_json(cases, by_alias=True, fallback=repr)
    suite = Suite.model_validate({"suite": "a/b@1"}).model_copy(update={"cases": packed})
    listed = suite.model_copy(update={"cases": cases})
    files = {c.id: [a.file for a in c.expect] for c in cases}
    if len(files) == len(cases):
        assert stored_suite_json(suite) == \
            (f'{{"suite":{listed.model_dump_json(by_alias=True, fallback=repr)},'
             f'"files":{json.dumps(files, ensure_ascii=False)}}}')


def test_a_plain_suite_is_dumped_without_making_its_cases(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = load_suite_file(_write_suite(tmp_path, 1500))
    text = stored_suite_json(loaded.suite)

    def refuse(*args: object) -> None:
        raise AssertionError("a case was made")

    monkeypatch.setattr(PackedCases, "_read", refuse)
    assert stored_suite_json(loaded.suite) == text


@settings(max_examples=100, deadline=None)
@given(st.lists(_cases, max_size=6), st.sets(st.sampled_from(["equals", "judge", "settles"])))
def test_having_is_the_cases_with_those_checks(data: list[dict[str, Any]],
                                               checks: set[str]) -> None:
    from assay.engine.record import _thresholds

    cases = _made(data)
    packed = PackedCases(cases)
    assert list(packed.having(checks)) == [c for c in cases
                                           if any(a.check in checks for a in c.expect)]
    for split in ("public", "hidden"):
        view = packed.of_split(split)
        assert list(view.having(checks)) == [  # type: ignore[attr-defined]
            c for c in cases if c.split == split and any(a.check in checks for a in c.expect)]
        assert _thresholds(view) == _thresholds(list(view))
