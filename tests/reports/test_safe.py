"""Text that is not ours is inert on every surface: terminal, JSON on a terminal, XML, Markdown."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from rich.errors import MarkupError

from assay.reports.safe import inert, json_text, markdown_code, markdown_text, shown

from ..fuzz_corpus import ANSI, CORPUS, HOSTILE, MARKUP, assert_inert

ANY_TEXT = st.text(st.characters(codec=None))


def render(*renderables: object) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=200, highlight=False)
    console.print(*renderables)
    return buffer.getvalue()


def test_markup_as_a_string_is_what_crashed_the_terminal() -> None:
    with pytest.raises(MarkupError):
        render(f"why: {MARKUP['inst']}")


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_each_entry_is_shown_as_written_and_acts_on_nothing(name: str) -> None:
    out = render(shown(CORPUS[name]))
    assert_inert(out, name)
    if name in MARKUP:
        assert CORPUS[name] in out  # not parsed: no style, no link, no emoji


def test_escapes_show_as_control_pictures_newlines_and_tabs_stay() -> None:
    assert inert(ANSI["csi"]) == "␛[31mred␛[0m"
    assert inert("a\x00b\rc\x7fd\x9be") == "a␀b␍c␡d\ufffde"
    assert inert("one\n\ttwo") == "one\n\ttwo"
    assert inert("one\n\ttwo", one_line=True) == "one  two"
    assert inert("x" * 10, limit=4) == "xxx…"
    plain = "an ordinary line"
    assert inert(plain) is plain


@given(ANY_TEXT)
def test_any_text_is_inert_and_encodable(text: str) -> None:
    kept = inert(text)
    assert_inert(kept)
    kept.encode("utf-8")
    assert "\n" not in inert(text, one_line=True)


@given(ANY_TEXT)
def test_any_text_makes_well_formed_xml(text: str) -> None:
    element = ET.Element("failure", message=inert(text))
    element.text = inert(text)
    again = ET.fromstring(ET.tostring(element, encoding="utf-8"))
    assert again.text == inert(text) or (again.text is None and inert(text) == "")
    assert again.get("message") is not None


@given(st.recursive(st.none() | ANY_TEXT | st.integers(),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(ANY_TEXT, inner, max_size=3), max_leaves=10))
def test_json_for_a_terminal_is_inert_and_the_same_value(value: object) -> None:
    text = json_text(value)
    assert_inert(text)
    assert json.loads(text) == value


def test_json_for_a_terminal_keeps_the_corpus_exactly() -> None:
    text = json_text(CORPUS)
    assert json.loads(text) == CORPUS
    assert "\\u009b" in text and "\\ud800" in text and "\\u202e" in text


@given(ANY_TEXT)
def test_markdown_cells_cannot_open_anything(text: str) -> None:
    cell = markdown_text(text)
    assert "\n" not in cell
    # Every character that opens a construct is escaped; so is every backslash.
    assert re.search(r"(?<!\\)(?:\\\\)*[|<>\[\]`*_&!~]", cell.replace("\\\\", "")) is None


def test_markdown_of_the_corpus() -> None:
    cell = markdown_text(HOSTILE)
    assert "\\<script\\>" in cell and "\\!\\[t\\]" in cell and "\\| fake \\|" in cell
    assert markdown_code("a `b` c") == "``a `b` c``"
    assert markdown_code("`x`") == "`` `x` ``"
    assert markdown_code("plain") == "`plain`"


def test_the_progress_bar_shows_a_label_as_written() -> None:
    from assay.reports.progress import BatteryProgress

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=200)
    with BatteryProgress(console, "[/INST] " + ANSI["csi"], total=2) as progress:
        progress.trial_done("pass")
        progress.trial_done("fail")
    assert progress.counts == {"pass": 1, "fail": 1}
    assert "[/INST] ␛[31mred␛[0m" in buffer.getvalue()


def test_a_table_folds_where_rich_takes_a_pipe_for_a_terminal() -> None:
    # FORCE_COLOR or TTY_COMPATIBLE=1 (CI keeping its colours) makes Rich treat any
    # stream as a terminal; a table printed to a log must still keep every value
    # whole (docs/decisions/0058-whole-values-in-logs.md).
    from rich.table import Table

    from assay.reports.safe import is_a_terminal, on_screen, print_table, screen_limit

    value = "".join(f"{n:03d}|" for n in range(75))  # 300 characters, none repeated
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=40)
    assert console.is_terminal and not on_screen(console)
    table = Table()
    table.add_column("key")
    table.add_column("value", overflow="ellipsis", no_wrap=True)
    table.add_row("k", value)
    print_table(console, table)
    out = re.sub(r"\x1b\[[0-9;]*m", "", buffer.getvalue())
    assert "…" not in out
    cells = "".join(line.split("│")[2].strip() for line in out.splitlines()
                    if line.count("│") == 3)
    assert cells == value
    assert screen_limit(console, 48) is None

    closed = io.StringIO()
    closed.close()
    assert not is_a_terminal(closed) and not is_a_terminal(object())
