"""The database store, the same tests on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from assay.errors import UsageError
from assay.grading import RunInfo, build_report, fold_case, fold_trial, redact
from assay.model import (
    Case,
    CaseResult,
    Event,
    Evidence,
    Report,
    SuiteRef,
    TargetRef,
    Trace,
    Usage,
    Verdict,
)
from assay.store import schema
from assay.store.database import Store, StoreError, open_store
from assay.store.runs.documents import report_digest
from assay.store.runs.record import save_run


def trace(text: str, cost: float = 0.01) -> Trace:
    return Trace(output={"answer": text, "score": 0.5}, steps=2,
                 events=[Event(kind="tool_call", name="lookup", arguments={"q": text}, t=0.25),
                         Event(kind="tool_result", name="lookup", result=[1, 2.5, None])],
                 usage=Usage(input_tokens=10, output_tokens=3, cost_usd=cost),
                 facets={"model": "m"}, evidence={"tools": Evidence.OBSERVED})


def a_case(case_id: str, split: str, texts: list[str]) -> CaseResult:
    trials = []
    for n, text in enumerate(texts, start=1):
        verdicts = [Verdict(assertion="equals $.answer", check="equals",
                            outcome="pass" if "ok" in text else "fail",
                            evidence=Evidence.OBSERVED, note=f"saw {text}"),
                    Verdict(assertion="never_calls [erp]", check="never_calls",
                            family="structural", outcome="pass", evidence=Evidence.OBSERVED,
                            provenance="trace", threshold=0.9)]
        trials.append(fold_trial(n, verdicts, duration_s=0.125 * n, usage=trace(text).usage,
                                 trace=trace(text)))
    return fold_case(Case(id=case_id, split=split), trials)  # type: ignore[arg-type]


def a_report(run_id: str = "run-1", started: str = "2026-01-01T00:00:00Z") -> Report:
    info = RunInfo(
        run_id=run_id,
        suite=SuiteRef(id="demo/s@1", digest="sha256:aa", hidden_set="sha256:bb",
                       hidden_source="samples"),
        target=TargetRef(uri="python:agent:run", digest="sha256:cc", facets={"model": "m"}),
        started_at=started, finished_at="2026-01-01T00:01:00Z", trials_per_case=2,
        pass_mark=0.8, seed=7,
    )
    cases = [a_case("p1", "public", ["ok-1", "ok-1"]), a_case("p2", "public", ["ok-2", "bad"]),
             a_case("SECRET-h1", "hidden", ["SECRET-ok", "SECRET-bad"])]
    return build_report(info, cases)


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    opened = open_store(db_url)
    yield opened
    opened.close()


def test_migrating_twice_changes_nothing(db_url: str) -> None:
    first = open_store(db_url)
    save_run(first, a_report())
    first.close()
    again = open_store(db_url)
    again.migrate()
    assert [r.run_id for r in again.runs()] == ["run-1"]
    tables = set(sa.inspect(again.engine).get_table_names())
    assert {"runs", "trials", "verdicts", "blobs", "alembic_version"} <= tables
    again.close()


def test_a_run_round_trips_whole(store: Store) -> None:
    report = a_report()
    save_run(store, report)
    loaded = store.load_report("run-1")
    assert loaded == report
    traces = [t.trace for c in loaded.cases if isinstance(c, CaseResult) for t in c.trials]
    assert len(traces) == 6 and all(t is not None for t in traces)


def test_runs_lists_each_run_with_its_scores(store: Store) -> None:
    save_run(store, a_report("run-b", "2026-01-02T00:00:00Z"))
    save_run(store, a_report("run-a", "2026-01-01T00:00:00Z"))
    listed = store.runs()
    assert [r.run_id for r in listed] == ["run-a", "run-b"]
    first, report = listed[0], a_report()
    assert (first.suite_id, first.target_uri, first.passed) == ("demo/s@1", "python:agent:run",
                                                                report.scores.passed)
    assert (first.public, first.hidden, first.overall) == (
        report.scores.public, report.scores.hidden, report.scores.overall)


def test_the_stored_report_is_full_and_its_digest_is_kept(store: Store) -> None:
    report = a_report()
    save_run(store, report)
    with store.engine.connect() as connection:
        row = connection.execute(sa.select(schema.runs)).one()
        verdicts = connection.scalar(sa.select(sa.func.count()).select_from(schema.verdicts))
    # The digest is of the stored bytes (the report with seal null), which load back
    # into the same report and the same bytes.
    assert row.report_digest == "sha256:" + hashlib.sha256(row.report.encode()).hexdigest()
    assert row.report_digest == report_digest(report) == report_digest(store.load_report("run-1"))
    assert json.loads(row.report) == {**report.to_json_dict(), "seal": None}
    assert "SECRET-h1" in str(row.report)  # kept for replay; outward surfaces redact
    assert (row.suite_digest, row.hidden_set, row.seed, row.pass_mark) == (
        "sha256:aa", "sha256:bb", 7, 0.8)
    assert verdicts == 12


def test_a_trial_is_stored_once(store: Store) -> None:
    report = a_report()
    case = report.cases[0]
    assert isinstance(case, CaseResult)
    case.trials.append(case.trials[0].model_copy())
    with pytest.raises(StoreError, match="stored twice") as caught:
        save_run(store, report)
    assert "SECRET" not in str(caught.value)
    assert store.runs() == []  # one transaction: nothing of the run was kept


def test_the_database_rejects_a_duplicate_trial_identity(store: Store) -> None:
    save_run(store, a_report())
    row = {"run_id": "run-1", "case_id": "p1", "split": "public", "n": 1, "outcome": "pass",
           "reason": None, "duration_s": 0.0, "usage": {}, "trace_digest": None}
    with pytest.raises(sa.exc.IntegrityError), store.engine.begin() as connection:
        connection.execute(schema.trials.insert(), row)


def test_saving_a_run_twice_is_refused(store: Store) -> None:
    save_run(store, a_report())
    with pytest.raises(StoreError, match="run-1"):
        save_run(store, a_report())


def test_traces_are_stored_once_by_content_digest(store: Store) -> None:
    save_run(store, a_report("run-1"))
    save_run(store, a_report("run-2"))
    with store.engine.connect() as connection:
        blobs = connection.execute(sa.select(schema.blobs)).all()
        pointers = connection.scalars(sa.select(schema.trials.c.trace_digest)).all()
    # Five distinct traces (p1's two trials are the same), shared by both runs.
    assert len(blobs) == 5 and len(pointers) == 12 and set(pointers) == {b.digest for b in blobs}
    for blob in blobs:
        assert blob.digest == "sha256:" + hashlib.sha256(blob.content).hexdigest()
    stored = trace("ok-1").model_dump_json().encode()
    assert "sha256:" + hashlib.sha256(stored).hexdigest() in pointers
    assert stored in {b.content for b in blobs}


def test_loading_an_unknown_run_names_it(store: Store) -> None:
    with pytest.raises(UsageError, match="no run nope"):
        store.load_report("nope")


def test_a_redacted_report_can_be_stored_but_keeps_no_trials(store: Store) -> None:
    save_run(store, redact(a_report()))
    assert store.load_report("run-1") == redact(a_report())


def test_the_default_store_lives_in_dot_assay(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    opened = open_store(None)
    save_run(opened, a_report())
    opened.close()
    assert (tmp_path / ".assay" / "assay.db").is_file()


def test_an_unusable_url_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        open_store("nosuchdb://x")


def test_importing_the_cli_loads_no_database_library() -> None:
    code = ("import sys, assay.cli; "
            "print(sorted(m for m in ('sqlalchemy', 'alembic', 'psycopg') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_the_cli_reads_either_store_and_shows_no_hidden_content(store: Store, db_url: str,
                                                                tmp_path: Path) -> None:
    save_run(store, a_report())

    def assay(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "assay", *args, "--db", db_url],
                              capture_output=True, text=True, cwd=tmp_path, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "SECRET" not in done.stdout + done.stderr
        return done.stdout

    assert "run-1" in assay("runs")
    assert '"run_id": "run-1"' in assay("runs", "--json")
    assert "holdout-1" in assay("show", "run-1")
    shown = assay("show", "run-1", "--json")
    assert '"holdout-1"' in shown and '"p1"' in shown


def test_the_known_head_revision_is_the_scripts_head() -> None:
    # open_store skips Alembic when the store is at HEAD_REVISION: it must be the newest.
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from assay.store import database

    config = Config()
    config.set_main_option("script_location", str(database._MIGRATIONS))
    assert ScriptDirectory.from_config(config).get_current_head() == database.HEAD_REVISION


def test_a_store_from_revision_0003_migrates_and_keeps_its_runs(tmp_path: Path) -> None:
    from alembic import command
    from alembic.config import Config

    from assay.store import database

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sa.create_engine(url)
    config = Config()
    config.set_main_option("script_location", str(database._MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0003")
        connection.execute(sa.text(
            "INSERT INTO runs (run_id, suite_id, suite_digest, target_uri, target_digest, "
            "target_facets, started_at, finished_at, trials_per_case, pass_mark, passed, "
            "interrupted, report, report_digest) VALUES ('old-1', 's@1', 'sha256:a', 'x:y', "
            "'sha256:b', '{}', '2026-01-01', '2026-01-01', 1, 1.0, 1, 0, '{}', 'sha256:c')"))
    engine.dispose()
    store = open_store(url)
    [summary] = store.runs()
    store.close()
    assert (summary.run_id, summary.status, summary.passed) == ("old-1", "sealed", True)
