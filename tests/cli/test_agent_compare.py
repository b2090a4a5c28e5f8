"""Two versions of a named agent compared end to end (SPEC §8): `assay agent publish URI
--name NAME`, real batteries, then `assay compare --agent NAME A B` — each side the
version's newest sealed battery, nothing new stored, hidden cases only as holdout-N."""

from __future__ import annotations

import json
import sqlite3

CANARY = "CANARY-AGENTS-51c0"

AGENT = """
def agent(input, tools):
    tools.usage(input_tokens=100, output_tokens=10, cost_usd=COST)
    text = str(input)
    if "hello" in text:
        return "HELLO" if GOOD else "hello"
    return text.upper()
"""

SUITE = """
suite: shop/agents@1
target: python:shop:agent
hidden: hidden/
cases:
  - id: greets
    input: hello
    expect: [{equals: HELLO}]
  - id: shouts
    input: quiet
    expect: [{equals: QUIET}]
"""

OTHER = """
suite: shop/other@1
target: python:shop:agent
cases:
  - id: shouts
    input: loud
    expect: [{equals: LOUD}]
"""

HIDDEN = f"""
- id: {CANARY}-case
  input: {CANARY}-input
  expect: [{{equals: {CANARY}-INPUT}}]
"""


def _agent(project, *, good: bool, cost: float) -> None:
    project.write("evals/shop.py", AGENT.replace("GOOD", str(good)).replace("COST", str(cost)))


def _publish(project, name: str = "shop") -> str:
    done = project.assay("agent", "publish", "python:shop:agent", "--dir", "evals",
                         "--name", name)
    assert done.code == 0, done.err
    assert f"as agent {name}" in done.err
    return done.out.strip()


def _battery(project, *more: str) -> str:
    done = project.assay("run", "evals", "--json", "r.json", *more)
    assert done.code in (0, 1), done.out + done.err
    # One report per line, one per suite: the first suite's (shop/agents@1) is first.
    report: dict = json.loads((project.root / "r.json").read_text().splitlines()[0])
    return str(report["run_id"])


def _stocked(project) -> tuple[str, str, str, str]:
    project.write("evals/shop.suite.yaml", SUITE)
    project.write("evals/hidden/cases.yaml", HIDDEN)
    _agent(project, good=True, cost=0.01)
    first = _publish(project)
    _battery(project)
    base = _battery(project)  # the newest battery of the first version
    _agent(project, good=False, cost=0.03)
    second = _publish(project)
    cand = _battery(project)
    return first, second, base, cand


def _count_rows(project) -> tuple[int, int]:
    with sqlite3.connect(project.root / ".assay" / "assay.db") as db:
        return (db.execute("select count(*) from runs").fetchone()[0],
                db.execute('select count(*) from ledger').fetchone()[0])


def test_compare_by_agent_takes_each_versions_newest_battery(project):
    first, second, base, cand = _stocked(project)
    assert first != second
    before = _count_rows(project)
    done = project.assay("compare", "--agent", "shop", "previous", "current", "--json", "-")
    assert done.code == 1, done.out + done.err  # greets regressed
    data = json.loads(done.out)
    assert data["schema"] == "assay.compare/1" and data["verdict"] == "worse"
    assert (data["base"]["run_id"], data["cand"]["run_id"]) == (base, cand)
    assert data["agent"] == {"name": "shop",
                             "base": {"asked": "previous", "version": first},
                             "cand": {"asked": "current", "version": second}}
    rows = {row["case"]: row["change"] for row in data["rows"]}
    assert rows == {"greets": "regressed", "shouts": "same", "holdout-1": "same"}
    # With cost in it: three times dearer per trial.
    assert data["totals"]["base"]["cost_usd"] < data["totals"]["cand"]["cost_usd"]
    assert CANARY not in done.out + done.err
    assert _count_rows(project) == before  # nothing new stored

    # A digest prefix names the same version; the terminal says which versions ran.
    shown = project.assay("compare", "--agent", "shop", first[7:19], second)
    assert shown.code == 1
    assert f"agent shop: {first[:19]}… ({first[7:19]}) → {second[:19]}…" in shown.out
    assert "WORSE" in shown.out and CANARY not in shown.out

    # The ledger's publish entries carry the name.
    with sqlite3.connect(project.root / ".assay" / "assay.db") as db:
        contents = [json.loads(c) for (c,) in db.execute(
            "select b.content from ledger l join blobs b on b.digest = l.content_digest "
            "where l.kind = 'agent' order by l.\"index\"")]
    assert [(c["action"], c["version"], c.get("name")) for c in contents] == [
        ("publish", first, "shop"), ("publish", second, "shop")]
    listed = project.assay("agent", "list", "--json")
    assert [v["names"] for v in json.loads(listed.out)["versions"]] == [["shop"], ["shop"]]


def test_a_side_with_no_battery_and_bad_versions_are_named(project):
    first, second, _, _ = _stocked(project)
    _agent(project, good=True, cost=0.02)
    third = _publish(project)
    done = project.assay("compare", "--agent", "shop", "previous", "current")
    assert done.code == 2
    assert f"version B of agent shop ({third}) has no sealed, whole battery" in done.err
    assert "Traceback" not in done.err

    for ref, said in (("ffff", "no version of agent shop starts with sha256:ffff"),
                      ("latest", "'latest' is not a version of agent shop")):
        bad = project.assay("compare", "--agent", "shop", ref, "current")
        assert bad.code == 2 and said in bad.err, bad.err
    unknown = project.assay("compare", "--agent", "nobody", "previous", "current")
    assert unknown.code == 2 and "no agent is published under the name 'nobody'" in unknown.err
    loose = project.assay("compare", first, second, "--suite", "shop/agents@1")
    assert loose.code == 2 and "--suite picks the batteries of --agent" in loose.err
    named = project.assay("agent", "publish", "python:shop:agent", "--dir", "evals",
                          "--name", "no/slash")
    assert named.code == 2 and "is not an agent name" in named.err

    # Filing a published version under a new name is recorded; again, it is not.
    again = project.assay("agent", "publish", "python:shop:agent", "--dir", "evals",
                          "--name", "shop")
    assert again.code == 0 and "nothing new recorded" in again.err
    renamed = project.assay("agent", "publish", "python:shop:agent", "--dir", "evals",
                            "--name", "shop-eu")
    assert renamed.code == 0 and "as agent shop-eu (ledger entry" in renamed.err


def test_versions_that_ran_several_suites_need_one_named(project):
    project.write("evals/other.suite.yaml", OTHER)
    _stocked(project)
    _agent(project, good=True, cost=0.01)
    _battery(project, "--suite", "shop/other@1")  # the first version, again
    _agent(project, good=False, cost=0.03)
    _battery(project, "--suite", "shop/other@1")
    done = project.assay("compare", "--agent", "shop", "previous", "current")
    assert done.code == 2
    assert ("ran several suites (shop/agents@1, shop/other@1): name one with --suite"
            in done.err)
    picked = project.assay("compare", "--agent", "shop", "previous", "current",
                           "--suite", "shop/other@1", "--json", "-")
    assert picked.code == 1, picked.err
    data = json.loads(picked.out)
    assert data["base"]["suite"] == "shop/other@1"
    # The same outcomes for three times the money: worse on cost alone.
    assert [row["change"] for row in data["rows"]] == ["same"]
    assert data["verdict"] == "worse" and data["cost"]["dearer"] == ["usd"]
