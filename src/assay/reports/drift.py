"""What ``assay drift`` prints for a person (its JSON is ``Drift.to_json``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .safe import inert

if TYPE_CHECKING:
    from ..analysis.drift import Drift


def drift_summary(result: Drift, *, on_terminal: bool) -> str:
    """What a person reads: the status, the two runs, what moved and what flipped.

    A value longer than 200 characters is cut on a terminal only; a log keeps it whole
    (docs/decisions/0058-whole-values-in-logs.md).
    """
    def show(value: object) -> str:
        return inert(value, one_line=True, limit=200 if on_terminal else None)

    lines = [f"{show(result.cand.suite_id)} · {show(result.cand.target_uri)} "
             f"({show(result.cand.target_digest)}): {result.status.upper()}",
             f"  base {show(result.base.run_id)} started {show(result.base.started_at)}",
             f"  cand {show(result.cand.run_id)} started {show(result.cand.started_at)}"]
    for moved in result.changed:
        if moved.case is None:
            lines.append(f"  changed: {moved.facet}: {show(moved.base)} → {show(moved.cand)}")
        elif moved.split == "hidden":
            lines.append(f"  changed: a hidden case ({moved.case}): its {moved.facet} changed"
                         + (" (the model its trials were served)" if moved.facet == "model"
                            else ""))
        elif moved.base is not None or moved.cand is not None:
            lines.append(f"  changed: {show(moved.case)}: {moved.facet}: {show(moved.base)} → "
                         f"{show(moved.cand)}")
        else:
            lines.append(f"  changed: {show(moved.case)}: its {moved.facet} changed")
    for flip in result.flipped:
        lines.append(f"  flipped: {show(flip.case)} ({flip.split}): {show(flip.base)} → "
                     f"{show(flip.cand)} ({flip.change})")
    if result.status == "stable":
        lines.append("  no case flipped and nothing that answered moved")
    return "\n".join(lines)
