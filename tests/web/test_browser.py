"""The tests' browser itself: it opens a page, and it is gone, event loop and all, before
a test of another folder runs in the same process (conftest.Chromium says why)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import Watched

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[2]

#: A test of another folder that runs its coroutine with ``asyncio.run``.
ELSEWHERE = ("tests/targets/test_scripted.py::"
             "test_a_broken_line_breaks_the_trial_with_its_reason")


def test_a_page_opens(page: Watched) -> None:
    page.page.set_content("<main><p>opened</p></main>")
    assert page.page.inner_text("main") == "opened"
    assert page.clean(), page.errors


def test_a_test_after_the_browser_can_run_its_own_event_loop(tmp_path: Path) -> None:
    # One process, no shuffling: the browser test first, then one of another folder.
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:randomly",
         "--basetemp", str(tmp_path / "inner"),
         f"{Path(__file__).relative_to(ROOT)}::test_a_page_opens", ELSEWHERE],
        cwd=ROOT, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout[-3000:]
