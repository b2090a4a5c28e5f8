"""The cyclic garbage collector during a run: collecting less often, held off while a
battery runs unless the process grows, and handed back as it was found
(docs/decisions/0025-collector-during-a-battery.md).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable


def tune_gc() -> tuple[int, ...]:
    """Collect less often while a run goes; returns the thresholds to put back after it.

    A run allocates many small, long-lived objects (cases, traces, verdicts)
    and frees few: the default thresholds rescan them again and again.
    """
    saved = gc.get_threshold()
    gc.set_threshold(50_000, 20, 100)
    return saved


#: How much the process may grow while a battery runs before the cyclic
#: collector looks for garbage, and every how many finished trials the size
#: is read (``HeldCollector``).
COLLECT_AFTER_BYTES = 256 * 1024 * 1024
COLLECT_EVERY = 500


class HeldCollector:
    """The cyclic collector held off while a battery runs, unless the process grows.

    A battery's trials make objects by the thousand that reference
    counting frees (a final case goes to disk, docs/decisions/0051); the
    collector's passes meanwhile rescan whatever lives through a trial and
    free next to nothing, all on the battery's thread (when the battery
    kept every result, ten passes of 30 ms each at ten thousand trials).
    So automatic collection is off while it runs. Every
    ``every`` finished trials the process's resident size is read (one
    system call); once it has grown by ``limit`` bytes since the battery
    began or since the last collection, say because an agent makes
    reference cycles, the collector runs once and what survives is frozen,
    so that later passes do not rescan it. Where the size cannot be read,
    the collector is left as it was.
    """

    def __init__(self, limit: int, every: int) -> None:
        self.limit = limit
        self.every = every
        self.finished = 0
        self.base: int | None = None
        self.held = False

    def __enter__(self) -> HeldCollector:
        self.base = resident_bytes()
        if self.base is not None and gc.isenabled():
            gc.disable()
            self.held = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.held:
            # Collected now only if the process grew; what is left is frozen
            # before the collector comes back, or its first pass would rescan
            # the whole battery at once. run_suites unfreezes it at the end.
            self.check()
            gc.freeze()
            gc.enable()
            self.held = False

    def counting(self, on_trial: Callable[[str], None]) -> Callable[[str], None]:
        """``on_trial`` that also counts the trial, and looks at the size every ``every``."""
        if not self.held:
            return on_trial

        def counted(outcome: str) -> None:
            on_trial(outcome)
            self.finished += 1
            if self.finished % self.every == 0:
                self.check()

        return counted

    def check(self) -> None:
        """Collect (and freeze what survives) if the process grew by ``limit`` since last time."""
        size = resident_bytes()
        if size is None or self.base is None or size - self.base < self.limit:
            return
        gc.collect()
        gc.freeze()
        self.base = resident_bytes() or size


def resident_bytes() -> int | None:
    """This process's resident size in bytes, or None where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def restore_gc(thresholds: tuple[int, ...]) -> None:
    # The caller's thresholds come back, and what the run froze (its suites,
    # each battery's results) is left to the collector's oldest generation:
    # in a process that goes on (a worker, the workbench), garbage among it
    # is collected again.
    gc.set_threshold(*thresholds)
    gc.unfreeze()
