"""Output checks: deterministic rules on the final output (SPEC §3)."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from ..model import Assertion, Trace
from ..model.values import (
    JSON_TYPES,
    as_text,
    is_number,
    is_whole,
    json_type_matches,
    same,
    select,
    short,
    type_name,
)
from .registry import Check, Judgement, LoadContext, register

STATUSES = ("ok", "error", "refused", "timeout")


def _passed(ok: bool, note_pass: str, note_fail: Callable[[], str]) -> Judgement:
    # The failure note is built only on failure: most verdicts pass, and
    # quoting values costs more than the check itself.
    return Judgement("pass", note_pass) if ok else Judgement("fail", note_fail())


def _at(assertion: Assertion) -> str:
    return f" at {assertion.path}" if assertion.path else ""


def _on_value(
    rule: Callable[[Assertion, Any], Judgement],
) -> Callable[[Assertion, Trace], Judgement]:
    """Wrap a rule on one value so it first resolves the assertion's path."""

    def evaluate(assertion: Assertion, trace: Trace) -> Judgement:
        found, value = select(trace.output, assertion.path)
        if not found:
            return Judgement("fail", f"nothing{_at(assertion)} in the output")
        return rule(assertion, value)

    return evaluate


# --- argument preparation (load time) --------------------------------------


def _need(kind: type | tuple[type, ...], what: str) -> Callable[[Any, LoadContext], Any]:
    def prepare(arg: Any, ctx: LoadContext) -> Any:
        if not isinstance(arg, kind) or isinstance(arg, bool) and kind is not bool:
            raise ValueError(f"expects {what}, got {type_name(arg)}")
        return arg

    return prepare


def _prepare_status(arg: Any, ctx: LoadContext) -> Any:
    if arg not in STATUSES:
        raise ValueError(f"expects one of {', '.join(STATUSES)}, got {short(arg)}")
    return arg


def _prepare_type(arg: Any, ctx: LoadContext) -> Any:
    if arg not in JSON_TYPES:
        raise ValueError(f"expects one of {', '.join(JSON_TYPES)}, got {short(arg)}")
    return arg


def _prepare_count(arg: Any, ctx: LoadContext) -> Any:
    if not is_whole(arg, 0):
        raise ValueError(f"expects a whole number ≥ 0, got {short(arg)}")
    return arg


def _prepare_regex(arg: Any, ctx: LoadContext) -> Any:
    if not isinstance(arg, str):
        raise ValueError(f"expects a regular expression as a string, got {type_name(arg)}")
    try:
        re.compile(arg)
    except re.error as exc:
        raise ValueError(f"bad regular expression: {exc}") from None
    return arg


def _prepare_schema(arg: Any, ctx: LoadContext) -> Any:
    if not isinstance(arg, dict | bool):
        raise ValueError(f"expects a JSON Schema (a mapping), got {type_name(arg)}")
    import jsonschema

    cls = jsonschema.validators.validator_for(arg)
    try:
        cls.check_schema(arg)  # type: ignore[arg-type]
    except jsonschema.SchemaError as exc:
        raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
    return arg


def _prepare_one_of(arg: Any, ctx: LoadContext) -> Any:
    if not isinstance(arg, list) or not arg:
        raise ValueError("expects a non-empty list of allowed values")
    return arg


def _prepare_approx(arg: Any, ctx: LoadContext) -> Any:
    if not isinstance(arg, dict) or set(arg) - {"value", "tol"} or "value" not in arg:
        raise ValueError("expects {value: NUMBER, tol: NUMBER}")
    tol = arg.get("tol", 1e-9)
    if not is_number(arg["value"]) or not is_number(tol) or tol < 0:
        raise ValueError("expects {value: NUMBER, tol: NUMBER ≥ 0}")
    return {"value": arg["value"], "tol": tol}


# --- rules (grade time) ----------------------------------------------------


def _status(assertion: Assertion, trace: Trace) -> Judgement:
    return _passed(
        trace.status == assertion.arg,
        f"status {trace.status}",
        lambda: f"status is {trace.status}, expected {assertion.arg}",
    )


def _equals(assertion: Assertion, value: Any) -> Judgement:
    return _passed(
        same(value, assertion.arg),
        "equal",
        lambda: f"got {short(value)}, expected {short(assertion.arg)}",
    )


