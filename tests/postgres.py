"""Databases for tests of the store, and of commands that use it: SQLite and a real PostgreSQL.

A pytest plugin (``pytest_plugins`` in tests/conftest.py), so that any test
folder can ask for ``db_url``, ``postgres_url`` or ``postgres_server``.

The PostgreSQL is a throwaway cluster this test session starts from Debian's
binaries (``apt-get install -y postgresql``), listening on 127.0.0.1 only, on
a free port, with trust authentication on loopback. Each xdist worker starts
its own; each test gets a fresh database in it. Missing binaries FAIL the
tests: a store that only ever ran on SQLite has not been shown to work.

A module whose tests all start from the same stored runs makes them once per
backend in ``template_store`` and gives each test a copy (``copy_store``).
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
from dataclasses import dataclass
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


#: The machine's temporary folder, read when this plugin loads, before the session's own.
_SYSTEM_TEMP = tempfile.gettempdir()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A running throwaway cluster; yields its base URL (no database name)."""
    bin_dir = _bin_dir()
    # In the machine's temporary folder: the server runs as ``postgres``, who cannot
    # enter the session's own temporary folder (conftest._session_temp), made private.
    root = Path(tempfile.mkdtemp(prefix="assay-pg-", dir=_SYSTEM_TEMP))
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


def _create(base: str, like: str | None = None) -> str:
    """A new database in the cluster at ``base``: empty, or a copy of the database ``like``."""
    name = f"assay_test_{uuid.uuid4().hex[:12]}"
    # A copy is PostgreSQL's own (CREATE DATABASE … TEMPLATE): the files, not a dump.
    # It waits a few seconds for sessions on ``like`` to end, so a process that
    # has just exited does not make it fail.
    _admin(base, f"CREATE DATABASE {name}" + (f" TEMPLATE {like}" if like else ""))
    return name


@pytest.fixture
def new_postgres_url(postgres_server: str) -> Iterator[Callable[..., str]]:
    """Makes fresh databases in the session's cluster (dropped after the test).

    ``make()`` is an empty one; ``make(like=URL)`` a copy of the database at
    URL, which nothing may be connected to.
    """
    made: list[str] = []

    def make(like: str | None = None) -> str:
        name = _create(postgres_server, like.rsplit("/", 1)[1] if like else None)
        made.append(name)
        return f"{postgres_server}/{name}"

    yield make
    for name in made:
        _admin(postgres_server, f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def postgres_url(new_postgres_url: Callable[..., str]) -> str:
    """A fresh, empty database in the session's cluster."""
    return new_postgres_url()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.real)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same test on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'assay.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@dataclass(frozen=True)
class Template:
    """A store a module fills once, in a folder of its own; each test takes a copy.

    ``root`` is where the filling ran (``assay`` in a subprocess, say): its
    files go with every copy, the ledger's signing key among them.
    """

    backend: str
    root: Path
    url: str


@pytest.fixture(scope="module",
                params=["sqlite", pytest.param("postgresql", marks=pytest.mark.real)])
def template_store(request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[Template]:
    """An empty store on SQLite and on PostgreSQL, once per module, for a module-scoped
    fixture to fill; tests read and change only their copies (``copy_store``).

    The same runs made again for every test cost seconds of subprocesses each
    and test nothing new: each test still starts from its own store, made by
    the real ``assay``, byte for byte as if it had made it itself.
    """
    root = tmp_path_factory.mktemp(f"template-{request.param}")
    if request.param == "sqlite":
        yield Template("sqlite", root, f"sqlite:///{root / 'assay.db'}")
        return
    server: str = request.getfixturevalue("postgres_server")
    name = _create(server)
    try:
        yield Template("postgresql", root, f"{server}/{name}")
    finally:
        _admin(server, f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def copy_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[Template], str]:
    """Copies a filled ``Template`` into this test: its folder into ``tmp_path``, its store
    next to it (the SQLite files with the folder, a PostgreSQL database by TEMPLATE);
    returns the copy's URL. No process may hold the template open."""

    def copy(template: Template) -> str:
        shutil.copytree(template.root, tmp_path, dirs_exist_ok=True)
        if template.backend == "sqlite":
            path = Path(template.url.removeprefix("sqlite:///"))
            return f"sqlite:///{tmp_path / path.relative_to(template.root)}"
        make: Callable[..., str] = request.getfixturevalue("new_postgres_url")
        return make(like=template.url)

    return copy
