"""Outcome checks: what the agent left in its workspace (SPEC §14).

``files``, ``file`` and ``command`` are binary and need no model. They read
the facts the engine collected into the trace after the agent
(``Trace.workspace``: the change set, the files checks name, each command's
run), never the disk, so a stored trial is graded again exactly as it was.
A command that could not start or ran out of time is ``inconclusive``: the
agent was not shown to fail.
"""

from __future__ import annotations

import json
from typing import Any

from ..documents import read_document
from ..model import Assertion, Trace
from ..model.changes import ChangeSet, WorkspaceFacts, check_glob, glob_matches
from ..model.values import compile_path, one_line, same, select, short, type_name
from .registry import Check, Judgement, LoadContext, lookup, register

#: The keys of ``files:``, each a list of globs.
FILES_KEYS = ("exists", "absent", "created", "deleted", "changed", "unchanged", "only_changed")
#: How long a ``command`` may run when its assertion gives no ``timeout_s``.
COMMAND_TIMEOUT_S = 120.0
#: Output checks that read structure, not text: a file or stdout is parsed for them.
_STRUCTURED = frozenset({"schema", "type", "min_rows", "max_rows", "approx"})
#: Output checks that cannot apply to a file's or a command's text.
_NOT_ON_TEXT = frozenset({"status", "grader"})
#: Most paths a failure note names.
_NAMED = 5


def _globs(value: Any, key: str) -> list[str]:
    globs = [value] if isinstance(value, str) else value
    if not isinstance(globs, list) or not globs or \
            not all(isinstance(g, str) for g in globs):
        raise ValueError(f"{key} is a glob or a list of globs, got {type_name(value)}")
    for glob in globs:
        wrong = check_glob(glob)
        if wrong:
            raise ValueError(f"{key}: {wrong}")
    return globs


def _prepare_files(arg: Any, ctx: LoadContext) -> Any:
    if not isinstance(arg, dict) or not arg:
        raise ValueError("expects a mapping such as {unchanged: [\"tests/**\"]} with any of "
                         + ", ".join(FILES_KEYS))
    unknown = [str(k) for k in arg if k not in FILES_KEYS]
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (keys: {', '.join(FILES_KEYS)})")
    return {key: _globs(value, key) for key, value in arg.items()}


