"""Make the store written before issue 32 (the hot path) again: ``python make.py [SRC]``.

The test beside it (tests/store/test_store_before_hot_path.py) reads what this
wrote, as committed: a run of ``project/evals`` made by the real ``assay run``
of the tree at ``SRC`` (default: this checkout's ``src``) before the per-trial
path moved off pydantic. It covers what a new encoder could write otherwise:
an echo, tool calls with a stateful fixture and an ask, non-ASCII and control
characters and U+2028 in output, arguments and stdout, floats of odd
magnitudes in output and usage, integers past 64 bits, a failing check, an
agent that raises, a refusal, a hang cut at its timeout after a call, a
workspace with a command, a judged check (the loopback judge of
tests/judge_server.py) and a hidden case.

It writes, into ``project/``: ``store/assay.db`` (the SQLite store, its ledger
and blobs; vacuumed into small pages, see ``compact``), ``report.json``
(``--json``) and ``receipt.json`` (``assay receipt``). Running it again makes
a different run (new id, times, durations): the committed bytes are the
fixture, not this script's output.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[2]
sys.path.insert(0, str(TESTS))

from judge_server import JudgeServer  # noqa: E402

#: The store, relative to the project folder.
STORE = "sqlite:///store/assay.db"


def assay(root: Path, src: Path, env: dict[str, str],
          *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "assay", *args], cwd=root, text=True,
                          capture_output=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(src), **env})


def compact(db: Path) -> None:
    """Store the database in 512-byte pages: a third of the size, the rows untouched.

    Only SQLite's page layout changes (``VACUUM``); every row, blob and ledger
    entry is the one ``assay run`` wrote, and the store is left in WAL mode as
    assay leaves it.
    """
    connection = sqlite3.connect(db, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=DELETE")
        connection.execute("PRAGMA page_size=512")
        connection.execute("VACUUM")
        connection.execute("PRAGMA journal_mode=WAL")
    finally:
        connection.close()


def make(src: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="assay-before-hot-path-") as scratch, \
            JudgeServer() as judge:
        root = Path(scratch) / "project"
        shutil.copytree(HERE / "project" / "evals", root / "evals",
                        ignore=shutil.ignore_patterns("__pycache__"))
        env = {"ASSAY_JUDGE_BASE_URL": judge.base_url, "OPENAI_API_KEY": "sk-not-a-key",
               "ASSAY_WORKSPACES": str(Path(scratch) / "staged"),
               "ASSAY_CACHE_DIR": str(Path(scratch) / "cache"), "COLUMNS": "120"}
        done = assay(root, src, env, "run", "evals", "--json", "report.json", "--db", STORE,
                     "--seed", "32")
        if done.returncode != 1:  # cases fail on purpose
            sys.exit(f"assay run exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        run_id = (root / "report.json").read_text().split('"run_id":"', 1)[1].split('"', 1)[0]
        made = assay(root, src, env, "receipt", run_id, "--db", STORE, "--out", "receipt.json")
        if made.returncode != 0:
            sys.exit(f"assay receipt exited {made.returncode}:\n{made.stderr}")
        out = HERE / "project"
        shutil.rmtree(out / "store", ignore_errors=True)
        (out / "store").mkdir()
        shutil.copy2(root / "store" / "assay.db", out / "store" / "assay.db")
        compact(out / "store" / "assay.db")
        for name in ("report.json", "receipt.json"):
            shutil.copy2(root / name, out / name)
        print(f"run {run_id}: {judge.calls} judge call(s)\n{done.stdout}")


if __name__ == "__main__":
    make(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else HERE.parents[3] / "src")
