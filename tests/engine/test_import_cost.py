"""`assay run` forks the store's writer before it imports the models: keep that path light."""

from __future__ import annotations

import subprocess
import sys


def _imported_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint('\\n'.join(sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    return set(done.stdout.split())


def test_opening_the_record_imports_no_model_and_no_database_library() -> None:
    # What commands/run.py imports before the fork: the writer then imports
    # SQLAlchemy on its own, while this process imports pydantic and the rest.
    loaded = _imported_after("from assay.engine.runs import open_sink")
    assert not {m for m in loaded if m == "pydantic" or m.startswith(("assay.model", "sqlalchemy"))}
    # Nor the ledger's chain and the cryptography it signs with (the writer's).
    assert not {m for m in loaded if m.startswith(("cryptography", "assay.store.ledger.chain"))}
    assert "assay.engine.battery" not in loaded


def test_the_writers_own_modules_need_no_model() -> None:
    loaded = _imported_after(
        "import assay.store.database, assay.store.runs.record, assay.store.ledger.keys")
    assert "sqlalchemy" in loaded  # the check below is about something real
    assert not {m for m in loaded if m == "pydantic" or m.startswith("assay.model")}


def test_the_engines_names_still_import_as_before() -> None:
    from assay.engine import Battery, RunStart, stamp
    from assay.engine.battery import Battery as Direct

    assert Battery is Direct and callable(stamp) and RunStart.__name__ == "RunStart"


def test_the_ledger_cores_names_still_import_from_the_package() -> None:
    import assay.store
    from assay.store import GENESIS, verify
    from assay.store.ledger import merkle
    from assay.store.ledger.chain import verify as direct

    assert verify is direct and merkle.HASH_SIZE == 32 and isinstance(GENESIS, str)
    assert sorted(assay.store.__all__) == sorted(
        name for name in assay.store.__all__ if getattr(assay.store, name) is not None)