def _prepare_relative(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip("/"):
        raise ValueError(f"{what} is a path in the workspace, got {type_name(value)}")
    wrong = check_glob(value)
    if wrong:
        raise ValueError(wrong.replace("globs are", "paths are").replace("glob", "path"))
    return value.strip("/")


def _prepare_subchecks(arg: dict[str, Any], head: str, ctx: LoadContext,
                       own: tuple[str, ...] = ()) -> dict[str, Any]:
    """The output checks beside ``head``, each argument prepared as its own check prepares it."""
    prepared: dict[str, Any] = {}
    for key, value in arg.items():
        if key == head or key in own or key == "includes":
            prepared[key] = value
            continue
        check = lookup(str(key))
        if check is None or check.family != "output" or key in _NOT_ON_TEXT:
            raise ValueError(f"{key!r} is not an output check {head} can apply "
                             "(equals, includes, contains, not_contains, regex, schema, …)")
        prepared[key] = check.prepare(value, ctx)
    return prepared


def _prepare_file(arg: Any, ctx: LoadContext) -> Any:
    assert isinstance(arg, dict)  # headed: the loader gives the whole mapping
    prepared = _prepare_subchecks(arg, "file", ctx)
    prepared["file"] = _prepare_relative(arg["file"], "file")
    return prepared


def _prepare_command(arg: Any, ctx: LoadContext) -> Any:
    assert isinstance(arg, dict)
    command = arg["command"]
    if isinstance(command, list):
        if not command or not all(isinstance(part, str) and part for part in command):
            raise ValueError("a command is a shell line or a list of words (argv)")
    elif not isinstance(command, str) or not command.strip():
        raise ValueError(f"a command is a shell line or a list of words, got "
                         f"{type_name(command)}")
    exit_code = arg.get("exit_code", 0)
    if isinstance(exit_code, bool) or not isinstance(exit_code, int):
        raise ValueError(f"exit_code is a whole number, got {type_name(exit_code)}")
    timeout = arg.get("timeout_s", COMMAND_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ValueError(f"timeout_s is a number of seconds above 0, got {short(timeout)}")
    prepared = _prepare_subchecks(arg, "command", ctx, ("exit_code", "timeout_s"))
    prepared.update(exit_code=exit_code, timeout_s=float(timeout))
    return prepared


def _facts(trace: Trace) -> WorkspaceFacts | None:
    return trace.workspace


def _named(paths: list[str]) -> str:
    shown = ", ".join(paths[:_NAMED])
    return shown + (f" and {len(paths) - _NAMED} more" if len(paths) > _NAMED else "")


def _files(assertion: Assertion, trace: Trace) -> Judgement:
    facts = _facts(trace)
    if facts is None:
        return Judgement("inconclusive", "no workspace was collected for this trial")
    changes: ChangeSet = facts.changes
    changed = changes.paths()
    for key, globs in assertion.arg.items():
        wrong = _files_rule(key, globs, changes, changed, facts)
        if wrong is not None:
            return Judgement("fail", wrong)
    return Judgement("pass", "; ".join(f"{k}: {', '.join(v)}" for k, v in assertion.arg.items()))


def _files_rule(key: str, globs: list[str], changes: ChangeSet, changed: list[str],
                facts: WorkspaceFacts) -> str | None:
    """Why the workspace breaks one rule of ``files:``, or None."""
    def under(glob: str, paths: list[str]) -> list[str]:
        return [p for p in paths if glob_matches(glob, p)]

    if key in ("created", "deleted", "changed"):
        pool = changed if key == "changed" else changes.paths(key)  # type: ignore[arg-type]
        for glob in globs:
            if not under(glob, pool):
                return f"nothing {key} matches {glob}"
    elif key == "unchanged":
        hit = [p for p in changed if any(glob_matches(g, p) for g in globs)]
        if hit:
            return f"changed, but expected unchanged: {_named(hit)}"
    elif key == "only_changed":
        stray = [p for p in changed if not any(glob_matches(g, p) for g in globs)]
        if stray:
            return f"changed outside {', '.join(globs)}: {_named(stray)}"
    elif key == "exists":
        for glob in globs:
            if not facts.found.get(glob):
                return f"no path in the workspace matches {glob}"
    elif key == "absent":
        hit = [p for g in globs for p in facts.found.get(g, [])]
        if hit:
            return f"expected absent, but there: {_named(hit)}"
    return None


def _judge(key: str, value: Any, path: str | None, subject: Any) -> Judgement:
    """One output check (or ``includes``) on ``subject`` at ``path``."""
    if key == "includes":
        found, there = select(subject, path)
        if not found:
            return Judgement("fail", f"nothing at {path}" if path else "nothing there")
        if isinstance(there, list):
            ok = any(same(item, value) for item in there)
        elif isinstance(there, dict):
            ok = value in there
        else:
            ok = isinstance(there, str) and isinstance(value, str) and value in there
        return Judgement("pass", f"includes {short(value)}") if ok else \
            Judgement("fail", f"{short(there)} does not include {short(value)}")
    check = lookup(key)
    assert check is not None  # prepared at load
    return check.evaluate(Assertion(check=key, arg=value, path=path), Trace(output=subject))


def _parsed(text: str) -> tuple[bool, Any]:
    """Text as the JSON or YAML value it holds, if it holds one."""
    import yaml

    try:
        return True, json.loads(text)
    except ValueError:
        try:
            return True, yaml.safe_load(text)
        except yaml.YAMLError:
            return False, None


def _on_text(assertion: Assertion, text: str, what: str, own: tuple[str, ...]) -> Judgement:
    """Every output check beside the head, on ``text`` (parsed when a check needs structure)."""
    notes: list[str] = []
    for key, value in assertion.arg.items():
        if key in own:
            continue
        structured = assertion.path is not None or key in _STRUCTURED or \
            (key in ("equals", "one_of", "includes") and not isinstance(value, str))
        subject: Any = text
        if structured:
            ok, subject = _parsed(text)
            if not ok:
                return Judgement("fail", f"{what} does not parse as JSON or YAML ({key} "
                                         "reads its structure)")
        judged = _judge(key, value, assertion.path, subject)
        if judged.outcome != "pass":
            return Judgement(judged.outcome, f"{what}: {judged.note}")
        notes.append(judged.note)
    return Judgement("pass", f"{what}: {'; '.join(notes)}" if notes else what)


def _file(assertion: Assertion, trace: Trace) -> Judgement:
    facts = _facts(trace)
    if facts is None:
        return Judgement("inconclusive", "no workspace was collected for this trial")
    path = assertion.arg["file"]
    read = facts.file(path)
    if read is None:
        return Judgement("inconclusive", f"{path} was not read after the trial")
    if read.error is not None:
        return Judgement("fail", f"{path}: {read.error}")
    if not read.exists or read.text is None:
        return Judgement("fail", f"no file {path} in the final workspace")
    cut = " (first bytes only: the file is longer than the cap)" if read.truncated else ""
    judged = _on_text(assertion, read.text, path, ("file",))
    return Judgement(judged.outcome, judged.note + cut)


def _command(assertion: Assertion, trace: Trace) -> Judgement:
    facts = _facts(trace)
    if facts is None:
        return Judgement("inconclusive", "no workspace was collected for this trial")
    arg = assertion.arg
    command = arg["command"]
    shown = one_line(command if isinstance(command, str) else " ".join(command))
    run = facts.command(arg["command"], arg["timeout_s"])
    if run is None:
        return Judgement("inconclusive", f"`{shown}` was not run after the trial")
    if run.error is not None or run.exit_code is None:
        return Judgement("inconclusive", f"`{shown}`: {run.error or 'no exit code'}")
    if run.exit_code != arg["exit_code"]:
        tail = (run.stderr or run.stdout).strip()[-300:]
        said = f": {short(tail)}" if tail else ""
        return Judgement("fail", f"`{shown}` exited {run.exit_code}, expected "
                                 f"{arg['exit_code']}{said}")
    judged = _on_text(assertion, run.stdout, f"`{shown}` stdout",
                      ("command", "exit_code", "timeout_s"))
    if judged.outcome == "pass" and judged.note.endswith("stdout"):
        return Judgement("pass", f"`{shown}` exited {run.exit_code}")
    return judged


def _prepare_state(arg: Any, ctx: LoadContext) -> Any:
    if not isinstance(arg, dict) or not arg:
        raise ValueError("expects a mapping of output checks on the final state, such as "
                         "{path: $.accounts.attacker.balance, equals: 0} or {equals_file: F}")
    prepared: dict[str, Any] = {}
    for key, value in arg.items():
        if key == "path":
            if not isinstance(value, str):
                raise ValueError(f"path is a JSONPath, got {type_name(value)}")
            compile_path(value)  # ValueError: the reason
            prepared["path"] = value
        elif key == "equals_file":
            if not isinstance(value, str) or not value:
                raise ValueError("equals_file names a JSON or YAML file")
            prepared["equals_file"] = value
        else:
            prepared.update(_prepare_subchecks({key: value}, "state", ctx))
    if "equals_file" in prepared:
        # The document is read now: a file that does not parse is the suite's mistake,
        # and what the state is compared with is part of what the suite is.
        document = read_document(ctx.base_dir / prepared["equals_file"])
        if "equals" in arg and not same(arg["equals"], document):
            # (Both and alike is an argument prepared already, prepared again.)
            raise ValueError("gives equals and equals_file; give one")
        prepared["equals"] = document
    if not [k for k in prepared if k not in ("path", "equals_file")]:
        raise ValueError("names no check to apply to the state (equals, includes, …)")
    return prepared


def _state(assertion: Assertion, trace: Trace) -> Judgement:
    arg = assertion.arg
    inner_path = arg.get("path") or assertion.path
    notes: list[str] = []
    for key, value in arg.items():
        if key in ("path", "equals_file"):
            continue
        judged = _judge(key, value, inner_path, trace.state)
        if judged.outcome != "pass":
            said = judged.note.replace("in the output", "in the state")
            if key == "equals" and "equals_file" in arg:
                said = f"the state is not the document in {arg['equals_file']}: {said}"
            return Judgement(judged.outcome, f"state: {said}")
        notes.append(judged.note)
    where = f" at {inner_path}" if inner_path else ""
    return Judgement("pass", f"state{where}: {'; '.join(notes)}")


def _register_all() -> None:
    for name, evaluate, prepare, takes_path in (
            ("files", _files, _prepare_files, False),
            ("file", _file, _prepare_file, True),
            ("command", _command, _prepare_command, True)):
        register(Check(name, "structural", "workspace", evaluate, prepare,
                       takes_path=takes_path))
    register(Check("state", "structural", "state", _state, _prepare_state))


_register_all()
