"""Outcomes end to end (SPEC §14): ``assay run`` on suites with a workspace, as a user runs it.

Real agents (Python functions written to a real folder), real commands
(a real ``python -m pytest`` in the final workspace), the real report.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "outcomes"


def _workspaces(root: Path) -> list[Path]:
    return sorted(root.iterdir()) if root.is_dir() else []


@pytest.fixture
def shop(project, tmp_path):
    """The shipped example, copied into the project, with its own workspaces folder."""
    shutil.copytree(EXAMPLE, project.root / "outcomes",
                    ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    return tmp_path / "staged"


def _verdicts(report: dict, case: int = 0, trial: int = 0) -> dict[str, dict]:
    return {v["assertion"]: v for v in report["cases"][case]["trials"][trial]["verdicts"]}


def test_the_example_tells_the_agent_that_fixes_the_code_from_the_one_that_edits_the_test(
        project, shop):
    env = {**os.environ, "ASSAY_WORKSPACES": str(shop)}
    good = project.assay("run", "outcomes", "--no-store", "--json", "good.json", env=env)
    assert good.code == 0, good.out + good.err
    report = json.loads((project.root / "good.json").read_text())
    verdicts = _verdicts(report)
    assert {k: v["outcome"] for k, v in verdicts.items()} == {
        "files": "pass", "file shop/total.py": "pass",
        "command python -m pytest -q -p no:cacheprovider tests": "pass",
        "contains": "pass"}
    assert all(v["evidence"] == "observed" for v in verdicts.values())

    bad = project.assay("run", "outcomes", "--no-store", "--json", "bad.json",
                        "--target", "python:shop_agents:edit_test", env=env)
    assert bad.code == 1, bad.out + bad.err
    report = json.loads((project.root / "bad.json").read_text())
    verdicts = _verdicts(report)
    # Its test run is green and its answer reads as well: only what it changed tells.
    assert verdicts["command python -m pytest -q -p no:cacheprovider tests"]["outcome"] == "pass"
    assert verdicts["contains"]["outcome"] == "pass"
    assert verdicts["files"]["outcome"] == "fail"
    assert "tests/test_total.py" in verdicts["files"]["note"]
    assert verdicts["file shop/total.py"]["outcome"] == "fail"
    # The suite's own folder was never written, and no workspace is left behind.
    original = (project.root / "outcomes" / "repo" / "tests" / "test_total.py").read_text()
    assert "== 45.0" in original
    assert not (project.root / "outcomes" / "repo" / "shop" / "__pycache__").exists()
    assert _workspaces(shop) == []


def test_a_failing_command_fails_and_one_that_cannot_run_is_inconclusive(project, tmp_path):
    project.write("evals/ws/readme.txt", "hello\n")
    project.write("evals/agent.py", """
        def agent(prompt, tools):
            (tools.workspace / "out.txt").write_text("made by the agent\\n")
            return "done"
        """)
    project.write("evals/cmd.suite.yaml", """
        suite: t/cmd@1
        target: python:agent:agent
        workspace: ws
        cases:
          - id: exits-three
            input: x
            expect:
              - command: "cat out.txt; exit 3"
          - id: no-such-program
            input: x
            expect:
              - command: [./no-such-program, --flag]
          - id: too-slow
            input: x
            expect:
              - command: "exec sleep 30"
                timeout_s: 0.5
          - id: stdout-checked
            input: x
            expect:
              - command: "cat out.txt"
                contains: "made by the agent"
                not_contains: "Traceback"
          - id: env-isolated
            input: x
            expect:
              - command: >-
                  test "$HOME" != "$REAL_HOME" && test -z "$OPENAI_API_KEY"
                  && test "$ASSAY_WORKSPACE" = "$PWD"
        """)
    env = {**os.environ, "ASSAY_WORKSPACES": str(tmp_path / "staged"),
           "OPENAI_API_KEY": "sk-canary-never-passed", "REAL_HOME": os.environ.get("HOME", "/")}
    done = project.assay("run", "--no-store", "--json", "r.json", env=env)
    assert "Traceback" not in done.err
    report = json.loads((project.root / "r.json").read_text())
    by_case = {c["id"]: c for c in report["cases"]}
    exits = by_case["exits-three"]["trials"][0]["verdicts"][0]
    assert exits["outcome"] == "fail"
    assert "exited 3, expected 0" in exits["note"] and "made by the agent" in exits["note"]
    missing = by_case["no-such-program"]["trials"][0]["verdicts"][0]
    assert missing["outcome"] == "inconclusive" and "could not start" in missing["note"]
    slow = by_case["too-slow"]["trials"][0]["verdicts"][0]
    assert slow["outcome"] == "inconclusive" and "ran out of time after 0.5s" in slow["note"]
    assert by_case["stdout-checked"]["outcome"] == "pass"
    assert by_case["env-isolated"]["outcome"] == "pass", by_case["env-isolated"]
    assert _workspaces(tmp_path / "staged") == []


def test_files_rules_and_file_checks_on_what_the_agent_left(project, tmp_path):
    project.write("evals/ws/config.json", '{"mode": "safe", "retries": 1}\n')
    project.write("evals/ws/docs/old.md", "old\n")
    project.write("evals/ws/keep/a.txt", "a\n")
    project.write("evals/agent.py", """
        import json, os
        def agent(prompt, tools):
            ws = tools.workspace
            (ws / "config.json").write_text(json.dumps({"mode": "fast", "retries": 3}))
            (ws / "docs" / "old.md").unlink()
            (ws / "docs" / "new.md").write_text("new\\n")
            (ws / "blob.bin").write_bytes(bytes(range(256)))
            os.symlink("/etc/hostname", ws / "escape")
            return "ok"
        """)
    project.write("evals/files.suite.yaml", """
        suite: t/files@1
        target: python:agent:agent
        workspace: ws
        cases:
          - id: all-hold
            input: x
            expect:
              - files:
                  exists: ["docs/*.md", "config.json"]
                  absent: ["docs/old.md", "*.tmp"]
                  created: ["docs/new.md", "blob.bin"]
                  deleted: ["docs/old.md"]
                  changed: ["config.json"]
                  unchanged: ["keep/**"]
                  only_changed: ["config.json", "docs/**", "blob.bin", "escape"]
              - file: config.json
                path: $.retries
                equals: 3
              - file: config.json
                schema: {type: object, required: [mode]}
                contains: '"fast"'
              - file: docs/new.md
                equals: "new\\n"
          - id: each-fails
            input: x
            expect:
              - files: {only_changed: ["docs/**"]}
              - files: {unchanged: ["config.json"]}
              - files: {absent: ["blob.bin"]}
              - file: docs/old.md
                contains: old
              - file: escape
                contains: x
              - file: config.json
                path: $.mode
                equals: safe
        """)
    done = project.assay("run", "--no-store", "--json", "r.json",
                         env={**os.environ, "ASSAY_WORKSPACES": str(tmp_path / "staged")})
    report = json.loads((project.root / "r.json").read_text())
    by_case = {c["id"]: c for c in report["cases"]}
    holds = by_case["all-hold"]["trials"][0]["verdicts"]
    assert [v["outcome"] for v in holds] == ["pass"] * 4, holds
    fails = by_case["each-fails"]["trials"][0]["verdicts"]
    assert [v["outcome"] for v in fails] == ["fail"] * 6, fails
    notes = [v["note"] for v in fails]
    assert "changed outside docs/**: blob.bin, config.json, escape" in notes[0]
    assert "config.json" in notes[1] and "blob.bin" in notes[2]
    assert "no file docs/old.md" in notes[3]
    assert "points out of the workspace" in notes[4]
    assert '"fast"' in notes[5] or "fast" in notes[5]
    assert done.code == 1


def test_keep_workspaces_keeps_public_trials_and_never_a_hidden_one(project, tmp_path):
    project.write("evals/ws/seed.txt", "seed\n")
    project.write("evals/agent.py", """
        def agent(prompt, tools):
            (tools.workspace / "answer.txt").write_text(prompt)
            return "ok"
        """)
    project.write("evals/keep.suite.yaml", """
        suite: t/keep@1
        target: python:agent:agent
        workspace: ws
        hidden: hidden
        trials: 2
        cases:
          - id: public/one
            input: PUBLIC-ANSWER
            expect: [{files: {created: [answer.txt]}}]
        """)
    project.write("evals/hidden/h.yaml", """
        id: secret-case
        input: HIDDEN-CANARY-7731
        expect: [{files: {created: [answer.txt]}}]
        """)
    kept = tmp_path / "kept"
    done = project.assay("run", "--no-store", "--keep-workspaces", str(kept),
                         env={**os.environ, "ASSAY_WORKSPACES": str(tmp_path / "staged")})
    assert done.code == 0, done.out + done.err
    runs = list(kept.iterdir())
    assert len(runs) == 1
    cases = sorted(p.name for p in runs[0].iterdir())
    assert cases == ["public_one"]
    trials = sorted(p.name for p in (runs[0] / "public_one").iterdir())
    assert trials == ["1", "2"]
    assert (runs[0] / "public_one" / "1" / "answer.txt").read_text() == "PUBLIC-ANSWER"
    for path in kept.rglob("*"):
        if path.is_file():
            assert b"HIDDEN-CANARY-7731" not in path.read_bytes()
    assert _workspaces(tmp_path / "staged") == []


def test_bad_workspace_input_is_a_load_error_with_file_and_line(project):
    project.write("evals/ws/tests/test_a.py", "def test(): pass\n")
    bad = {
        "missing": ("workspace: nowhere", "workspace 'nowhere' does not exist"),
        "a-file": ("workspace: ws/tests/test_a.py", "is not a folder"),
        "typo-glob": ("workspace: ws\n    expect: [{files: {unchanged: [\"test/**\"]}}]",
                      "matches nothing in the workspace"),
        "absolute": ("workspace: ws\n    expect: [{file: /etc/passwd, contains: root}]",
                     "is absolute"),
        "escapes": ("workspace: ws\n    expect: [{file: ../secret.txt, contains: x}]",
                    "climbs out of the workspace"),
        "no-workspace": ("expect: [{command: pytest}]", "has none: give it"),
        "unknown-rule": ("workspace: ws\n    expect: [{files: {touched: [a]}}]",
                         "unknown key 'touched'"),
        "not-an-output-check": ("workspace: ws\n    expect: [{file: a.txt, settles: true}]",
                                "'settles' is not an output check"),
    }
    for name, (body, said) in bad.items():
        path = project.write(f"bad/{name}/s.suite.yaml", f"""\
