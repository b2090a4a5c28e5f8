"""Settings for the whole test suite."""

import compileall
import importlib.util
import shutil
import sys
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import settings

# Where PYTHONDONTWRITEBYTECODE is set (this machine sets it), pytest would rewrite the
# assertions of every test module again in each process that imports it (each xdist
# worker, each pytest a test starts): about 12 s of CPU a process for this suite. Its
# rewritten modules are cached next to them, as without the variable; this module is
# imported before any test module is.
sys.dont_write_bytecode = False

# The throwaway PostgreSQL and the db_url fixture, for every test folder.
pytest_plugins = ["tests.postgres"]

# Property tests run beside real servers and subprocesses on a 2-core machine:
# a per-example deadline would turn a busy moment into a failure that says
# nothing about the code. The number of examples stays the same.
settings.register_profile("assay", deadline=None)
settings.load_profile("assay")


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile assay's own modules once, before any test starts a ``python -m assay``.

    Hundreds of tests run the real CLI in a subprocess. Where the environment
    sets PYTHONDONTWRITEBYTECODE (this machine does, as bench/throughput.py
    notes), no process ever writes assay's bytecode, so every one of them
    compiled the package from source again: ~0.1-0.3 s of CPU per command. The
    bytecode is written once here, next to the sources, as Python itself would
    without the variable; nothing else changes, and each process still checks
    it against the source it was made from.
    """
    if hasattr(config, "workerinput"):  # an xdist worker: its controller has done it
        return
    spec = importlib.util.find_spec("assay")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        compileall.compile_dir(folder, quiet=2)


@pytest.fixture(scope="session", autouse=True)
def _session_temp() -> Iterator[None]:
    """Temporary files go in a folder of this session's own, removed when it ends.

    Many tests kill a run on purpose (SIGKILL, ``os._exit``, a stopped
    server), and a killed process cannot remove its temporary files: a
    suite's stored JSON, a zygote's socket folder. In the session's folder
    they go with it instead of piling up in ``/tmp`` run after run.
    ``TMPDIR`` reaches the processes the tests start; ``tempfile.tempdir``
    is reset so that this process asks again. The folder sits in the
    machine's temporary folder, not under pytest's base folder: a Unix
    socket's path (Chromium's, a zygote's) must stay under about 100
    characters.
    """
    folder = tempfile.mkdtemp(prefix="assay-tests-")
    patch = pytest.MonkeyPatch()
    patch.setenv("TMPDIR", folder)
    patch.setattr(tempfile, "tempdir", None)
    try:
        yield
    finally:
        patch.undo()
        shutil.rmtree(folder, ignore_errors=True)
