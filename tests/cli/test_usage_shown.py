"""Usage on every surface: seen, partly seen, or "unavailable" — never an invented $0.

Through the real command: the terminal, ``--json``, ``--markdown`` and
``assay show`` of the stored run say the same thing.
"""

from __future__ import annotations

import json

AGENT = """
def agent(input, tools):
    if input != "silent":
        tools.usage(input_tokens=1200, output_tokens=100, cost_usd=0.06)
    return input
"""

SUITE = """
suite: demo/usage@1
target: python:usage_agent:agent
cases:
  - {id: a, input: a, expect: [{equals: a}]}
  - {id: b, input: b, expect: [{equals: b}]}
  - {id: silent, input: silent, expect: [{equals: silent}]}
"""

SILENT_SUITE = """
suite: demo/silent@1
target: python:usage_agent:agent
cases:
  - {id: s1, input: silent, expect: [{equals: silent}]}
  - {id: s2, input: silent, expect: [{equals: silent}]}
"""


def test_a_run_nobody_reported_usage_for_shows_unavailable(project):
    project.write("evals/usage_agent.py", AGENT)
    project.write("evals/silent.suite.yaml", SILENT_SUITE)
    done = project.assay("run", "--json", "r.json", "--markdown", "r.md")
    assert done.code == 0, done.out + done.err
    assert "cost unavailable · tokens unavailable (no trial reported usage)" in done.out
    assert "$0.0000" not in done.out and "0 in / 0 out" not in done.out
    cost = json.loads((project.root / "r.json").read_text())["cost"]
    # SPEC §6's keys stay, as null; beside them, how many trials said nothing, and why.
    assert cost == {"usd": None, "input_tokens": None, "output_tokens": None, "trials": 2,
                    "unreported": {"tokens": 2, "cost": 2},
                    "evidence": {"tokens": "unavailable", "cost": "unavailable"}}
    markdown = (project.root / "r.md").read_text()
    assert "| unavailable | unavailable |" in markdown and "0.0000" not in markdown


def test_a_run_that_partly_reported_usage_gives_a_lower_bound(project):
    project.write("evals/usage_agent.py", AGENT)
    project.write("evals/usage.suite.yaml", SUITE)
    done = project.assay("run", "--json", "r.json", "--markdown", "r.md")
    assert done.code == 0, done.out + done.err
    line = ("cost ≥ $0.1200 (1 of 3 trials unreported, inferred) · tokens ≥ 2,400 in / "
            "200 out (1 of 3 trials unreported, inferred)")
    assert line in done.out
    report = json.loads((project.root / "r.json").read_text())
    cost = report["cost"]
    assert (cost["usd"], cost["input_tokens"], cost["output_tokens"]) == (0.12, 2400, 200)
    assert cost["unreported"] == {"tokens": 1, "cost": 1}
    assert cost["evidence"] == {"tokens": "inferred", "cost": "inferred"}
    usages = {c["id"]: c["trials"][0]["usage"] for c in report["cases"]}
    assert usages["silent"] == {"input_tokens": None, "output_tokens": None, "cost_usd": None}
    assert "≥ $0.1200 (1 of 3 trials unreported, inferred)" in (project.root / "r.md").read_text()
    shown = project.assay("show", report["run_id"])
    assert shown.code == 0, shown.out + shown.err
    assert line in shown.out