def _type(assertion: Assertion, value: Any) -> Judgement:
    return _passed(
        json_type_matches(value, assertion.arg),
        f"is {assertion.arg}",
        lambda: f"is {type_name(value)}, expected {assertion.arg}",
    )


def _rows(bound: str) -> Callable[[Assertion, Any], Judgement]:
    def rule(assertion: Assertion, value: Any) -> Judgement:
        if not isinstance(value, list):
            return Judgement("fail", f"is {type_name(value)}, not an array of rows")
        n, limit = len(value), assertion.arg
        ok = n >= limit if bound == "min" else n <= limit
        word = "at least" if bound == "min" else "at most"
        return _passed(ok, f"{n} rows", lambda: f"{n} rows, expected {word} {limit}")

    return rule


def _contains(fold: bool, negate: bool) -> Callable[[Assertion, Any], Judgement]:
    def rule(assertion: Assertion, value: Any) -> Judgement:
        text, needle = as_text(value), assertion.arg
        if fold:
            text, needle = text.casefold(), needle.casefold()
        present = needle in text
        if negate:
            return _passed(not present, f"no {short(assertion.arg)}",
                           lambda: f"contains {short(assertion.arg)}")
        return _passed(present, f"contains {short(assertion.arg)}",
                       lambda: f"does not contain {short(assertion.arg)}")

    return rule


@lru_cache(maxsize=512)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _matches(assertion: Assertion, value: Any) -> Judgement:
    return _passed(
        _regex(assertion.arg).search(as_text(value)) is not None,
        f"matches /{assertion.arg}/",
        lambda: f"does not match /{assertion.arg}/",
    )


def _schema(assertion: Assertion, value: Any) -> Judgement:
    import jsonschema

    cls = jsonschema.validators.validator_for(assertion.arg)
    errors = sorted(cls(assertion.arg).iter_errors(value), key=lambda e: list(e.path))
    if not errors:
        return Judgement("pass", "valid against the schema")
    first = errors[0]
    where = "/".join(str(p) for p in first.absolute_path) or "(root)"
    return Judgement("fail", f"{len(errors)} schema error(s); first at {where}: {first.message}")


def _one_of(assertion: Assertion, value: Any) -> Judgement:
    return _passed(
        any(same(value, allowed) for allowed in assertion.arg),
        "an allowed value",
        lambda: f"got {short(value)}, expected one of {short(assertion.arg)}",
    )


def _approx(assertion: Assertion, value: Any) -> Judgement:
    target, tol = assertion.arg["value"], assertion.arg["tol"]
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return Judgement("fail", f"got {short(value)}, not a number")
    if not is_number(value):
        return Judgement("fail", f"got {type_name(value)}, not a number")
    return _passed(
        abs(value - target) <= tol,
        f"{value} within {tol} of {target}",
        lambda: f"got {value}, expected {target} ± {tol}",
    )


def _register_all() -> None:
    def out(name: str, evaluate: Any, prepare: Any, takes_path: bool = True) -> None:
        register(Check(name, "output", "output", evaluate, prepare, takes_path=takes_path))

    out("status", _status, _prepare_status, takes_path=False)
    out("equals", _on_value(_equals), lambda a, c: a)
    out("type", _on_value(_type), _prepare_type)
    out("min_rows", _on_value(_rows("min")), _prepare_count)
    out("max_rows", _on_value(_rows("max")), _prepare_count)
    out("contains", _on_value(_contains(False, False)), _need(str, "a string"))
    out("icontains", _on_value(_contains(True, False)), _need(str, "a string"))
    out("not_contains", _not_contains, _need(str, "a string"))
    out("regex", _on_value(_matches), _prepare_regex)
    out("schema", _on_value(_schema), _prepare_schema)
    out("one_of", _on_value(_one_of), _prepare_one_of)
    out("approx", _on_value(_approx), _prepare_approx)


def _not_contains(assertion: Assertion, trace: Trace) -> Judgement:
    # Nothing at the path cannot contain the forbidden text.
    found, value = select(trace.output, assertion.path)
    if not found:
        return Judgement("pass", f"nothing{_at(assertion)} in the output")
    return _contains(False, True)(assertion, value)


_register_all()
