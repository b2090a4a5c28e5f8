"""``exec:`` end to end: ``assay run`` on programs written in a real folder, as a user runs it.

Real programs (a Python script, a shell one-liner, a Node script), the real
command in a subprocess, the real report and store: outcomes from what the
agent left in its workspace, hidden cases whose content the agent prints on
stderr and stdout, provider keys the agent must never see, sixteen trials at
once, and the version ``assay agent publish`` names.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.real

PYTHON = shlex.quote(sys.executable)
CANARY = "CANARY-e1c0"
KEY = "sk-canary-exec-never-passed"

AGENT = """\
import json, os, sys

RATES = {("EUR", "USD"): 1.08, ("USD", "JPY"): 151.2}

given = json.load(sys.stdin)
print("converting", json.dumps(given), file=sys.stderr)     # stderr: kept, never shown
if isinstance(given, str):
    if "crash" in given:
        os.abort()
    if "fail" in given:
        print("cannot handle " + given, file=sys.stderr)
        sys.exit(4)
    print(json.dumps({"echo": given, "key": os.environ.get("OPENAI_API_KEY")}))
    sys.exit(0)
if given["into"] in ("BTC", "ETH"):
    print(json.dumps({"status": "refused", "reason": "I do not convert into crypto"}))
    sys.exit(0)
rate = RATES.get((given["currency"], given["into"]))
if rate is None:
    print(f"no rate from {given['currency']} to {given['into']}", file=sys.stderr)
    sys.exit(2)
print(json.dumps({"amount": round(given["amount"] * rate, 2), "currency": given["into"]}))
"""

SUITE = f"""\
suite: exec/convert@1
target: exec:{PYTHON} agent.py
trials: 2
hidden: hidden/
cases:
  - id: euros-to-dollars
    input: {{amount: 100, currency: EUR, into: USD}}
    expect:
      - status: ok
      - exit_code: 0
      - {{path: $.amount, approx: {{value: 108, tol: 0.01}}}}
  - id: unknown-currency
    input: {{amount: 5, currency: EUR, into: XXX}}
    expect:
      - status: error
      - exit_code: 2
  - id: no-crypto
    input: {{amount: 5, currency: EUR, into: BTC}}
    expect:
      - status: refused
  - id: no-key
    input: hello
    expect:
      - {{path: $.echo, equals: hello}}
      - {{path: $.key, equals: assay-stand-in-key}}   # the real key stays with the proxy
"""

HIDDEN = f"""\
- id: {CANARY}-id-echo
  input: {CANARY}-input-echo
  expect: [{{path: $.echo, equals: {CANARY}-expected}}]
- id: {CANARY}-id-fail
  input: {CANARY}-input-fail
  expect: [{{status: ok}}]
- id: {CANARY}-id-crash
  input: {CANARY}-input-crash
  expect: [{{status: ok}}]
