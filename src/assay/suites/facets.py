"""What a case was, as digests: the facets ``assay compare`` aligns two runs on (SPEC §8).

A row of a comparison claims a delta only when both runs ran the same case:
the same input and settings, the same fixture bytes, the same assertions and
the same grader code. Each is one digest in the case's facets, so that a
comparison can name which of them moved (``differs: ["fixture"]``) without
quoting anything — a hidden case's facets are digests too, and are never
shown, only compared (docs/decisions/0029-compare-and-gate.md).

The digests are SHA-256 of sorted, compact JSON: they are only ever compared
with each other, never verified by a third party, so the C encoder does
(RFC 8785 bytes would cost ten times as much per case, on the battery's path).
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..canonical import file_digest
from ..model import Case

#: Case fields that label a case without changing what it asks: not part of its facet.
_LABELS = frozenset({"tags", "expect"})


def json_digest(value: Any) -> str:
    """``sha256:`` of ``value`` as sorted, compact JSON (not RFC 8785: see the module doc)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=repr)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def case_facets(case: Case, identity: Mapping[str, Any], graders: dict[str, str]
                ) -> dict[str, str]:
    """The facets of one case, from its identity (the JSON the suite digest covers).

    ``identity`` is the case's entry in the loader's identities (fields left
    at their defaults omitted, ``fixture_digest`` added); ``graders`` caches
    grader sources' digests across cases.
    """
    facets = {
        "case": json_digest({k: v for k, v in identity.items()
                             if k not in _LABELS and k != "fixture_digest"}),
        "assertions": json_digest(identity.get("expect", [])),
    }
    fixture = identity.get("fixture_digest")
    if isinstance(fixture, str):
        facets["fixture"] = fixture
    code = [grader_digest(a.arg, a.file, graders) for a in case.expect if a.check == "grader"]
    if code:
        facets["graders"] = json_digest(code)
    if case.invocation is not None:
        facets["invocation"] = case.invocation
    return facets


def grader_digest(spec: Any, file: str | None, cache: dict[str, str]) -> str:
    """The digest of a grader's code: its script's bytes, or its function's module source.

    A grader that cannot be found (it was refused at load, so this is rare)
    is named by its spec: two runs still align when neither could read it.
    """
    key = f"{file}\0{spec}"
    found = cache.get(key)
    if found is None:
        found = cache[key] = _grader_source_digest(str(spec), file) or json_digest(str(spec))
    return found


def _grader_source_digest(spec: str, file: str | None) -> str | None:
    from ..checks.graders import is_script
    from ..importing import resolve_function

    base = Path(file).parent if file else Path.cwd()
    try:
        if is_script(spec):
            path = (base / spec).resolve()
            return file_digest(path) if path.is_file() else None
        source = inspect.getsourcefile(resolve_function(spec, base))
        return file_digest(Path(source)) if source else None
    except (OSError, TypeError, ValueError):
        return None
