"""YAML loading that keeps line marks, so errors can point at the user's line."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml
from yaml.events import (
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)

from ..errors import SuiteError

Loc = Sequence[str | int]
#: A place in the data as a tuple, the key of the lines the event pass records.
Place = tuple[str | int, ...]

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Marked:
    """A loaded YAML document, able to give the line of any value in it.

    The lines a clean load always asks for (the document's, and each item
    of every list: every case and every assertion) were recorded while the
    data was read. Any other line (an error's) comes from the node tree,
    which is composed from the text only when first needed.
    """

    def __init__(self, data: Any, root: yaml.Node | None, file: str, *,
                 text: str | None = None, lines: dict[Place, int] | None = None) -> None:
        self.data = data
        self.file = file
        self._root = root
        #: The text to compose the node tree from, until it has been composed.
        self._text = text
        self._lines = lines if lines is not None else {}
        # Where each parent path led: a suite asks for the lines of every case and
        # every assertion, and walking from the root each time rescans the same keys.
        self._walked: dict[Place, tuple[yaml.Node | None, int | None, bool]] = {}

    @property
    def root(self) -> yaml.Node | None:
        """The document's node tree (composed now if the data was read without it)."""
        if self._text is not None:
            self._root = _compose(self._text)
            self._text = None
        return self._root

    def line(self, loc: Loc) -> int | None:
        """The 1-based line of the value at ``loc`` (or of the nearest parent found)."""
        known = self._lines.get(tuple(loc))
        if known is not None:
            return known
        if not loc:
            root = self.root
            return root.start_mark.line + 1 if root is not None else None
        node, best, whole = self._walk(tuple(loc[:-1]))
        if not whole:
            return best
        child = _child(node, loc[-1])
        return best if child is None else int(child.start_mark.line) + 1

    def _walk(self, loc: Place) -> tuple[yaml.Node | None, int | None, bool]:
        """The node at ``loc``, the line of the deepest node found on the way, and if all was."""
        known = self._walked.get(loc)
        if known is not None:
            return known
        if not loc:
            node = self.root
            walked = (node, node.start_mark.line + 1 if node is not None else None, True)
        else:
            node, best, whole = self._walk(loc[:-1])
            child = _child(node, loc[-1]) if whole else None
            walked = (node, best, False) if child is None else \
                (child, int(child.start_mark.line) + 1, True)
        self._walked[loc] = walked
        return walked

    def key_line(self, loc: Loc) -> int | None:
        """The 1-based line of the *key* at the end of ``loc`` (for unknown keys)."""
        parent = self.root
        for part in loc[:-1]:
            parent = _child(parent, part)
        if isinstance(parent, yaml.MappingNode):
            for key, _ in parent.value:
                if key.value == loc[-1]:
                    return int(key.start_mark.line) + 1
        return self.line(loc)


def _child(node: yaml.Node | None, part: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if key.value == part:
                return value  # type: ignore[no-any-return]
    elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
        if 0 <= part < len(node.value):
            return node.value[part]  # type: ignore[no-any-return]
    return None


def _compose(text: str) -> yaml.Node | None:
    """The node tree of text that has already loaded without error."""
    loader = _LOADER(text)
    try:
        return loader.get_single_node()  # type: ignore[no-any-return]
    finally:
        loader.dispose()


_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_MERGE = "tag:yaml.org,2002:merge"


class _Unusual(Exception):
    """Something the event pass leaves to the node tree (which says what it is)."""


def _from_events(loader: Any) -> tuple[Any, dict[Place, int]]:
    """The document's plain data straight from libyaml's events, and the lines of list items.

    Composing a node tree first costs twice what reading the events does:
    libyaml calls back into Python to resolve every scalar, and the tree is
    walked again to build the data and again for every line asked for.
    Here a scalar is resolved only when it could be anything but a string
    (a plain scalar whose first character starts one of the loader's
    implicit resolvers, or is empty), and the result is what the node path
    gives: strings as written, every other value from the loader's own
    constructor.

    Whatever the node path treats specially, or refuses, is not handled
    here: anchors, aliases, tags, merge keys, complex keys, a key written
    twice, more than one document, a syntax error. Each raises (``_Unusual``
    or the parser's or constructor's own error), and ``load_marked`` reads
    the file again the old way, so the data or the error is the node path's
    own.

    The lines recorded are keyed by place as ``Marked.line`` walks the tree:
    a mapping's part is the key as written (equal to the key itself for
    string keys), a list's is the index. After a key that is not a string
    (``1:``, ``true:``) nothing more of that mapping is recorded, as a
    quoted key written the same way (``"1":``) would be shadowed there by
    the earlier one; those lines come from the node tree.
    """
    lines: dict[Place, int] = {}
    get, value = _reader(loader, lines)
    if type(get()) is not StreamStartEvent:
        raise _Unusual("no stream")
    event = get()
    if type(event) is StreamEndEvent:
        return None, lines
    if type(event) is not DocumentStartEvent:
        raise _Unusual("no document")
    event = get()
    lines[()] = event.start_mark.line + 1
    data = value(event, ())
    if type(get()) is not DocumentEndEvent or type(get()) is not StreamEndEvent:
        raise _Unusual("more than one document")
    return data, lines


def _reader(loader: Any, lines: dict[Place, int]) -> tuple[Callable[[], Any],
                                                            Callable[[Any, Place | None], Any]]:
    """``get``, the loader's next event, and ``value(event, place)``: the plain data at ``event``.

    ``value`` reads the events of the value that ``event`` starts, and records
    in ``lines`` the line of every list item below ``place`` (None: none).
    """
    if loader.yaml_path_resolvers or None in loader.yaml_implicit_resolvers:
        raise _Unusual("resolvers that depend on more than a scalar's text")
    starts = frozenset(loader.yaml_implicit_resolvers)  # first characters, and "" for empty
    get = loader.get_event
    resolve = loader.resolve
    construct = loader.construct_object
    scalar_node = yaml.ScalarNode
    tags: dict[str, str] = {}  # a plain scalar's tag depends on its text alone

    # Most scalars are strings as written: untagged, unanchored, and quoted or
    # starting with no resolver's character. That test is written out where a
    # scalar is met (a list item, a key, a value), as a call per scalar would
    # cost a tenth of the whole pass; ``scalar`` takes the rest.

    def scalar(event: Any) -> Any:
        if event.anchor is not None or event.tag is not None:
            raise _Unusual("anchor or tag")
        value: str = event.value
        if not event.implicit[0] or value[:1] not in starts:
            return value
        tag = tags.get(value)
        if tag is None:
            tag = tags[value] = resolve(scalar_node, value, event.implicit)
        if tag == _STR:
            return value
        if tag == _MERGE:
            raise _Unusual("merge key")
        return construct(scalar_node(tag, value, event.start_mark, event.end_mark,
                                     event.style), True)

    def collection(event: Any, place: Place | None) -> Any:
        kind = type(event)
        if kind is not SequenceStartEvent and kind is not MappingStartEvent:
            raise _Unusual("alias")
        if event.anchor is not None or event.tag is not None:
            raise _Unusual("anchor or tag")
        return sequence(place) if kind is SequenceStartEvent else mapping(place)

    def sequence(place: Place | None) -> list[Any]:
        out: list[Any] = []
        append = out.append
        index = 0
        event = get()
        while type(event) is not SequenceEndEvent:
            here = None
            if place is not None:
                here = (*place, index)
                lines[here] = event.start_mark.line + 1
            if type(event) is not ScalarEvent:
                append(collection(event, here))
            elif event.tag is None and event.anchor is None and \
                    (not event.implicit[0] or event.value[:1] not in starts):
                append(event.value)
            else:
                append(scalar(event))
            index += 1
            event = get()
        return out

    def mapping(place: Place | None) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        event = get()
        while type(event) is not MappingEndEvent:
            if type(event) is not ScalarEvent:
                raise _Unusual("a key that is not a scalar, or an alias")
            if event.tag is None and event.anchor is None and \
                    (not event.implicit[0] or event.value[:1] not in starts):
                key = event.value
            else:
                key = scalar(event)
                if type(key) is not str:
                    place = None
            if key in out:
                raise _Unusual("a key written twice")
            event = get()
            if type(event) is not ScalarEvent:
                out[key] = collection(event, None if place is None else (*place, key))
            elif event.tag is None and event.anchor is None and \
                    (not event.implicit[0] or event.value[:1] not in starts):
                out[key] = event.value
            else:
                out[key] = scalar(event)
            event = get()
        return out

    def value(event: Any, place: Place | None) -> Any:
        return scalar(event) if type(event) is ScalarEvent else collection(event, place)

    return get, value


class _Builder:
    """Plain data from the node tree, refusing a key written twice in one mapping.

    PyYAML would keep the last of two equal keys without a word (a case's
    first ``expect:`` list would vanish); YAML 1.2 says keys are unique. Plain
    strings, lists and mappings are built here directly, which is also about
    twice as fast as PyYAML's generic constructor; every other node (numbers,
    booleans, dates, merge keys) goes to PyYAML's safe constructor.
    """

    def __init__(self, loader: Any, file: str, secret: bool) -> None:
        self.loader = loader
        self.file = file
        self.secret = secret

    def build(self, node: yaml.Node) -> Any:
        if isinstance(node, yaml.ScalarNode):
            return node.value if node.tag == _STR else self._construct(node)
        if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ:
            return [self.build(child) for child in node.value]
        if isinstance(node, yaml.MappingNode) and node.tag == _MAP:
            if any(key.tag == _MERGE for key, _ in node.value):
                return self._construct(node)
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                key = self.build(key_node)
                try:
                    seen = key in out
                except TypeError:
                    raise SuiteError(self.file, key_node.start_mark.line + 1,
                                     "a mapping key must be a plain value") from None
                if seen:
                    what = "a key" if self.secret else f"key {key!r}"
                    raise SuiteError(self.file, key_node.start_mark.line + 1,
                                     f"{what} is written twice in the same mapping")
                out[key] = self.build(value_node)
            return out
        return self._construct(node)

    def _construct(self, node: yaml.Node) -> Any:
        """PyYAML's safe constructor for ``node``; a value it cannot make is the file's error.

        A date that does not exist (``2024-13-45``) or a time-zone offset past
        a day raises a bare ``ValueError`` from inside PyYAML: the user gets
        their line instead of a traceback.
        """
        try:
            return self.loader.construct_object(node, True)
        except yaml.YAMLError:
            raise
        except (ValueError, OverflowError) as exc:
            what = "not a valid value" if self.secret else f"not a valid value: {exc}"
            raise SuiteError(self.file, node.start_mark.line + 1, what) from None


def load_marked(path: Path, *, secret: bool = False, text: str | None = None) -> Marked:
    """Parse one YAML file with libyaml, keeping what is needed for line marks.

    The data is read from libyaml's events (``_from_events``); a file that
    pass declines is parsed again into a node tree, as every file once was,
    which gives the same data or raises the error. A syntax error becomes a
    ``SuiteError`` at the line libyaml reports; for a hidden file
    (``secret``) the parser's own words, which may quote the content, are
    withheld. ``text`` is the file's text when already read.
    """
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SuiteError(str(path), None, f"cannot read the file: {exc}") from None
    loader = _LOADER(text)
    try:
        data, lines = _from_events(loader)
    except Exception:  # whatever it was, the node path below meets it too
        pass
    else:
        return Marked(data, None, str(path), text=text, lines=lines)
    finally:
        loader.dispose()
    return _load_nodes(path, text, secret)


def _load_nodes(path: Path, text: str, secret: bool) -> Marked:
    """The node path: compose the whole tree, then build the data from it."""
    loader = _LOADER(text)
    try:
        root = loader.get_single_node()
        data = _Builder(loader, str(path), secret).build(root) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = "not valid YAML" if secret else f"not valid YAML: {exc.problem}"
        raise SuiteError(str(path), line, what) from None
    except yaml.YAMLError as exc:
        what = "not valid YAML" if secret else f"not valid YAML: {exc}"
        raise SuiteError(str(path), None, what) from None
    finally:
        loader.dispose()
    return Marked(data, root, str(path))


class Declined(Exception):
    """Something a case-by-case read leaves to a whole parse (which says what it is)."""


#: One case as a suite file holds it: its plain data, its line, and each assertion's line.
RawCase = tuple[Any, int | None, list[int | None]]


class SuiteStream:
    """A suite file read from libyaml's events one case at a time, never held whole.

    Iterating yields each case of the top-level ``cases:`` list as ``RawCase``
    (the data ``load_marked`` would give for it, and the lines it would
    record); once the iteration ends, ``top`` holds every other top-level
    key. The file is read in pieces by libyaml, not as one string.

    Only the usual shape is read this way: a document that is one mapping of
    string keys whose ``cases`` is a list (or empty). Anything else, and
    anything ``_from_events`` would leave to the node tree (a syntax error,
    an anchor, a tag, a key written twice, a file that is not UTF-8), raises
    ``Declined`` wherever it is met, perhaps after some cases were yielded:
    the caller then loads the file whole, which gives the data or the error.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.top: dict[str, Any] | None = None

    def __iter__(self) -> Iterator[RawCase]:
        try:
            with self.path.open(encoding="utf-8") as stream:
                loader = _LOADER(stream)
                try:
                    yield from self._read(loader)
                finally:
                    loader.dispose()
        except Declined:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever it is, the whole parse meets it too
            raise Declined(type(exc).__name__) from None

    def _read(self, loader: Any) -> Iterator[RawCase]:
        lines: dict[Place, int] = {}
        get, value = _reader(loader, lines)
        if type(get()) is not StreamStartEvent or type(get()) is not DocumentStartEvent:
            raise Declined("no document")
        event = get()
        if type(event) is not MappingStartEvent or event.anchor is not None \
                or event.tag is not None:
            raise Declined("not a plain mapping")
        top: dict[str, Any] = {}
        listed = False
        event = get()
        while type(event) is not MappingEndEvent:
            if type(event) is not ScalarEvent:
                raise Declined("a key that is not a scalar")
            key = value(event, None)
            if type(key) is not str or key in top or (key == "cases" and listed):
                raise Declined("a key that is not a string, or written twice")
            event = get()
            if key != "cases":
                top[key] = value(event, None)
            elif type(event) is SequenceStartEvent and event.anchor is None \
                    and event.tag is None:
                listed = True
                yield from self._cases(get, value, lines)
            else:
                listed = True
                if value(event, None):  # no cases (null, empty) is fine; anything else is not
                    raise Declined("cases is not a list")
            event = get()
        if type(get()) is not DocumentEndEvent or type(get()) is not StreamEndEvent:
            raise Declined("more than one document")
        self.top = top

    @staticmethod
    def _cases(get: Callable[[], Any], value: Callable[[Any, Place | None], Any],
               lines: dict[Place, int]) -> Iterator[RawCase]:
        index = 0
        event = get()
        while type(event) is not SequenceEndEvent:
            lines.clear()
            line = event.start_mark.line + 1
            place = ("cases", index)
            data = value(event, place)
            expect = data.get("expect") if isinstance(data, dict) else None
            found: list[int | None] = []
            if isinstance(expect, list):
                for j in range(len(expect)):
                    at = lines.get((*place, "expect", j))
                    if at is None:  # not recorded (after a key that is not a string)
                        raise Declined("an assertion's line")
                    found.append(at)
            yield data, line, found
            index += 1
            event = get()
