"""A promptfoo config (``promptfooconfig.yaml``) as an assay suite, naming what did not map.

promptfoo runs each prompt template, with each test's ``vars`` filled in,
against each provider, and checks the output with ``assert`` entries. An
assay case is one input against one target, so each (test, prompt) pair
becomes a case whose input is the rendered prompt; the first provider that
maps becomes the suite's target (an ``openai:`` model; any other is named,
and ``--target`` gives one at run time). Assertions map where assay has
the same check:

==================  ==================================
promptfoo           assay
==================  ==================================
equals              equals
contains            contains
icontains           icontains
not-contains        not_contains
regex               regex
starts-with         regex (anchored, escaped)
contains-all        contains (one per value)
contains-any        regex (alternatives, escaped)
llm-rubric          judge: {criteria}
similar             similar: {to, threshold}
cost                costs_at_most: {usd}, min_evidence: inferred
==================  ==================================

Everything else (``javascript``, ``python``, ``latency``, ``is-json``, a
``not-`` form assay has no check for, templates beyond ``{{ name }}``,
tests read from files) is listed by ``Imported.unmapped``, each with the
test it belongs to; nothing is dropped silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import SuiteError

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass
class Imported:
    """The suite's data (ready to write as YAML) and what could not be mapped."""

    suite: dict[str, Any]
    unmapped: list[str] = field(default_factory=list)


