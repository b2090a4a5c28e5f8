"""Graders: user code that judges a trace (SPEC §3).

``grader: module:function`` calls a Python function with the Trace; ``grader:
./graders/x.py`` runs a script that reads the trace as JSON on stdin and
prints ``{"outcome": ..., "note": ...}``. A case with a workspace has it in
``ASSAY_WORKSPACE`` (a script) or ``trace.workspace.path`` (a function) while
it is graded. Either may answer pass, fail or
inconclusive; anything else, an exception, a non-zero exit or garbage is
``inconclusive`` — a grader that did not answer has not passed anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..importing import resolve_function
from ..model import Assertion, Trace
from .registry import Check, Judgement, LoadContext, register

GRADER_TIMEOUT_S = 60.0
OUTCOMES = ("pass", "fail", "inconclusive")


def is_script(spec: str) -> bool:
    """Whether a grader spec names a script (a path) rather than ``module:function``."""
    return spec.startswith((".", "/")) or spec.endswith(".py") and ":" not in spec


def _base_dir(assertion: Assertion) -> Path:
    return Path(assertion.file).parent if assertion.file else Path.cwd()


def _prepare(arg: Any, ctx: LoadContext) -> Any:
    if not isinstance(arg, str) or not arg:
        raise ValueError("expects module:function or a ./path/to/script")
    if is_script(arg):
        path = (ctx.base_dir / arg).resolve()
        if not path.is_file():
            raise ValueError(f"grader script {arg!r} does not exist")
    else:
        try:
            resolve_function(arg, ctx.base_dir)
        except ValueError as exc:
            raise ValueError(f"grader {exc}") from None
    return arg


def _read_answer(answer: Any) -> Judgement:
    if isinstance(answer, Judgement):
        return answer
    if isinstance(answer, bool):
        return Judgement("pass" if answer else "fail")
    if isinstance(answer, str) and answer in OUTCOMES:
        return Judgement(answer)  # type: ignore[arg-type]
    if isinstance(answer, tuple) and len(answer) == 2:
        first = _read_answer(answer[0])
        return Judgement(first.outcome, str(answer[1]))
    if isinstance(answer, dict) and answer.get("outcome") in OUTCOMES:
        return Judgement(answer["outcome"], str(answer.get("note", "")))
    return Judgement("inconclusive", "grader answered out of form")


def _run_script(path: Path, trace: Trace) -> Judgement:
    command = [sys.executable, str(path)] if path.suffix == ".py" else [str(path)]
    env = None
    if trace.workspace is not None and trace.workspace.path is not None:
        # The trial's final workspace, while it is graded (SPEC §14).
        env = {**os.environ, "ASSAY_WORKSPACE": trace.workspace.path}
    try:
        done = subprocess.run(
            command,
            input=trace.model_dump_json(),
            capture_output=True,
            text=True,
            timeout=GRADER_TIMEOUT_S,
            cwd=path.parent,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return Judgement("inconclusive", f"grader script ran over {GRADER_TIMEOUT_S:.0f}s")
    except OSError as exc:
        return Judgement("inconclusive", f"grader script could not start: {exc.strerror}")
    if done.returncode != 0:
        return Judgement("inconclusive", f"grader script exited {done.returncode}")
    try:
        lines = [line for line in done.stdout.splitlines() if line.strip()]
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        return Judgement("inconclusive", "grader script printed no JSON answer")
    return _read_answer(answer)


def _evaluate(assertion: Assertion, trace: Trace) -> Judgement:
    spec: str = assertion.arg
    base = _base_dir(assertion)
    if is_script(spec):
        judgement = _run_script((base / spec).resolve(), trace)
    else:
        try:
            judgement = _read_answer(resolve_function(spec, base)(trace))
        except Exception as exc:  # a grader that raises has not answered
            judgement = Judgement("inconclusive", f"grader raised {type(exc).__name__}: {exc}")
    return Judgement(judgement.outcome, judgement.note, provenance=f"grader:{spec}")


register(Check("grader", "output", "output", _evaluate, _prepare, takes_path=False, blocking=True))
