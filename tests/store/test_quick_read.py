"""Reports read from a SQLite store without SQLAlchemy: what the store gives, or nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from assay.analysis.run_facts import load_runs
from assay.errors import UsageError
from assay.store import schema
from assay.store.database import open_store
from assay.store.revision import HEAD_REVISION
from assay.store.runs.record import save_run
from assay.store.runs.sqlite_reports import report_documents, sqlite_file

from .test_database import a_report


def stored(url: str) -> None:
    store = open_store(url)
    sealed = a_report("sealed").model_copy(update={"seal": {"entry": 3, "hash": "sha256:ab"}})
    save_run(store, sealed)
    save_run(store, a_report("open-one"))
    with store.engine.begin() as connection:
        connection.execute(sa.update(schema.runs).where(schema.runs.c.run_id == "open-one")
                           .values(status="open", report=None))
    store.close()


def test_it_answers_what_the_store_answers(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    stored(url)
    quick = report_documents(url, ["sealed", "open-one", "absent"], HEAD_REVISION)
    store = open_store(url)
    try:
        assert quick is not None
        assert quick["sealed"] == store.report_document("sealed")
        assert quick["open-one"] == store.report_document("open-one")
        assert quick["sealed"][2] == {"entry": 3, "hash": "sha256:ab"}
        assert quick["absent"] is None
        with pytest.raises(UsageError, match="no run absent"):
            store.report_document("absent")
    finally:
        store.close()


def test_it_steps_aside_for_anything_it_does_not_know(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    stored(url)
    assert report_documents(f"sqlite:///{tmp_path / 'none.db'}", ["sealed"], HEAD_REVISION) \
        is None  # no such file: the store would be created
    assert report_documents(url, ["sealed"], "0001") is None  # another revision: migrate first
    assert report_documents(url + "?timeout=5", ["sealed"], HEAD_REVISION) is None
    assert report_documents("postgresql+psycopg://h/db", ["sealed"], HEAD_REVISION) is None
    assert report_documents("sqlite://", ["sealed"], HEAD_REVISION) is None
    (tmp_path / "junk.db").write_bytes(b"not a database at all" * 100)
    assert report_documents(f"sqlite:///{tmp_path / 'junk.db'}", ["x"], HEAD_REVISION) is None
    assert sqlite_file(None) == Path(".assay/assay.db")
    assert sqlite_file("sqlite:////abs/x.db") == Path("/abs/x.db")


def test_load_runs_reads_the_same_facts_either_way(tmp_path: Path, postgres_url: str) -> None:
    sqlite_url = f"sqlite:///{tmp_path / 'a.db'}"
    for url in (sqlite_url, postgres_url):
        stored(url)
    quick = load_runs(["sealed", "sealed"], sqlite_url)
    ordinary = load_runs(["sealed", "sealed"], postgres_url)  # the store's own path
    assert quick == ordinary and quick[0].cases and quick[0].seal == {"entry": 3,
                                                                      "hash": "sha256:ab"}
    for url in (sqlite_url, postgres_url):
        with pytest.raises(UsageError, match="no run absent in the store"):
            load_runs(["sealed", "absent"], url)
        with pytest.raises(UsageError, match="run open-one is not sealed"):
            load_runs(["open-one", "sealed"], url)


def test_a_comparison_does_not_import_sqlalchemy(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    stored(url)
    code = ("import sys\nfrom assay.cli import main\n"
            f"sys.argv = ['assay', 'compare', 'sealed', 'sealed', '--db', {url!r}, '--json', '-']\n"
            "try:\n    main()\nexcept SystemExit as done:\n"
            "    print('SQLALCHEMY' if 'sqlalchemy' in sys.modules else 'NONE', done.code)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    *body, last = done.stdout.strip().splitlines()
    assert last == "NONE 0"
    assert json.loads("\n".join(body))["verdict"] == "same"
