"""The panel's hold on the judge cache: what it hands over is on disk once it is closed."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from assay.judging.panel import JudgeOptions, Panel
from assay.model import Suite
from assay.targets.call_cache import CallCache

SUITE = Suite.model_validate({"suite": "demo/panel@1", "cases": [
    {"id": "c1", "input": "hi", "expect": [{"contains": "hi"}]}]})


def open_in(folder: Path) -> list[str]:
    """The files under ``folder`` this process holds open (Linux: /proc/self/fd)."""
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(f"{folder}{os.sep}"):
            found.append(target)
    return found


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd")
def test_close_writes_the_last_entries_and_closes_the_cache(tmp_path: Path) -> None:
    panel = Panel(SUITE, JudgeOptions(cache_root=tmp_path, env={}))
    assert panel.cache is not None
    keys = [CallCache.key(["panel", n]) for n in range(50)]
    assert panel.cache.get(keys[0]) is None
    for n, key in enumerate(keys):
        panel.cache.put_later(key, {"n": n})
    asyncio.run(panel.close())
    assert open_in(tmp_path) == []
    assert panel.cache.writes == 50
    fresh = CallCache("judge", tmp_path)
    assert [fresh.get(key) for key in keys] == [{"n": n} for n in range(50)]
