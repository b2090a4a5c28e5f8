"""What a trace may hold: text every encoder accepts, nesting every reader accepts.

An agent's output is not ours. Two things in it break what comes after the
trace rather than the agent's grade, so they are tamed where a trace is made
(docs/decisions/0021-hostile-output.md):

- A lone surrogate (``"\\ud800"``, from a Python string or a JSON ``\\u``
  escape) cannot be encoded as UTF-8: the store, the ledger's canonical JSON
  and every report would refuse the trial. Each becomes U+FFFD.
- Nesting deeper than ``MAX_DEPTH`` levels is past what the store reads back
  (pydantic's JSON parser stops near 200 levels), what JSONPath's recursive
  descent walks (100) and what recursive code (canonical JSON, the stdlib
  encoder) survives. The part below the limit is kept as its JSON text
  behind ``CUT_NOTE``, so checks that read text (``contains``,
  ``not_contains``) still see everything the agent said.

Both are no-ops for ordinary output, which is returned as the same object.
A trace is stored as JSON, which writes a NUL as ``\\u0000``; a trial's reason
and a verdict's note are stored as text columns, where PostgreSQL refuses a
NUL: :func:`storable_note` shows it as "␀" there.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Containers an output (or a tool call's arguments) may nest before the rest is kept as text.
MAX_DEPTH = 64
#: What the text kept in place of a too-deep part begins with.
CUT_NOTE = f"<assay: nested deeper than {MAX_DEPTH} levels, kept as JSON text> "

_SURROGATE = re.compile("[\ud800-\udfff]")


def storable_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (the same object when it has none)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub("\ufffd", text)


def storable_note(text: str) -> str:
    """A reason or a note as any store's text column holds it: storable, a NUL shown as "␀"."""
    text = storable_text(text)
    return text.replace("\x00", "\u2400") if "\x00" in text else text


def storable_json(value: Any, depth: int = MAX_DEPTH) -> Any:
    """``value`` with storable strings and at most ``depth`` levels of lists and objects.

    Containers other than ``dict``/``list``/``tuple`` and scalars are left as
    they are (a Python agent's output is checked for being JSON afterwards).
    """
    kind = type(value)
    if kind is str:
        return storable_text(value)
    if kind is dict or kind is list or kind is tuple:
        if depth <= 0:
            return CUT_NOTE + _flat_json(value)
        if kind is dict:
            changed = False
            items = {}
            for key, item in value.items():
                new_key = storable_text(key) if type(key) is str else key
                new_item = storable_json(item, depth - 1)
                changed = changed or new_key is not key or new_item is not item
                items[new_key] = new_item
            return items if changed else value
        seq = [storable_json(item, depth - 1) for item in value]
        if any(new is not old for new, old in zip(seq, value, strict=True)):
            return seq
        return value
    return value


class NotPlain(Exception):  # noqa: N818 - a signal, not an error
    """``plain_copy`` met something only the full conversion knows what to do with."""


def plain_copy(value: Any, depth: int = MAX_DEPTH) -> Any:
    """A fresh copy of plain JSON data, with storable strings; ``NotPlain`` for anything else.

    What ``json.loads(json.dumps(storable_json(value)))`` gives for data made
    only of ``dict`` (string keys), ``list``, ``tuple``, ``str``, ``int``,
    ``bool``, ``None`` and finite ``float`` (exact types, no subclasses),
    nested at most ``depth`` levels, without writing and reading the text: a
    Python agent's answer is copied this way on every trial. Anything else
    (a subclass, a non-string key, NaN, deeper nesting) raises ``NotPlain``
    and is left to that slower round trip, which decides what it becomes.
    """
    kind = type(value)
    if kind is str:
        return storable_text(value)
    if kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if value - value != 0.0:  # NaN or an infinity
            raise NotPlain
        return value
    if depth <= 0:
        raise NotPlain
    if kind is dict:
        copied = {}
        for key, item in value.items():
            if type(key) is not str:
                raise NotPlain
            copied[storable_text(key)] = plain_copy(item, depth - 1)
        return copied
    if kind is list or kind is tuple:
        return [plain_copy(item, depth - 1) for item in value]
    raise NotPlain


def json_copy(value: Any) -> Any:
    """A fresh copy of ``value`` as plain, storable JSON data (what a Python agent hands us).

    ``plain_copy`` where it can; anything else is written as JSON and read
    back, nesting past ``MAX_DEPTH`` cut to text first (the round trip would
    otherwise raise ``RecursionError``). Raises ``TypeError`` or ``ValueError``
    for what JSON cannot hold (an object, NaN).
    """
    try:
        return plain_copy(value)
    except NotPlain:
        return json.loads(json.dumps(storable_json(value), allow_nan=False))


class _Raw(str):
    """A piece of JSON text already written (a bracket, a separator, a key)."""


def _flat_json(value: Any) -> str:
    """Compact JSON text of ``value`` at any depth, without recursion.

    Raises ``TypeError`` for a value JSON has no form for, like ``json.dumps``.
    """
    parts: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if type(item) is _Raw:
            parts.append(item)
        elif isinstance(item, dict):
            stack.append(_Raw("}"))
            entries = list(item.items())
            for index in range(len(entries) - 1, -1, -1):
                key, child = entries[index]
                stack.append(child)
                prefix = "," if index else ""
                stack.append(_Raw(prefix + json.dumps(_key(key), ensure_ascii=False) + ":"))
            parts.append("{")
        elif isinstance(item, list | tuple):
            stack.append(_Raw("]"))
            for index in range(len(item) - 1, -1, -1):
                stack.append(item[index])
                if index:
                    stack.append(_Raw(","))
            parts.append("[")
        elif isinstance(item, str):
            parts.append(json.dumps(storable_text(item), ensure_ascii=False))
        else:
            parts.append(json.dumps(item, allow_nan=False))
    return "".join(parts)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return storable_text(key)
    if isinstance(key, bool) or key is None:
        return json.dumps(key)
    if isinstance(key, int | float):
        return json.dumps(key, allow_nan=False)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")
