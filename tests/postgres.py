"""Databases for tests of the store, and of commands that use it: SQLite and a real PostgreSQL.

A pytest plugin (``pytest_plugins`` in tests/conftest.py), so that any test
folder can ask for ``db_url``, ``postgres_url`` or ``postgres_server``.

The PostgreSQL is a throwaway cluster this test session starts from Debian's
binaries (``apt-get install -y postgresql``), listening on 127.0.0.1 only, on
a free port, with trust authentication on loopback. Each xdist worker starts
its own; each test gets a fresh database in it. Missing binaries FAIL the
tests: a store that only ever ran on SQLite has not been shown to work.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

INSTALL = ("PostgreSQL binaries not found under /usr/lib/postgresql/*/bin (initdb, pg_ctl): "
           "install them with `apt-get install -y postgresql` (as root), as .ci/run does")


def _bin_dir() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    found = [p for p in found if (p.parent / "initdb").exists()]
    if not found:
        pytest.fail(INSTALL, pytrace=False)
    return found[-1].parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _as_owner(args: list[str | Path]) -> list[str]:
    # PostgreSQL refuses to run as root: run it as the postgres user then.
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    return prefix + [str(a) for a in args]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A running throwaway cluster; yields its base URL (no database name)."""
    bin_dir = _bin_dir()
    root = Path(tempfile.mkdtemp(prefix="assay-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    subprocess.run(_as_owner([bin_dir / "initdb", "-D", data, "-U", "postgres", "-E", "UTF8",
                              "--no-sync", "-A", "trust"]),
                   check=True, capture_output=True)
    (data / "pg_hba.conf").write_text("local all all trust\n"
                                      "host all all 127.0.0.1/32 trust\n")
    port = _free_port()
    options = (f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={root} "
               "-c fsync=off -c synchronous_commit=off -c full_page_writes=off")
    log = root / "server.log"
    subprocess.run(_as_owner([bin_dir / "pg_ctl", "-D", data, "-l", log, "-o", options,
                              "-W", "start"]), check=True, capture_output=True)
    try:
        deadline = time.monotonic() + 60
        while subprocess.run([bin_dir / "pg_isready", "-q", "-h", "127.0.0.1", "-p", str(port)],
                             check=False).returncode != 0:
            if time.monotonic() > deadline:
                pytest.fail(f"PostgreSQL did not start:\n{log.read_text()}", pytrace=False)
            time.sleep(0.05)  # a poll interval, not a guess at how long startup takes
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(_as_owner([bin_dir / "pg_ctl", "-D", data, "-m", "immediate", "stop"]),
                       check=False, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def _admin(base: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(base.replace("postgresql+psycopg", "postgresql") + "/postgres",
                         autocommit=True) as connection:
        connection.execute(sql)  # type: ignore[arg-type]


@pytest.fixture
def new_postgres_url(postgres_server: str) -> Iterator[Callable[[], str]]:
    """Makes fresh, empty databases in the session's cluster (dropped after the test)."""
    made: list[str] = []

    def make() -> str:
        name = f"assay_test_{uuid.uuid4().hex[:12]}"
        _admin(postgres_server, f"CREATE DATABASE {name}")
        made.append(name)
        return f"{postgres_server}/{name}"

    yield make
    for name in made:
        _admin(postgres_server, f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def postgres_url(new_postgres_url: Callable[[], str]) -> str:
    """A fresh, empty database in the session's cluster."""
    return new_postgres_url()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.real)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same test on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'assay.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url
