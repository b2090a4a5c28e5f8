"""docs/tau2.md, run as written, where tau2-bench is installed (the ``tau2`` extra).

The page imports tau2's retail tasks with ``assay import tau2`` and runs them against an
agent that does nothing, its user a toy server on 127.0.0.1:8795; tau2's package must be
in the Python that runs assay, which the plain page runner (tests/docs/test_pages.py)
cannot take for granted, so this test runs the page with the same runner, or is skipped
without it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.docs.pages import Page

pytest.importorskip("tau2", reason="the tau2 extra is not installed (pip install -e '.[tau2]')")

pytestmark = pytest.mark.real

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tau2.md"


def test_the_page_runs_as_written(tmp_path: Path) -> None:
    Page(tmp_path).run(PAGE.read_text(encoding="utf-8"))
