"""Which judge, where and how, as a run is told: the options a panel is made with.

Apart from ``panel`` so that a run that judges nothing (most) reads its options
without importing the panel's clients, caches and templates.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..targets.prices import PriceTable


@dataclass(frozen=True)
class JudgeOptions:
    """Which judge, where, and how: the command line's and the environment's word."""

    #: ``--judge``: overrides ``ASSAY_JUDGE`` and the suite's ``judge:``.
    judge: str | None = None
    #: ``--judge-base-url``: the OpenAI-compatible server (else ``ASSAY_JUDGE_BASE_URL``).
    base_url: str | None = None
    #: Calls to judges in flight at once.
    concurrency: int = 8
    #: ``judge_timeout_s`` for every call, overriding the suite's.
    timeout_s: float | None = None
    #: Serve repeated questions from the judge cache (``--no-judge-cache`` turns it off).
    cache: bool = True
    cache_root: Path | None = None
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    prices: PriceTable | None = None
