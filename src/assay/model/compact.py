"""Compact JSON on the hot path: the bytes pydantic writes, made by orjson.

What the store and the report hold of a trial (its trace, its usage, the
case it folds into) is pydantic's compact JSON (docs/decisions/0017). orjson
writes the same bytes for the same values — insertion order kept, no spaces,
floats and strings written alike — about ten times faster. It refuses what
pydantic writes in its own way (integers outside 64 bits, keys that are not
strings, a lone surrogate, objects that are not JSON); ``fast_json`` then
gives None and the caller writes those values through pydantic, as before.
"""

from __future__ import annotations

from typing import Any

import orjson

#: Values orjson would write in a form of its own (dataclasses, dates, subclasses of
#: str, int, dict, list) are refused instead, and so written by pydantic.
_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME \
    | orjson.OPT_PASSTHROUGH_SUBCLASS


def fast_json(value: Any) -> bytes | None:
    """``value`` (dicts, lists, str, int, float, bool, None) as compact JSON, or None
    where orjson would write it otherwise than pydantic or not at all."""
    try:
        return orjson.dumps(value, option=_OPTIONS)
    except (orjson.JSONEncodeError, TypeError):
        return None
