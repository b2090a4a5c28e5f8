"""The workbench (SPEC §11): a local web page over the store — runs, a run live,
a trial's evidence, compare and trends, the review queue, the ledger — each
page with its JSON twin under ``/api/``.

One module per page family (``runs``, ``live`` — suites, starting, progress,
cancel —, ``trials``, ``compare``, ``review``, ``ledger``), templates beside
them; ``app`` puts them together behind
``guard``'s rules (loopback or a token, a strict Content-Security-Policy,
no cross-site writes). Every page reads the store through the rooms that
own it and shows hidden cases only as ``holdout-N``.
"""

from __future__ import annotations

from .app import Workbench, create_app

__all__ = ["Workbench", "create_app"]
