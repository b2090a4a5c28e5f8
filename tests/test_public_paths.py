"""The import paths users write keep working whatever the rooms behind them are called
(docs/decisions/0057-one-house.md): each is imported in a fresh interpreter, as a user's
program would, after the rooms behind it were imported first."""

from __future__ import annotations

import subprocess
import sys

import pytest

#: (what a user writes, a check of what it gave) — each run in a fresh interpreter.
PATHS = [
    ("from assay import Suite, Case, expect",
     "assert Suite.__name__ == 'Suite' and Case.__name__ == 'Case' and callable(expect.equals)"),
    ("from assay import AgentError, Refused, PolicyDenied, publish_gated, __version__",
     "assert issubclass(Refused, Exception) and callable(publish_gated) and __version__"),
    # assay.online is a function; the room behind it (assay.sampling) imported first
    # must not replace it on the package.
    ("import assay.sampling.online, assay.sampling.asgi\nimport assay",
     "assert callable(assay.online) and assay.online.__module__ == 'assay.sampling.online'"),
    ("from assay import online", "assert online.__name__ == 'online' and callable(online)"),
    ("import assay.pytest_plugin as plugin", "assert hasattr(plugin, 'pytest_collect_file')"),
    ("from assay.canonical import digest", "assert digest({}).startswith('sha256:')"),
    ("from assay.store import merkle, entry_hash, verify, GENESIS",
     "assert callable(entry_hash) and callable(verify) and merkle.__name__.endswith('merkle')"),
    ("from assay.web import Workbench, create_app", "assert callable(create_app) and Workbench"),
]


@pytest.mark.parametrize(("statement", "check"), PATHS, ids=[p[0] for p in PATHS])
def test_a_public_path_works(statement: str, check: str) -> None:
    done = subprocess.run([sys.executable, "-c", f"{statement}\n{check}"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
