"""What the review screen shows of one item: its header, its trace and its verdicts.

Pure: text in, Rich ``Text`` out, no terminal and no Textual. Every piece
of stored text (an agent's output, a tool's arguments, a judge's note)
goes through ``reports.safe.inert`` and is appended to a ``Text`` as plain
characters, so markup such as ``[bold]`` or ``[@click=app.quit]`` is shown,
never parsed, and no control character reaches the terminal.

Secrets by construction: :func:`view` reads an item's evidence only when the
item may be shown whole. A hidden item that ``--hidden-dir`` did not reveal
becomes a :class:`Withheld`, which holds the printable fields and nothing
else, so no later step can render what it never had.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text

from ..reports.safe import inert, json_text
from .queue import Shown, shown

if TYPE_CHECKING:
    from ..model import Event, Trace
    from ..store.database import Store
    from ..store.reviews.items import ItemEvidence, StoredItem

#: A stored value longer than this many characters is cut, saying how much was left out.
LIMIT = 20_000

_OUTCOME_STYLE = {"pass": "green", "fail": "bold red", "inconclusive": "yellow",
                  "broken": "magenta"}


@dataclass(frozen=True)
class Withheld:
    """A hidden item the operator did not reveal: its label and outcome, no content."""

    item: Shown


@dataclass(frozen=True)
class Whole:
    """An item that may be shown whole, with the evidence a reviewer reads."""

    item: Shown
    evidence: ItemEvidence


def view(store: Store, row: StoredItem, *, reveal: bool) -> Withheld | Whole:
    """``row`` as the screen may show it; its evidence is read only when it may be shown."""
    from ..store.reviews.items import item_evidence

    item = shown(row, reveal=reveal)
    if row.split == "hidden" and not reveal:
        return Withheld(item)
    return Whole(item, item_evidence(store, row))


def detail(seen: Withheld | Whole) -> Text:
    """The detail pane's text for one item."""
    out = Text()
    _header(out, seen.item)
    if isinstance(seen, Withheld):
        out.append("\ncontent withheld", style="bold")
        out.append(": a hidden case. Its input, output, expected answer, reason and the "
                   "judges' answers stay private; pass --hidden-dir with the private hidden "
                   "set this run ran to see them.\n")
        return out
    _trace(out, seen.evidence.trace)
    _verdicts(out, seen.evidence.verdicts)
    return out


def empty() -> Text:
    """The detail pane when no item is open."""
    return Text("The queue is empty: no item waits for a decision.", style="bold")


def list_cells(item: Shown) -> tuple[Text, Text, Text, Text, Text]:
    """One row of the item list: number, case label, trial, outcome, run (all inert).

    The run comes last: on a narrow terminal it is what is cut.
    """
    return (Text(str(item.item), justify="right"),
            Text(inert(item.case, one_line=True, limit=40)),
            Text("-" if item.trial is None else str(item.trial), justify="right"),
            _outcome(item.outcome),
            Text(inert(item.run_id or item.source, one_line=True), style="dim"))


def _outcome(outcome: str | None) -> Text:
    name = outcome or "-"
    return Text(inert(name, one_line=True), style=_OUTCOME_STYLE.get(name, ""))


def _header(out: Text, item: Shown) -> None:
    out.append(f"item {item.item}", style="bold")
    out.append("  ")
    out.append(inert(item.case, one_line=True), style="bold cyan")
    if item.trial is not None:
        out.append(f"  trial {item.trial}")
    out.append("  ")
    out.append_text(_outcome(item.outcome))
    out.append("\n")
    _field(out, "run", item.run_id or "-")
    _field(out, "source", item.source)
    _field(out, "queued", item.added_at)
    if item.reason:
        _field(out, "reason", item.reason)


def _field(out: Text, name: str, value: object) -> None:
    out.append(f"{name}: ", style="dim")
    out.append(_cut(inert(value)))
    out.append("\n")


def _section(out: Text, title: str) -> None:
    out.append(f"\n── {title} ", style="bold")
    out.append("\n")


def _trace(out: Text, trace_bytes: bytes | None) -> None:
    from pydantic import ValidationError

    from ..model import Trace

    _section(out, "trace")
    if trace_bytes is None:
        out.append("no trace is stored for this item (none was kept, or it was erased)\n",
                   style="italic")
        return
    try:
        trace = Trace.model_validate_json(trace_bytes)
    except ValidationError:
        # Not a trace this version reads: show the stored JSON as it is.
        out.append("(stored trace in a form this version does not read; shown as stored)\n",
                   style="italic")
        out.append(_value(_loose_json(trace_bytes)))
        out.append("\n")
        return
    _trace_summary(out, trace)
    for event in trace.events:
        _event(out, event)
    if trace.error:
        _field(out, "error", trace.error)
    if trace.output is not None:
        out.append("output:", style="dim")
        out.append("\n")
        out.append(_value(trace.output))
        out.append("\n")
    if trace.stdout:
        out.append("printed:", style="dim")
        out.append("\n")
        out.append(_cut(inert(trace.stdout)))
        out.append("\n")