suite: t/bad@1
target: python:agent:agent
cases:
  - id: c
    input: x
    {body}
""")
        (path.parent / "ws").symlink_to(project.root / "evals" / "ws")
        done = project.assay("run", "--no-store", f"bad/{name}")
        assert done.code == 2, (name, done.out, done.err)
        assert said in done.err, (name, done.err)
        assert f"bad/{name}/s.suite.yaml:" in done.err and "Traceback" not in done.err, name


def test_targets_that_cannot_give_a_workspace_refuse_the_suite_naming_the_case(project):
    project.write("evals/ws/a.txt", "a\n")
    project.write("evals/w.suite.yaml", """
        suite: t/w@1
        cases:
          - id: plain
            input: x
          - id: with-folder
            input: x
            workspace: ws
            expect: [{files: {unchanged: [a.txt]}}]
        """)
    for uri in ("http://127.0.0.1:9/agent", "mcp+http://127.0.0.1:9/mcp",
                "scripted:none.jsonl", "openai:gpt-x"):
        done = project.assay("run", "--no-store", "--target", uri)
        assert done.code == 2, (uri, done.out, done.err)
        assert "case 'with-folder' has a workspace" in done.err, done.err
        assert "evals/w.suite.yaml:5" in done.err and "Traceback" not in done.err


def test_a_host_given_a_folder_as_fixture_is_told_to_use_workspace(project):
    project.write("evals/docs/notes.txt", "hi\n")
    project.write("evals/h.suite.yaml", """
        suite: t/h@1
        target: claude
        cases:
          - id: reads
            input: x
            fixture: docs
        """)
    done = project.assay("run", "--no-store")
    assert done.code == 2
    assert "(did you mean workspace: docs?)" in done.err and "h.suite.yaml:4" in done.err


def test_graders_find_the_final_workspace(project, tmp_path):
    project.write("evals/ws/a.txt", "a\n")
    project.write("evals/agent.py", """
        def agent(prompt, tools):
            (tools.workspace / "result.txt").write_text("42\\n")
            return "ok"
        """)
    project.write("evals/graders.py", """
        from pathlib import Path
        def sees_it(trace):
            text = (Path(trace.workspace.path) / "result.txt").read_text()
            return text == "42\\n"
        """)
    project.write("evals/script_grader.py", """
        import json, os, sys
        from pathlib import Path
        json.load(sys.stdin)
        found = (Path(os.environ["ASSAY_WORKSPACE"]) / "result.txt").read_text()
        print(json.dumps({"outcome": "pass" if found == "42\\n" else "fail", "note": found}))
        """)
    project.write("evals/g.suite.yaml", """
        suite: t/g@1
        target: python:agent:agent
        workspace: ws
        cases:
          - id: graded
            input: x
            expect:
              - grader: graders:sees_it
              - grader: ./script_grader.py
        """)
    done = project.assay("run", "--no-store", "--json", "r.json",
                         env={**os.environ, "ASSAY_WORKSPACES": str(tmp_path / "staged")})
    report = json.loads((project.root / "r.json").read_text())
    verdicts = report["cases"][0]["trials"][0]["verdicts"]
    assert [v["outcome"] for v in verdicts] == ["pass", "pass"], verdicts
    assert done.code == 0
    assert _workspaces(tmp_path / "staged") == []


def test_a_hidden_case_with_a_bad_workspace_is_refused_without_its_content(project):
    project.write("evals/ws/a.txt", "a\n")
    project.write("evals/s.suite.yaml", """
        suite: t/s@1
        target: python:agent:agent
        hidden: hidden
        cases: [{id: c, input: x}]
        """)
    for body in ("workspace: CANARY-folder-9c1",
                 "workspace: ../ws\nexpect: [{files: {unchanged: [CANARY-glob-9c1]}}]",
                 "expect: [{file: CANARY-path-9c1, contains: x}]"):
        project.write("evals/hidden/h.yaml", f"id: CANARY-id-9c1\ninput: CANARY-in\n{body}\n")
        done = project.assay("run", "--no-store")
        assert done.code == 2, done.err
        assert "CANARY" not in done.out + done.err, done.err
        assert "withheld" in done.err and "Traceback" not in done.err


def test_replay_grades_the_outcome_checks_again_from_the_stored_facts(project, shop):
    """The trial's workspace is gone by then: replay reads what the trace kept."""
    env = {**os.environ, "ASSAY_WORKSPACES": str(shop)}
    bad = project.assay("run", "outcomes", "--json", "bad.json",
                        "--target", "python:shop_agents:edit_test", env=env)
    assert bad.code == 1, bad.err
    run_id = json.loads((project.root / "bad.json").read_text())["run_id"]
    assert _workspaces(shop) == []
    replayed = project.assay("replay", run_id, "--json", env=env)
    assert replayed.code == 0, replayed.out + replayed.err
    shown = project.assay("show", run_id)
    assert "changed, but expected unchanged: tests/test_total.py" in shown.out
    assert "modified tests/test_total.py" in shown.out