def import_config(path: Path) -> Imported:
    """Read a promptfoo config; ``SuiteError`` (file, line, what) when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SuiteError(str(path), None, f"cannot read the promptfoo config: {error}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(error, "problem", None) or "not valid YAML"
        raise SuiteError(str(path), line, f"not a promptfoo config: {problem}") from None
    if not isinstance(data, dict):
        raise SuiteError(str(path), None, "a promptfoo config is a mapping with prompts, "
                         "providers and tests")
    lines = _top_lines(text)
    for key in ("prompts", "tests"):
        if key not in data:
            raise SuiteError(str(path), None, f"missing required key {key!r}")
    unmapped: list[str] = []
    prompts = _prompts(data["prompts"], path, lines, unmapped)
    tests = data["tests"]
    if isinstance(tests, str):
        raise SuiteError(str(path), lines.get("tests"),
                         f"tests: {tests!r}: tests read from a file are not imported; list "
                         "them in the config")
    if not isinstance(tests, list):
        raise SuiteError(str(path), lines.get("tests"), "tests is a list of test cases")
    default = data.get("defaultTest") or {}
    if not isinstance(default, dict):
        unmapped.append(f"defaultTest: {default!r} (only an inline mapping is imported)")
        default = {}
    target = _target(data.get("providers"), unmapped)
    cases: list[dict[str, Any]] = []
    for number, test in enumerate(tests, 1):
        if not isinstance(test, dict):
            raise SuiteError(str(path), None, f"test {number} is not a mapping")
        variables = {**(default.get("vars") or {}), **(test.get("vars") or {})}
        asserts = [*(default.get("assert") or []), *(test.get("assert") or [])]
        expect = []
        for entry in asserts:
            expect.extend(_assertion(entry, f"test {number}", unmapped))
        for index, prompt in enumerate(prompts, 1):
            rendered, missing = _render(prompt, variables)
            if missing:
                unmapped.append(f"test {number}, prompt {index}: {missing} left as written "
                                "(only {{ name }} placeholders are filled)")
            case_id = f"test-{number}" if len(prompts) == 1 else f"test-{number}-prompt-{index}"
            case: dict[str, Any] = {"id": case_id, "input": rendered,
                                    "expect": expect or [{"status": "ok"}]}
            if isinstance(test.get("description"), str):
                case["tags"] = [_slug(test["description"])[:60]]
            cases.append(case)
    name = _slug(str(data.get("description") or path.parent.name or "promptfoo")) or "promptfoo"
    suite: dict[str, Any] = {"suite": f"imported/{name}@1"}
    if isinstance(data.get("description"), str):
        suite["title"] = data["description"]
    if target is not None:
        suite["target"] = target
    repeat = (data.get("evaluateOptions") or {}).get("repeat")
    if isinstance(repeat, int) and repeat > 1:
        suite["trials"] = repeat
    suite["cases"] = cases
    return Imported(suite, unmapped)


def _prompts(given: Any, path: Path, lines: dict[str, int], unmapped: list[str]) -> list[str]:
    items = given if isinstance(given, list) else [given]
    prompts: list[str] = []
    for item in items:
        raw = item.get("raw") if isinstance(item, dict) else item
        if not isinstance(raw, str):
            unmapped.append(f"prompt {item!r} (only text prompts and file:// text files)")
            continue
        if raw.startswith("file://"):
            where = path.parent / raw.removeprefix("file://")
            if where.suffix not in (".txt", ".md", "") or not where.is_file():
                unmapped.append(f"prompt {raw} (only text files next to the config)")
                continue
            raw = where.read_text(encoding="utf-8")
        prompts.append(raw)
    if not prompts:
        raise SuiteError(str(path), lines.get("prompts"), "no prompt could be imported")
    return prompts


def _target(providers: Any, unmapped: list[str]) -> str | None:
    items = providers if isinstance(providers, list) else [providers] if providers else []
    chosen = None
    for item in items:
        name = item.get("id") if isinstance(item, dict) else item
        if not isinstance(name, str):
            unmapped.append(f"provider {item!r}")
            continue
        model = None
        if name.startswith("openai:chat:"):
            model = name.removeprefix("openai:chat:")
        elif name.startswith("openai:") and name.count(":") == 1:
            model = name.removeprefix("openai:")
        if model and chosen is None:
            chosen = f"openai:{model}"
        elif model:
            unmapped.append(f"provider {name}: a run has one target; give it with --target")
        else:
            unmapped.append(f"provider {name}: no assay target for it; give one with --target")
    return chosen


def _assertion(entry: Any, where: str, unmapped: list[str]) -> list[dict[str, Any]]:
    if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
        unmapped.append(f"{where}: assertion {entry!r}")
        return []
    kind, value = entry["type"], entry.get("value")
    threshold = entry.get("threshold")
    if kind == "equals":
        return [{"equals": value}]
    if kind in ("contains", "icontains", "regex") and isinstance(value, str):
        return [{kind: value}]
    if kind == "not-contains" and isinstance(value, str):
        return [{"not_contains": value}]
    if kind == "starts-with" and isinstance(value, str):
        return [{"regex": "^" + re.escape(value)}]
    if kind == "contains-all" and isinstance(value, list) and all(
            isinstance(v, str) for v in value):
        return [{"contains": v} for v in value]
    if kind == "contains-any" and isinstance(value, list) and value and all(
            isinstance(v, str) for v in value):
        return [{"regex": "|".join(re.escape(v) for v in value)}]
    if kind == "llm-rubric" and isinstance(value, str):
        return [{"judge": {"criteria": value}}]
    if kind == "similar" and isinstance(value, str):
        return [{"similar": {"to": value, "threshold": threshold if isinstance(
            threshold, int | float) else 0.75}}]
    if kind == "cost" and isinstance(threshold, int | float):
        # promptfoo prices tokens from its tables: a cost assay infers the same way.
        return [{"costs_at_most": {"usd": threshold}, "min_evidence": "inferred"}]
    shown = f" ({value!r})" if value is not None else ""
    unmapped.append(f"{where}: assertion {kind}{shown[:120]}")
    return []


def _render(template: str, variables: dict[str, Any]) -> tuple[str, str | None]:
    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        return str(variables[name]) if name in variables else match.group(0)

    rendered = _PLACEHOLDER.sub(fill, template)
    left = re.search(r"\{\{.*?\}\}|\{%.*?%\}", rendered)
    return rendered, None if left is None else left.group(0)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _top_lines(text: str) -> dict[str, int]:
    lines: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        match = re.match(r"([A-Za-z][A-Za-z0-9_]*)\s*:", line)
        if match and match.group(1) not in lines:
            lines[match.group(1)] = number
    return lines
