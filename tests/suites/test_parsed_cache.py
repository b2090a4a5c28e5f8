"""The parsed-suite cache: a second load skips the YAML parse and gives the same suite."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.errors import SuiteError
from assay.suites import cache, load_suite_file, validated
from assay.suites.cache import FOLDER

from .test_many_cases import cases as case_items


def _fingerprint(path: Path) -> Any:
    try:
        loaded = load_suite_file(path)
    except SuiteError as error:
        return ("error", str(error), error.file, error.line)
    return (loaded.digest, loaded.hidden_digest, loaded.suite.model_dump(mode="json"),
            [(c.line, c.file, c.model_fields_set,
              [(a.line, a.file, a.model_fields_set, a.arg) for a in c.expect])
             for c in loaded.suite.cases])


def _entries() -> list[Path]:
    return sorted(FOLDER.glob("*.json"))


def validated_entries() -> list[Path]:
    return sorted(validated.FOLDER.glob("*.json"))


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder of its own, with an .assay/ for the cache to go in."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".assay").mkdir()
    return tmp_path


def test_loading_never_creates_the_assay_folder(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """`--no-store` and other stores leave no .assay/ behind; the cache must not either."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "s.suite.yaml"
    path.write_text(SUITE)
    load_suite_file(path)
    load_suite_file(path)
    assert not (tmp_path / ".assay").exists()


def test_nothing_is_prepared_for_the_cache_without_the_assay_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without .assay/ the lines and JSON an entry needs would be made for nothing."""
    monkeypatch.chdir(tmp_path)

    def refuse(*args: object) -> None:
        raise AssertionError("prepared for a cache that is not kept")

    monkeypatch.setattr(cache, "lines_of", refuse)
    path = tmp_path / "s.suite.yaml"
    path.write_text(SUITE)
    assert [c.id for c in load_suite_file(path).suite.cases] == ["a", "b"]


SUITE = """\
suite: demo/cached@1
trials: 2
cases:
  - id: a
    input: {q: "one"}
    tags: [x]
    expect:
      - settles
      - equals: 1
        path: $.n
  - id: b
    input: two
    expect: [{contains: two, min_evidence: inferred}]
"""


def test_the_second_load_reads_the_kept_parse(here: Path) -> None:
    path = here / "s.suite.yaml"
    path.write_text(SUITE)
    first = _fingerprint(path)
    [entry] = _entries()
    assert _fingerprint(path) == first
    # Proof that the entry, not the file, was read: an entry edited in place is believed
    # (.assay/ is trusted as the store is); the file itself never changed.
    kept = [json.loads(line) for line in entry.read_text().splitlines()]
    kept[2][2]["input"] = "edited"  # [header, case a, case b, top]; a case is [line, lines, data]
    entry.write_text("".join(json.dumps(item) + "\n" for item in kept))
    for kept_cases in validated_entries():  # else the validated cases are read, not the parse
        kept_cases.unlink()
    assert load_suite_file(path).suite.cases[1].input == "edited"


def test_an_edited_suite_file_is_parsed_again(here: Path) -> None:
    path = here / "s.suite.yaml"
    path.write_text(SUITE)
    load_suite_file(path)
    path.write_text(SUITE.replace("input: two", "input: three"))
    assert load_suite_file(path).suite.cases[1].input == "three"
    assert len(_entries()) == 1  # one entry per file, replaced


def test_an_error_after_a_kept_parse_has_its_exact_line(here: Path) -> None:
    """A fixture that went missing since the parse was kept: the error reads as on a first load."""
    (here / "fx.yaml").write_text("tools: []\n")
    path = here / "s.suite.yaml"
    path.write_text(textwrap.dedent("""\
        suite: demo/cached@1
        cases:
          - id: a
            input: x
            fixture: fx.yaml
            expect: [settles]
        """))
    load_suite_file(path)
    (here / "fx.yaml").unlink()
    with pytest.raises(SuiteError) as kept:
        load_suite_file(path)
    for entry in _entries():
        entry.unlink()
    with pytest.raises(SuiteError) as first:
        load_suite_file(path)
    assert (str(kept.value), kept.value.line) == (str(first.value), first.value.line) \
        and first.value.line == 5


@pytest.mark.parametrize("value", ["2024-01-01", "{1: one}", ".nan", "!!binary aGk="])
def test_data_json_cannot_give_back_exactly_is_not_kept(here: Path, value: str) -> None:
    path = here / "s.suite.yaml"
    path.write_text(f"suite: demo/cached@1\ncases:\n  - id: a\n    input: {value}\n")
    if value == ".nan":  # no case may hold one (model.suite.finite): refused, and not kept
        with pytest.raises(SuiteError):
            load_suite_file(path)
    else:
        load_suite_file(path)
    assert _entries() == []


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(case_items, max_size=4), st.sampled_from([None, True, False]))
def test_a_kept_parse_loads_as_the_file_does(here: Path, items: list[Any],
                                             flow: bool | None) -> None:
    path = here / "s.suite.yaml"
    path.write_text(yaml.safe_dump({"suite": "demo/cached@1", "cases": items}, sort_keys=False,
                                   default_flow_style=flow))
    for entry in _entries():
        entry.unlink()
    first = _fingerprint(path)
    assert _fingerprint(path) == first
