"""`assay erase --subject ID`: a subject's content leaves the store, the ledger still verifies.

Stored runs come from the real CLI in a subprocess, on SQLite and on a real
PostgreSQL. One case's input, the agent's output for it, a failing note and
an assertion path carry a canary; after erasure it must be nowhere: not in
any column of any table and, on SQLite, not in the database file's bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from assay.store import schema
from assay.store.database import open_store
from assay.store.runs.documents import load_stored_suite

from ..postgres import Template

CANARY = "CANARY-ERASE-7f3a"
SUBJECT = "person-1"

# The output's second key is the input's last word: only the canary case's
# output (and its assertion's path) holds the canary.
AGENT = """
def agent(input):
    text = str(input)
    return {"echo": text, text.split()[-1]: text}
"""

SUITE = f"""
suite: erase/canary@1
target: python:erase_agent:agent
trials: 2
cases:
  - id: {SUBJECT}
    input: "hello {CANARY}"
    expect:
      - {{path: $.echo, equals: "bye {CANARY}"}}
      - {{path: "$['{CANARY}']", contains: hello}}
  - id: other
    input: OTHER-TEXT
    expect: [{{path: $.echo, equals: OTHER-TEXT}}]
"""


def assay(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "assay", *args], capture_output=True,
                          text=True, cwd=root, timeout=120)


def two_runs(root: Path, db_url: str) -> list[str]:
    """Run the suite twice into the store; the run ids, in order."""
    (root / "evals").mkdir(parents=True)
    (root / "evals" / "erase_agent.py").write_text(AGENT)
    (root / "evals" / "erase.suite.yaml").write_text(SUITE)
    ids = []
    for n in (1, 2):
        done = assay(root, "run", "evals", "--json", f"r{n}.json", "--db", db_url)
        assert done.returncode == 1, done.stderr  # person-1's equals fails
        ids.append(json.loads((root / f"r{n}.json").read_text())["run_id"])
    return ids


@pytest.fixture(scope="module")
def made(template_store: Template) -> tuple[Template, list[str]]:
    """The two runs, made once per backend by the real CLI; each test erases in a copy."""
    return template_store, two_runs(template_store.root, template_store.url)


@pytest.fixture
def stored(made: tuple[Template, list[str]],
           copy_store: Callable[[Template], str]) -> tuple[str, list[str]]:
    """This test's copy of the two runs (in ``tmp_path``): its URL and the run ids."""
    template, runs = made
    return copy_store(template), list(runs)


def cells(db_url: str) -> list[tuple[str, str, bytes]]:
    """Every non-NULL value of every column of every table, as bytes."""
    store = open_store(db_url)
    found = []
    try:
        metadata = sa.MetaData()
        metadata.reflect(store.engine)
        with store.engine.connect() as connection:
            for table in metadata.sorted_tables:
                for row in connection.execute(sa.select(table)):
                    for column, value in row._mapping.items():
                        if value is None:
                            continue
                        raw = bytes(value) if isinstance(value, bytes | memoryview) \
                            else (value if isinstance(value, str) else json.dumps(value)).encode()
                        found.append((table.name, str(column), raw))
    finally:
        store.close()
    return found


def holding_canary(db_url: str) -> set[tuple[str, str]]:
    return {(table, column) for table, column, raw in cells(db_url) if CANARY.encode() in raw}


def rows(db_url: str, query: sa.Select[Any]) -> list[Any]:
    store = open_store(db_url)
    try:
        with store.engine.connect() as connection:
            return list(connection.execute(query).all())
    finally:
        store.close()


def blobs(db_url: str) -> dict[str, bytes | None]:
    b = schema.blobs.c
    return {r.digest: None if r.content is None else bytes(r.content)
            for r in rows(db_url, sa.select(b.digest, b.content))}


def traces(db_url: str, case_id: str) -> set[str]:
    t = schema.trials.c
    return {r.trace_digest for r in rows(db_url, sa.select(t.trace_digest)
                                         .where(t.case_id == case_id))}


def ledger(db_url: str) -> list[Any]:
    c = schema.ledger.c
    return rows(db_url, sa.select(c.index, c.kind, c.content_digest).order_by(c.index))


