"""Draft cases for a cold start (SPEC §10): promoted from a stored trace, or asked of a model.

Pure but for one thing: a model's draft is checked by the suite loader's own
case builder (``suites.build.make_case``), which looks whether a fixture or
grader it names exists. Nothing here reads the store, calls a model or
prints; ``commands/promote`` and ``commands/synth`` do, and hand plain data
in. The choices are in docs/decisions/0041-drafts.md.

``promote``: a trace becomes a case that asserts what that trial did — its
status, each tool it called (``calls``), and the tools it was offered but
did not call (``never_calls``) when the run's fixture says which those were.

``synth``: a prompt made of the suite's PUBLIC cases only (``synth_prompt``
filters them itself: a caller cannot hand it a hidden case by mistake), the
model's answer read as JSON (``read_answer``), and each draft built as the
loader would build it (``check_drafts``) so that an invalid one is refused
with its number and what is wrong, never written.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..canonical import digest_bytes
from ..model.suite import MAX_CASE_ID

if TYPE_CHECKING:
    from ..model import Assertion, Case, Suite, Trace
    from ..suites import LoadedSuite

#: What a promoted case's id ends with: it never clashes with the case it came from.
PROMOTED = "-promoted"
#: The most public cases a synth prompt shows; a larger suite is sampled by the seed.
MAX_EXAMPLES = 20
#: The most case ids a synth prompt lists as taken; beyond it, those of the examples shown.
MAX_TAKEN_SHOWN = 200
#: The case fields a promoted case keeps from the case it came from (what the agent is
#: given and how it runs); its assertions are the trace's, never the old ones.
KEPT = ("input", "fixture", "timeout_s", "model", "effort", "invocation")


# --------------------------------------------------------------------------- promote


@dataclass(frozen=True)
class ToolsOffered:
    """Which tools the agent could call in the trial, as far as the run tells.

    ``names`` None: not known, and ``why`` says why (no ``never_calls`` can be
    drafted then); else the names, ``why`` saying where they were read.
    """

    names: tuple[str, ...] | None
    why: str


@dataclass(frozen=True)
class Promotion:
    """Where a promoted case came from: the run, the case as it ran, the trial's trace."""

    run_id: str
    case: Mapping[str, Any]
    n: int
    outcome: str
    trace: Trace
    offered: ToolsOffered
    hidden: bool = False
    #: The file the case was read from, as the run saw it (None: not recorded).
    source_file: str | None = None


def promoted_id(case_id: str) -> str:
    """``<case>-promoted``, the case's id cut where needed to stay within ``MAX_CASE_ID``."""
    return case_id[: MAX_CASE_ID - len(PROMOTED)] + PROMOTED


def glob_literal(name: str) -> str:
    """A tool name as a glob that matches only itself (``*``, ``?`` and ``[`` bracketed)."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def tools_called(trace: Trace) -> list[str]:
    """The tools a trace called, each once, in the order of its first call."""
    names = (event.name for event in trace.events if event.kind == "tool_call" and event.name)
    return list(dict.fromkeys(names))


def promoted_case(promotion: Promotion) -> dict[str, Any]:
    """The draft case: the input and settings that ran, and what the trial did as assertions."""
    case = promotion.case
    draft: dict[str, Any] = {"id": promoted_id(str(case["id"]))}
    for key in KEPT:
        if case.get(key) is not None:
            draft[key] = case[key]
    called = tools_called(promotion.trace)
    expect: list[Any] = [{"status": promotion.trace.status}]
    expect += [{"calls": glob_literal(name)} for name in called]
    offered = promotion.offered.names
    if offered is not None:
        idle = [name for name in dict.fromkeys(offered) if name not in called]
        if idle:
            expect.append({"never_calls": [glob_literal(name) for name in idle]})
    draft["expect"] = expect
    return draft


def promoted_text(promotion: Promotion) -> str:
    """The draft as YAML: a one-item list, the form of a suite's ``cases:`` entries,
    under comment lines that say it is a draft, where it came from and what it lacks."""
    case_id = str(promotion.case["id"])
    notes = [
        "DRAFT case made by `assay promote`: read it before it joins a suite.",
        f"from run {promotion.run_id}, case {case_id}, trial {promotion.n} "
        f"(that trial's outcome: {promotion.outcome}).",
        "It asserts what that one trial did: keep what must always hold, loosen what need not,",
        f"then paste it under the suite's cases: (its id ends in {PROMOTED}: it clashes with "
        "no case).",
    ]
    if promotion.case.get("fixture") is not None:
        where = promotion.source_file or "the suite file the case came from"
        notes.append(f"fixture: is relative to the folder of {where}.")
    notes.append(f"Tools: {promotion.offered.why}")
    if promotion.hidden:
        notes += ["This draft holds a HIDDEN case's content: keep it in the private hidden "
                  "folder,", "never in the suite file, a log or a review."]
    return comment_lines(notes) + yaml_text([promoted_case(promotion)])


# --------------------------------------------------------------------------- synth


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
        '"min_evidence" and "threshold", is one of: ' + ", ".join(sorted(REGISTRY)),
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
                                      or assertion.threshold is not None):
        return assertion.check
    form: dict[str, Any] = {assertion.check: to_jsonable_python(assertion.arg, fallback=repr)}
    if assertion.path is not None:
        form["path"] = assertion.path
    if assertion.min_evidence is not None:
        form["min_evidence"] = assertion.min_evidence.value
    if assertion.threshold is not None:
        form["threshold"] = assertion.threshold
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


# --------------------------------------------------------------------------- YAML


class _Dumper(yaml.SafeDumper):
    """Lists indented under their key, as assay's own suites are written."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # Text of several lines as a literal block; the emitter quotes it instead where a
    # block cannot hold it exactly (trailing spaces, control characters).
    return dumper.represent_scalar("tag:yaml.org,2002:str", value,
                                   style="|" if "\n" in value else None)


_Dumper.add_representer(str, _text)

#: Characters that are not shown as themselves (C0 and C1 controls, line and paragraph
#: separators, bidi controls, a byte-order mark): with any of them the text is written
#: in ASCII with escapes, which reads back the same and acts on no terminal.
_HIDDEN_ACTS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e"
                          "\u2066-\u2069\ufeff\ud800-\udfff]")


def yaml_text(data: Any) -> str:
    """``data`` as block YAML that reads back to ``data`` and is safe to print.

    Written with its own characters where it can be; otherwise in ASCII with
    escapes. Either is read back and compared before it is returned.
    """
    for readable in (True, False):
        text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=readable,
                         width=100, default_flow_style=False)
        if readable and _HIDDEN_ACTS.search(text):
            continue
        try:
            if yaml.safe_load(text) == data:
                return text
        except yaml.YAMLError:
            pass
    raise ValueError("the draft cannot be written as YAML that reads back the same")


def comment_lines(notes: Iterable[str]) -> str:
    """Each note as a ``#`` line; anything that would end a comment early is shown as ``?``."""
    return "".join(f"# {_HIDDEN_ACTS.sub('?', note.replace(chr(10), ' '))}\n" for note in notes)
