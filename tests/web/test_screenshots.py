"""Screenshots of the workbench's main pages, taken by the tests' own browser.

Each is checked to be a real picture of a rendered page (a PNG of the
viewport's width with the page's heading in it, no console error); with
``ASSAY_SCREENSHOTS=DIR`` they are written to DIR (``docs/workbench/`` holds
the ones the docs show: `ASSAY_SCREENSHOTS=docs/workbench pytest
tests/web/test_screenshots.py`), else to a temporary folder.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from playwright.sync_api import expect

from .conftest import CANARY, Served, Stocked, Watched, name_versions

pytestmark = pytest.mark.real


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_screenshots_of_the_main_pages(stocked: Stocked, served: Served, page: Watched,
                                       tmp_path: Path) -> None:
    folder = Path(os.environ.get("ASSAY_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    stocked.project.assay("review", "--add", stocked.second, "--case", "greets")
    queue = served.get("/api/review").json()
    first_item = queue["items"][0]["item"]
    run = served.get(f"/api/runs/{stocked.second}").json()
    failing = next(c for c in run["cases"] if c["label"] == "hostile")
    name_versions(stocked)
    shots = {
        "runs": ("/runs", "Runs"),
        "run": (f"/runs/{stocked.second}", stocked.second),
        "trial": (f"/runs/{stocked.second}/cases/{failing['index']}/trials/1", "hostile"),
        "compare": (f"/compare?base={stocked.first}&cand={stocked.second}", "regressed"),
        "trends": ("/trends?suite=web/shop@1", "web/shop@1"),
        "review": (f"/review/{first_item}", "Review"),
        "ledger": ("/ledger", "Ledger"),
        "suites": ("/suites", "web/shop@1"),
        "agent": ("/agents/shop", "Agent shop"),
    }
    for name, (path, heading) in shots.items():
        page.page.goto(served.url + path)
        page.page.wait_for_load_state("load")
        if name == "ledger":  # the first view checks the whole ledger in the background
            expect(page.page.locator(".verification .outcome")).to_have_text("verified")
        assert heading in page.page.inner_text("main"), name
        data = page.page.screenshot(full_page=True)
        width, height = _png_size(data)
        assert width == 1280 and height >= 300, (name, width, height)
        assert len(data) > 10_000, name  # a rendered page, not a blank one
        assert CANARY not in page.page.content()
        (folder / f"{name}.png").write_bytes(data)
    assert page.clean(), page.errors