NOTES_SERVER = """
import os
from pathlib import Path
from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")


@server.tool()
def write_note(text: str) -> dict:
    '''Write a note in the folder the server runs in.'''
    Path("note.txt").write_text(text)
    return {"cwd_is_workspace": os.getcwd() == os.environ.get("ASSAY_WORKSPACE"),
            "pid": os.getpid()}


if __name__ == "__main__":
    server.run("stdio")
"""


def test_an_mcp_stdio_server_is_started_in_each_trials_workspace(project, tmp_path):
    import sys

    project.write("evals/notes_server.py", NOTES_SERVER)
    project.write("evals/ws/readme.txt", "a folder for notes\n")
    project.write("evals/n.suite.yaml", f"""
        suite: t/notes@1
        target: "mcp+stdio:{sys.executable} notes_server.py"
        call: {{tool: write_note}}
        workspace: ws
        trials: 2
        cases:
          - id: writes
            input: {{text: hello}}
            expect:
              - {{path: $.cwd_is_workspace, equals: true}}
              - files: {{created: [note.txt], unchanged: [readme.txt]}}
              - file: note.txt
                equals: hello
        """)
    done = project.assay("run", "--no-store", "--json", "r.json",
                         env={**os.environ, "ASSAY_WORKSPACES": str(tmp_path / "staged")})
    assert done.code == 0, done.out + done.err
    report = json.loads((project.root / "r.json").read_text())
    trials = report["cases"][0]["trials"]
    assert [t["outcome"] for t in trials] == ["pass", "pass"]
    # One server per trial, each in its own copy; the suite's folder has no note.
    assert not (project.root / "evals" / "ws" / "note.txt").exists()
    assert _workspaces(tmp_path / "staged") == []


