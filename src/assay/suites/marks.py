"""YAML loading that keeps line marks, so errors can point at the user's line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from ..errors import SuiteError

Loc = Sequence[str | int]


class Marked:
    """A loaded YAML document with its node tree, to find the line of any value."""

    def __init__(self, data: Any, root: yaml.Node | None, file: str) -> None:
        self.data = data
        self.root = root
        self.file = file
        # Where each parent path led: a suite asks for the lines of every case and
        # every assertion, and walking from the root each time rescans the same keys.
        self._walked: dict[tuple[str | int, ...], tuple[yaml.Node | None, int | None, bool]] = {}

    def line(self, loc: Loc) -> int | None:
        """The 1-based line of the value at ``loc`` (or of the nearest parent found)."""
        if not loc:
            return self.root.start_mark.line + 1 if self.root is not None else None
        node, best, whole = self._walk(tuple(loc[:-1]))
        if not whole:
            return best
        child = _child(node, loc[-1])
        return best if child is None else int(child.start_mark.line) + 1

    def _walk(self, loc: tuple[str | int, ...]) -> tuple[yaml.Node | None, int | None, bool]:
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


_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_MERGE = "tag:yaml.org,2002:merge"


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
            return node.value if node.tag == _STR else self.loader.construct_object(node, True)
        if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ:
            return [self.build(child) for child in node.value]
        if isinstance(node, yaml.MappingNode) and node.tag == _MAP:
            if any(key.tag == _MERGE for key, _ in node.value):
                return self.loader.construct_object(node, True)
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
        return self.loader.construct_object(node, True)


def load_marked(path: Path, *, secret: bool = False, text: str | None = None) -> Marked:
    """Parse one YAML file with libyaml, keeping the node tree for line marks.

    A syntax error becomes a ``SuiteError`` at the line libyaml reports; for a
    hidden file (``secret``) the parser's own words, which may quote the
    content, are withheld. ``text`` is the file's text when already read.
    """
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SuiteError(str(path), None, f"cannot read the file: {exc}") from None
    loader_cls = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = loader_cls(text)
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
