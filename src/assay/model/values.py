"""Reading and comparing output values: JSONPath, JSON types, numeric equality."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, TypeGuard

_MISSING = object()

#: ``$`` then ``.name`` and ``[index]`` steps only: what nearly every suite writes.
_SIMPLE = re.compile(r"\$(?:\.[A-Za-z_][A-Za-z0-9_]*|\[(?:0|-?[1-9][0-9]{0,14})\])*")
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(-?[0-9]+)\]")


class SimplePath:
    """A JSONPath of names and indexes, resolved as python-jsonpath resolves it.

    Such a path needs neither the library (its import alone costs more than
    loading a small suite) nor its general machinery, once per trial. The
    semantics are the library's, held to it by a property test: a name
    selects a mapping's member; an index selects a sequence's item (negative
    from the end) and, as the library's default (non-strict) mode does, also
    a mapping's member named by the index's digits.
    """

    __slots__ = ("steps",)

    def __init__(self, steps: tuple[str | int, ...]) -> None:
        self.steps = steps

    def singular_query(self) -> bool:
        """Always: each step selects at most one value."""
        return True

    def findall(self, data: Any) -> list[Any]:
        """The values the path selects in ``data``: none or one."""
        node = data
        for step in self.steps:
            if isinstance(step, str):
                if not isinstance(node, Mapping) or step not in node:
                    return []
                node = node[step]
            elif isinstance(node, Mapping):
                if str(step) not in node:
                    return []
                node = node[str(step)]
            elif isinstance(node, Sequence) and not isinstance(node, str) \
                    and -len(node) <= step < len(node):
                node = node[step]
            else:
                return []
        return [node]


def _simple(path: str) -> SimplePath | None:
    if not _SIMPLE.fullmatch(path):
        return None
    return SimplePath(tuple(name if name else int(index)
                            for name, index in _STEP.findall(path)))


@lru_cache(maxsize=1024)
def compile_path(path: str) -> Any:
    """Compile a JSONPath (RFC 9535); raises ``ValueError`` when it is malformed."""
    simple = _simple(path)
    if simple is not None:
        return simple
    import jsonpath  # imported on first use: suites without paths never pay for it

    try:
        return jsonpath.compile(path)
    except jsonpath.JSONPathError as exc:
        first = str(exc).splitlines()[0]
        raise ValueError(f"bad JSONPath {path!r}: {first}") from None


def select(output: Any, path: str | None) -> tuple[bool, Any]:
    """The value at ``path`` in ``output``: ``(found, value)``.

    Without a path, the whole output. A string output that holds JSON is read
    as JSON when a path is given. The shape follows the path, never the data
    (SPEC §3): a singular path (names and indexes only, ``$.rows[0].total``)
    gives the value, or ``found=False`` when nothing is there; any other path
    (a wildcard, slice, filter, union or descent, ``$.rows[*].total``) gives
    the list of its matches in document order, however many there are, none
    included.
    """
    if path is None:
        return True, output
    data = output
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            return False, None
    compiled = compile_path(path)
    matches = compiled.findall(data)
    if not _singular(compiled):
        return True, list(matches)
    if not matches:
        return False, None
    return True, matches[0]


def _singular(compiled: Any) -> bool:
    # A union of paths (`$.a | $.b`, python-jsonpath's extension) has no
    # singular_query: it selects a list, like any path that may match several.
    singular = getattr(compiled, "singular_query", None)
    return bool(singular()) if singular is not None else False


def as_text(value: Any) -> str:
    """The text a string check reads: a string as is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def is_number(value: Any) -> bool:
    """A JSON number: int or float, but not bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_whole(value: Any, minimum: int | None = None) -> TypeGuard[int]:
    """A whole number (an int, not a bool), at least ``minimum`` if given.

    What every count a check takes is held to (``times``, ``steps``,
    ``tokens``, rows, an exit code): ``1.0`` and ``true`` are not counts.
    """
    return isinstance(value, int) and not isinstance(value, bool) and (
        minimum is None or value >= minimum)


def same(a: Any, b: Any) -> bool:
    """JSON equality where numbers compare as numbers (1 == 1.0) and bools are not numbers."""
    if is_number(a) and is_number(b):
        return bool(a == b) or (
            isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
        )
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


JSON_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")


def json_type_matches(value: Any, name: str) -> bool:
    """Whether ``value`` is of the JSON type ``name`` (integer: no fractional part)."""
    if name == "string":
        return isinstance(value, str)
    if name == "number":
        return is_number(value)
    if name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if name == "boolean":
        return isinstance(value, bool)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    return value is None


def type_name(value: Any) -> str:
    """The JSON type name of a value, for notes."""
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if json_type_matches(value, name):
            return name
    return type(value).__name__


def one_line(text: str, limit: int = 80) -> str:
    """Text on one line (runs of whitespace as one space), cut to ``limit`` with "…"."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def short(value: Any, limit: int = 80) -> str:
    """A value shortened for a note."""
    text = as_text(value) if not isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"
