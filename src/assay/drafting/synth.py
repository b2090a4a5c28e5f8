"""``assay synth``: draft cases asked of a model, for a cold start (SPEC §10).

A prompt made of the suite's PUBLIC cases only (``synth_prompt`` filters them itself:
a caller cannot hand it a hidden case by mistake), the model's answer read as JSON
(``read_answer``), and each draft built as the loader would build it (``check_drafts``,
through ``suites.build.make_case``, which looks whether a fixture or grader it names
exists) so that an invalid one is refused with its number and what is wrong, never
written. Nothing here calls a model or prints; ``commands/synth`` does, and hands
plain data in. The choices are in docs/decisions/0041-drafts.md.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..canonical import digest_bytes

if TYPE_CHECKING:
    from ..model import Assertion, Case, Suite
    from ..suites import LoadedSuite

from .case_yaml import comment_lines, yaml_text

#: The most public cases a synth prompt shows; a larger suite is sampled by the seed.
MAX_EXAMPLES = 20
#: The most case ids a synth prompt lists as taken; beyond it, those of the examples shown.
MAX_TAKEN_SHOWN = 200



class BadAnswer(ValueError):
    """The model's answer cannot be read as drafts at all (not JSON, not a list of cases)."""


@dataclass(frozen=True)
class SynthPrompt:
    """What the model is asked: the text, its digest, how many examples it shows of how many."""

    text: str
    digest: str
    shown: int
    public: int


def synth_prompt(suite: Suite, k: int, seed: int, *, tools: Sequence[str] = (),
                 fixtures: Sequence[str] = ()) -> SynthPrompt:
    """Ask for ``k`` new cases in the style of ``suite``'s public cases.

    Hidden cases are left out here, whoever calls: only ``split == "public"``
    cases are read. Above ``MAX_EXAMPLES`` public cases, a sample drawn with
    ``seed`` is shown (the seed is recorded, so the prompt can be made again).
    ``tools`` and ``fixtures``: the tool names and fixture files the public
    cases use (``public_tools``), so that drafts can name them.
    """
    from ..checks import REGISTRY

    public = [case for case in suite.cases if case.split == "public"]
    shown = public
    if len(public) > MAX_EXAMPLES:
        picked = sorted(random.Random(seed).sample(range(len(public)), MAX_EXAMPLES))
        shown = [public[i] for i in picked]
    examples = "\n".join(json.dumps(authored(case), ensure_ascii=False, sort_keys=False)
                         for case in shown)
    named = public if len(public) <= MAX_TAKEN_SHOWN else shown
    taken = ", ".join(json.dumps(case.id, ensure_ascii=False) for case in named) or "(none)"
    if len(named) < len(public):
        taken += f" (nor any other of the suite's {len(public)} case ids)"
    title = f" ({json.dumps(suite.title, ensure_ascii=False)})" if suite.title else ""
    lines = [
        f"You are drafting new test cases for the agent evaluation suite {suite.id}{title}.",
        "A case gives the agent one input and lists what its answer and its tool calls "
        "must satisfy.",
        "",
        f"Write {k} new case(s) in the style of the examples below: situations the examples "
        "do not cover yet, of the same kind and difficulty, each one checkable from what "
        "the agent answers and which tools it calls.",
        "",
        "Each case is a JSON object with these keys:",
        '- "id": a short name in lower case with hyphens, unique, and none of: ' + taken,
        '- "input": what the agent is given (a string is a prompt; any JSON value is allowed)',
        '- "expect": a non-empty list of assertions; each assertion is an object whose one '
        "key, besides the optional modifiers \"path\" (a JSONPath into the answer), "
        '"min_evidence", "threshold" and "breach_evidence", is one of: '
        + ", ".join(sorted(REGISTRY)),
        '- optionally "tags" (a list of words) and "expected" (a reference answer)',
    ]
    if fixtures:
        lines.append('- "fixture" when the agent needs tools: one of '
                     + ", ".join(json.dumps(f, ensure_ascii=False) for f in fixtures))
    if tools:
        lines.append("The tools those fixtures give the agent: "
                     + ", ".join(json.dumps(t, ensure_ascii=False) for t in tools))
    lines += [
        "",
        f"The examples ({len(shown)} of the suite's {len(public)} public cases), "
        "one JSON object per line:",
        examples or "(the suite has no public cases yet)",
        "",
        f'Answer with JSON only, no prose and no code fence: {{"cases": [...]}} holding {k} '
        "case object(s).",
    ]
    text = "\n".join(lines) + "\n"
    return SynthPrompt(text, digest_bytes(text.encode("utf-8", "surrogatepass")), len(shown),
                       len(public))


