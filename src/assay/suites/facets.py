"""What a case was, as digests: the facets ``assay compare`` aligns two runs on (SPEC §8).

A row of a comparison claims a delta only when both runs ran the same case:
the same input and settings, the same fixture bytes, the same assertions and
the same grader code. Each is one digest in the case's facets, so that a
comparison can name which of them moved (``differs: ["fixture"]``) without
quoting anything — a hidden case's facets are digests too, and are never
shown, only compared (docs/decisions/0029-compare-and-gate.md).

The digests are SHA-256 of sorted, compact JSON: they are only ever compared
with each other, never verified by a third party, so the C encoder does
(RFC 8785 bytes would cost ten times as much per case). The two that read
only the case (``case``, ``assertions``) are made once, at load, from the
identity the suite digest takes anyway, and kept as 64 raw bytes a case
(``packed_digests``); the battery's path only spells them out (``facets_of``).
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..canonical import file_digest
from ..model import Case
from ..model.invocation import invocation_facet

#: What the ``case`` facet leaves out: labels that change nothing the agent is asked
#: (``tags``), and what other facets cover (``expect``, ``fixture_digest``).
_SKIP = frozenset({"tags", "expect", "fixture_digest"})


def _encoder() -> Callable[[Any], str]:
    """One JSON encoder for every digest, made once.

    ``json.dumps`` with options builds its encoder anew on every call, and
    even ``JSONEncoder.encode`` builds the C one per call: two thirds of the
    cost per case, ten thousand times on the battery's path. The C encoder is
    built once here where the standard library offers it.
    """
    from json import encoder as std

    options = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                               default=repr)
    make = getattr(std, "c_make_encoder", None)
    if make is None:  # pragma: no cover - a Python without the C accelerator
        return options.encode
    c_encoder = make(None, options.default, std.encode_basestring, None, ":", ",", True,
                     False, True)
    return lambda value: "".join(c_encoder(value, 0))


_ENCODE = _encoder()


def json_digest(value: Any) -> str:
    """``sha256:`` of ``value`` as sorted, compact JSON (not RFC 8785: see the module doc)."""
    return "sha256:" + hashlib.sha256(
        _ENCODE(value).encode("utf-8", "surrogatepass")).hexdigest()


#: Bytes a case's two identity facets (``case``, ``assertions``) take packed: two SHA-256.
PACKED = 64


def packed_digests(identity: Mapping[str, Any]) -> bytes:
    """The ``case`` and ``assertions`` facets of one case, as 64 raw bytes.

    What a load keeps per case (``LoadedSuite.case_facets`` makes the facets
    of them): computed where the loader already has the case's identity for
    the suite digest, instead of dumping the case again on the battery's path.
    """
    rest = {k: v for k, v in identity.items() if k not in _SKIP}
    sha256 = hashlib.sha256
    return sha256(_ENCODE(rest).encode("utf-8", "surrogatepass")).digest() + sha256(
        _ENCODE(identity.get("expect", [])).encode("utf-8", "surrogatepass")).digest()


def facets_of(case: Case, packed: bytes | memoryview, fixture: str | None,
              graders: dict[str, str]) -> dict[str, str]:
    """A case's facets from its ``packed_digests`` and its fixture's digest (None: none).

    The facets that read files stay per case, and only for the cases that have
    them: a grader's code (``graders`` caches its digest across cases).
    """
    facets = {"case": "sha256:" + packed[:32].hex(),
              "assertions": "sha256:" + packed[32:PACKED].hex()}
    if fixture is not None:
        facets["fixture"] = fixture
    code = [grader_digest(a.arg, a.file, graders) for a in case.expect if a.check == "grader"]
    if code:
        facets["graders"] = json_digest(code)
    if case.invocation is not None:
        facets["invocation"] = invocation_facet(case.invocation)
    return facets


def case_facets(cases: Iterable[Case], identities: Mapping[str, Mapping[str, Any]],
                graders: dict[str, str]) -> dict[str, dict[str, str]]:
    """The facets of each case, by id, from its identity (the JSON the suite digest covers).

    ``identities`` holds each case's entry in the loader's identities (fields
    left at their defaults omitted, ``fixture_digest`` added); ``graders``
    caches grader sources' digests across cases.
    """
    found: dict[str, dict[str, str]] = {}
    for case in cases:
        identity = identities[case.id]
        fixture = identity.get("fixture_digest")
        found[case.id] = facets_of(case, packed_digests(identity),
                                   fixture if isinstance(fixture, str) else None, graders)
    return found


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