def _trace_summary(out: Text, trace: Trace) -> None:
    parts = [f"status {trace.status}", f"{trace.duration_s:.2f} s"]
    if trace.steps is not None:
        parts.append(f"{trace.steps} steps")
    usage = trace.usage
    if usage.tokens is not None:
        parts.append(f"{usage.tokens} tokens")
    if usage.cost_usd is not None:
        parts.append(f"${usage.cost_usd:.4f}")
    if trace.partial:
        parts.append("partial (stopped at its timeout)")
    out.append(inert(" · ".join(parts)), style="dim")
    out.append("\n")


def _event(out: Text, event: Event) -> None:
    name = inert(event.name or "", one_line=True)
    if event.kind == "user":  # a conversation's turn opens with what the user said (SPEC §16)
        out.append(f"── turn {event.turn if event.turn is not None else '?'} ", style="bold")
        out.append("\n")
        out.append("user ", style="bold cyan")
        out.append(_cut(inert(event.text or "")))
        out.append("\n")
    elif event.kind == "reply":  # ... and closes with the agent's answer
        out.append("agent replied ", style="bold green")
        out.append(_value(event.result))
        out.append("\n")
    elif event.kind == "message":
        if event.text is not None:  # (a target notes a reply with no text: the output says it)
            out.append("message ", style="bold")
            out.append(_cut(inert(event.text)))
            out.append("\n")
        elif event.arguments is not None:  # an online sample's input that is not text
            out.append(f"message {name} " if name else "message ", style="bold")
            out.append(_value(event.arguments))
            out.append("\n")
    elif event.kind == "tool_call":
        out.append("→ call ", style="bold blue")
        out.append(name, style="blue")
        out.append(" ")
        out.append(_value(event.arguments, one_line=True))
        out.append("\n")
    elif event.kind == "tool_result":
        out.append("← error from " if event.is_error else "← result of ",
                   style="bold red" if event.is_error else "bold blue")
        out.append(name, style="blue")
        out.append(" ")
        out.append(_value(event.result, one_line=True))
        out.append("\n")
    elif event.kind == "ask":
        out.append("? ask ", style="bold magenta")
        out.append(name, style="magenta")
        out.append(": ")
        out.append(_cut(inert(event.text or "")))
        out.append("\n")
    elif event.kind == "answer":
        out.append("  answer to ", style="magenta")
        out.append(name, style="magenta")
        out.append(": ")
        out.append(_value(event.result, one_line=True))
        out.append("\n")
    elif event.kind == "skill":
        out.append("✦ skill ", style="bold green")
        out.append(name, style="green")
        if event.text:
            out.append(": ")
            out.append(_cut(inert(event.text)))
        out.append("\n")
    elif event.kind == "http":  # an exchange kept as a one-line note (SPEC §15)
        out.append("⇄ http ", style="bold red" if event.is_error else "dim")
        out.append(inert(event.text or "", one_line=True), style="dim")
        out.append("\n")
    else:  # error
        out.append("✗ error", style="bold red")
        if name:
            out.append(f" in {name}")
        out.append(": ")
        out.append(_cut(inert(event.text if event.text is not None else event.result)))
        out.append("\n")


def _verdicts(out: Text, verdicts: Iterable[Mapping[str, Any]]) -> None:
    rows = list(verdicts)
    _section(out, f"verdicts ({len(rows)})")
    if not rows:
        out.append("no verdicts are stored for this item\n", style="italic")
        return
    for row in rows:
        out.append_text(_outcome(str(row.get("outcome") or "")))
        out.append("  ")
        out.append(inert(row.get("check") or "", one_line=True), style="bold")
        out.append(inert(f"  ({row.get('family')}, evidence {row.get('evidence')})"),
                   style="dim")
        out.append("\n  ")
        out.append(_cut(inert(row.get("assertion") or "", one_line=True)))
        out.append("\n")
        figures = []
        if row.get("score") is not None:
            figures.append(f"score {row['score']:g}")
        if row.get("threshold") is not None:
            figures.append(f"threshold {row['threshold']:g}")
        if figures:
            out.append("  " + " · ".join(figures) + "\n", style="dim")
        if row.get("note"):
            out.append("  note: ", style="dim")
            out.append(_cut(inert(row["note"])))
            out.append("\n")
        if row.get("provenance"):
            out.append("  by: ", style="dim")
            out.append(_cut(_provenance(str(row["provenance"]))))
            out.append("\n")


def _provenance(text: str) -> str:
    """A judge's provenance (``judge:MODEL prompt DIGEST``) as "judge MODEL, prompt DIGEST"."""
    kind, _, rest = text.partition(":")
    model, marker, digest = rest.partition(" prompt ")
    if kind in ("judge", "rubric", "similar", "pairwise") and marker:
        return inert(f"{kind} {model}, prompt {digest}", one_line=True)
    return inert(text, one_line=True)


def _value(value: Any, *, one_line: bool = False) -> str:
    """A JSON value for reading: a string as its text, anything else as JSON."""
    if isinstance(value, str):
        return _cut(inert(value))
    text = json_text(value, indent=None if one_line else 2)
    return _cut(inert(text))


def _loose_json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return data.decode("utf-8", "replace")


def _cut(text: str) -> str:
    if len(text) <= LIMIT:
        return text
    return f"{text[:LIMIT]}… ({len(text) - LIMIT} more characters not shown)"
