"""Who may see a hidden case's queued trials: whoever holds the very hidden set the run ran.

``--hidden-dir`` is checked, run by run, against the ``hidden_set`` digest
the run recorded (``suites.loader.hidden_set_digest``): a folder that holds
other cases, or none, proves nothing, and those items stay ``holdout-N``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import AssayError

if TYPE_CHECKING:
    from ..store.database import Store
    from ..store.reviews.items import StoredItem


def revealed(store: Store, rows: list[StoredItem], hidden_dir: Path | None) -> set[str]:
    """The runs whose hidden set ``hidden_dir`` holds: their hidden items may be shown whole."""
    if hidden_dir is None:
        return set()
    from ..store.reviews.items import hidden_sets

    runs = hidden_sets(store, [r.run_id for r in rows if r.run_id and r.split == "hidden"])
    held: dict[tuple[str, str], bool] = {}
    shown: set[str] = set()
    for run_id, (suite_id, hidden_set) in runs.items():
        if hidden_set is None:
            continue
        key = (suite_id, hidden_set)
        if key not in held:
            held[key] = holds_hidden_set(hidden_dir, suite_id, hidden_set)
        if held[key]:
            shown.add(run_id)
    return shown


def holds_hidden_set(hidden_dir: Path | None, suite_id: str, hidden_set: str | None) -> bool:
    """Whether ``hidden_dir`` holds exactly the hidden set (by digest) a run of ``suite_id`` ran."""
    if hidden_dir is None or hidden_set is None:
        return False
    from ..suites.hidden import private_folder
    from ..suites.loader import hidden_set_digest

    try:
        return hidden_set_digest(private_folder(hidden_dir, suite_id)) == hidden_set
    except AssayError:  # a broken private folder proves nothing
        return False