def authored(case: Case) -> dict[str, Any]:
    """A case as a suite file writes it: one-key assertions, defaults left out."""
    from pydantic_core import to_jsonable_python

    data: dict[str, Any] = case.model_dump(
        mode="json", by_alias=True, exclude_defaults=True, fallback=repr,
        exclude={"expect", "split", "line", "file"})
    data["expect"] = [_authored_assertion(a) for a in case.expect]
    return to_jsonable_python(data, fallback=repr)  # type: ignore[no-any-return]


def _authored_assertion(assertion: Assertion) -> Any:
    from pydantic_core import to_jsonable_python

    if assertion.arg is None and not (assertion.path or assertion.min_evidence
                                      or assertion.threshold is not None
                                      or assertion.breach_evidence):
        return assertion.check
    form: dict[str, Any] = {assertion.check: to_jsonable_python(assertion.arg, fallback=repr)}
    if assertion.path is not None:
        form["path"] = assertion.path
    if assertion.min_evidence is not None:
        form["min_evidence"] = assertion.min_evidence.value
    if assertion.threshold is not None:
        form["threshold"] = assertion.threshold
    if assertion.breach_evidence is not None:
        form["breach_evidence"] = assertion.breach_evidence.value
    return form


def public_tools(loaded: LoadedSuite) -> tuple[list[str], list[str]]:
    """The fixture files the public cases name, and the tools those fixtures declare.

    A fixture only hidden cases use is left out: its name and tools are theirs.
    """
    fixtures: list[str] = []
    tools: list[str] = []
    for case in loaded.suite.cases:
        if case.split != "public" or case.fixture is None:
            continue
        if case.fixture not in fixtures:
            fixtures.append(case.fixture)
        parsed = loaded.fixtures.get(str(loaded.fixture_path(case)))
        if parsed is not None:
            tools += [tool.name for tool in parsed.tools if tool.name not in tools]
    return fixtures, tools


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def read_answer(raw: str) -> list[Any]:
    """The drafts in a model's answer: ``{"cases": [...]}`` or a bare list.

    A code fence around the JSON is taken off (models add one when told not
    to). ``BadAnswer`` says what is wrong when there is nothing to read: not
    JSON, not a list of cases, no cases. It quotes nothing of the answer.
    """
    text = raw.strip()
    fenced = re.fullmatch(r"```[A-Za-z]*\s*\n(.*?)\n?```", text, flags=re.DOTALL)
    if fenced is not None:
        text = fenced.group(1)
    try:
        value = json.loads(text, parse_constant=_no_constants)
    except RecursionError:
        raise BadAnswer("the model's answer is not JSON (it is nested too deeply)") from None
    except ValueError as error:
        where = ""
        if isinstance(error, json.JSONDecodeError):
            where = f" ({error.msg} at line {error.lineno}, column {error.colno})"
        elif str(error).endswith("is not a JSON number"):
            where = f" ({error})"
        raise BadAnswer(f"the model's answer is not JSON{where}") from None
    if isinstance(value, dict):
        if "cases" not in value:
            raise BadAnswer('the model\'s answer is a JSON object without "cases": '
                            "not a list of cases")
        value = value["cases"]
        if not isinstance(value, list):
            raise BadAnswer(f'the model\'s answer gives "cases" as {_kind(value)}, not a list '
                            "of cases")
    elif not isinstance(value, list):
        raise BadAnswer(f"the model's answer is {_kind(value)}, not a list of cases")
    if not value:
        raise BadAnswer("the model's answer holds no cases")
    return value