def content_of(db_url: str, digest: str) -> bytes | None:
    return blobs(db_url)[digest]


def suite_doc(db_url: str, run_id: str) -> dict[str, Any]:
    r = schema.runs.c
    doc: dict[str, Any] = json.loads(rows(db_url, sa.select(r.suite)
                                          .where(r.run_id == run_id))[0].suite)
    return doc


def file_bytes(db_url: str) -> bytes:
    """The SQLite database file and its WAL and journal, if any."""
    path = Path(db_url.removeprefix("sqlite:///"))
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal"), Path(f"{path}-journal"))
                    if p.exists())


def test_erasing_a_case_leaves_its_content_nowhere(stored: tuple[str, list[str]],
                                                   tmp_path: Path) -> None:
    db_url, runs = stored
    assert {("blobs", "content"), ("runs", "suite"), ("runs", "report"), ("verdicts", "note"),
            ("verdicts", "assertion"), ("trials", "reason")} <= holding_canary(db_url)
    other_before = {d: c for d, c in blobs(db_url).items() if d in traces(db_url, "other")}
    erased = traces(db_url, SUBJECT)
    assert len(erased) == 4 and None not in erased
    before = ledger(db_url)
    v = schema.verdicts.c
    other_verdicts = [tuple(x) for x in rows(db_url, sa.select(
        v.case_id, v.outcome, v.note, v.assertion, v.check).where(v.case_id == "other"))]
    assert len(other_verdicts) == 4  # 2 runs x 2 trials

    done = assay(tmp_path, "erase", "--subject", SUBJECT, "--db", db_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"erased: 4 content(s) of subject {SUBJECT} in 2 run(s); "
                           f"ledger entry {len(before)}\n")
    assert CANARY not in done.stdout + done.stderr

    assert holding_canary(db_url) == set()
    if db_url.startswith("sqlite"):
        assert CANARY.encode() not in file_bytes(db_url)

    # The ledger: every old entry as it was, one erasure more, and it verifies.
    after = ledger(db_url)
    assert after[:-1] == before and after[-1].kind == "erasure"
    store = open_store(db_url)
    result, count = store.ledger.verify()
    with store.engine.connect() as connection:
        newest = max(connection.scalars(sa.select(schema.ledger_heads.c.size)))
    store.close()
    assert result.ok and count == len(before) + 1 and result.absent == ()
    assert newest == count  # the erasure signed a head over its own entry
    verified = assay(tmp_path, "ledger", "verify", "--db", db_url)
    assert verified.returncode == 0, verified.stdout
    assert re.fullmatch(rf"ledger: {count} entries verify, \d+ heads?\n", verified.stdout)
    record = content_of(db_url, after[-1].content_digest)
    assert record is not None and SUBJECT.encode() not in record
    content = json.loads(record)
    assert content["subject"] == "sha256:" + hashlib.sha256(SUBJECT.encode()).hexdigest()
    assert content["runs"] == sorted(runs) and content["digests"] == sorted(erased)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", content["erased_at"])

    # The subject's traces are claim checks without content; the other case's are untouched.
    now = blobs(db_url)
    assert all(now[d] is None for d in erased)
    assert {d: now[d] for d in other_before} == other_before and None not in other_before.values()

    # Rows keep what was decided: ids, outcomes, evidence; content is blank.
    verdicts = rows(db_url, sa.select(v.case_id, v.outcome, v.note, v.assertion, v.check))
    mine = [x for x in verdicts if x.case_id == SUBJECT]
    assert len(mine) == 8 and {x.note for x in mine} == {""}
    assert sorted(x.outcome for x in mine) == ["fail"] * 4 + ["pass"] * 4
    assert all(x.assertion == x.check for x in mine)
    assert [tuple(x) for x in verdicts if x.case_id == "other"] == other_verdicts

    # The stored suite: the case kept (ids, checks), its input and arguments nulled, marked.
    for run in runs:
        doc = suite_doc(db_url, run)
        assert doc["erased"] == [SUBJECT]
        suite = load_stored_suite(doc)
        case = next(c for c in suite.cases if c.id == SUBJECT)
        assert case.input is None and [a.check for a in case.expect] == ["equals", "contains"]
        assert all(a.arg is None and a.path is None for a in case.expect)
        other = next(c for c in suite.cases if c.id == "other")
        assert other.input == "OTHER-TEXT" and other.expect[0].arg == "OTHER-TEXT"

    # show still works; replay re-grades the rest and names the erased trials, no differences.
    shown = assay(tmp_path, "show", runs[0], "--db", db_url, "--json")
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert [c["id"] for c in report["cases"]] == [SUBJECT, "other"]
    assert report["cases"][0]["outcome"] == "fail" and CANARY not in shown.stdout
    replayed = assay(tmp_path, "replay", runs[0], "--db", db_url, "--json")
    assert replayed.returncode == 1, replayed.stderr
    result_json = json.loads(replayed.stdout)
    assert result_json["differences"] == [], result_json["differences"]
    assert result_json["not_replayable"] == [
        {"case": SUBJECT, "trial": n, "reason": "trace content erased"} for n in (1, 2)]
    assert result_json["verdicts"] == 2  # other: 2 trials x 1 assertion, re-graded

    # The erasure entry bridges each rewritten report to its seal: the digest the
    # run-sealed entry holds, and the digest of the report as it is now.
    for run in runs:
        sealed = next(json.loads(content_of(db_url, e.content_digest) or b"")
                      for e in after if e.kind == "run-sealed"
                      and run in (content_of(db_url, e.content_digest) or b"").decode())
        assert content["reports"][run]["before"] == sealed["report_digest"]
        assert content["reports"][run]["after"] != sealed["report_digest"]

    # A receipt still proves the run was sealed, and carries nothing erased.
    made = assay(tmp_path, "receipt", runs[0], "--db", db_url, "--out", "receipt.json")
    assert made.returncode == 0, made.stderr
    assert CANARY not in (tmp_path / "receipt.json").read_text()
    checked = assay(tmp_path, "receipt", "verify", "receipt.json")
    assert checked.returncode == 0, checked.stdout


