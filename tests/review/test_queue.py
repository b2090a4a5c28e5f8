"""The annotation queue (SPEC §10) through the real command line: what a sealed run
queues, oldest first; one decision without the screen, sealed as a ``review``
entry; list and export; hidden cases as holdout-N, their content shown only to
whoever holds the very hidden set."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest

from .conftest import Project

CANARY = "CANARY-REVIEW-5d1e"

AGENT = """
def agent(input):
    text = str(input)
    if "explode" in text:
        raise RuntimeError("boom")
    return {"echo": text}
"""

SUITE = """
suite: review/queue@1
target: python:queue_agent:agent
trials: 2
hidden: hidden/
cases:
  - id: passes
    input: fine
    expect: [{path: $.echo, equals: fine}]
  - id: fails
    input: wrong
    expect: [{path: $.echo, equals: right}]
  - id: undecided
    input: maybe
    expect: [{costs_at_most: {usd: 0.01}}]  # no usage reported: inconclusive
  - id: breaks
    input: explode
    expect: [{path: $.echo, equals: explode}]
"""

HIDDEN = f"""
- id: {CANARY}-hidden-id
  input: {CANARY}-hidden-input
  expect: [{{path: $.echo, equals: {CANARY}-expected}}]
"""


def write_project(project: Project) -> None:
    project.write("queue_agent.py", AGENT)
    project.write("evals/queue.suite.yaml", SUITE)
    project.write("evals/hidden/cases.yaml", HIDDEN)


def run(project: Project, *more: str) -> str:
    done = project.assay("run", "evals", "--json", "r.json", *more)
    assert done.code == 1, done.err  # a failing case: not passed
    return json.loads((project.root / "r.json").read_text().splitlines()[0])["run_id"]


def listed(project: Project, *more: str) -> list[dict[str, object]]:
    done = project.assay("review", "--export", "-", *more)
    assert done.code == 0, done.err
    return [json.loads(line) for line in done.out.splitlines()]


def outcome_of(undecided_policy: list[dict[str, object]]) -> list[tuple[object, object, object]]:
    return [(i["case"], i["trial"], i["outcome"]) for i in undecided_policy]


@pytest.fixture
def sealed(project: Project) -> tuple[Project, str]:
    write_project(project)
    return project, run(project)


def test_a_sealed_run_queues_its_failing_and_inconclusive_trials(sealed) -> None:
    project, run_id = sealed
    items = listed(project)
    # Two trials each of the failing, the undecided and the hidden case; not the
    # passing case, not the broken one (it never answered).
    assert sorted(outcome_of(items)) == sorted([
        ("fails", 1, "fail"), ("fails", 2, "fail"),
        ("undecided", 1, "inconclusive"), ("undecided", 2, "inconclusive"),
        ("holdout-1", 1, "fail"), ("holdout-1", 2, "fail")])
    assert all(i["run_id"] == run_id and i["source"] == "run" and i["verdict"] is None
               for i in items)
    assert all(i["format"] == "assay.review-item/1" for i in items)
    fails = next(i for i in items if i["case"] == "fails")
    assert "equals" in str(fails["reason"])  # a public item says why it failed
    hidden = [i for i in items if i["hidden"]]
    assert len(hidden) == 2 and all(i["reason"] is None for i in hidden)
    # Served oldest first, by the number they were given.
    assert [i["item"] for i in items] == sorted(i["item"] for i in items)


def test_the_hidden_case_leaks_nowhere(sealed) -> None:
    project, _ = sealed
    listing = project.assay("review", "--list")
    exported = project.assay("review", "--export", "-", "--all")
    hidden = next(i for i in listed(project) if i["hidden"])
    decided = project.assay("review", str(hidden["item"]), "--verdict", "rejected",
                            "--note", "looked wrong", "--reviewer", "ana")
    again = project.assay("review", str(hidden["item"]), "--verdict", "approved")
    after = project.assay("review", "--list", "--all")
    for done in (listing, exported, decided, again, after):
        assert CANARY not in done.out + done.err
    assert "holdout-1" in listing.out and "holdout-1" in decided.out


@pytest.mark.parametrize(("policy", "expected"), [
    ("failing", {"fail"}), ("inconclusive", {"inconclusive"}), ("none", set())])
def test_review_says_which_trials_are_queued(project: Project, policy: str,
                                             expected: set[str]) -> None:
    write_project(project)
    run(project, "--review", policy)
    assert {i["outcome"] for i in listed(project)} == expected


def test_one_decision_without_the_screen_is_sealed(sealed) -> None:
    project, run_id = sealed
    first = listed(project)[0]
    done = project.assay("review", str(first["item"]), "--verdict", "needs-fix",
                         "--note", "the total is off by one", "--reviewer", "ana")
    assert done.code == 0, done.err
    assert f"item {first['item']}" in done.out and "needs-fix by ana" in done.out
    # Off the open queue, and exported with its decision.
    assert first["item"] not in [i["item"] for i in listed(project)]
    [decided] = [i for i in listed(project, "--all") if i["item"] == first["item"]]
    assert (decided["verdict"], decided["reviewer"], decided["note"]) == (
        "needs-fix", "ana", "the total is off by one")
    assert decided["decided_at"]
    # A review entry in the ledger, which still verifies.
    db = sqlite3.connect(project.root / ".assay" / "assay.db")
    kinds = [k for (k,) in db.execute("SELECT kind FROM ledger ORDER BY \"index\"")]
    assert kinds.count("review") == 1 and kinds[-1] == "review"
    (entry,) = db.execute("SELECT entry FROM review_items WHERE id = ?",
                          (first["item"],)).fetchone()
    (digest,) = db.execute("SELECT content_digest FROM ledger WHERE \"index\" = ?",
                           (entry,)).fetchone()
    (content,) = db.execute("SELECT content FROM blobs WHERE digest = ?", (digest,)).fetchone()
    sealed_review = json.loads(content)
    assert (sealed_review["item"], sealed_review["verdict"], sealed_review["reviewer"],
            sealed_review["run_id"]) == (first["item"], "needs-fix", "ana", run_id)
    assert sealed_review["note"].startswith("sha256:")  # the note by digest: erasable
    verify = project.assay("ledger", "verify")
    assert verify.code == 0, verify.out + verify.err


def test_bad_decisions_are_refused_with_exit_2(sealed) -> None:
    project, _ = sealed
    item = listed(project)[0]["item"]
    assert project.assay("review", str(item), "--verdict", "approved").code == 0
    twice = project.assay("review", str(item), "--verdict", "rejected")
    assert twice.code == 2 and "decided already: approved by" in twice.err
    assert "Traceback" not in twice.err
    missing = project.assay("review", "999", "--verdict", "approved")
    assert missing.code == 2 and "no item 999" in missing.err
    no_verdict = project.assay("review", str(item))
    assert no_verdict.code == 2 and "--verdict" in no_verdict.err
    bad = project.assay("review", str(item), "--verdict", "maybe")
    assert bad.code == 2
    lonely = project.assay("review", "--verdict", "approved")
    assert lonely.code == 2 and "ITEM" in lonely.err
    # The refused ones left nothing behind: one decision, one review entry.
    db = sqlite3.connect(project.root / ".assay" / "assay.db")
    assert db.execute("SELECT count(*) FROM ledger WHERE kind = 'review'").fetchone() == (1,)


def test_the_screen_needs_a_terminal(sealed) -> None:
    project, _ = sealed
    done = project.assay("review")  # stdin is not a terminal here
    assert done.code == 2 and "--list" in done.err


def test_two_people_deciding_one_item_at_once_leave_one_decision(sealed) -> None:
    from assay.store.database import open_store
    from assay.store.reviews.items import AlreadyDecided, decide

    project, _ = sealed
    item = int(listed(project)[0]["item"])
    url = f"sqlite:///{project.root / '.assay' / 'assay.db'}"
    results: list[str] = []
    start = threading.Barrier(2)

    def one(verdict: str) -> None:
        store = open_store(url)
        try:
            start.wait()
            decide(store, item, verdict, "", verdict + "-person")
            results.append("decided")
        except AlreadyDecided:
            results.append("refused")
        finally:
            store.close()

    threads = [threading.Thread(target=one, args=(v,)) for v in ("approved", "rejected")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results) == ["decided", "refused"]
    db = sqlite3.connect(project.root / ".assay" / "assay.db")
    assert db.execute("SELECT count(*) FROM ledger WHERE kind = 'review'").fetchone() == (1,)


def test_the_hidden_set_shows_its_content_to_whoever_holds_it(sealed, tmp_path: Path) -> None:
    project, _ = sealed
    private = tmp_path / "private"
    (private / "review" / "queue@1").mkdir(parents=True)
    (private / "review" / "queue@1" / "cases.yaml").write_text(HIDDEN, encoding="utf-8")
    shown = [i for i in listed(project, "--hidden-dir", str(private)) if i["hidden"]]
    assert shown and all(i["case"] == f"{CANARY}-hidden-id" for i in shown)
    assert all(i["reason"] is None for i in shown)  # a hidden item's reason was never kept
    # A folder holding other cases proves nothing: still holdout-1.
    other = tmp_path / "other"
    (other / "review" / "queue@1").mkdir(parents=True)
    (other / "review" / "queue@1" / "cases.yaml").write_text(
        HIDDEN.replace("-expected", "-something-else"), encoding="utf-8")
    kept = [i for i in listed(project, "--hidden-dir", str(other)) if i["hidden"]]
    assert kept and all(i["case"] == "holdout-1" for i in kept)


def test_oldest_first_across_runs(project: Project) -> None:
    write_project(project)
    first = run(project, "--review", "failing")
    second = run(project, "--review", "failing")
    runs = [i["run_id"] for i in listed(project)]
    assert runs == [first] * 4 + [second] * 4


def test_erasing_a_case_erases_the_notes_on_its_items(sealed) -> None:
    project, _ = sealed
    item = next(i for i in listed(project) if i["case"] == "fails")
    note = "NOTE-NAMING-A-PERSON-42"
    assert project.assay("review", str(item["item"]), "--verdict", "rejected",
                         "--note", note, "--reviewer", "ana").code == 0
    assert project.assay("erase", "--subject", "fails").code == 0
    [after] = [i for i in listed(project, "--all") if i["item"] == item["item"]]
    assert after["note"] is None and after["reason"] == ""
    assert after["verdict"] == "rejected"  # what was decided stays
    db = (project.root / ".assay" / "assay.db").read_bytes()
    assert note.encode() not in db
    assert project.assay("ledger", "verify").code == 0


def test_the_hidden_dir_reveals_only_the_runs_that_ran_it(project: Project,
                                                          tmp_path: Path) -> None:
    write_project(project)
    first = run(project, "--review", "failing")
    changed = HIDDEN.replace("-expected", "-changed")
    project.write("evals/hidden/cases.yaml", changed)
    second = run(project, "--review", "failing")
    private = tmp_path / "private" / "review" / "queue@1"
    private.mkdir(parents=True)
    (private / "cases.yaml").write_text(HIDDEN, encoding="utf-8")
    hidden = {(i["run_id"], i["case"]) for i in
              listed(project, "--hidden-dir", str(tmp_path / "private")) if i["hidden"]}
    assert hidden == {(first, f"{CANARY}-hidden-id"), (second, "holdout-1")}


def test_items_are_added_by_hand(project: Project) -> None:
    write_project(project)
    run_id = run(project, "--review", "none")
    assert listed(project) == []
    done = project.assay("review", "--add", run_id, "--case", "passes", "--trial", "2")
    assert done.code == 0 and "queued 1 trial(s) of passes" in done.out, done.err
    hidden = project.assay("review", "--add", run_id, "--case", "holdout-1")
    assert hidden.code == 0 and "queued 2 trial(s) of holdout-1" in hidden.out
    assert CANARY not in hidden.out + hidden.err
    again = project.assay("review", "--add", run_id, "--case", "passes", "--trial", "2")
    assert again.code == 0 and "queued 0 trial(s)" in again.out and "1 queued already" in again.out
    items = listed(project)
    assert [(i["case"], i["trial"], i["outcome"], i["source"]) for i in items] == [
        ("passes", 2, "pass", "manual"), ("holdout-1", 1, "fail", "manual"),
        ("holdout-1", 2, "fail", "manual")]
    for args, message in [
            (("--add", run_id, "--case", "nope"), "has no case nope"),
            (("--add", run_id, "--case", "passes", "--trial", "9"), "passes has no trial 9"),
            (("--add", "no-such-run", "--case", "passes"), "no run no-such-run"),
            (("--add", run_id), "needs --case"),
            (("--case", "passes"), "go with --add")]:
        bad = project.assay("review", *args)
        assert bad.code == 2 and message in bad.err, (args, bad.err)
        assert "Traceback" not in bad.err