def _kind(value: Any) -> str:
    names = {str: "a string", int: "a number", float: "a number", bool: "true or false",
             type(None): "null", dict: "an object", list: "a list"}
    return names.get(type(value), type(value).__name__)


@dataclass
class Checked:
    """The drafts read: valid ones (number, case mapping), refused ones (number, why)."""

    valid: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)
    #: Drafts past the ``k`` asked for, not read.
    extra: int = 0


def check_drafts(items: Sequence[Any], k: int, base_dir: Path,
                 taken: Iterable[str] = ()) -> Checked:
    """Build each of the first ``k`` drafts as the suite loader builds a case.

    Drafts are numbered from 1, in the answer's order. ``base_dir``: the
    folder the drafts file will be in (fixtures and graders resolve there).
    ``taken``: ids a draft may not reuse (the suite's public cases); an id
    used twice is refused the second time. A valid draft is marked
    ``synthetic: true`` whatever it said.
    """
    from ..errors import SuiteError
    from ..suites.build import Problem, make_case

    checked = Checked(extra=max(0, len(items) - k))
    used = set(taken)
    for number, item in enumerate(items[:k], start=1):
        if not isinstance(item, dict):
            checked.refused.append((number, f"a draft is an object with id, input and expect, "
                                            f"not {_kind(item)}"))
            continue
        unknown = [str(key) for key in item if key in ("line", "file")]
        if unknown:  # kept by the loader for its own messages, never written by an author
            checked.refused.append((number, f"unknown key {unknown[0]!r}"))
            continue
        draft = {"id": item.get("id"), "synthetic": True,
                 **{key: value for key, value in item.items() if key not in ("id", "synthetic")}}
        if "id" not in item:
            draft.pop("id")
        problem = Problem(f"draft {number}", _no_line, secret=False)
        try:
            case = make_case(draft, problem, [], split="public", base_dir=base_dir)
        except SuiteError as error:
            checked.refused.append((number, error.message))
            continue
        if "input" not in item:
            checked.refused.append((number, "it has no input: a case gives the agent one"))
        elif not case.expect:
            checked.refused.append((number, "its expect is empty: a case that asserts nothing "
                                            "passes whatever the agent does"))
        elif case.id in used:
            checked.refused.append((number, f"its id {case.id!r} is taken (by a case of the "
                                            "suite or an earlier draft)"))
        else:
            used.add(case.id)
            checked.valid.append((number, draft))
    return checked


def _no_line(loc: object) -> None:
    return None


def synth_suite(loaded: LoadedSuite) -> dict[str, Any]:
    """The top of the drafts file: the source suite's settings under ``ns/name-synth@N``.

    Its hidden folder is not carried: synthetic cases are all public.
    """
    suite = loaded.suite
    top: dict[str, Any] = suite.model_dump(mode="json", by_alias=True, exclude_defaults=True,
                                           exclude={"cases", "source", "hidden"})
    name, _, major = suite.id.partition("@")
    top["suite"] = f"{name}-synth@{major}"
    top["title"] = f"Synthetic drafts for {suite.id}" + (f": {suite.title}" if suite.title
                                                          else "")
    return {"suite": top.pop("suite"), "title": top.pop("title"), **top}


def synth_text(notes: Sequence[str], top: Mapping[str, Any],
               cases: Sequence[Mapping[str, Any]]) -> str:
    """The drafts file: comment lines, then a suite document holding ``cases``."""
    return comment_lines(notes) + yaml_text({**top, "cases": list(cases)})
