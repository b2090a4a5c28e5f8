"""The writer process's own ways: batches sent by a thread, its log moved while idle, its exit
waited for at the end (store/runs/recorder_process.py, docs/decisions/0087)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from assay.store.database import open_store
from assay.store.runs.recorder_process import WriterError, start_writer


def test_a_writer_gone_mid_run_is_said_on_the_next_call_not_lost_in_the_sending_thread(
        tmp_path: Path) -> None:
    """Batches go out through a thread of their own; when the writer is gone, the thread
    cannot send, and the battery's next call must say so (exit 3), not hang or pass."""
    sink = start_writer(f"sqlite:///{tmp_path / 'a.db'}")
    sink.ready()
    os.kill(sink.process.pid, signal.SIGKILL)
    sink.process.join(timeout=60)
    records = [("c", "public", n, "passed", None, None, None) for n in range(50)]
    with pytest.raises(WriterError, match="went away"):
        for _ in range(100):  # the first batches may still go into the pipe's buffer
            sink.write("r1", records)  # type: ignore[arg-type]
        sink.close()
    with pytest.raises(WriterError, match="went away"):
        sink.close()


def _sizes(path: Path) -> tuple[int, int]:
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size, wal.stat().st_size if wal.exists() else 0


def test_a_settled_store_moves_its_log_when_asked_and_not_in_a_large_commit(
        tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = open_store(f"sqlite:///{path}")
    try:
        store.settle()
        with store.engine.begin() as connection:
            connection.exec_driver_sql("CREATE TABLE filler (b BLOB)")
            for _ in range(1500):  # about 6 MB: past SQLite's own 1,000-page checkpoint
                connection.exec_driver_sql("INSERT INTO filler VALUES (randomblob(4000))")
        database, log = _sizes(path)
        assert log > 5_000_000 and database < 2_000_000, (database, log)  # not checkpointed
        store.settle()
        database, _ = _sizes(path)
        assert database > 5_000_000  # moved into the database now
    finally:
        store.close()


def test_an_unsettled_store_still_checkpoints_as_sqlite_does(tmp_path: Path) -> None:
    """The setting is the settled connection's: a store opened elsewhere keeps SQLite's."""
    path = tmp_path / "u.db"
    store = open_store(f"sqlite:///{path}")
    try:
        with store.engine.begin() as connection:
            connection.exec_driver_sql("CREATE TABLE filler (b BLOB)")
            for _ in range(1500):
                connection.exec_driver_sql("INSERT INTO filler VALUES (randomblob(4000))")
        database, _ = _sizes(path)
        assert database > 5_000_000
    finally:
        store.close()


def test_a_stopped_writer_closes_its_store_before_the_command_exits(tmp_path: Path) -> None:
    """``stop`` no longer waits for the writer's exit; the command's exit does. Were it
    not waited for, multiprocessing's exit handler would terminate the writer while it
    closes the store, and the store's log would be left behind."""
    script = textwrap.dedent(f"""
        from assay.store.runs.recorder_process import start_writer
        sink = start_writer("sqlite:///{tmp_path / 'x.db'}")
        sink.ready()
        sink.stop()
        print("alive", sink.process.exitcode is None or sink.process.exitcode == 0)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "alive True" in done.stdout
    assert (tmp_path / "x.db").is_file()
    assert not (tmp_path / "x.db-wal").exists()  # closed whole: SQLite removes its log then


def test_batches_queued_behind_a_busy_writer_go_as_one_in_order() -> None:
    """A writer that falls behind gets the batches that queued up as one (a transaction
    and a look at the ledger each, whatever their size), in order, never another run's
    with them, never more than a batch's worth; and a battery a whole batch ahead of the
    writer waits for it."""
    import threading

    from assay.store.runs import recorder_process as rp

    outbox = rp._Outbox()
    for message in [("write", "r1", [1, 2]), ("write", "r1", [3]), ("write", "r2", [4]),
                    ("write", "r1", [5])]:
        outbox.put(message)
    assert outbox.get() == ("write", "r1", [1, 2, 3])
    assert outbox.get() == ("write", "r2", [4])
    assert outbox.get() == ("write", "r1", [5])
    outbox.put(("write", "r1", list(range(rp._QUEUED - 1))))
    outbox.put(("write", "r1", [-1, -2]))  # past a batch's worth: a batch of its own
    assert len(outbox.get()[2]) == rp._QUEUED - 1  # type: ignore[index]
    full = rp._Outbox()
    full.put(("write", "r1", list(range(rp._QUEUED))))
    put = threading.Thread(target=full.put, args=(("write", "r1", [0]),))
    put.start()
    put.join(timeout=0.2)
    assert put.is_alive()  # waits: the writer is a whole batch behind
    assert len(full.get()[2]) == rp._QUEUED  # type: ignore[index]
    put.join(timeout=10)
    assert not put.is_alive()
    full.close()
    assert full.get() == ("write", "r1", [0])
    assert full.get() is None
