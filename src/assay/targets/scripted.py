"""``scripted:FILE.jsonl`` — recorded traces replayed deterministically (SPEC §4).

Each line is a JSON object: ``case`` (the case id), optionally ``trial`` (which
trial it answers; without it, a case's lines are used in turn, cycling), and
the fields of a Trace (``output``, ``status``, ``events``, ``usage`` …). A
line may say ``"broken": "reason"`` to replay a trial that never ran, or give
its own ``evidence`` map.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..canonical import file_digest
from ..errors import HarnessFailure
from ..model import Trace
from .base import TargetOptions, TrialBroken, TrialRequest, case_facets, evidence
from .identity import identity_digest


class ScriptedTarget:
    """Answers each trial with the trace recorded for its case."""

    evidence = evidence(output="observed", tool_calls="observed", asks="observed",
                        skills="observed", tokens="observed", cost="observed", steps="observed",
                        exit_code="observed")

    def __init__(self, uri: str, options: TargetOptions) -> None:
        self.uri = uri
        name = uri.removeprefix("scripted:")
        candidate = options.base_dir / name
        self.path = candidate if candidate.exists() else Path(name)
        self.facets = {"harness": "scripted"}
        self._lines: dict[str, list[dict[str, Any]]] = {}

    async def start(self) -> None:
        """Read and check every line; a bad recording cannot start."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise HarnessFailure(f"target {self.uri}: cannot read {self.path}: "
                                 f"{exc.strerror}") from None
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                raise HarnessFailure(f"{self.path}:{number}: not a JSON object") from None
            if not isinstance(record, dict) or not isinstance(record.get("case"), str):
                raise HarnessFailure(f"{self.path}:{number}: each line needs a \"case\" id")
            body = {k: v for k, v in record.items() if k not in ("case", "trial", "broken",
                                                                  "delay_s")}
            try:
                Trace.model_validate(body)
            except ValidationError as exc:
                err = exc.errors(include_url=False)[0]
                field = ".".join(str(p) for p in err["loc"])
                raise HarnessFailure(f"{self.path}:{number}: {field}: {err['msg']}") from None
            self._lines.setdefault(record["case"], []).append(record)

    async def run(self, request: TrialRequest) -> Trace:
        """The recorded trace for this case and trial."""
        lines = self._lines.get(request.case.id)
        if not lines:
            raise TrialBroken("no recorded trace for this case")
        exact = [r for r in lines if r.get("trial") == request.n]
        free = [r for r in lines if r.get("trial") is None]
        if exact:
            record = exact[0]
        elif free:  # unpinned lines answer the other trials in turn
            record = free[(request.n - 1) % len(free)]
        else:
            raise TrialBroken(f"no recorded trace for trial {request.n}")
        if record.get("delay_s"):
            await asyncio.sleep(float(record["delay_s"]))
        if record.get("broken"):
            raise TrialBroken(str(record["broken"]))
        body = {k: v for k, v in record.items() if k not in ("case", "trial", "broken", "delay_s")}
        trace = Trace.model_validate(body)
        if "evidence" not in body:
            trace.evidence = dict(self.evidence)
        pins = case_facets(request.case, "scripted",
                           unpinnable="a scripted trace is replayed as it was recorded")
        trace.facets = {**self.facets, **pins, **trace.facets}
        return trace

    async def close(self) -> None:
        """Nothing to release."""

    def identity(self) -> dict[str, str]:
        """The URI and the recording's bytes."""
        return {"uri": self.uri, "recording": file_digest(self.path)}

    def digest(self) -> str:
        """The agent version: the digest of ``identity()``."""
        return identity_digest(self.identity())