def test_an_unknown_subject_exits_2_and_records_nothing(stored: tuple[str, list[str]],
                                                        tmp_path: Path) -> None:
    db_url, runs = stored
    before, contents = ledger(db_url), blobs(db_url)
    missing = "sha256:" + "ab" * 32
    for args, message in (
            (["--subject", "nobody"], "no case nobody"),
            (["--subject", SUBJECT, "--run", "no-such-run"], "no run no-such-run"),
            (["--subject", missing], f"no content {missing}"),
            (["--subject", next(iter(traces(db_url, "other"))), "--run", runs[0]], "--run")):
        done = assay(tmp_path, "erase", *args, "--db", db_url)
        assert done.returncode == 2, done.stdout + done.stderr
        assert message in done.stderr and done.stdout == ""
    assert ledger(db_url) == before and blobs(db_url) == contents


def test_a_digest_subject_erases_exactly_that_blob(stored: tuple[str, list[str]],
                                                   tmp_path: Path) -> None:
    db_url, runs = stored
    t = schema.trials.c
    target, run = rows(db_url, sa.select(t.trace_digest, t.run_id)
                       .where(t.case_id == "other").order_by(t.id))[0]
    before, entries = blobs(db_url), ledger(db_url)
    r = schema.runs.c
    documents = rows(db_url, sa.select(r.suite, r.report).order_by(r.run_id))

    done = assay(tmp_path, "erase", "--subject", target, "--db", db_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"erased: 1 content(s) of subject {target} in 1 run(s); "
                           f"ledger entry {len(entries)}\n")
    after = blobs(db_url)
    record = after.pop(ledger(db_url)[-1].content_digest)
    assert after == {**before, target: None}
    assert record is not None and json.loads(record)["digests"] == [target]
    assert json.loads(record)["runs"] == [run]
    assert rows(db_url, sa.select(r.suite, r.report).order_by(r.run_id)) == documents

    # A ledger entry's own content: erased, the entry stays and verify says so.
    registered = next(e for e in entries if e.kind == "run-registered")
    done = assay(tmp_path, "erase", "--subject", registered.content_digest, "--db", db_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"erased: 1 content(s) of subject {registered.content_digest}"
                                  " in 0 run(s)")
    verified = assay(tmp_path, "ledger", "verify", "--db", db_url)
    assert verified.returncode == 0
    assert verified.stdout.startswith(f"ledger: {len(entries) + 2} entries verify")
    assert "(1 with content erased)" in verified.stdout
    assert runs  # both runs stored

    # The record of an erasure is not erasable by erase.
    last = ledger(db_url)
    done = assay(tmp_path, "erase", "--subject", last[-1].content_digest, "--db", db_url)
    assert done.returncode == 2 and "not erasable" in done.stderr
    assert ledger(db_url) == last and content_of(db_url, last[-1].content_digest) is not None


