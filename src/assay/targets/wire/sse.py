"""Server-sent events, read the way a browser reads them (WHATWG HTML §9.2.6), leniently.

Every model API streams its answer as ``text/event-stream``: lines of
``field: value``, an event ended by a blank line. Forty lines do not call
for a dependency (``httpx-sse`` is not installed, and ``sse-starlette`` is a
server). Two departures from the standard, both because what is read here
may be a stream cut mid-way: an event still open at the end is kept (the
standard drops it; a reader that cannot parse it says so), and an event with
no ``data`` line is kept too (its name alone can say something).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINES = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One event: its name (``message`` when the stream gave none) and its data lines joined."""

    event: str
    data: str


def sse_events(text: str) -> list[SseEvent]:
    """The events of a server-sent-event stream, in order.

    Lines end with ``\\r\\n``, ``\\n`` or ``\\r``; a line beginning with ``:``
    is a comment; ``data`` lines are joined with newlines; one space after
    the colon is not part of the value; ``id`` and ``retry`` are ignored.
    """
    events: list[SseEvent] = []
    name = ""
    data: list[str] = []
    started = False
    for line in _LINES.split(text.removeprefix("\ufeff")):
        if not line:
            if started:
                events.append(SseEvent(name or "message", "\n".join(data)))
            name, data, started = "", [], False
            continue
        if line.startswith(":"):
            continue
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
            started = True
        elif field == "event":
            name = value
            started = True
    if started:
        events.append(SseEvent(name or "message", "\n".join(data)))
    return events
