"""A brand-new store is created at head and stamped, not migrated (docs/decisions/0024).

What must hold: the schema made from ``schema.metadata`` is the one the
Alembic revisions build (compared table by table, on SQLite and PostgreSQL);
Alembic and the next open both take it to be at head; opening it, new or
existing, imports no Alembic; an older store still migrates to the same
schema; and two first opens at once leave one good store.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from assay.store import database, schema
from assay.store.database import HEAD_REVISION, Store, open_store
from assay.store.runs.record import save_run

from .test_database import a_report

OLDER = ["0001", "0002", "0003"]

#: Open the store named on the command line in a fresh interpreter, and say
#: which Alembic modules that imported.
OPEN_AND_LIST_ALEMBIC = (
    "import sys\n"
    "from assay.store.database import open_store\n"
    "open_store(sys.argv[1]).close()\n"
    "print(sorted(m for m in sys.modules if m.partition('.')[0] == 'alembic'))\n"
)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.real)])
def db_pair(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """Two empty databases of one kind: one for Alembic to migrate, one to create fresh."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'migrated.db'}", f"sqlite:///{tmp_path / 'fresh.db'}"
    make: Callable[[], str] = request.getfixturevalue("new_postgres_url")
    return make(), make()


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(database._MIGRATIONS))
    return config


def alembic_upgrade(url: str, revision: str) -> None:
    """Run the revisions up to ``revision``, as every store was made before 0024."""
    engine = sa.create_engine(url)
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
    engine.dispose()


def describe(url: str) -> dict[str, Any]:
    """Every table as the inspector sees it: columns in order, keys, constraints, indexes."""
    engine = sa.create_engine(url)
    inspector = sa.inspect(engine)
    described: dict[str, Any] = {}
    for name in sorted(inspector.get_table_names()):
        described[name] = {
            "columns": [{k: str(v) if k == "type" else v for k, v in column.items()}
                        for column in inspector.get_columns(name)],
            "primary key": inspector.get_pk_constraint(name),
            "foreign keys": sorted(map(repr, inspector.get_foreign_keys(name))),
            "unique": sorted(map(repr, inspector.get_unique_constraints(name))),
            "indexes": sorted(map(repr, inspector.get_indexes(name))),
            "checks": sorted(map(repr, inspector.get_check_constraints(name))),
        }
    if engine.dialect.supports_sequences:
        described["(sequences)"] = sorted(inspector.get_sequence_names())
    engine.dispose()
    return described


def _normalised(sql: str | None) -> str | None:
    """SQL modulo whitespace and identifier quoting (Alembic's batch rebuild quotes "runs")."""
    if sql is None:
        return None
    flat = re.sub(r"\s+", " ", sql.replace('"', ""))
    return re.sub(r"\s*([(),])\s*", r"\1", flat).strip()


def sqlite_master(url: str) -> list[tuple[str, str, str, str | None]]:
    """Every object SQLite keeps (tables, their automatic indexes), with normalised SQL."""
    path = sa.engine.make_url(url).database
    assert path
    with closing(sqlite3.connect(path)) as connection:
        rows = connection.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    return sorted((kind, name, table, _normalised(sql)) for kind, name, table, sql in rows)


def differences(url: str, metadata: sa.MetaData = schema.metadata) -> list[Any]:
    """What Alembic's autogenerate would change to make the database match ``metadata``."""
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "compare_server_default": True})
        found: list[Any] = compare_metadata(context, metadata)
    engine.dispose()
    return found


def versions(url: str) -> list[str]:
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        found = list(connection.scalars(sa.text("SELECT version_num FROM alembic_version")))
    engine.dispose()
    return found


