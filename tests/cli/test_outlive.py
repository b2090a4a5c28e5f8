"""A command keeps its largest results to the end of the process instead of freeing them."""

from __future__ import annotations

import gc
import weakref

from assay.commands.common import outlive
from assay.engine.runs import RunResult


def test_results_outlive_the_command_and_every_collection() -> None:
    result = RunResult(suite_id="s/x@1", target_uri="python:a:b")
    alive = weakref.ref(result)
    try:
        kept = outlive([result])
        assert kept[0] is result
        del kept, result
        gc.collect()
        assert alive() is not None  # held by a frozen cycle, not by the caller
    finally:
        gc.unfreeze()