"""


def _report(project: Any, name: str) -> dict[str, Any]:
    return json.loads((project.root / name).read_text())


def _by_case(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {case["id"]: case for case in report["cases"]}


@pytest.fixture
def convert(project: Any) -> Any:
    project.write("evals/agent.py", AGENT)
    project.write("evals/convert.suite.yaml", SUITE)
    project.write("evals/hidden/cases.yaml", HIDDEN)
    return project


def test_a_python_script_as_an_agent_and_nothing_hidden_or_secret_leaks(convert: Any) -> None:
    env = {**os.environ, "OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY}
    done = convert.assay("run", "--json", "r.json", "--junit", "r.xml", "--markdown", "r.md",
                         env=env)
    assert done.code == 1, done.out + done.err  # the hidden cases fail and break
    report = _report(convert, "r.json")
    cases = _by_case(report)
    for name in ("euros-to-dollars", "unknown-currency", "no-crypto", "no-key"):
        assert cases[name]["outcome"] == "pass", cases[name]
    assert report["target"]["uri"] == f"exec:{sys.executable} agent.py"
    assert report["target"]["facets"]["harness"] == "exec"
    assert report["counts"]["hidden"] == {"total": 3, "passed": 0, "failed": 2,
                                          "inconclusive": 0, "broken": 1}
    surfaces = {"stdout": done.out, "stderr": done.err,
                **{name: (convert.root / name).read_text() for name in ("r.json", "r.xml",
                                                                       "r.md")}}
    for where, text in surfaces.items():
        assert CANARY not in text, f"hidden content leaked into {where}"
        assert KEY not in text, f"a provider key leaked into {where}"
        # What the agent says on stderr is its trace's, never assay's output.
        assert "converting" not in text, f"the agent's stderr reached {where}"
    assert "euros-to-dollars" in done.out and "holdout-1" in done.out


def test_the_version_assay_agent_publish_names_is_the_one_a_battery_records(
        convert: Any) -> None:
    uri = f"exec:{PYTHON} agent.py"
    published = convert.assay("agent", "publish", uri, "--dir", "evals")
    assert published.code == 0, published.out + published.err
    version = published.out.strip()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", version)
    done = convert.assay("run", "--json", "r.json", "--case", "euros-to-dollars")
    assert done.code == 0, done.out + done.err
    assert _report(convert, "r.json")["target"]["digest"] == version
    # An edit of the script is another agent.
    with (convert.root / "evals" / "agent.py").open("a") as script:
        script.write("# an edit\n")
    again = convert.assay("agent", "publish", uri, "--dir", "evals")
    assert again.code == 0 and again.out.strip() != version


def test_a_program_that_is_not_there_is_a_harness_failure(project: Any) -> None:
    project.write("evals/none.suite.yaml", """\
        suite: exec/none@1
        target: exec:./no-such-agent --flag
        cases:
          - {id: one, input: x, expect: [{status: ok}]}
        """)
    done = project.assay("run", "--no-store")
    assert done.code == 3, done.out + done.err
    assert "no-such-agent is not an executable file" in done.err
    assert "Traceback" not in done.err


def test_input_in_the_arguments_a_shell_one_liner_and_a_node_script(project: Any) -> None:
    project.write("evals/args.suite.yaml", """\
        suite: exec/args@1
        target: >-
          exec:sh -c 'printf "{\\"said\\": \\"%s\\"}" "$1"' sh {input}
        cases:
          - id: plain
            input: hello there
            expect: [{path: $.said, equals: hello there}]
          - id: shell-words-stay-words
            input: $(echo pwned)
            expect: [{path: $.said, equals: $(echo pwned)}]
        """)
    done = project.assay("run", "--no-store", "--json", "r.json")
    assert done.code == 0, done.out + done.err
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    project.write("evals/node/agent.js", """\
        const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
        console.error("node saw", input.words.length, "words");
        console.log(JSON.stringify({count: input.words.length, first: input.words[0]}));
        """)
    project.write("evals/node/count.suite.yaml", """\
        suite: exec/node@1
        target: exec:node agent.js
        cases:
          - id: counts
            input: {words: [alpha, beta, gamma]}
            expect:
              - {path: $.count, equals: 3}
              - {path: $.first, equals: alpha}
              - exit_code: 0
        """)
    node = project.assay("run", "evals/node", "--no-store", "--json", "n.json")
    assert node.code == 0, node.out + node.err
    assert _by_case(_report(project, "n.json"))["counts"]["outcome"] == "pass"


def test_what_the_agent_leaves_in_its_workspace_is_graded_sixteen_trials_at_once(
        project: Any, tmp_path: Path) -> None:
    project.write("evals/repo/counter.txt", "0\n")
    project.write("evals/repo/notes/keep.md", "keep me\n")
    # Each trial reads the counter, adds one and writes a report: a workspace shared
    # between trials would show a count above 1 somewhere.
    project.write("evals/tally.py", """\
        import json, os, sys
        from pathlib import Path
        task = json.load(sys.stdin)
        here = Path(os.environ["ASSAY_WORKSPACE"])
        assert here == Path.cwd()
        count = int(Path("counter.txt").read_text()) + 1
        Path("counter.txt").write_text(f"{count}\\n")
        Path("out").mkdir()
        Path("out/report.json").write_text(json.dumps({"task": task, "count": count}))
        print(json.dumps({"count": count}))
        """)
    project.write("evals/tally.suite.yaml", f"""\
        suite: exec/tally@1
        target: exec:{PYTHON} tally.py
        workspace: repo
        trials: 16
        cases:
          - id: counts-once
            input: count
            expect:
              - {{path: $.count, equals: 1}}
              - files: {{created: ["out/report.json"], changed: [counter.txt],
                         unchanged: ["notes/**"], only_changed: [counter.txt, "out/**"]}}
              - file: out/report.json
                path: $.count
                equals: 1
              - file: counter.txt
                equals: "1\\n"
        """)
    staged = tmp_path / "staged"
    env = {**os.environ, "ASSAY_WORKSPACES": str(staged)}
    done = project.assay("run", "--no-store", "--json", "r.json", "--concurrency", "16",
                         env=env)
    assert done.code == 0, done.out + done.err
    (case,) = _report(project, "r.json")["cases"]
    assert case["outcome"] == "pass" and len(case["trials"]) == 16
    for trial in case["trials"]:
        assert {v["outcome"] for v in trial["verdicts"]} == {"pass"}, trial
        assert {v["evidence"] for v in trial["verdicts"]} == {"observed"}
    # The suite's folder was never written, and no workspace is left behind.
    assert (project.root / "evals" / "repo" / "counter.txt").read_text() == "0\n"
    assert not (project.root / "evals" / "repo" / "out").exists()
    assert not staged.exists() or list(staged.iterdir()) == []


def test_a_folder_given_as_fixture_is_refused_with_the_spelling_that_works(
        project: Any) -> None:
    project.write("evals/docs/notes.txt", "hi\n")
    project.write("evals/f.suite.yaml", """\
        suite: exec/folder@1
        target: exec:cat notes.txt
        cases:
          - id: reads
            input: x
            fixture: docs
        """)
    done = project.assay("run", "--no-store")
    assert done.code == 2, done.out + done.err
    assert "case 'reads': fixture 'docs': a folder an exec: program works in is given as " \
        "workspace: (did you mean workspace: docs?)" in done.err
    assert "f.suite.yaml:4" in done.err and "Traceback" not in done.err
