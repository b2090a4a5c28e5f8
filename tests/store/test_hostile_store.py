"""Hostile output is stored, read back and sealed intact, on SQLite and on PostgreSQL.

An agent's reasons, notes and traces may hold NUL and other control
characters, lone surrogates, a megabyte or 2,000 levels of nesting. The run
is recorded, `assay show --json` gives back the very report the run wrote,
replay re-grades every stored trace to the same verdicts, and the ledger
verifies.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from ..fuzz_corpus import NAME, assert_inert, python_source

AGENT = python_source() + '''
def agent(input, tools):
    if input == "raise":
        raise ValueError(HOSTILE)
    if input == "deep":
        tools.call("deep " + HOSTILE, nested(2000))
        return nested(2000, HOSTILE)
    if input == "big":
        return {"out": MEGABYTE, "nul": "a\\x00b"}
    return {"out": HOSTILE}
'''

SUITE = f"""
suite: store/hostile@1
target: python:hostile_store_agent:agent
cases:
  - {{id: raise, input: raise, expect: [status: ok]}}
  - {{id: deep, input: deep, expect: [{{path: $.a.a, type: object}}, never_calls: ["deep*"]]}}
  - {{id: big, input: big, expect: [{{path: $.nul, equals: "a\\x00c"}}]}}
  - id: {json.dumps("echo " + NAME)}
    input: echo
    expect: [{{path: $.out, equals: nope}}]
"""


def assay(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "assay", *args], capture_output=True,
                          text=True, cwd=root, timeout=300, stdin=subprocess.DEVNULL)


def test_hostile_runs_are_stored_shown_replayed_and_sealed(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "hostile_store_agent.py").write_text(AGENT)
    (tmp_path / "evals" / "hostile.suite.yaml").write_text(textwrap.dedent(SUITE))
    done = assay(tmp_path, "run", "--db", db_url, "--json", "r.json")
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    written = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert [c["outcome"] for c in written["cases"]] == ["broken", "fail", "fail", "fail"]
    # The agent's text, exactly, except a NUL, which no PostgreSQL text holds.
    assert "a\u2400b" in written["cases"][0]["reason"]
    assert "\x1b[31m" in written["cases"][0]["reason"]

    shown = assay(tmp_path, "show", written["run_id"], "--db", db_url, "--json")
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert_inert(shown.stdout, "show --json")
    assert json.loads(shown.stdout) == written
    replayed = assay(tmp_path, "replay", written["run_id"], "--db", db_url)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr[-3000:]
    assert "all match" in replayed.stdout
    verified = assay(tmp_path, "ledger", "verify", "--db", db_url)
    assert verified.returncode == 0, verified.stdout + verified.stderr
