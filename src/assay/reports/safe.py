"""Text that is not ours, made inert for a terminal, a CI log, XML and Markdown.

Case ids, titles, tags, target URIs, an agent's output, notes that quote it,
exception messages and anything read back from the store may hold Rich markup
(``[bold]``, ``[/INST]``), escape sequences or control characters. Shown as
they are, they crash Rich (``MarkupError``), recolour or rewrite the
terminal, hide text, or make JUnit XML unreadable. Every outward surface puts
such text through :func:`inert` (and, on a Rich console, :func:`shown`,
which also keeps it out of Rich's markup and emoji parsing). The policy is in
docs/decisions/0021-hostile-output.md.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text


def _table() -> dict[int, str]:
    # C0 controls (ESC among them) become their visible Control Pictures
    # (U+2400…), so an escape sequence shows as "␛[31m" instead of acting;
    # newline and tab stay. What has no picture and no place in text (C1
    # controls, lone surrogates, the non-characters XML refuses, the bidi
    # overrides that reorder what a reader sees) becomes U+FFFD.
    table = {code: chr(0x2400 + code) for code in range(0x20) if code not in (0x09, 0x0A)}
    table[0x7F] = "\u2421"
    for code in (*range(0x80, 0xA0), *range(0xD800, 0xE000), 0xFFFE, 0xFFFF,
                 *range(0x202A, 0x202F), *range(0x2066, 0x206A)):
        table[code] = "\ufffd"
    return table


_INERT = _table()
#: Any character ``_INERT`` changes: searched first, since most text has none.
_ACTS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff"
                   "\u202a-\u202e\u2066-\u2069]")


def inert(value: object, *, one_line: bool = False, limit: int | None = None) -> str:
    """``str(value)`` with nothing in it that a terminal, XML or a log would act on.

    ``one_line`` folds newlines and tabs into spaces (a table cell must not
    look like more rows); ``limit`` cuts the text to that many characters,
    ending with "…".
    """
    text = value if isinstance(value, str) else str(value)
    if _ACTS.search(text) is not None:
        text = text.translate(_INERT)
    if one_line and ("\n" in text or "\t" in text):
        text = text.replace("\n", " ").replace("\t", " ")
    if limit is not None and len(text) > limit:
        text = text[: max(0, limit - 1)] + "…"
    return text


def shown(value: object, style: str = "", *, one_line: bool = False,
          limit: int | None = None) -> Text:
    """:func:`inert` text as a Rich ``Text``: never parsed for markup or emoji codes."""
    from rich.text import Text

    return Text(inert(value, one_line=one_line, limit=limit), style=style)


def json_text(value: Any, *, indent: int | None = 2) -> str:
    """JSON for a terminal: every character an escape could act on is written as ``\\uXXXX``.

    JSON escapes C0 controls itself; DEL, C1 controls, lone surrogates and
    the bidi overrides would otherwise reach the terminal raw (or fail to
    encode). Outside strings JSON is plain ASCII, so the escaped text parses
    back to the same value.
    """
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    if _ACTS.search(text) is None:
        return text
    return text.translate(_JSON_ESCAPES)


_JSON_ESCAPES = {code: f"\\u{code:04x}" for code in _INERT if code >= 0x7F}


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>&|~!#])")


def markdown_text(value: object, *, limit: int | None = None) -> str:
    """Inert text for a Markdown table cell or line: no HTML, links, emphasis or new cells.

    Every character that could open a Markdown or HTML construct is
    backslash-escaped (CommonMark reads any escaped ASCII punctuation as
    itself; ``\\|`` keeps a GFM table's cells), newlines become spaces.
    """
    return _MARKDOWN_SPECIAL.sub(r"\\\1", inert(value, one_line=True, limit=limit))


def markdown_code(value: object) -> str:
    """Inert text as a Markdown code span, fenced by more backticks than it holds."""
    text = inert(value, one_line=True)
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def is_a_terminal(stream: object) -> bool:
    """Whether ``stream`` itself is a terminal (``isatty``); a closed stream is not."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # closed (at the end of a test run, say)
        return False


def on_screen(console: Console) -> bool:
    """Whether ``console`` prints to a terminal a person can widen, not to a kept log.

    Rich's ``is_terminal`` alone is not the answer: it is also true where
    ``FORCE_COLOR`` or ``TTY_COMPATIBLE=1`` is set, as CI jobs often do to
    keep colours in their logs, though the stream is still a pipe. So the
    stream is asked too: output is on a screen only where Rich treats it as
    a terminal and it is one.
    """
    return console.is_terminal and is_a_terminal(console.file)


def print_table(console: Console, table: Table) -> None:
    """Print ``table`` so that no cell is cut where the output is kept.

    On a terminal a cell wider than its column may end in "…": the window can
    be widened, and ``--json`` has every value. Anywhere else — a pipe, a
    file, a CI log, coloured or not — every column folds instead: a value
    written for a log is whole, its characters in order across lines, never
    ellipsised (docs/decisions/0058-whole-values-in-logs.md).
    """
    if not on_screen(console):
        for column in table.columns:
            column.overflow = "fold"
            column.no_wrap = False
    console.print(table)


def screen_limit(console: Console, limit: int) -> int | None:
    """``limit`` on a terminal, where it keeps a line on the screen; None anywhere else,
    where a value is written whole (``print_table``)."""
    return limit if on_screen(console) else None
