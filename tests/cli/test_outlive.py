"""`assay run` keeps its results to the end of the process instead of freeing them one by one."""

from __future__ import annotations

import gc
import weakref

from assay.commands.run import _outlive
from assay.engine.runs import RunResult


def test_results_outlive_the_command_and_every_collection() -> None:
    result = RunResult(suite_id="s/x@1", target_uri="python:a:b")
    alive = weakref.ref(result)
    try:
        kept = _outlive([result])
        assert kept[0] is result
        del kept, result
        gc.collect()
        assert alive() is not None  # held by a frozen cycle, not by the caller
    finally:
        gc.unfreeze()
