"""A trend chart's geometry: pass rates and their intervals as SVG coordinates.

Pure arithmetic, no markup: the page's template draws what this returns
(an inline SVG with presentation attributes and classes, no script, no
``style=``), and the JSON twin carries the same numbers, so what is drawn
can be checked against what was counted.

Runs sit in slots of equal width in the order they started, with their
dates on the axis below: batteries come in bursts and gaps, and on a time
scale a burst would pile its points and whiskers into one smear
(docs/decisions/0045-compare-and-trends.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The drawing's size and the plot's margins, in SVG user units.
WIDTH = 760
HEIGHT = 240
LEFT, RIGHT, TOP, BOTTOM = 48, 36, 12, 34
#: The rates with a grid line and a label.
GRID = (0.0, 0.25, 0.5, 0.75, 1.0)
#: At most this many dates under the axis (the first and last slots always).
MAX_DATES = 6
#: Runs over more days than this are told apart by their date alone, else by date and time.
WEEK = 7


@dataclass(frozen=True)
class Plot:
    """Where the plot sits in the drawing: rates map to y, slots to x."""

    slots: int
    left: float = LEFT
    top: float = TOP
    width: float = WIDTH - LEFT - RIGHT
    height: float = HEIGHT - TOP - BOTTOM

    def y(self, rate: float) -> float:
        """A rate 0..1 as a y coordinate (1.0 at the top)."""
        return round(self.top + (1.0 - rate) * self.height, 2)

    @property
    def cap(self) -> float:
        """Half a whisker cap's width: narrower than a slot, so neighbours never touch."""
        return round(min(4.0, 0.3 * self.width / max(1, self.slots)), 2)

    @property
    def radius(self) -> float:
        """A point's radius: as large as its slot allows, never a speck."""
        return round(max(1.5, min(4.0, 0.4 * self.width / max(1, self.slots))), 2)

    def x(self, slot: int) -> float:
        """The centre of a run's slot."""
        return round(self.left + (slot + 0.5) * self.width / max(1, self.slots), 2)


def trend_chart(points: Sequence[Mapping[str, Any]], split: str,
                series: Mapping[str, int]) -> dict[str, Any] | None:
    """The chart of ``split``'s pass rate over ``points`` (runs, oldest first); None if none has it.

    Each point is a run as the trends page lists it: ``run_id``, ``started_at``,
    ``version``, ``interrupted``, ``pass_mark`` and per split ``passed``, ``total``,
    ``rate``, ``low`` and ``high``. A run without cases in ``split`` keeps its slot
    empty, so the charts of one page line up run by run. ``series`` numbers the
    versions (a colour each).
    """
    if not any(point.get(split) for point in points):
        return None
    plot = Plot(len(points))
    label = _day if _days(points) > WEEK else _minute
    marks: list[dict[str, Any]] = []
    lines: dict[str, list[str]] = {}
    for slot, point in enumerate(points):
        rate = point.get(split)
        if not rate:
            continue
        x, y = plot.x(slot), plot.y(rate["rate"])
        marks.append({"run_id": point["run_id"], "started_at": point["started_at"],
                      "version": point["version"], "series": series[point["version"]],
                      "interrupted": bool(point.get("interrupted")), **rate,
                      "x": x, "y": y, "r": plot.radius,
                      "low_y": plot.y(rate["low"]), "high_y": plot.y(rate["high"]),
                      "cap": [round(x - plot.cap, 2), round(x + plot.cap, 2)]})
        lines.setdefault(point["version"], []).append(f"{x},{y}")
    marks_of = {point["pass_mark"] for point in points if point.get(split)}
    return {
        "split": split, "width": WIDTH, "height": HEIGHT,
        "plot": {"left": plot.left, "top": plot.top, "width": plot.width,
                 "height": plot.height, "bottom": plot.top + plot.height,
                 "right": plot.left + plot.width},
        "grid": [{"y": plot.y(rate), "label": f"{rate:.0%}"} for rate in GRID],
        "dates": [{"x": plot.x(slot), "label": label(points[slot]["started_at"])}
                  for slot in _date_slots(len(points))],
        "lines": [{"version": version, "series": series[version], "points": " ".join(xy)}
                  for version, xy in lines.items() if len(xy) > 1],
        "marks": marks,
        # One pass mark for every run drawn is a line; several would be a guess.
        "pass_mark": plot.y(marks_of.pop()) if len(marks_of) == 1 else None,
    }


def _days(points: Sequence[Mapping[str, Any]]) -> int:
    """How many days the runs span (by their UTC dates)."""
    return len({str(point["started_at"])[:10] for point in points})


def _day(stamp: Any) -> str:
    return str(stamp)[:10]


def _minute(stamp: Any) -> str:
    """Runs of a few days told apart by their time too: ``12-02 03:02``."""
    text = str(stamp)
    return f"{text[5:10]} {text[11:16]}"


def _date_slots(slots: int) -> list[int]:
    """The slots labelled with their date: evenly spread, the first and last included."""
    if slots <= MAX_DATES:
        return list(range(slots))
    step = (slots - 1) / (MAX_DATES - 1)
    return sorted({round(index * step) for index in range(MAX_DATES)})