def open_in_a_new_interpreter(url: str) -> str:
    done = subprocess.run([sys.executable, "-c", OPEN_AND_LIST_ALEMBIC, url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_new_store_has_the_schema_the_revisions_build(db_pair: tuple[str, str]) -> None:
    migrated, fresh = db_pair
    alembic_upgrade(migrated, "head")
    open_store(fresh).close()
    assert describe(fresh) == describe(migrated)
    assert versions(fresh) == versions(migrated) == [HEAD_REVISION]
    # Alembic's own comparison: the metadata the new store is made from is what
    # the revisions built, types and server defaults included.
    assert differences(migrated) == []
    assert differences(fresh) == []


def test_a_new_sqlite_store_has_the_revisions_sql(tmp_path: Path) -> None:
    migrated, fresh = f"sqlite:///{tmp_path / 'migrated.db'}", f"sqlite:///{tmp_path / 'fresh.db'}"
    alembic_upgrade(migrated, "head")
    open_store(fresh).close()
    made = sqlite_master(fresh)
    assert made == sqlite_master(migrated)
    assert {name for kind, name, _, _ in made if kind == "table"} == {
        *schema.metadata.tables, "alembic_version"}


@pytest.mark.parametrize("side", ["migrated", "fresh"])
def test_the_comparisons_see_a_column_only_one_side_has(tmp_path: Path, side: str) -> None:
    # As if a revision added a column the metadata lacks ("migrated"), or the
    # metadata had one no revision adds ("fresh"): every comparison must fail.
    migrated, fresh = f"sqlite:///{tmp_path / 'migrated.db'}", f"sqlite:///{tmp_path / 'fresh.db'}"
    alembic_upgrade(migrated, "head")
    open_store(fresh).close()
    engine = sa.create_engine(migrated if side == "migrated" else fresh)
    with engine.begin() as connection:
        connection.exec_driver_sql("ALTER TABLE trials ADD COLUMN extra TEXT")
    engine.dispose()
    assert describe(fresh) != describe(migrated)
    assert sqlite_master(fresh) != sqlite_master(migrated)
    if side == "migrated":
        assert [d[0] for d in differences(migrated)] == ["remove_column"]
    else:
        wider = sa.MetaData()
        for table in schema.metadata.sorted_tables:
            table.to_metadata(wider)
        wider.tables["trials"].append_column(sa.Column("extra", sa.Text))
        assert [d[0] for d in differences(migrated, wider)] == ["add_column"]


def test_a_new_store_is_created_without_alembic(db_url: str) -> None:
    assert open_in_a_new_interpreter(db_url) == "[]"
    assert versions(db_url) == [HEAD_REVISION]


def test_a_new_store_is_at_head_for_the_next_open_and_for_alembic(db_url: str) -> None:
    store = open_store(db_url)
    save_run(store, a_report())
    store.close()
    # The next open, in a fresh interpreter, recognises head without Alembic.
    assert open_in_a_new_interpreter(db_url) == "[]"
    # Alembic agrees: its current revision is the scripts' head, and upgrading
    # to head changes nothing.
    engine = sa.create_engine(db_url)
    with engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_revision()
    engine.dispose()
    assert current == ScriptDirectory.from_config(alembic_config()).get_current_head()
    before = describe(db_url)
    alembic_upgrade(db_url, "head")
    assert describe(db_url) == before
    again = open_store(db_url)
    assert [run.run_id for run in again.runs()] == ["run-1"]
    again.close()


@pytest.mark.parametrize("revision", OLDER)
def test_a_store_at_an_older_revision_migrates_to_the_new_stores_schema(
        db_pair: tuple[str, str], revision: str) -> None:
    old, fresh = db_pair
    alembic_upgrade(old, revision)
    assert versions(old) == [revision]
    open_store(old).close()
    open_store(fresh).close()
    assert versions(old) == [HEAD_REVISION]
    assert describe(old) == describe(fresh)


def test_a_database_holding_another_table_is_migrated_by_alembic(db_url: str) -> None:
    # Not new: the revisions run (as before 0024), beside what is there.
    engine = sa.create_engine(db_url)
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE someone_elses (x INTEGER)")
    engine.dispose()
    open_store(db_url).close()
    described = describe(db_url)
    assert described.pop("someone_elses")
    assert set(described) - {"(sequences)"} == {*schema.metadata.tables, "alembic_version"}
    assert versions(db_url) == [HEAD_REVISION]
    # Alembic would drop only someone_elses, which the metadata does not know.
    assert [d[0] for d in differences(db_url)] == ["remove_table"]


def test_a_second_first_open_waits_for_the_first_and_finds_its_store(db_url: str) -> None:
    # The first creator holds its transaction open; a second open_store must
    # wait for it, then take the store as made, not create it again.
    first = sa.create_engine(db_url)
    if first.dialect.name == "sqlite":
        database._tune_sqlite(first)  # BEGIN IMMEDIATE, as open_store's engine
    outcome: dict[str, Any] = {}

    def second() -> None:
        try:
            outcome["runs"] = (store := open_store(db_url)).runs()
            store.close()
        except Exception as error:  # reported by the assertion below
            outcome["error"] = error

    with first.begin() as connection:
        if first.dialect.name == "postgresql":
            connection.execute(sa.select(sa.func.pg_advisory_xact_lock(database.SCHEMA_LOCK_KEY)))
        assert database._table_names(connection) is None
        thread = threading.Thread(target=second)
        thread.start()
        thread.join(timeout=0.5)
        assert thread.is_alive()  # waiting for the lock, not creating beside us
        database._create_at_head(connection)
    thread.join(timeout=60)
    first.dispose()
    assert outcome == {"runs": []}
    assert versions(db_url) == [HEAD_REVISION]


RACER = (
    "import sys\n"
    "from assay.store.database import open_store\n"
    "print('ready', flush=True)\n"
    "sys.stdin.readline()\n"
    "open_store(sys.argv[1]).close()\n"
)


def test_processes_creating_one_new_store_at_once_leave_one_good_store(
        db_url: str, tmp_path: Path) -> None:
    racers = [subprocess.Popen([sys.executable, "-c", RACER, db_url], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(3)]
    try:
        for racer in racers:  # each has imported everything: start them together
            assert racer.stdout is not None and racer.stdout.readline().strip() == "ready"
        for racer in racers:
            assert racer.stdin is not None
            racer.stdin.write("go\n")
            racer.stdin.flush()
        ended = [(racer.wait(timeout=120), racer.stderr.read() if racer.stderr else "")
                 for racer in racers]
    finally:
        for racer in racers:
            if racer.poll() is None:
                racer.kill()
            for stream in (racer.stdin, racer.stdout, racer.stderr):
                if stream is not None:
                    stream.close()
    assert [code for code, _ in ended] == [0, 0, 0], [err for _, err in ended]
    assert versions(db_url) == [HEAD_REVISION]
    if db_url.startswith("sqlite"):
        alone = f"sqlite:///{tmp_path / 'alone.db'}"
        Store(sa.create_engine(alone)).migrate()
        assert sqlite_master(db_url) == sqlite_master(alone)
    assert differences(db_url) == []


def test_connections_switching_one_new_file_to_wal_at_once_all_succeed(tmp_path: Path) -> None:
    # SQLite answers one of two connections switching a new file to WAL "database is
    # locked" at once, without its busy handler (it could deadlock): CI met it with three
    # processes creating one store. Threads released together by a barrier race the same
    # way, many times over; before the retry about a third of the rounds failed.
    import sqlite3
    import threading

    from assay.store.database import _to_wal

    failures: list[str] = []
    for round_ in range(40):
        path = tmp_path / f"round-{round_}.db"
        barrier = threading.Barrier(3)

        def switch(path: Path = path, barrier: threading.Barrier = barrier,
                   round_: int = round_) -> None:
            connection = sqlite3.connect(path, isolation_level=None, timeout=30)
            try:
                connection.execute("PRAGMA synchronous = NORMAL")
                barrier.wait()
                _to_wal(connection.cursor())
                mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
                if mode != "wal":
                    failures.append(f"round {round_}: {mode}")
            except sqlite3.OperationalError as error:
                failures.append(f"round {round_}: {error}")
            finally:
                connection.close()

        threads = [threading.Thread(target=switch) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []


def test_the_default_stores_folder_is_made_before_the_writer_forks(tmp_path, monkeypatch):
    """The suites load while the writer starts, and keep their caches only where ``.assay/``
    already is: the folder must be there when ``start_writer`` returns, not when the writer
    process (after importing its database libraries) gets round to it."""
    from assay.store.runs.recorder_process import start_writer

    monkeypatch.chdir(tmp_path)
    sink = start_writer(None)
    try:
        assert (tmp_path / ".assay").is_dir()
        sink.ready()
    finally:
        sink.stop()
    assert (tmp_path / ".assay" / "assay.db").is_file()
