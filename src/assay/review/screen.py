"""The review screen: work the annotation queue from the keyboard (SPEC §10).

A Textual app, opened by ``assay review`` with no arguments. The open items
are listed oldest first; the selected one's trace and verdicts are shown
beside the list (``review.detail`` says what, as inert Rich text). ``a``,
``r`` and ``f`` ask for a note and take the decision through
``store.reviews.items.decide``, which seals it as a ``review`` ledger entry; the
item then leaves the list. A decision someone else took in the meantime is
a notification naming who took it, not a crash.

Textual is imported by this module only, and this module only when the
screen opens, so ``assay --help`` does not pay for it. No stored text is
ever handed to Textual as a string it would read as markup: the list, the
detail and the notifications are ``rich.text.Text`` or plain text with
markup off. The command palette is off: it offers to save screenshots,
which would write a revealed hidden case to a file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Input, Static

from ..reports.safe import inert
from .detail import Whole, Withheld, detail, empty, list_cells, view
from .queue import Shown, shown

if TYPE_CHECKING:
    from ..store.database import Store
    from ..store.reviews.items import StoredItem

#: The keys, as ``?`` lists them (and docs/usage.md "Reviewing").
KEYS = (
    ("↑ ↓  j k", "move through the open items"),
    ("g G", "the first / the last item (PgUp PgDn: a page)"),
    ("a", "approve the selected item (asks for a note)"),
    ("r", "reject it (asks for a note)"),
    ("f", "mark it needs-fix (asks for a note)"),
    ("Enter", "in the note: take the decision"),
    ("Escape", "in the note: cancel, nothing is written"),
    ("Tab", "switch to the detail and back (arrows then scroll it)"),
    ("?", "this list of keys"),
    ("q", "quit"),
)

#: How many open items the list holds at once. A queue nobody worked for a month
#: can hold tens of thousands; filling the list costs about a millisecond an item,
#: and the oldest come first anyway. The next page comes when this one is done.
PAGE = 500

_DECISIONS = {"a": "approved", "r": "rejected", "f": "needs-fix"}


def run_screen(store: Store, reviewer: str, hidden_dir: Path | None) -> int:
    """Open the review screen on ``store``'s open items until the reviewer quits.

    Returns the app's return code: 0, or 1 when the screen stopped on an error
    (already said on standard error, see ``ReviewApp._fatal_error``).
    """
    app = ReviewApp(store, reviewer, hidden_dir)
    app.run()
    return app.return_code or 0


class NoteScreen(ModalScreen[str | None]):
    """Asks for the note of one decision: Enter takes it (with the note), Escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, prompt: Text) -> None:
        super().__init__()
        self._prompt = prompt

    def compose(self) -> ComposeResult:
        with Vertical(id="note-box"):
            yield Static(self._prompt, markup=False)
            yield Input(placeholder="why (Enter takes the decision, Escape cancels)",
                        id="note")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class KeysScreen(ModalScreen[None]):
    """The keys of the review screen; any of Escape, ``?`` or ``q`` closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"), Binding("question_mark", "close", show=False),
        Binding("q", "close", show=False)]

    def compose(self) -> ComposeResult:
        text = Text("Keys\n\n", style="bold")
        for key, meaning in KEYS:
            text.append(f"{key:<10}", style="bold cyan")
            text.append(f"  {meaning}\n")
        with Vertical(id="keys-box"):
            yield Static(text, markup=False)

    def action_close(self) -> None:
        self.dismiss(None)


class ReviewApp(App[None]):
    """The open items on the left, the selected one's detail on the right."""

    TITLE = "assay review"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    #status { height: 1; background: $panel; padding: 0 1; }
    #items { width: auto; max-width: 60%; }
    #detail-pane { width: 1fr; border-left: solid $panel-lighten-2; padding: 0 1; }
    #panes { height: 1fr; }
    NoteScreen, KeysScreen { align: center middle; }
    #note-box, #keys-box { width: 80; height: auto; border: thick $accent;
                           background: $surface; padding: 1 2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "down", "Down", show=False),
        Binding("k", "up", "Up", show=False),
        Binding("g", "first", "First", show=False),
        Binding("G", "last", "Last", show=False),
        Binding("a", "decide('a')", "Approve"),
        Binding("r", "decide('r')", "Reject"),
        Binding("f", "decide('f')", "Needs fix"),
        Binding("question_mark", "keys", "Keys"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, store: Store, reviewer: str, hidden_dir: Path | None = None, *,
                 page: int = PAGE) -> None:
        super().__init__()
        self._store = store
        self._reviewer = reviewer
        self._hidden_dir = hidden_dir
        self._page = page
        self._more = False
        self._rows: list[StoredItem] = []
        self._reveal: set[str] = set()
        self._shown_item: int | None = None

    def _fatal_error(self) -> None:
        # Textual's own report of an unexpected error is a traceback showing every
        # frame's local variables, and the exception's message: either may hold a
        # hidden case's content (a row, a trace). Say what failed and where, no more.
        import sys
        import traceback

        self.bell()
        error = sys.exc_info()[1]
        frames = traceback.extract_tb(error.__traceback__) if error is not None else []
        where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
        self._exit_renderables.append(Text(
            f"assay review: the screen stopped on an internal error "
            f"({type(error).__name__}{where}); every decision taken before it is sealed."))
        self._close_messages_no_wait()

    # -- layout and loading -------------------------------------------------

    def compose(self) -> ComposeResult:
        from textual.containers import Horizontal

        yield Static(id="status", markup=False)
        with Horizontal(id="panes"):
            yield DataTable(id="items", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="detail-pane"):
                yield Static(id="detail", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#items", DataTable)
        table.add_columns("item", "case", "trial", "outcome", "run")
        table.focus()
        self._load()

    def _load(self) -> None:
        """Fill the list with the oldest open items, at most a page of them."""
        from ..store.reviews.items import list_items
        from .reveal import revealed

        rows = list_items(self._store, decided=False, limit=self._page + 1)
        self._more = len(rows) > self._page
        self._rows = rows[: self._page]
        self._reveal = revealed(self._store, self._rows, self._hidden_dir)
        table = self.query_one("#items", DataTable)
        table.clear()
        for row in self._rows:
            table.add_row(*list_cells(self._shown(row)), key=str(row.id))
        self._refresh_status()
        self._shown_item = None
        self._show(0)

    def _shown(self, row: StoredItem) -> Shown:
        return shown(row, reveal=row.run_id in self._reveal)

    def _refresh_status(self) -> None:
        count = len(self._rows)
        text = Text("assay review", style="bold")
        if self._more:
            text.append(f"  the oldest {count} open items (more wait)  ·  reviewer ")
        else:
            text.append(f"  {count} open item{'' if count == 1 else 's'}  ·  reviewer ")
        text.append(inert(self._reviewer, one_line=True), style="bold")
        text.append("  ·  ? for the keys")
        self.query_one("#status", Static).update(text)

    def _show(self, index: int) -> None:
        """Show the detail of the item at ``index`` in the list (or say the queue is empty)."""
        pane = self.query_one("#detail", Static)
        if not self._rows:
            self._shown_item = None
            pane.update(empty())
            return
        row = self._rows[max(0, min(index, len(self._rows) - 1))]
        if row.id == self._shown_item:
            return
        self._shown_item = row.id
        seen: Withheld | Whole = view(self._store, row, reveal=row.run_id in self._reveal)
        pane.update(detail(seen))
        self.query_one("#detail-pane", VerticalScroll).scroll_home(animate=False)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show(event.cursor_row)

    # -- actions --------------------------------------------------------------

    def action_down(self) -> None:
        self.query_one("#items", DataTable).action_cursor_down()

    def action_up(self) -> None:
        self.query_one("#items", DataTable).action_cursor_up()

    def action_first(self) -> None:
        self.query_one("#items", DataTable).action_scroll_top()

    def action_last(self) -> None:
        self.query_one("#items", DataTable).action_scroll_bottom()

    def action_keys(self) -> None:
        self.push_screen(KeysScreen())

    def action_decide(self, key: str) -> None:
        verdict = _DECISIONS[key]
        row = self._selected()
        if row is None:
            self.notify("The queue is empty: there is nothing to decide.", markup=False)
            return
        item = shown(row, reveal=row.run_id in self._reveal)
        prompt = Text(f"{verdict} ", style="bold")
        prompt.append(f"item {item.item} (")
        prompt.append(inert(item.case, one_line=True, limit=60), style="bold cyan")
        prompt.append(f"{'' if item.trial is None else f', trial {item.trial}'})")
        prompt.append(" — the note:")

        def taken(note: str | None) -> None:
            if note is not None:
                self._decide(row, verdict, note)

        self.push_screen(NoteScreen(prompt), taken)

    def _selected(self) -> StoredItem | None:
        if not self._rows:
            return None
        index = self.query_one("#items", DataTable).cursor_row
        return self._rows[max(0, min(index, len(self._rows) - 1))]

    def _decide(self, row: StoredItem, verdict: str, note: str) -> None:
        from sqlalchemy.exc import SQLAlchemyError

        from ..store.reviews.items import AlreadyDecided, NoSuchItem, decide

        label = inert(shown(row, reveal=row.run_id in self._reveal).case, one_line=True,
                      limit=60)
        try:
            done = decide(self._store, row.id, verdict, note, self._reviewer)
        except AlreadyDecided as taken:
            before = taken.row
            self.notify(inert(f"item {row.id} ({label}) was decided already: {before.verdict} "
                              f"by {before.reviewer} at {before.decided_at}", one_line=True),
                        title="decided meanwhile", severity="warning", markup=False)
        except NoSuchItem:
            self.notify(f"item {row.id} ({label}) is no longer in the queue", markup=False,
                        severity="warning")
        except SQLAlchemyError as error:  # the store refused (locked, gone): keep the item
            self.notify(inert(f"item {row.id} could not be decided: the store said "
                              f"{type(error).__name__}", one_line=True),
                        severity="error", markup=False)
            return
        else:
            self.notify(inert(f"item {done.id} ({label}) {done.verdict} by {done.reviewer}; "
                              f"ledger entry {done.entry}", one_line=True), markup=False)
        self._drop(row)

    def _drop(self, row: StoredItem) -> None:
        """Take ``row`` off the list and select the item that took its place."""
        table = self.query_one("#items", DataTable)
        index = next((i for i, r in enumerate(self._rows) if r.id == row.id), None)
        if index is None:
            return
        del self._rows[index]
        if not self._rows and self._more:  # this page is done: the next oldest
            self._load()
            return
        table.remove_row(str(row.id))
        self._refresh_status()
        if self._rows:
            table.move_cursor(row=min(index, len(self._rows) - 1))
        self._shown_item = None
        self._show(min(index, len(self._rows) - 1))