def test_erasing_twice_records_one_entry(stored: tuple[str, list[str]], tmp_path: Path) -> None:
    db_url, _ = stored
    first = assay(tmp_path, "erase", "--subject", SUBJECT, "--db", db_url)
    assert first.returncode == 0, first.stderr
    entries, contents = ledger(db_url), blobs(db_url)
    again = assay(tmp_path, "erase", "--subject", SUBJECT, "--db", db_url)
    assert again.returncode == 0, again.stderr
    assert again.stdout == (f"erase: nothing left to erase of subject {SUBJECT} "
                            "(already erased); no ledger entry recorded\n")
    assert ledger(db_url) == entries and blobs(db_url) == contents


def test_run_limits_a_case_subject_to_one_run(stored: tuple[str, list[str]],
                                              tmp_path: Path) -> None:
    db_url, (first, second) = stored
    t = schema.trials.c
    kept = {r.trace_digest for r in rows(db_url, sa.select(t.trace_digest).where(
        t.case_id == SUBJECT, t.run_id == second))}
    done = assay(tmp_path, "erase", "--subject", SUBJECT, "--run", first, "--db", db_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"erased: 2 content(s) of subject {SUBJECT} in 1 run(s)")
    content = json.loads(content_of(db_url, ledger(db_url)[-1].content_digest) or b"")
    assert content["runs"] == [first]
    assert "erased" in suite_doc(db_url, first) and "erased" not in suite_doc(db_url, second)
    assert CANARY in json.dumps(suite_doc(db_url, second))
    assert all(blobs(db_url)[d] is not None for d in kept)
    assert ("verdicts", "note") in holding_canary(db_url)  # the second run's notes stay


def test_a_case_only_in_a_stored_suite_is_erased_there(stored: tuple[str, list[str]]) -> None:
    # A run stopped before the case ran keeps its input in the stored suite only.
    from datetime import UTC, datetime

    from assay.store.erasure import erase

    db_url, (first, second) = stored
    store = open_store(db_url)
    try:
        t, v = schema.trials.c, schema.verdicts.c
        with store.engine.begin() as connection:
            connection.execute(schema.verdicts.delete().where(v.case_id == SUBJECT))
            connection.execute(schema.trials.delete().where(t.case_id == SUBJECT))
        done = erase(store, SUBJECT, second, now=lambda: datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    finally:
        store.close()
    assert done.runs == (second,) and done.digests == () and done.entry is not None
    content = json.loads(content_of(db_url, done.entry.content_digest) or b"")
    assert content["erased_at"] == "2026-01-02T03:04:05.000000Z" and content["digests"] == []
    assert CANARY not in json.dumps(suite_doc(db_url, second))
    assert CANARY in json.dumps(suite_doc(db_url, first))


@pytest.mark.parametrize("template_store", ["sqlite"], indirect=True)
def test_replay_after_a_digest_erasure_names_only_the_trial(stored: tuple[str, list[str]],
                                                            tmp_path: Path) -> None:
    db_url, (first, _) = stored
    t = schema.trials.c
    target = rows(db_url, sa.select(t.trace_digest).where(
        t.case_id == "other", t.run_id == first, t.n == 1))[0].trace_digest
    done = assay(tmp_path, "erase", "--subject", target, "--db", db_url)
    assert done.returncode == 0, done.stderr
    replayed = json.loads(assay(tmp_path, "replay", first, "--db", db_url, "--json").stdout)
    assert replayed["not_replayable"] == [
        {"case": "other", "trial": 1, "reason": "trace content erased"}]
    assert replayed["differences"] == [], replayed["differences"]
