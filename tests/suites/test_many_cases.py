"""Cases built all at once are the cases built one by one, and so are the errors."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.errors import SuiteError
from assay.model import Case
from assay.suites.build import Problem, make_case, make_cases
from assay.suites.marks import load_marked

# Assertions as a suite writes them: most valid, some wrong in each way the loader refuses.
assertions = st.sampled_from([
    "settles",
    {"equals": "x"},
    {"equals": 3, "path": "$.a"},
    {"contains": "y", "min_evidence": "inferred"},
    {"equals": {"k": [1, 2]}, "path": "$.rows[1]"},
    {"status": "ok"},
    {"regex": "^a+$"},
    {"equals": 1, "threshold": 0.5},          # threshold on a binary check
    {"equalz": 1},                            # unknown check, with a suggestion
    {"judge": "fair"},                        # planned, not available
    {"equals": 1, "contains": 2},             # two names
    {"path": "$.a"},                          # modifiers only
    {"equals": 1, "path": "$.["},             # bad JSONPath
    {"equals": 1, "min_evidence": "seen"},    # not an evidence level
    {"equals": 1, "min_evidence": "unavailable"},
    {"status": "fine"},                       # bad argument
    7,                                        # not a mapping
])
extras = st.sampled_from([
    {}, {}, {},
    {"tags": ["a", "b"]}, {"trials": 2}, {"timeout_s": 1.5}, {"synthetic": True},
    {"model": "m", "effort": "low"}, {"invocation": "explicit"},
    {"trials": 0}, {"tags": "one"}, {"unknown": 1}, {"split": "hidden"}, {"split": "public"},
    {"invocation": "sometimes"}, {"fixture": "missing.yaml"},
])
cases = st.builds(
    lambda n, extra, expect, shape: (
        7 if shape == "scalar" else
        {"id": f"c{n}", "input": f"in-{n}", **extra,
         **({} if shape == "no-expect" else
            {"expect": None} if shape == "null-expect" else
            {"expect": "eq"} if shape == "bad-expect" else {"expect": expect})}),
    st.integers(0, 3), extras, st.lists(assertions, max_size=3),
    st.sampled_from(["normal"] * 8 + ["scalar", "no-expect", "null-expect", "bad-expect"]),
)


def _outcome(build: Any) -> Any:
    try:
        built: list[Case] = build()
    except SuiteError as error:
        return ("error", str(error), error.line)
    return [(c.model_dump(mode="json"), c.line, c.file, c.model_fields_set,
             [(a.model_dump(mode="json"), a.line, a.file, a.model_fields_set) for a in c.expect])
            for c in built]


@settings(max_examples=150, deadline=None)
@given(st.lists(cases, max_size=5), st.booleans())
def test_all_at_once_is_one_by_one(tmp_path_factory: Any, items: list[Any], secret: bool) -> None:
    folder: Path = tmp_path_factory.mktemp("many")
    path = folder / "s.suite.yaml"
    path.write_text(yaml.safe_dump({"suite": "demo/many@1", "cases": items}, sort_keys=False))
    marked = load_marked(path)
    raw = marked.data["cases"]
    split = "hidden" if secret else "public"

    def problem() -> Problem:  # a fresh one each: nothing carried between the two builds
        return Problem(str(path), load_marked(path).line, secret=secret,
                       key_line_of=load_marked(path).key_line)

    def one_by_one() -> list[Case]:
        p = problem()
        return [make_case(item, p, ["cases", i], split=split, base_dir=folder)
                for i, item in enumerate(raw)]

    assert _outcome(lambda: make_cases(raw, problem(), ["cases"], split=split,
                                       base_dir=folder)) == _outcome(one_by_one)


def test_the_first_bad_case_is_named_though_a_later_one_is_worse(tmp_path: Path) -> None:
    """A later case that pydantic refuses must not hide an earlier unknown check."""
    path = tmp_path / "s.suite.yaml"
    path.write_text(textwrap.dedent("""\
        suite: demo/many@1
        cases:
          - id: a
            expect: [{equals: 1}]
          - id: b
            expect: [{equalz: 1}]
          - id: c
            trials: 0
        """))
    marked = load_marked(path)
    problem = Problem(str(path), marked.line, secret=False, key_line_of=marked.key_line)
    try:
        make_cases(marked.data["cases"], problem, ["cases"], split="public", base_dir=tmp_path)
    except SuiteError as error:
        assert (error.line, "equalz" in str(error)) == (6, True)
    else:
        raise AssertionError("loaded")
