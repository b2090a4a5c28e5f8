"""The queue's tables beside the store's: applied once, checked after, never imported idly."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
import sqlalchemy as sa

from assay.errors import UsageError
from assay.queue.app import conninfo, ensure_schema, needs_postgres
from assay.queue.chunks import count, cut, decode, encode, singles
from assay.store.database import open_store


def _tables(url: str) -> set[str]:
    store = open_store(url)
    with store.engine.connect() as connection:
        found = set(sa.inspect(connection).get_table_names())
    store.close()
    return found


@pytest.mark.real
def test_the_schema_is_applied_once_however_many_start_together(postgres_url: str) -> None:
    stores = [open_store(postgres_url) for _ in range(3)]
    errors: list[BaseException] = []

    def apply(store: object) -> None:
        try:
            ensure_schema(store)  # type: ignore[arg-type]
        except BaseException as error:  # noqa: BLE001 - collected for the assertion
            errors.append(error)

    threads = [threading.Thread(target=apply, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    ensure_schema(stores[0])  # and again, later: a no-op
    for store in stores:
        store.close()
    tables = _tables(postgres_url)
    assert {"procrastinate_jobs", "procrastinate_workers", "runs", "run_chunks"} <= tables


@pytest.mark.real
def test_a_queue_made_by_something_else_is_refused_naming_both(postgres_url: str) -> None:
    store = open_store(postgres_url)
    ensure_schema(store)
    with store.engine.begin() as connection:
        connection.execute(sa.text("COMMENT ON TABLE procrastinate_jobs IS 'procrastinate 2.0'"))
    with pytest.raises(UsageError) as refused:
        ensure_schema(store)
    store.close()
    assert "procrastinate 2.0" in str(refused.value)
    assert "procrastinate schema 03." in str(refused.value)


def test_only_postgresql_has_a_queue_and_its_url_loses_the_driver_name() -> None:
    with pytest.raises(UsageError, match="PostgreSQL"):
        needs_postgres("sqlite:///x.db", "assay worker")
    with pytest.raises(UsageError, match="PostgreSQL"):
        needs_postgres(None, "assay worker")
    url = "postgresql+psycopg://me:s3cret@127.0.0.1:5/db"
    assert needs_postgres(url, "x") == url
    assert conninfo(url) == "postgresql://me:s3cret@127.0.0.1:5/db"


def test_assay_help_and_a_local_run_never_import_the_queue_library() -> None:
    # Every command's module imported, as `assay --help` imports them to list them.
    code = ("import sys\nfrom assay.cli import main\nmain.load_all()\n"
            "import assay.engine.runs\nprint('\\n'.join(sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    loaded = set(done.stdout.split())
    assert "assay.commands.worker" in loaded  # the command is there, its library is not
    assert not {m for m in loaded if m.startswith(("procrastinate", "assay.queue"))}


def test_chunks_hold_every_planned_trial_once_and_adaptive_cases_whole() -> None:
    trials = [(f"c{i}", n) for i in range(7) for n in (1, 2, 3)]
    chunks = cut(trials, {"a1": 3, "a2": 5}, 4)
    flat = [(case, n) for chunk in chunks for case, numbers in chunk if numbers
            for n in numbers]
    assert sorted(flat) == sorted(trials)
    assert all(sum(len(ns) if ns else 0 for _, ns in chunk) <= 4 for chunk in chunks)
    whole = [case for chunk in chunks for case, numbers in chunk if numbers is None]
    assert whole == ["a1", "a2"]
    assert len(chunks) == 7  # 21 fixed trials in six chunks, the adaptive ones after
    back = decode(encode(chunks[0], hidden={"c0"}))
    assert back.only == {"c0": {1, 2, 3}, "c1": {1}} and back.split("c0") == "hidden"
    assert back.split("c1") == "public" and count(back.only) == 4
    assert singles(back.only, [("c0", 2)]) == [[("c0", [1])], [("c0", [3])], [("c1", [1])]]
    with pytest.raises(ValueError):
        cut(trials, {}, 0)
