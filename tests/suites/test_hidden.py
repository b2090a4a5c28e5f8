"""Hidden cases (SPEC §2, §5): samples, the private replacement, digests, and secrecy in errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from assay.errors import SuiteError
from assay.suites import LoadedSuite, private_folder

Write = Callable[[str, str], Path]

SUITE = """
suite: demo/secret.cases@2
hidden: hidden/
cases:
  - id: public-one
    input: 1
    expect: [{equals: 1}]
"""

ONE = """
id: holdout-single
input: {q: one}
expect:
  - {path: $.a, equals: 1}
"""

MANY = """
- id: holdout-a
  input: a
  expect: [{contains: a}]
- id: holdout-b
  input: b
  split: public
  expect: [{contains: b}]
"""


@pytest.fixture
def suite(write: Write) -> Path:
    write("evals/hidden/one.yaml", ONE)
    write("evals/hidden/many.yaml", MANY)
    write("evals/hidden/deeper/more.yml", "id: holdout-deep\nexpect: [{equals: 3}]\n")
    write("evals/hidden/notes.txt", "not a case")
    return write("evals/s.suite.yaml", SUITE)


def test_private_folder_layout() -> None:
    assert private_folder(Path("/r"), "demo/secret.cases@2") == Path("/r/demo/secret.cases@2")


def test_every_yaml_under_hidden_becomes_a_hidden_case(
    suite: Path, load: Callable[..., LoadedSuite]
) -> None:
    loaded = load(suite)
    s = loaded.suite
    assert [(c.id, c.split) for c in s.cases] == [
        ("public-one", "public"),
        ("holdout-deep", "hidden"),
        ("holdout-a", "hidden"),
        ("holdout-b", "hidden"),  # split: public in a hidden file does not make it public
        ("holdout-single", "hidden"),
    ]
    assert [c.id for c in s.public_cases()] == ["public-one"]
    assert {c.id for c in s.hidden_cases()} == {
        "holdout-single", "holdout-a", "holdout-b", "holdout-deep"}
    single = next(c for c in s.cases if c.id == "holdout-single")
    assert single.input == {"q": "one"}
    assert [(a.check, a.arg, a.path) for a in single.expect] == [("equals", 1, "$.a")]
    assert single.file == str(suite.parent / "hidden" / "one.yaml")
    assert single.line == 1
    b = next(c for c in s.cases if c.id == "holdout-b")
    assert b.line == 4 and b.file == str(suite.parent / "hidden" / "many.yaml")
    assert loaded.hidden_source == "samples"
    assert loaded.hidden_digest is not None and loaded.hidden_digest.startswith("sha256:")


def test_a_suite_without_hidden_cases_has_no_hidden_digest(
    write: Write, load: Callable[..., LoadedSuite]
) -> None:
    loaded = load(write("p.suite.yaml", "suite: ns/p@1\ncases: [{id: a}]\n"))
    assert (loaded.hidden_digest, loaded.hidden_source) == (None, None)
    assert loaded.suite.hidden_cases() == []


def test_an_empty_hidden_folder_gives_no_hidden_set(
    write: Write, load: Callable[..., LoadedSuite], tmp_path: Path
) -> None:
    (tmp_path / "hidden").mkdir()
    loaded = load(write("p.suite.yaml", "suite: ns/p@1\nhidden: hidden\ncases: [{id: a}]\n"))
    assert (loaded.hidden_digest, loaded.hidden_source) == (None, None)
    assert [c.id for c in loaded.suite.cases] == ["a"]


def test_a_private_folder_replaces_the_samples(
    suite: Path, write: Write, load: Callable[..., LoadedSuite], tmp_path: Path
) -> None:
    write("private/demo/secret.cases@2/p.yaml", "- {id: private-1, input: x}\n- {id: private-2}\n")
    samples = load(suite)
    private = load(suite, tmp_path / "private")
    assert [(c.id, c.split) for c in private.suite.cases] == [
        ("public-one", "public"), ("private-1", "hidden"), ("private-2", "hidden")]
    assert private.hidden_source == "private"
    assert private.digest == samples.digest
    assert private.hidden_digest != samples.hidden_digest


def test_a_missing_private_folder_falls_back_to_the_samples(
    suite: Path, write: Write, load: Callable[..., LoadedSuite], tmp_path: Path
) -> None:
    # A private root with folders for other suites and other versions of this one.
    write("private/demo/secret.cases@1/p.yaml", "id: old-version\n")
    write("private/demo/other@2/p.yaml", "id: other-suite\n")
    loaded = load(suite, tmp_path / "private")
    assert loaded.hidden_source == "samples"
    assert "holdout-single" in {c.id for c in loaded.suite.hidden_cases()}
    assert loaded.hidden_digest == load(suite).hidden_digest
    nowhere = load(suite, tmp_path / "no-such-root")
    assert nowhere.hidden_source == "samples"


def test_a_private_folder_serves_a_suite_with_no_samples(
    write: Write, load: Callable[..., LoadedSuite], tmp_path: Path
) -> None:
    write("private/ns/nosamples@1/h.yaml", "id: only-private\n")
    path = write("evals/n.suite.yaml", "suite: ns/nosamples@1\ncases: [{id: pub}]\n")
    loaded = load(path, tmp_path / "private")
    assert [(c.id, c.split) for c in loaded.suite.cases] == [
        ("pub", "public"), ("only-private", "hidden")]
    assert loaded.hidden_source == "private"
    assert load(path).hidden_source is None


def test_hidden_digest_follows_the_hidden_set_and_the_suite_digest_does_not(
    suite: Path, write: Write, load: Callable[..., LoadedSuite]
) -> None:
    before = load(suite)
    write("evals/hidden/one.yaml", ONE.replace("equals: 1", "equals: 2"))
    changed = load(suite)
    assert changed.digest == before.digest
    assert changed.hidden_digest != before.hidden_digest
    write("evals/hidden/extra.yaml", "id: holdout-new\n")
    added = load(suite)
    assert added.digest == before.digest
    assert len({before.hidden_digest, changed.hidden_digest, added.hidden_digest}) == 3
    write("evals/hidden/one.yaml", ONE)
    (suite.parent / "hidden" / "extra.yaml").unlink()
    assert load(suite).hidden_digest == before.hidden_digest


def test_hidden_digest_ignores_which_line_a_case_sits_on(
    suite: Path, write: Write, load: Callable[..., LoadedSuite]
) -> None:
    before = load(suite).hidden_digest
    write("evals/hidden/one.yaml", "\n\n# moved down\n" + ONE)
    assert load(suite).hidden_digest == before


def test_a_public_change_changes_the_suite_digest_not_the_hidden_one(
    suite: Path, write: Write, load: Callable[..., LoadedSuite]
) -> None:
    before = load(suite)
    write("evals/s.suite.yaml", SUITE.replace("input: 1", "input: 2"))
    after = load(suite)
    assert after.digest != before.digest
    assert after.hidden_digest == before.hidden_digest


def test_a_hidden_fixture_is_relative_to_its_hidden_file(
    write: Write, load: Callable[..., LoadedSuite], tmp_path: Path
) -> None:
    write("evals/hidden/fixtures/doc.csv", "a\n1\n")
    write("evals/hidden/h.yaml", "id: h\nfixture: fixtures/doc.csv\n")
    loaded = load(write("evals/s.suite.yaml", "suite: ns/f@1\nhidden: hidden/\n"))
    case = loaded.suite.cases[0]
    assert loaded.fixture_path(case) == (tmp_path / "evals/hidden/fixtures/doc.csv").resolve()


def test_an_empty_hidden_case_file_is_refused(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    empty = write("evals/hidden/empty.yaml", "# nothing here\n")
    err = refused(write("evals/s.suite.yaml", "suite: ns/e@1\nhidden: hidden/\n"))
    assert err.file == str(empty)
    assert err.message == "the hidden case file is empty"


def test_a_hidden_case_reusing_a_public_id_is_refused_without_saying_which(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    hidden = write("evals/hidden/h.yaml", "- id: other\n- id: public-one\n  input: 2\n")
    err = refused(write("evals/s.suite.yaml", SUITE))
    assert err.file == str(hidden)
    assert err.line == line_of(hidden, "id: public-one")
    assert err.message == "duplicate case id (details withheld: hidden case)"


# --- canaries: a hidden case's content never reaches an error message ------------------------

TOKEN = "CANARY_Q9ZX"

CANARIES: list[tuple[str, str, str | None]] = [
    # (id, hidden file text, needle for the line of the fault)
    ("unknown-assertion",
     f"id: h\ninput: 1\nexpect:\n  - {{equals: 1}}\n  - {TOKEN}_check: 1\n", f"{TOKEN}_check"),
    ("typo-assertion", f"id: h\nexpect:\n  - equls: {TOKEN}\n", "equls"),
    ("bad-trials", f"id: h\ntrials: {TOKEN}_many\n", "trials"),
    ("bad-min-rows", f"id: h\nexpect:\n  - {{path: $.rows, min_rows: {TOKEN}}}\n", "min_rows"),
    ("bad-status", f"id: h\nexpect:\n  - status: {TOKEN}\n", "status"),
    ("bad-type", f"id: h\nexpect:\n  - type: {TOKEN}\n", "type"),
    ("bad-regex", f"id: h\nexpect:\n  - regex: '({TOKEN}'\n", "regex"),
    ("bad-schema", f"id: h\nexpect:\n  - schema: {{type: {TOKEN}}}\n", "schema"),
    ("bad-approx", f"id: h\nexpect:\n  - approx: {{value: {TOKEN}}}\n", "approx"),
    ("bad-invocation", f"id: h\ninvocation: {TOKEN}\n", "invocation"),
    ("bad-model-map", f"id: h\nmodel:\n  codex: x\n  {TOKEN}: y\n", f"{TOKEN}: y"),
    ("bad-effort-pin", f"id: h\neffort: [{TOKEN}]\n", "effort"),
    ("bad-path", f"id: h\nexpect:\n  - {{path: '$.{TOKEN}[', equals: 1}}\n", "path"),
    ("status-with-path", f"id: h\nexpect:\n  - {{path: $.{TOKEN}, status: ok}}\n", "status"),
    ("threshold", f"id: h\nexpect:\n  - {{equals: {TOKEN}, threshold: 0.5}}\n", "threshold"),
    ("threshold-range", f"id: h\nexpect:\n  - {{equals: {TOKEN}, threshold: 7}}\n",
     "threshold"),
    ("min-evidence", f"id: h\nexpect:\n  - {{equals: {TOKEN}, min_evidence: unavailable}}\n",
     "min_evidence"),
    ("min-evidence-word", f"id: h\nexpect:\n  - {{equals: 1, min_evidence: {TOKEN}}}\n",
     "min_evidence"),
    ("two-checks", f"id: h\nexpect:\n  - {{{TOKEN}_a: 1, {TOKEN}_b: 2}}\n", f"{TOKEN}_a"),
    ("only-modifiers", f"id: h\nexpect:\n  - {{path: $.{TOKEN}}}\n", "path"),
    ("not-a-mapping", f"id: h\nexpect:\n  - [{TOKEN}]\n", TOKEN),
    ("expect-not-list", f"id: h\nexpect: {TOKEN}\n", "expect"),
    ("unknown-key", f"id: h\n{TOKEN}_key: 1\n", f"{TOKEN}_key"),
    ("case-not-mapping", f"- id: ok\n- {TOKEN}\n", TOKEN),
    ("missing-fixture", f"id: h\nfixture: {TOKEN}.csv\n", "fixture"),
    ("missing-grader", f"id: h\nexpect:\n  - grader: ./{TOKEN}.py\n", "grader"),
    ("grader-import", f"id: h\nexpect:\n  - grader: {TOKEN}_mod:fn\n", "grader"),
    ("missing-id", f"input: {TOKEN}\n", "input"),
    ("yaml-syntax", f"id: h\ninput: [{TOKEN}, 2\nexpect: []\n", None),
    ("yaml-syntax-quote", f"id: h\ninput: \"{TOKEN}\n", None),
    ("yaml-bad-indent", f"id: h\ninput:\n  a: {TOKEN}\n b: 2\n", None),
]


#: What each fault is called once the details are withheld: still says what kind of fault.
SAFE = {
    "unknown-assertion": "unknown assertion",
    "typo-assertion": "unknown assertion",
    "bad-trials": "trials: invalid value",
    "bad-min-rows": "min_rows: invalid argument",
    "bad-status": "status: invalid argument",
    "bad-type": "type: invalid argument",
    "bad-regex": "regex: invalid argument",
    "bad-schema": "schema: invalid argument",
    "bad-approx": "approx: invalid argument",
    "bad-invocation": "invocation: invalid value",
    "bad-model-map": "model: invalid pin",
    "bad-effort-pin": "effort: invalid pin",
    "bad-path": "bad JSONPath",
    "status-with-path": "status takes no path",
    "threshold": "equals: threshold applies to quality checks only",
    "threshold-range": "threshold: invalid value",
    "min-evidence": "equals: min_evidence cannot be unavailable",
    "min-evidence-word": "min_evidence: invalid value",
    "two-checks": "malformed assertion",
    "only-modifiers": "malformed assertion",
    "not-a-mapping": "malformed assertion",
    "expect-not-list": "expect is a list of assertions",
    "unknown-key": "unknown key",
    "case-not-mapping": "a case is a mapping with id, input and expect",
    "missing-fixture": "fixture path does not exist",
    "missing-grader": "grader: invalid argument",
    "grader-import": "grader: invalid argument",
    "missing-id": "missing required key 'id'",
}


@pytest.mark.parametrize(("name", "text", "needle"), CANARIES, ids=[c[0] for c in CANARIES])
def test_an_error_in_a_hidden_case_never_quotes_it(
    write: Write,
    refused: Callable[..., SuiteError],
    line_of: Callable[..., int],
    name: str,
    text: str,
    needle: str | None,
) -> None:
    hidden = write("evals/hidden/h.yaml", text)
    err = refused(write("evals/s.suite.yaml", "suite: ns/c@1\nhidden: hidden/\n"))
    assert TOKEN not in str(err)
    assert TOKEN not in err.message
    assert TOKEN not in repr(err.args)
    assert err.file == str(hidden)
    assert err.line is not None
    assert str(err).startswith(f"{hidden}:{err.line}: ")
    if needle is not None:
        assert err.line == line_of(hidden, needle)
    if name.startswith("yaml-"):
        assert err.message == "not valid YAML"
    else:
        assert err.message == f"{SAFE[name]} (details withheld: hidden case)"
    assert err.__cause__ is None
    assert err.__context__ is None or err.__suppress_context__


def test_a_canary_error_in_a_private_hidden_folder_is_withheld_too(
    write: Write, refused: Callable[..., SuiteError], tmp_path: Path, line_of: Callable[..., int]
) -> None:
    hidden = write("private/ns/c@1/x.yaml", f"- id: fine\n- id: bad\n  expect:\n"
                                            f"    - {TOKEN}: 1\n")
    path = write("evals/s.suite.yaml", "suite: ns/c@1\ncases: [{id: pub}]\n")
    err = refused(path, tmp_path / "private")
    assert TOKEN not in str(err)
    assert (err.file, err.line) == (str(hidden), line_of(hidden, TOKEN))
    assert err.message == "unknown assertion (details withheld: hidden case)"


def test_a_duplicate_canary_id_across_hidden_files_is_withheld(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    write("evals/hidden/a.yaml", f"id: {TOKEN}_dup\ninput: 1\n")
    second = write("evals/hidden/b.yaml", f"input: 2\nid: {TOKEN}_dup\n")
    err = refused(write("evals/s.suite.yaml", "suite: ns/c@1\nhidden: hidden/\n"))
    assert TOKEN not in str(err)
    assert err.file == str(second)
    assert err.line == 1  # the case mapping starts on the first line of b.yaml
    assert err.message == "duplicate case id (details withheld: hidden case)"


def test_a_duplicate_canary_id_within_one_hidden_file_is_withheld(
    write: Write, refused: Callable[..., SuiteError], line_of: Callable[..., int]
) -> None:
    hidden = write("evals/hidden/a.yaml", f"- id: {TOKEN}\n- id: x\n- id: {TOKEN}\n")
    err = refused(write("evals/s.suite.yaml", "suite: ns/c@1\nhidden: hidden/\n"))
    assert TOKEN not in str(err)
    assert (err.file, err.line) == (str(hidden), 3)


def test_a_broken_tool_fixture_of_a_hidden_case_is_withheld(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    # Not under hidden/: every *.yaml there is read as a case (SPEC §2).
    write("evals/secret_tools/tools.yaml", f"""
        tools:
          - name: {TOKEN}_tool
            result: {{secret: {TOKEN}}}
            handler: {TOKEN}_mod:fn
    """)
    write("evals/hidden/h.yaml", "id: h\nfixture: ../secret_tools/tools.yaml\n")
    err = refused(write("evals/s.suite.yaml", "suite: ns/c@1\nhidden: hidden/\n"))
    assert TOKEN not in str(err)
    assert err.file is not None and err.file.endswith("tools.yaml")
    assert err.line == 2
    assert "withheld" in err.message


def test_an_unimportable_handler_of_a_hidden_fixture_is_withheld(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    write("evals/secret_tools/tools.yaml", f"tools:\n  - name: t\n    handler: {TOKEN}_mod:fn\n")
    write("evals/hidden/h.yaml", "id: h\nfixture: ../secret_tools/tools.yaml\n")
    err = refused(write("evals/s.suite.yaml", "suite: ns/c@1\nhidden: hidden/\n"))
    assert TOKEN not in str(err)
    assert err.line == 3
    assert err.message == "handler cannot be imported (details withheld: hidden case)"


def test_the_same_faults_in_a_public_suite_do_say_what_is_wrong(
    write: Write, refused: Callable[..., SuiteError]
) -> None:
    # Contrast: secrecy is for hidden cases only; public errors quote the fault.
    err = refused(write("pub.suite.yaml",
                        f"suite: ns/c@1\ncases:\n  - id: a\n    expect:\n      - {TOKEN}: 1\n"))
    assert err.message == f"unknown assertion '{TOKEN}'"


def test_the_private_folder_looked_for_is_returned_when_missing(
    suite: Path, write: Write, load: Callable[..., LoadedSuite], tmp_path: Path
) -> None:
    write("private/demo/secret.cases@1/p.yaml", "id: old-version\n")
    fallen = load(suite, tmp_path / "private")
    assert fallen.hidden_source == "samples"
    assert fallen.hidden_missing == tmp_path / "private" / "demo" / "secret.cases@2"
    assert load(suite).hidden_missing is None  # no --hidden-dir: nothing was looked for
    write("private/demo/secret.cases@2/p.yaml", "id: current\n")
    assert load(suite, tmp_path / "private").hidden_missing is None
    bare = write("evals/n.suite.yaml", "suite: ns/nosamples@1\ncases: [{id: pub}]\n")
    none_at_all = load(bare, tmp_path / "private")
    assert none_at_all.hidden_source is None
    assert none_at_all.hidden_missing == tmp_path / "private" / "ns" / "nosamples@1"
