"""Build validated Suites and Cases from plain data, with errors at the user's line.

Both forms meet here: YAML suites (through ``marks``) and Python suites
(objects that remember their lines) are checked against the checks registry
by the same code, so a rule cannot differ between the two.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..checks import PLANNED, REGISTRY, LoadContext, lookup
from ..errors import SuiteError
from ..model import MODIFIERS, Assertion, Case, Evidence, Suite
from ..model.changes import glob_matches
from ..model.invocation import Invocation, prompt_invocation
from ..model.suite import assertion_name, pin_problem
from ..model.values import compile_path
from ..workspaces.staged import Source
from .marks import Loc

LineOf = Callable[[Loc], int | None]

WITHHELD = "(details withheld: hidden case)"


class Problem:
    """Raise a SuiteError for ``file``, revealing details only for public content."""

    def __init__(self, file: str, line_of: LineOf, *, secret: bool,
                 key_line_of: LineOf | None = None) -> None:
        self.file = file
        self.line_of = line_of
        self.key_line_of = key_line_of or line_of
        self.secret = secret

    def __call__(self, loc: Loc, public: str, safe: str | None = None) -> SuiteError:
        """An error at ``loc``: ``public`` wording, or ``safe`` wording for a hidden case."""
        message = public if not self.secret else f"{safe or 'invalid hidden case'} {WITHHELD}"
        return SuiteError(self.file, self.line_of(loc), message)

    def from_validation(self, exc: ValidationError, prefix: Loc = ()) -> SuiteError:
        """The first pydantic error, placed at its line."""
        err = exc.errors(include_url=False)[0]
        loc = [*prefix, *err["loc"]]
        field = ".".join(str(p) for p in err["loc"]) or "value"
        if err["type"] == "missing":
            key = f"missing required key {err['loc'][-1]!r}"
            return self(loc[:-1], key, key)
        if err["type"] == "extra_forbidden":
            line = self.key_line_of(loc)
            return SuiteError(self.file, line, f"unknown key {err['loc'][-1]!r}"
                              if not self.secret else f"unknown key {WITHHELD}")
        msg = err["msg"].removeprefix("Value error, ")
        return self(loc, f"{field}: {msg}", f"{field}: invalid value")


def make_cases(items: list[Any], problem: Problem, loc: Loc, *, split: str,
               base_dir: Path, start: int = 0, args: list[list[Any]] | None = None) -> list[Case]:
    """Cases from their mappings: ``make_case`` for each, in one pass when all are well formed.

    Validating every case (and every assertion) in one call into pydantic
    costs a fraction of validating them one at a time. Anything that would
    not validate sends the whole list through ``make_case``, one by one, so
    the error a user sees is the one ``make_case`` gives for the first bad
    case, at its line. ``items`` may be one block of a longer list that
    starts at ``start``: places (and so lines) are counted in the whole list.
    ``args``, if given, receives per case its assertions' arguments as they
    were before their checks prepared them (``check_case``).
    """
    built = _all_at_once(items, problem, loc, split, start)
    if built is None:
        return [make_case(item, problem, [*loc, i], split=split, base_dir=base_dir,
                          args=_more(args)) for i, item in enumerate(items, start)]
    for i, case in enumerate(built, start):
        check_case(case, problem, [*loc, i], base_dir=base_dir, args=_more(args))
    return built


def _more(args: list[list[Any]] | None) -> list[Any] | None:
    """A new list at the end of ``args`` (None: none kept)."""
    if args is None:
        return None
    args.append([])
    return args[-1]


_ASSERTIONS: TypeAdapter[list[Assertion]] = TypeAdapter(list[Assertion])
_CASES: TypeAdapter[list[Case]] = TypeAdapter(list[Case])


def _all_at_once(items: list[Any], problem: Problem, loc: Loc, split: str,
                 start: int = 0) -> list[Case] | None:
    """The cases as ``make_case`` would build them, or None if any needs its own error."""
    line_of, file = problem.line_of, problem.file
    forms: list[dict[str, Any]] = []
    counts: list[int] = []
    fields: list[dict[str, Any]] = []
    for i, data in enumerate(items, start):
        if not isinstance(data, dict):
            return None
        expect = data.get("expect", [])
        if expect is None:
            expect = []
        if not isinstance(expect, list):
            return None
        for j, item in enumerate(expect):
            form = _assertion_form(item)
            if form is None:
                return None
            form["line"], form["file"] = line_of([*loc, i, "expect", j]), file
            forms.append(form)
        counts.append(len(expect))
        case = {**data, "line": line_of([*loc, i]), "file": file}
        if split == "hidden":
            case["split"] = "hidden"
        elif data.get("split") == "hidden":
            return None
        fields.append(case)
    try:
        assertions = iter(_ASSERTIONS.validate_python(forms))
        for case, count in zip(fields, counts, strict=True):
            case["expect"] = [next(assertions) for _ in range(count)]
        return _CASES.validate_python(fields)
    except ValidationError:
        return None


def _assertion_form(data: Any) -> dict[str, Any] | None:
    """The fields ``Assertion.from_mapping`` gives the model, or None where it raises."""
    if isinstance(data, str):
        return {"check": data}
    if not isinstance(data, dict):
        return None
    named = assertion_name([k for k in data if k not in MODIFIERS])
    if named is None:
        return None
    name, headed = named
    form = {"check": name,
            "arg": {k: v for k, v in data.items() if k not in MODIFIERS} if headed else data[name]}
    form.update((k, data[k]) for k in MODIFIERS if k in data)
    return form


def make_case(data: Any, problem: Problem, loc: Loc, *, split: str, base_dir: Path,
              args: list[Any] | None = None) -> Case:
    """One case from its mapping; assertions keep their own lines."""
    if not isinstance(data, dict):
        raise problem(loc, "a case is a mapping with id, input and expect",
                      "a case is a mapping with id, input and expect")
    expect = data.get("expect", [])
    if expect is None:
        expect = []
    if not isinstance(expect, list):
        raise problem([*loc, "expect"], "expect is a list of assertions",
                      "expect is a list of assertions")
    assertions = []
    for j, item in enumerate(expect):
        try:
            assertions.append(Assertion.from_mapping(
                item, line=problem.line_of([*loc, "expect", j]), file=problem.file))
        except ValidationError as exc:
            raise problem.from_validation(exc, [*loc, "expect", j]) from None
        except ValueError as exc:
            raise problem([*loc, "expect", j], str(exc), "malformed assertion") from None
    for pin in ("model", "effort"):
        wrong = pin_problem(data.get(pin))
        if wrong is not None:  # at the map key's own line when one is at fault
            key, why = wrong
            at = [*loc, pin] if key is None else [*loc, pin, key]
            raise problem(at, f"{pin}: {why}", f"{pin}: invalid pin")
    fields = {**data, "expect": assertions, "line": problem.line_of(loc), "file": problem.file}
    if split == "hidden":
        fields["split"] = "hidden"
    elif data.get("split") == "hidden":
        raise problem([*loc, "split"], "a case written in the suite file is public; hidden "
                      "cases live in the suite's hidden: folder")
    try:
        case = Case.model_validate(fields)
    except ValidationError as exc:
        raise problem.from_validation(exc, loc) from None
    check_case(case, problem, loc, base_dir=base_dir, args=args)
    return case


def check_case(case: Case, problem: Problem, loc: Loc, *, base_dir: Path,
               args: list[Any] | None = None) -> Case:
    """Refuse what the model cannot see: unknown checks, bad arguments, missing paths.

    ``args``, if given, receives each assertion's argument as it was before its
    check prepared it, in the order of the case's assertions once checked.
    """
    if case.fixture is not None and not (base_dir / case.fixture).exists():
        raise problem([*loc, "fixture"], f"fixture {case.fixture!r} does not exist",
                      "fixture path does not exist")
    if case.workspace is not None:
        wrong = survey_workspace((base_dir / case.workspace).resolve()).problem
        if wrong is not None:
            raise problem([*loc, "workspace"], f"workspace {case.workspace!r} {wrong}",
                          "the workspace folder cannot be used")
    ctx = LoadContext(base_dir=base_dir)
    for j, assertion in enumerate(case.expect):
        if assertion.file is None:  # a mapping in a Python suite: it was written with its case
            assertion = assertion.model_copy(update={"file": case.file, "line": case.line})
            case.expect[j] = assertion
        here = [*loc, "expect", j]
        at = _at(problem, assertion, here)
        if args is not None:
            args.append(assertion.arg)
        case.expect[j] = check_assertion(assertion, at, ctx)
    if isinstance(case.invocation, Invocation):
        _check_invocation(case, case.invocation, problem, loc, ctx, args)
    _check_conversation(case, problem, loc)
    return case


def _check_conversation(case: Case, problem: Problem, loc: Loc) -> None:
    """A conversation (SPEC §16) is scripted or simulated, not both; its ``input``, if
    any, is the agent's system message; ``turn: N`` scopes an output check to a reply
    the conversation can have (``turn: any`` to each reply, one passing enough)."""
    talks = case.turns is not None or case.user is not None
    if case.turns is not None and case.user is not None:
        raise problem([*loc, "user"], "a case is a scripted conversation (turns:) or a "
                      "simulated one (user:), not both", "turns: and user: on one case")
    if talks and case.input is not None and not isinstance(case.input, str):
        raise problem([*loc, "input"], "in a conversation, input is the agent's system "
                      "message (a string); the user's messages are its turns",
                      "a conversation's input is a string")
    for assertion in case.expect:
        if assertion.turn is None:
            continue
        fail = _at(problem, assertion, [])
        check = lookup(assertion.check)
        if not talks:
            read = "the replies" if assertion.turn == "any" else "one reply"
            raise fail(f"turn: {assertion.turn} reads {read} of a conversation, and case "
                       f"{case.id!r} is none (give it turns: or user:)",
                       "turn: on a case that is no conversation")
        if check is None or check.family != "output":
            raise fail(f"turn: scopes an output check to one reply; {assertion.check} reads "
                       "the whole conversation", "turn: on a check that is no output check")
        if assertion.turn == "any":
            if assertion.check == "not_contains":
                raise fail("turn: any passes when one reply passes, and not_contains would "
                           "then pass when a single reply lacks the text; without turn: it "
                           "reads the last reply", "not_contains with turn: any")
            continue
        if case.turns is not None and assertion.turn > len(case.turns):
            raise fail(f"turn: {assertion.turn}, and the case scripts {len(case.turns)} "
                       "turn(s)", "turn: past the case's last turn")


def _check_invocation(case: Case, invocation: Invocation, problem: Problem, loc: Loc,
                      ctx: LoadContext, args: list[Any] | None = None) -> None:
    """An invocation that names a skill: the input does not invoke it itself, and ``none``
    forbids it (a ``never_activates_skill`` the case is given unless it has one)."""
    skill = invocation.skill
    prompt = case.input if isinstance(case.input, str) else \
        case.input.get("prompt") if isinstance(case.input, dict) else None
    written = prompt_invocation(prompt, skill) if isinstance(prompt, str) else None
    if written is not None:
        raise problem([*loc, "input"], f"the input invokes skill {skill!r} itself ({written}); "
                      f"invocation {invocation.mode} says how the host comes to it, so leave "
                      f"{written} out", "the input invokes the invocation's skill itself")
    if invocation.mode != "none":
        return
    for assertion in case.expect:
        if assertion.check == "activates_skill" and fnmatchcase(skill, assertion.arg):
            raise _at(problem, assertion, [])(
                f"activates_skill {assertion.arg} can never pass: invocation none says skill "
                f"{skill!r} is never activated", "activates_skill contradicts invocation none")
    if not any(a.check == "never_activates_skill" and any(fnmatchcase(skill, g) for g in a.arg)
               for a in case.expect):
        implied = Assertion(check="never_activates_skill", arg=skill, line=case.line,
                            file=case.file or problem.file)
        if args is not None:
            args.append(implied.arg)
        case.expect.append(check_assertion(implied, _at(problem, implied, loc), ctx))


#: The most a workspace folder may hold: every trial of its cases copies it.
MAX_WORKSPACE_BYTES = 1 << 30
#: Checks that read a trial's workspace (SPEC §14): a case with one needs a workspace.
OUTCOME_CHECKS = frozenset({"files", "file", "command"})
#: ``files:`` rules about paths the workspace held before the agent: each glob must
#: match one of them, or it is a typo.
_BEFORE_RULES = ("unchanged", "deleted")


@dataclass(frozen=True)
class Survey:
    """A workspace folder as a load sees it: what is wrong with it, or the paths it holds."""

    problem: str | None
    paths: tuple[str, ...] = ()


_surveys: dict[Path, Survey] = {}


def survey_workspace(path: Path) -> Survey:
    """Whether ``path`` can be a workspace (a folder of at most ``MAX_WORKSPACE_BYTES``), and
    its paths; remembered for the process (many cases name one folder)."""
    found = _surveys.get(path)
    if found is None:
        found = _surveys[path] = _survey(path)
    return found


def _survey(path: Path) -> Survey:
    if not path.exists():
        return Survey("does not exist")
    if not path.is_dir():
        return Survey("is not a folder (a workspace is a folder; put the file in one)")
    try:
        source = Source.of(path)  # its files and links, as a trial's copy will be listed
    except OSError as exc:
        return Survey(f"cannot be read: {exc.strerror or exc}")
    if source.size > MAX_WORKSPACE_BYTES:
        return Survey(f"holds more than {MAX_WORKSPACE_BYTES >> 30} GiB; a workspace is "
                      "copied for every trial, so it is at most 1 GiB")
    return Survey(None, tuple(source.listing))


def check_outcomes(case: Case, workspace: Path | None, problem: Problem) -> None:
    """A case's outcome checks against its workspace: there is one, and every ``unchanged``
    or ``deleted`` glob matches a path it holds (one that matches nothing is a typo)."""
    for assertion in case.expect:
        if assertion.check not in OUTCOME_CHECKS:
            continue
        fail = _at(problem, assertion, [])
        if workspace is None:
            raise fail(f"{assertion.check} reads the workspace the agent worked in, and case "
                       f"{case.id!r} has none: give it (or the suite) workspace: DIR",
                       f"{assertion.check} needs a workspace")
        if assertion.check != "files":
            continue
        paths = survey_workspace(workspace).paths
        for key in _BEFORE_RULES:
            for glob in assertion.arg.get(key, ()):
                if not any(glob_matches(glob, p) for p in paths):
                    raise fail(f"files: {key}: {glob!r} matches nothing in the workspace "
                               f"{workspace.name}/ (a typo?)",
                               f"files: {key}: a glob matches nothing in the workspace")


def _at(problem: Problem, assertion: Assertion, loc: Loc) -> Callable[[str, str], SuiteError]:
    def fail(public: str, safe: str) -> SuiteError:
        if assertion.line is not None:
            message = public if not problem.secret else f"{safe} {WITHHELD}"
            return SuiteError(assertion.file or problem.file, assertion.line, message)
        return problem(loc, public, safe)

    return fail


def check_assertion(
    assertion: Assertion, fail: Callable[[str, str], SuiteError], ctx: LoadContext
) -> Assertion:
    """Validate one assertion against the registry; returns it with its argument prepared."""
    name = assertion.check
    check = lookup(name)
    if check is None:
        if name in PLANNED:
            raise fail(f"assertion {name!r} is in the spec but not available in this "
                       f"version of assay ({PLANNED[name]})", "assertion not available")
        close = difflib.get_close_matches(name, list(REGISTRY) + list(PLANNED), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise fail(f"unknown assertion {name!r}{hint}", "unknown assertion")
    if assertion.path is not None:
        if not check.takes_path:
            raise fail(f"{name} takes no path", f"{name} takes no path")
        try:
            compile_path(assertion.path)
        except ValueError as exc:
            raise fail(str(exc), "bad JSONPath") from None
    if assertion.threshold is not None and check.family != "quality":
        raise fail(f"{name}: threshold applies to quality checks only",
                   f"{name}: threshold applies to quality checks only")
    if assertion.min_evidence is Evidence.UNAVAILABLE:
        raise fail(f"{name}: min_evidence cannot be unavailable",
                   f"{name}: min_evidence cannot be unavailable")
    if assertion.breach_evidence is not None:
        if not check.breaches:
            # A modifier that would silently do nothing is refused: this check has no breach.
            named = ", ".join(sorted(n for n, c in REGISTRY.items() if c.breaches))
            raise fail(f"{name}: breach_evidence applies only to the checks that fail on a "
                       f"breach ({named})", f"{name}: breach_evidence does not apply")
        if assertion.breach_evidence is Evidence.UNAVAILABLE:
            raise fail(f"{name}: breach_evidence cannot be unavailable (a breach nobody saw "
                       "is no breach): observed or inferred",
                       f"{name}: breach_evidence cannot be unavailable")
    try:
        arg = check.prepare(assertion.arg, ctx)
    except ValueError as exc:
        raise fail(f"{name}: {exc}", f"{name}: invalid argument") from None
    if assertion.threshold is not None and isinstance(arg, dict) and "threshold" in arg \
            and name in ("judge", "rubric"):
        raise fail(f"{name}: threshold is given twice (beside the check and in it); keep one",
                   f"{name}: threshold is given twice")
    return assertion if arg is assertion.arg else assertion.model_copy(update={"arg": arg})


def check_unique(cases: Iterable[Case], problem_for: Callable[[Case], Problem]) -> None:
    """Case ids are unique within a suite (the later one is named)."""
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            problem = problem_for(case)
            raise SuiteError(case.file or problem.file, case.line,
                             f"duplicate case id {case.id!r}" if not problem.secret
                             else f"duplicate case id {WITHHELD}")
        seen.add(case.id)


def make_suite(top: dict[str, Any], cases: list[Case], problem: Problem) -> Suite:
    """The suite object from its top-level keys and already-built cases."""
    try:
        return Suite.model_validate({**top, "cases": cases})
    except ValidationError as exc:
        raise problem.from_validation(exc) from None
