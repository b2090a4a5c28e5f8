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

    def line(self, loc: Loc) -> int | None:
        """The 1-based line of the value at ``loc`` (or of the nearest parent found)."""
        node = self.root
        best = node.start_mark.line + 1 if node is not None else None
        for part in loc:
            child = _child(node, part)
            if child is None:
                break
            node = child
            best = node.start_mark.line + 1
        return best

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


def load_marked(path: Path, *, secret: bool = False) -> Marked:
    """Parse one YAML file with libyaml, keeping the node tree for line marks.

    A syntax error becomes a ``SuiteError`` at the line libyaml reports; for a
    hidden file (``secret``) the parser's own words, which may quote the
    content, are withheld.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(str(path), None, f"cannot read the file: {exc}") from None
    loader_cls = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = loader_cls(text)
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
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
