"""Exit codes 0, 1, 2, 3 and the bad-file messages, through the real command (SPEC §7)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

AGENT = """
def echo(input):
    return input

def upper(input):
    return input.upper()

def broken(input):
    raise RuntimeError("agent fell over")
"""

SUITE = """
suite: demo/echo@1
target: python:agent_{n}:echo
trials: 3
cases:
  - id: hello
    input: hello
    expect: [{{equals: hello}}, {{type: string}}]
  - id: world
    input: world
    expect: [{{contains: orl}}]
"""


def make(project, n: int = 0, suite: str = SUITE):
    project.write(f"evals/agent_{n}.py", AGENT)
    project.write("evals/echo.suite.yaml", suite.format(n=n))


def test_passing_run_exits_0_and_writes_the_report(project):
    make(project)
    done = project.assay("run", "--json", "out/r.json", "--junit", "out/r.xml",
                         "--markdown", "out/r.md")
    assert done.code == 0, done.err
    assert "PASSED" in done.out
    text = (project.root / "out/r.json").read_text()
    assert text.count("\n") == 1  # one run, one line: the SPEC §6 object
    report = json.loads(text)
    for key in ("schema", "run_id", "suite", "target", "started_at", "finished_at",
                "trials_per_case", "evidence", "scores", "counts", "cost", "cases", "seal"):
        assert key in report
    assert report["schema"] == "assay.report/1"
    assert report["suite"]["id"] == "demo/echo@1"
    assert report["suite"]["digest"].startswith("sha256:")
    assert report["target"]["uri"] == "python:agent_0:echo"
    assert report["evidence"] == "reliability"
    assert report["scores"] == {"public": 1.0, "hidden": None, "overall": 1.0, "synthetic": None,
                                "pass_mark": 1.0, "passed": True, "flags": []}
    assert report["counts"]["public"] == {"total": 2, "passed": 2, "failed": 0,
                                          "inconclusive": 0, "broken": 0}
    hello = report["cases"][0]
    assert hello["id"] == "hello" and hello["outcome"] == "pass"
    assert [t["n"] for t in hello["trials"]] == [1, 2, 3]
    assert hello["pass_at_1"] == 1.0 and hello["pass_hat_k"] == 1.0
    assert hello["trials"][0]["verdicts"][0]["assertion"] == "equals"
    assert hello["trials"][0]["verdicts"][0]["evidence"] == "observed"
    tree = ET.parse(project.root / "out/r.xml")
    assert [c.get("name") for c in tree.iter("testcase")] == ["hello", "world"]
    assert not list(tree.iter("failure"))
    assert "| hello | public | pass |" in (project.root / "out/r.md").read_text()


def test_failing_run_exits_1_and_says_why(project):
    make(project)
    done = project.assay("run", "--target", "python:agent_0:upper", "--json", "r.json")
    assert done.code == 1
    assert "NOT PASSED" in done.out
    assert "got \"HELLO\", expected \"hello\"" in done.out or "equals failed" in done.out
    report = json.loads((project.root / "r.json").read_text())
    assert report["scores"]["passed"] is False
    assert report["counts"]["public"]["failed"] == 2


def test_broken_agent_exits_1_with_the_reason(project):
    make(project)
    done = project.assay("run", "--target", "python:agent_0:broken", "--json", "r.json")
    assert done.code == 1
    report = json.loads((project.root / "r.json").read_text())
    assert report["counts"]["public"]["broken"] == 2
    trial = report["cases"][0]["trials"][0]
    assert trial["outcome"] == "broken"
    assert "RuntimeError: agent fell over" in trial["reason"]
    assert "Traceback" not in done.err


def test_smoke_evidence_under_three_trials(project):
    make(project)
    done = project.assay("run", "--trials", "2", "--json", "r.json")
    assert done.code == 0
    assert json.loads((project.root / "r.json").read_text())["evidence"] == "smoke"


def test_unknown_assertion_exits_2_with_file_line_and_hint(project):
    make(project, suite=SUITE.replace("{{contains: orl}}", "{{equls: world}}"))
    done = project.assay("run")
    assert done.code == 2
    assert "evals/echo.suite.yaml:10: unknown assertion 'equls' (did you mean 'equals'?)" \
        in done.err
    assert "Traceback" not in done.err and done.out == ""


def test_duplicate_case_id_exits_2(project):
    make(project, suite=SUITE.replace("id: world", "id: hello"))
    done = project.assay("run")
    assert done.code == 2
    assert "evals/echo.suite.yaml:8: duplicate case id 'hello'" in done.err


def test_malformed_suite_id_exits_2(project):
    make(project, suite=SUITE.replace("demo/echo@1", "Demo Echo"))
    done = project.assay("list")
    assert done.code == 2
    assert "evals/echo.suite.yaml:1:" in done.err and "namespace/name@major" in done.err


def test_missing_fixture_path_exits_2(project):
    make(project, suite=SUITE.replace("    input: world\n", "    input: world\n"
                                      "    fixture: nowhere/tools.yaml\n"))
    done = project.assay("run")
    assert done.code == 2
    assert "evals/echo.suite.yaml:10: fixture 'nowhere/tools.yaml' does not exist" in done.err


def test_wrong_value_type_exits_2(project):
    make(project, suite=SUITE.replace("trials: 3", "trials: many"))
    done = project.assay("run")
    assert done.code == 2
    assert "evals/echo.suite.yaml:3: trials:" in done.err


def test_yaml_syntax_error_exits_2(project):
    make(project, suite=SUITE + "  - id: [unclosed\n")
    done = project.assay("run")
    assert done.code == 2
    assert "evals/echo.suite.yaml:" in done.err and "not valid YAML" in done.err
    assert "Traceback" not in done.err


def test_bad_usage_exits_2(project):
    make(project)
    assert project.assay("run", "--trials", "0").code == 2
    missing = project.assay("run", "no/such/folder")
    assert missing.code == 2 and "no/such/folder: no such file or folder" in missing.err
    nothing = project.assay("run", "--suite", "demo/other@1")
    assert nothing.code == 2 and "no suite demo/other@1" in nothing.err
    scheme = project.assay("run", "--target", "gopher://x")
    assert scheme.code == 2 and "unknown scheme" in scheme.err


def test_target_that_cannot_start_exits_3(project):
    make(project)
    done = project.assay("run", "--target", "python:no_such_module:fn")
    assert done.code == 3
    assert "harness failure" in done.err and "no_such_module" in done.err
    refused = project.assay("run", "--target", "http://127.0.0.1:9/agent")
    assert refused.code == 3 and "cannot connect to 127.0.0.1:9" in refused.err


def test_several_targets_give_one_run_each_side_by_side(project):
    make(project)
    done = project.assay("run", "--target", "python:agent_0:echo",
                         "--target", "python:agent_0:upper", "--json", "r.json")
    assert done.code == 1
    assert "python:agent_0:echo" in done.out and "python:agent_0:upper" in done.out
    # One shape for one run or several: each line is a SPEC §6 report.
    lines = (project.root / "r.json").read_text(encoding="utf-8").splitlines()
    runs = [json.loads(line) for line in lines]
    assert [r["schema"] for r in runs] == ["assay.report/1", "assay.report/1"]
    assert [r["target"]["uri"] for r in runs] == ["python:agent_0:echo", "python:agent_0:upper"]
    assert [r["scores"]["passed"] for r in runs] == [True, False]
    assert runs[0]["run_id"] != runs[1]["run_id"]


def test_a_report_stays_on_its_line_whatever_it_holds(project):
    # U+2028, U+2029 and NEL are legal raw in JSON strings, but splitlines()
    # breaks at them: escaped, each line is still one whole report.
    make(project)
    project.write("evals/echo.suite.yaml", r"""
        suite: demo/echo@1
        target: python:agent_0:echo
        cases:
          - {id: hello, input: hello, tags: ["a\Lb\Pc\Nd"], expect: [{equals: hello}]}
        """)
    done = project.assay("run", "--target", "python:agent_0:echo", "--target",
                         "python:agent_0:echo", "--json", "r.json")
    assert done.code == 0, done.err
    lines = (project.root / "r.json").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    for line in lines:
        assert json.loads(line)["cases"][0]["tags"] == ["a\u2028b\u2029c\x85d"]


def test_list_shows_public_cases_and_counts_hidden(project):
    make(project)
    project.write("evals/hidden/one.yaml", "id: secret-one\ninput: x\nexpect: [{equals: x}]\n")
    suite = (project.root / "evals/echo.suite.yaml").read_text() + "hidden: hidden/\n"
    project.write("evals/echo.suite.yaml", suite)
    done = project.assay("list")
    assert done.code == 0
    assert "demo/echo@1" in done.out and "hello" in done.out and "world" in done.out
    assert "1 hidden" in done.out and "secret-one" not in done.out


def test_help_is_fast_to_import():
    import subprocess
    import sys

    code = ("import sys, assay.cli; heavy = [m for m in ('pydantic', 'rich', 'httpx', 'yaml',"
            " 'jsonschema') if m in sys.modules]; print(heavy)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "[]"