def test_ctrl_c_leaves_no_workspace_behind(project, tmp_path):
    import subprocess
    import sys

    project.write("evals/ws/a.txt", "a\n")
    project.write("evals/stop_agent.py", """
        import asyncio, os, signal

        calls = 0

        async def agent(prompt, tools):
            global calls
            calls += 1
            (tools.workspace / "mine.txt").write_text(prompt)
            if calls == 3:
                os.kill(os.getpid(), signal.SIGINT)   # the user presses Ctrl-C
                await asyncio.sleep(3600)             # and this trial never finishes
            return prompt
        """)
    rule = "[{files: {created: [mine.txt]}}]"
    project.write("evals/stop.suite.yaml", "suite: t/stop@1\ntarget: python:stop_agent:agent\n"
                  "workspace: ws\ncases:\n" + "".join(
                      f"  - {{id: c{i}, input: c{i}, expect: {rule}}}\n" for i in range(8)))
    staged = tmp_path / "staged"
    done = subprocess.run([sys.executable, "-m", "assay", "run", "--no-store", "--concurrency",
                           "2", "--json", "r.json"], cwd=project.root, capture_output=True,
                          text=True, timeout=60,
                          env={**os.environ, "ASSAY_WORKSPACES": str(staged)})
    assert done.returncode == 1 and "interrupted" in done.stderr, done.stderr
    report = json.loads((project.root / "r.json").read_text())
    assert report["interrupted"] is True
    assert [c["outcome"] for c in report["cases"][:2]] == ["pass", "pass"]
    # The trials in flight and the finished ones: no copy is left, nor the owner's folder.
    left = [copy for owner in _workspaces(staged) for copy in owner.iterdir()]
    assert left == []


def test_a_workspace_over_one_gibibyte_is_refused_at_load(project):
    big = project.root / "evals" / "huge"
    big.mkdir(parents=True)
    with open(big / "disk.img", "wb") as sparse:  # 1.1 GiB that take no room on the disk
        sparse.truncate(int(1.1 * (1 << 30)))
    project.write("evals/h.suite.yaml", """
        suite: t/huge@1
        target: python:agent:agent
        cases:
          - id: c
            input: x
            workspace: huge
        """)
    done = project.assay("run", "--no-store")
    assert done.code == 2 and "holds more than 1 GiB" in done.err, done.err
    assert "h.suite.yaml:6" in done.err and "Traceback" not in done.err
