"""Load one suite file, YAML or Python, into a Suite with its hidden cases and digests."""

from __future__ import annotations

import gc
import hashlib
import importlib.util
import sys
import traceback
from array import array
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Protocol

from pydantic import TypeAdapter, ValidationError

from ..canonical import canonical, digest, file_digest
from ..errors import SuiteError
from ..model import Case, Suite
from ..model.fixture import ToolFixture
from ..model.invocation import Invocation
from ..model.packed import PackedCases, row_of
from . import cache, marks, validated
from .build import (
    OUTCOME_CHECKS,
    LineOf,
    Problem,
    check_case,
    check_outcomes,
    check_unique,
    make_cases,
    make_suite,
    survey_workspace,
)
from .facets import PACKED, case_facets, facets_of, packed_digests
from .fixtures import is_tool_fixture, load_tool_fixture
from .hidden import HiddenSource, choose_folder, load_hidden
from .marks import load_marked
from .skills import Found, SkillUse, find_skill


@dataclass(frozen=True)
class LoadedSuite:
    """A suite ready to run: its cases (public and hidden) and what identifies them.

    A YAML suite's cases are held packed (``model.packed.PackedCases``): each is
    made a ``Case`` when read. Per case only the two facet digests the load made
    are kept, as bytes (``suites.facets.packed_digests``); positions are made
    once someone needs them.
    """

    suite: Suite
    path: Path
    digest: str
    hidden_digest: str | None
    hidden_source: HiddenSource | None
    #: Tool fixtures by absolute path, parsed and checked at load time.
    fixtures: dict[str, ToolFixture] = field(default_factory=dict)
    #: The private folder ``--hidden-dir`` had no copy of (``DIR/ns/name@N``), so
    #: the samples (or no hidden cases) were used instead. A fact for the command
    #: to tell the user; loading never prints.
    hidden_missing: Path | None = None
    #: Whether this is a part of the suite (some of its cases, ``part_of``): such a
    #: run is not the suite's battery, is never recorded, and its report says so.
    part: bool = False
    #: The validated-case cache's key of the load, for a YAML suite with no hidden case
    #: where entries are kept: what the suite's stored JSON is kept under
    #: (``validated.kept_suite_json``). None otherwise.
    cache_key: str | None = None
    #: Facets given for some cases, by id, that ``case_facets`` returns as they are
    #: (a rejudge keeps its original run's); empty for a suite loaded from its file.
    _facets: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    #: Each case's position in ``suite.cases``, by id: made on first use (``positions``).
    _positions: dict[str, int] = field(default_factory=dict, repr=False)
    #: The first case run with a workspace (its own or the suite's), if any: a target
    #: that cannot give one refuses the suite, naming it (SPEC §14).
    workspace_case: Case | None = None
    #: The first case whose fixture is a folder or a plain file, not a tool fixture.
    folder_fixture_case: Case | None = None
    #: The first conversation (SPEC §16): a target that cannot hold one refuses the suite.
    conversation_case: Case | None = None
    #: The first case with a simulated user, and the first whose user names no model:
    #: without the suite's ``user_model`` or ``--user-model`` the run is refused at it.
    simulated_case: Case | None = None
    unmodelled_user_case: Case | None = None
    #: The cases whose invocation names a skill, with the hosts that can see it: a
    #: target that cannot invoke it, or see it, refuses the suite (``engine.runs``).
    skill_uses: tuple[SkillUse, ...] = ()
    #: Each (file, workspace) a case names, resolved (``workspace_path``).
    _workspaces: dict[tuple[str | None, str | None], Path] = field(default_factory=dict,
                                                                   repr=False)
    #: Fixture and grader digests, shared by every case's facets (few files, many cases).
    _fixture_digests: dict[Path, str] = field(default_factory=dict, repr=False)
    _grader_digests: dict[str, str] = field(default_factory=dict, repr=False)
    #: Each case's ``case`` and ``assertions`` facets as raw digests, ``facets.PACKED``
    #: bytes a case in ``suite.cases``' order (made by the load; empty: made when asked).
    _case_digests: bytes | bytearray = field(default=b"", repr=False)

    def positions(self) -> dict[str, int]:
        """Each case's position in ``suite.cases``, by id (made once, then shared)."""
        cases = self.suite.cases
        if len(self._positions) != len(cases):
            self._positions.clear()
            ids = cases.ids() if isinstance(cases, PackedCases) else (case.id for case in cases)
            self._positions.update((case_id, index) for index, case_id in enumerate(ids))
        return self._positions

    def case_facets(self, case: Case) -> dict[str, str]:
        """The digests ``assay compare`` aligns this case on (``suites.facets``).

        ``case`` is one of the suite's: its ``case`` and ``assertions`` facets are
        the ones the load made of the case with its id (a suite made otherwise,
        with none kept, has them made now, from the case given).
        """
        found = self._facets.get(case.id)
        if found is not None:
            return found
        kept = self._case_digests
        if kept and len(kept) == PACKED * len(self.suite.cases):
            index = self.positions().get(case.id)
            if index is not None:
                at = PACKED * index
                return facets_of(case, memoryview(kept)[at:at + PACKED],
                                 self._fixture_digest(case), self._grader_digests)
        identity = _identities([case], self._fixture_digests)[0]
        return case_facets([case], {case.id: identity}, self._grader_digests)[case.id]

    def _fixture_digest(self, case: Case) -> str | None:
        """The ``fixture_digest`` of the case's identity (``_identities``), or None."""
        if case.fixture is None or case.file is None:
            return None
        where = Path(case.file).parent / case.fixture
        found = self._fixture_digests.get(where)
        if found is None:
            found = self._fixture_digests[where] = file_digest(where)
        return found

    def part_of(self, indices: Sequence[int]) -> LoadedSuite:
        """The suite with only the cases at ``indices`` (in order), marked as a part.

        Its suite digest stays the whole suite's: it names what the cases were
        taken from, and a part is never recorded under it. A part with no
        hidden case names no hidden set.
        """
        from dataclasses import replace

        cases = self.suite.cases
        chosen = [cases[i] for i in indices]
        suite = self.suite.model_copy(update={"cases": chosen})
        kept = self._case_digests
        if len(kept) == PACKED * len(cases):
            kept = b"".join(kept[PACKED * i:PACKED * (i + 1)] for i in indices)
        if any(case.split == "hidden" for case in chosen):
            return replace(self, suite=suite, part=True, _positions={}, _case_digests=kept,
                           cache_key=None)
        return replace(self, suite=suite, part=True, _positions={}, hidden_digest=None,
                       hidden_source=None, _case_digests=kept, cache_key=None)

    def fixture_path(self, case: Case) -> Path | None:
        """The absolute path of a case's fixture (relative to the file that wrote the case)."""
        return _fixture_path(case, self.path)

    def workspace_path(self, case: Case) -> Path | None:
        """The folder a case's trials each work in a copy of: its own ``workspace`` (relative
        to the file that wrote the case), else the suite's (relative to the suite file)."""
        if case.workspace is None and self.suite.workspace is None:
            return None
        key = (case.file, case.workspace)
        found = self._workspaces.get(key)
        if found is None:  # resolved once per file and folder, not per case
            found = self._workspaces[key] = \
                (Path(case.file or self.path).parent / case.workspace).resolve() \
                if case.workspace is not None \
                else (self.path.parent / str(self.suite.workspace)).resolve()
        return found


def _fixture_path(case: Case, path: Path) -> Path | None:
    if case.fixture is None:
        return None
    return (Path(case.file or path).parent / case.fixture).resolve()


def load_suite_file(path: Path, hidden_root: Path | None = None) -> LoadedSuite:
    """Load ``*.suite.yaml`` or ``*_eval.py``; raises SuiteError on anything wrong."""
    if path.name.endswith(".py"):
        suite = _load_python(path)  # the user's code runs: the collector stays as it was
        with _collector_paused():
            return _with_hidden(suite, None, path, hidden_root)
    with _collector_paused():
        try:
            key: str | None = cache.key_of_file(path)
        except OSError:
            key = None  # load_marked says why the file cannot be read
        if key is not None:
            kept = _from_validated(path, validated.key_of(key, path))
            if kept is not None:
                try:
                    return _kept_under(_with_hidden(*kept, path, hidden_root), key)
                except (SuiteError, validated.Miss):
                    pass  # loaded in full below: the exact error, or what changed
        suite, digests = _load_yaml(path, key)
        try:
            loaded = _with_hidden(suite, digests, path, hidden_root)
            if digests.keeper is not None and digests.body is not None:
                digests.keeper.finish(loaded.digest, digests.body)
            return _kept_under(loaded, key)
        finally:
            if digests.keeper is not None:
                digests.keeper.abandon()  # nothing, once finished


def _kept_under(loaded: LoadedSuite, key: str | None) -> LoadedSuite:
    """``loaded``, with the key its stored JSON may be kept under (``cache_key``): a YAML
    suite's whose bytes were read, with no hidden case (no hidden-set digest), where
    caches are kept."""
    if key is not None and loaded.hidden_digest is None and cache.keeping():
        from dataclasses import replace

        return replace(loaded, cache_key=validated.key_of(key, loaded.path))
    return loaded


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while YAML becomes cases.

    Loading makes the file's data (lists and mappings, and a tree of YAML
    nodes for a file that needs one), freed by reference counting once the
    cases are built, and many small models that live on; it makes no
    cycles. The collector's passes meanwhile rescan all of it (about 300
    passes, a third more CPU than the whole load, at ten thousand cases)
    and free nothing. Whatever a load does leave behind is collected on the
    first pass after it.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


#: Cases validated and packed at a time: the models of one block are all a load holds.
BLOCK = 1024


class _Again(Exception):
    """A case-by-case build that cannot give the exact error: the whole file is built instead."""


def _load_yaml(path: Path, key: str | None) -> tuple[Suite, _Digests]:
    """The suite in ``path``, its cases packed, read case by case where the file allows.

    Three ways, the first that works: the parsed-suite cache's entry, then
    libyaml's events one case at a time (``marks.SuiteStream``), both never
    holding the file's data whole; then the whole parse (``load_marked``),
    for the unusual YAML the first two decline and for every error, so that
    an error has the exact words and line it always had. ``key`` is the
    parsed-suite cache's for the file (None: it could not be read). Each way
    also writes the validated-case cache's entry (``digests.keeper``), which
    the caller puts in place once the whole load succeeded.
    """
    if key is not None:
        kept = cache.read(path, key)
        if kept is not None:
            try:
                return _build_yaml(path, kept, keeper=_keeper(path, key))
            except (SuiteError, cache.KeptLines.Unknown, cache.Miss, _Again):
                pass  # parsed again below, for the error's exact words and line
        try:
            return _build_yaml(path, marks.SuiteStream(path), cache.writer(path, key),
                               _keeper(path, key))
        except (SuiteError, cache.KeptLines.Unknown, marks.Declined, _Again):
            pass  # the whole parse below gives the data, or the exact error
    marked = load_marked(path)
    whole = _Whole(path, marked)
    try:
        return _build_yaml(path, whole, cache.writer(path, key) if key is not None else None,
                           _keeper(path, key) if key is not None else None)
    except _Again:
        pass
    suite = _build_whole(path, marked.data, marked.line, marked.key_line)  # raises, in effect
    digests = _Digests(path)
    digests.add(suite.cases)
    return suite.model_copy(update={"cases": PackedCases(suite.cases)}), digests


class _Source(Protocol):
    """Where a suite's cases come from, one at a time; ``top`` is set once they are all read."""

    top: dict[str, Any] | None

    def __iter__(self) -> Iterator[marks.RawCase]: ...


class _Whole:
    """A suite file parsed whole (``load_marked``) as a source, with every line it can give."""

    def __init__(self, path: Path, marked: marks.Marked) -> None:
        problem = Problem(str(path), marked.line, secret=False, key_line_of=marked.key_line)
        data = marked.data
        if not isinstance(data, dict):
            raise problem([], "a suite file is a mapping with suite: and cases:")
        if "suite" not in data:
            raise problem([], "missing required key 'suite' (namespace/name@major)")
        raw_cases = data.get("cases") or []
        if not isinstance(raw_cases, list):
            raise problem(["cases"], "cases is a list")
        self.marked = marked
        self.cases: list[Any] = raw_cases
        self.top: dict[str, Any] | None = {k: v for k, v in data.items() if k != "cases"}

    def __iter__(self) -> Iterator[marks.RawCase]:
        line = self.marked.line
        for i, data in enumerate(self.cases):
            expect = data.get("expect") if isinstance(data, dict) else None
            count = len(expect) if isinstance(expect, list) else 0
            yield data, line(["cases", i]), [line(["cases", i, "expect", j])
                                             for j in range(count)]


def _keeper(path: Path, key: str) -> validated.Writer | None:
    return validated.writer(path, validated.key_of(key, path))


def _build_yaml(path: Path, source: _Source, writer: cache.Writer | None = None,
                keeper: validated.Writer | None = None) -> tuple[Suite, _Digests]:
    """The suite from its cases as ``source`` gives them, validated and packed a block at a time.

    Raises the SuiteError a block meets (exact for a ``_Whole`` source, whose
    lines are all known; a streamed source may raise ``KeptLines.Unknown``
    for an error's line instead), or ``_Again`` for what only the whole
    list can word exactly (a case id written twice). ``writer`` keeps the
    cases for the parsed-suite cache; it is put in place only on success.
    ``keeper`` keeps them validated (``suites.validated``), once the caller
    knows the whole load succeeded: it is abandoned here on any failure.
    """
    try:
        packed = PackedCases()
        digests = _Digests(path)
        written: list[list[Any]] | None = [] if keeper is not None else None
        ids = array("q")  # each case id's hash: 8 bytes a case, not a set of strings
        items: list[Any] = []
        lines: cache.Lines = []
        start = 0

        def flush() -> None:
            line_of: LineOf = cache.KeptLines(lines, start)
            key_line_of = line_of
            if isinstance(source, _Whole):
                line_of, key_line_of = source.marked.line, source.marked.key_line
            problem = Problem(str(path), line_of, secret=False, key_line_of=key_line_of)
            cases = make_cases(items, problem, ["cases"], split="public", base_dir=path.parent,
                               start=start, args=written)
            ids.extend(hash(case.id) for case in cases)
            digests.add(cases)
            if keeper is not None and written is not None:
                at = len(digests.case_digests) - PACKED * len(cases)
                for case, args in zip(cases, written, strict=True):
                    row = row_of(case)  # made once: packed, and kept
                    packed.append(case, row)
                    keeper.add(row, args, bytes(digests.case_digests[at:at + PACKED]))
                    at += PACKED
                written.clear()
            else:
                packed.extend(cases)

        for data, line, inner in source:
            if writer is not None:
                writer.add(data, line, inner)
            items.append(data)
            lines.append((line, inner))
            if len(items) == BLOCK:
                flush()
                start += len(items)
                items, lines = [], []
        if items:
            flush()
        if _repeats(ids):  # a case id written twice (or two ids hashed alike): said exactly
            raise _Again
        top = source.top
        if top is None or "suite" not in top:
            raise _Again
        key_line_of = source.marked.key_line if isinstance(source, _Whole) \
            else cache.KeptLines([])
        suite = make_suite(top, [], Problem(str(path), key_line_of, secret=False))
        if writer is not None:
            writer.finish(top)
        if keeper is not None:
            keeper.top = top
            keeper.fixtures = {str(where): found
                               for where, found in digests.fixture_digests.items()}
            digests.keeper, keeper = keeper, None
    finally:
        if writer is not None:
            writer.abandon()
        if keeper is not None:
            keeper.abandon()
    return suite.model_copy(update={"cases": packed, "source": str(path)}), digests


def _from_validated(path: Path, key: str) -> tuple[Suite, _Digests] | None:
    """The suite from the validated-case cache's entry, or None (a miss).

    What reads the world is done again (``suites.validated``): each argument
    prepared (while reading the entry); here, each fixture and workspace a case
    names found, checked as ``check_case`` checks it and digested, and the
    digests compared with those the entry was made with. The cases a load
    notes are noted (``_Digests.note``); the suite body is compared when its
    digest is asked for (``_Digests.suite_digest``).
    """
    hit = validated.read(path, key)
    if hit is None:
        return None
    digests = _Digests(path, hit)
    found: dict[Path, str] = {}
    for index in hit.notable:
        case = hit.cases.get(index)
        if case.fixture is not None and not (path.parent / case.fixture).exists():
            return None
        if case.workspace is not None and \
                survey_workspace((path.parent / case.workspace).resolve()).problem is not None:
            return None
        for _, where in _world(case):
            if where not in found:
                found[where] = file_digest(where)
        digests.note(case)
    if {str(where): value for where, value in found.items()} != hit.fixtures:
        return None
    digests.fixture_digests.update(found)
    try:
        suite = make_suite(hit.top, [], Problem(str(path), cache.KeptLines([]), secret=False))
    except (SuiteError, cache.KeptLines.Unknown):
        return None
    return suite.model_copy(update={"cases": hit.cases, "source": str(path)}), digests


def _repeats(values: array[int]) -> bool:
    ordered = sorted(values)
    return any(a == b for a, b in zip(ordered, islice(ordered, 1, None), strict=False))


def _build_whole(path: Path, data: Any, line_of: LineOf, key_line_of: LineOf) -> Suite:
    """The whole file's cases built at once, as every load once did: for the exact error."""
    problem = Problem(str(path), line_of, secret=False, key_line_of=key_line_of)
    if not isinstance(data, dict):
        raise problem([], "a suite file is a mapping with suite: and cases:")
    if "suite" not in data:
        raise problem([], "missing required key 'suite' (namespace/name@major)")
    raw_cases = data.get("cases") or []
    if not isinstance(raw_cases, list):
        raise problem(["cases"], "cases is a list")
    cases = make_cases(raw_cases, problem, ["cases"], split="public", base_dir=path.parent)
    check_unique(cases, lambda case: problem)
    top = {k: v for k, v in data.items() if k != "cases"}
    problem_top = Problem(str(path), key_line_of, secret=False)
    suite = make_suite(top, cases, problem_top)
    return suite.model_copy(update={"source": str(path)})


def _load_python(path: Path) -> Suite:
    folder = str(path.parent.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = "assay_suite_" + "_".join(path.resolve().with_suffix("").parts[1:])
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SuiteError(str(path), None, "cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SuiteError:
        raise
    except ValidationError as exc:
        raise _python_error(path, exc, _validation_message(exc)) from None
    except Exception as exc:  # the user's module raised: point at their line
        raise _python_error(path, exc, f"{type(exc).__name__}: {exc}") from None
    suite = getattr(module, "suite", None)
    if not isinstance(suite, Suite):
        raise SuiteError(str(path), None, "defines no `suite = assay.Suite(...)`")
    problem = Problem(str(path), _no_line, secret=False)
    try:
        for case in suite.cases:
            line_problem = Problem(case.file or str(path), _line_of(case), secret=False)
            check_case(case, line_problem, [], base_dir=Path(case.file or path).parent)
        check_unique(suite.cases, lambda case: problem)
    except SuiteError as error:
        raise _as_given(error, path) from None
    return suite.model_copy(update={"source": str(path)})


def _as_given(error: SuiteError, path: Path) -> SuiteError:
    """The error, naming the suite file as the user gave it (``evals/x_eval.py:9``).

    A Python case and its assertions remember their file as Python knows it,
    an absolute path; a YAML suite's errors name the file as given, and so do these.
    """
    if error.file is None or Path(error.file).resolve() != path.resolve():
        return error  # a case built in another module: named by its own file
    return SuiteError(str(path), error.line, error.message)


def _validation_message(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        return f"{exc.title}: unknown key {err['loc'][-1]!r}"
    if not err["loc"]:
        return f"{exc.title}: {msg}"
    field = ".".join(str(p) for p in err["loc"])
    return f"{exc.title}: {field}: {msg}"


def _python_error(path: Path, exc: BaseException, message: str) -> SuiteError:
    line = None
    if isinstance(exc, SyntaxError) and exc.filename and Path(exc.filename).resolve() == \
            path.resolve():
        return SuiteError(str(path), exc.lineno, f"SyntaxError: {exc.msg}")
    for frame in traceback.extract_tb(exc.__traceback__):
        if Path(frame.filename).resolve() == path.resolve():
            line = frame.lineno
    return SuiteError(str(path), line, message)


def hidden_set_digest(folder: Path) -> str | None:
    """The ``hidden_set`` digest of the hidden cases in ``folder``, as a run records it.

    What proves that someone holds a run's hidden cases (``assay review
    --hidden-dir``): the same cases give the same digest. None when the
    folder holds none.
    """
    secret = load_hidden(folder) if folder.is_dir() else []
    return digest(_identities(secret, {})) if secret else None


def _with_hidden(suite: Suite, digests: _Digests | None, path: Path,
                 hidden_root: Path | None) -> LoadedSuite:
    """The suite with its hidden cases added, its digests and its tool fixtures.

    ``digests`` has taken the suite's own cases already (a YAML suite's, as
    they were packed), or is None (a Python suite's list: taken here).
    """
    samples = None
    if suite.hidden is not None:
        samples = path.parent / suite.hidden
        if not samples.is_dir():
            raise SuiteError(str(path), _hidden_line(path), f"hidden folder {suite.hidden!r} "
                             "does not exist")
    choice = choose_folder(suite.id, samples, hidden_root)
    hidden = load_hidden(choice.folder) if choice.folder is not None else []
    if digests is None:
        digests = _Digests(path)
        digests.add(suite.cases)
    if hidden:
        clash = {case.id for case in hidden}
        ids = suite.cases.ids() if isinstance(suite.cases, PackedCases) else \
            (case.id for case in suite.cases)
        earlier = [suite.cases[i] for i, case_id in enumerate(ids) if case_id in clash]
        check_unique([*earlier, *hidden], lambda case: _case_problem(case, path))
        digests.add(hidden)
        cases = suite.cases
        if isinstance(cases, PackedCases):
            cases.extend(hidden)
        else:
            cases = [*cases, *hidden]
        suite = suite.model_copy(update={"cases": cases})
    body = suite.model_dump(mode="json", by_alias=True, exclude={"cases", "source"},
                            exclude_defaults=True)
    if suite.judge is not None and suite.judge.strip().startswith("python:"):
        _check_python_judge(suite.judge, path)
    default = None
    if suite.workspace is not None:
        default = (path.parent / suite.workspace).resolve()
        wrong = survey_workspace(default).problem
        if wrong is not None:
            raise SuiteError(str(path), _key_line(path, "workspace"),
                             f"workspace {suite.workspace!r} {wrong}")
        # The folder's files are part of what the suite is, as a fixture's are a case's.
        body["workspace_digest"] = file_digest(default)
    for case in digests.outcome_cases:
        own = (Path(case.file or path).parent / case.workspace).resolve() \
            if case.workspace is not None else default
        check_outcomes(case, own, _case_problem(case, path))
    skill_uses = _skill_uses(digests.skill_cases, default, path)
    hidden_digest = digests.hidden_digest()
    workspace_case = digests.workspace_case
    if default is not None and suite.cases:
        workspace_case = suite.cases[0]
    loaded = LoadedSuite(suite, path, digests.suite_digest(body), hidden_digest,
                         choice.source if hidden_digest is not None else None,
                         hidden_missing=choice.missing, workspace_case=workspace_case,
                         folder_fixture_case=digests.folder_fixture_case,
                         conversation_case=digests.conversation_case,
                         simulated_case=digests.simulated_case,
                         unmodelled_user_case=digests.unmodelled_user_case,
                         skill_uses=skill_uses, _fixture_digests=digests.fixture_digests,
                         _case_digests=digests.case_digests)
    for where, secret in digests.fixtures.items():
        if is_tool_fixture(Path(where)):
            loaded.fixtures[where] = load_tool_fixture(Path(where), secret=secret)
    for case in digests.state_cases:
        fixture = _fixture_path(case, path)
        tools = loaded.fixtures.get(str(fixture)) if fixture is not None else None
        if tools is None or not tools.has_state:
            assertion = next(a for a in case.expect if a.check == "state")
            withheld = case.split == "hidden"
            raise SuiteError(assertion.file or case.file or str(path), assertion.line,
                             "state: reads the final state of the case's tool fixture, and "
                             + ("it has none (details withheld: hidden case)" if withheld
                                else f"its fixture has no state: (case {case.id!r})"))
    return loaded


class _Digests:
    """The suite digest and the hidden-set digest, fed case by case as the cases are built.

    The suite digest is ``digest({"suite": body, "cases": [identity of each
    public case]})``: RFC 8785 sorts ``cases`` before ``suite``, so its bytes
    are ``{"cases":[`` and each case's canonical identity, then the body,
    which is known last; the hidden set's is ``digest([identity of each
    hidden case])``. The same values as digesting the whole lists at once,
    without holding them. Also noted on the way: each tool fixture's path,
    and whether the first case naming it is hidden.
    """

    def __init__(self, path: Path, hit: validated.Hit | None = None) -> None:
        self._path = path
        self._public = hashlib.sha256(b'{"cases":[')
        self._hidden = hashlib.sha256(b"[")
        self._counts = {"public": 0, "hidden": 0}
        self.fixture_digests: dict[Path, str] = {}
        #: Each case's two facet digests (``facets.packed_digests``), in the order added.
        self.case_digests = bytearray()
        #: The public cases read from the validated-case cache, whose suite digest is kept.
        self._hit = hit
        if hit is not None:
            self._counts["public"] = len(hit.cases)
            self.case_digests = hit.case_digests
        #: The digest of the suite body the suite digest was made with (``suite_digest``).
        self.body: str | None = None
        #: The validated-case cache's entry for the cases added, written once the load is done.
        self.keeper: validated.Writer | None = None
        #: Each fixture's absolute path, in the order cases name them: whether the first is hidden.
        self.fixtures: dict[str, bool] = {}
        #: The cases with outcome checks (SPEC §14), checked against their workspace once
        #: the suite's own (a default) is known.
        self.outcome_cases: list[Case] = []
        #: The cases with ``state`` checks: their fixture must give a state.
        self.state_cases: list[Case] = []
        #: The cases whose invocation names a skill: their workspace must hold it.
        self.skill_cases: list[Case] = []
        #: The first case with a workspace of its own; the first with a folder as fixture.
        self.workspace_case: Case | None = None
        self.folder_fixture_case: Case | None = None
        #: The first conversation, and the first simulated user with no model of its own.
        self.conversation_case: Case | None = None
        self.simulated_case: Case | None = None
        self.unmodelled_user_case: Case | None = None

    def add(self, cases: Sequence[Case]) -> None:
        """Take these cases' identities, in order (a block at a time: one dump per block)."""
        for start in range(0, len(cases), BLOCK):
            block = list(cases[start:start + BLOCK])
            for case, identity in zip(block, _identities(block, self.fixture_digests),
                                      strict=True):
                split = case.split
                sink = self._hidden if split == "hidden" else self._public
                try:
                    text = canonical(identity)
                except ValueError as exc:  # JCS has no infinity, NaN or integer past 2**53
                    raise Problem(case.file or str(self._path), _line_of(case),
                                   secret=split == "hidden")(
                        [], f"case {case.id!r}: {_UNRECORDABLE} ({exc})",
                        _UNRECORDABLE) from None
                if self._counts[split]:
                    sink.update(b",")
                sink.update(text)
                self.case_digests += packed_digests(identity)
                self._counts[split] += 1
                self.note(case)

    def note(self, case: Case) -> None:
        """Note what the rest of the load checks, or a run refuses, of one case.

        A case from the validated-case cache is noted only if it has one of
        these (``validated.Hit.notable``, which must cover everything read here).
        """
        where = _fixture_path(case, self._path)
        if where is not None and str(where) not in self.fixtures:
            self.fixtures[str(where)] = case.split == "hidden"
            if self.folder_fixture_case is None and not is_tool_fixture(where):
                self.folder_fixture_case = case
        if self.workspace_case is None and case.workspace is not None:
            self.workspace_case = case
        if self.conversation_case is None and (case.turns is not None
                                               or case.user is not None):
            self.conversation_case = case
        if self.simulated_case is None and case.user is not None:
            self.simulated_case = case
        if self.unmodelled_user_case is None and case.user is not None \
                and case.user.model is None:
            self.unmodelled_user_case = case
        if any(a.check in OUTCOME_CHECKS for a in case.expect):
            self.outcome_cases.append(case)
        if any(a.check == "state" for a in case.expect):
            self.state_cases.append(case)
        if isinstance(case.invocation, Invocation):
            self.skill_cases.append(case)

    def suite_digest(self, body: dict[str, Any]) -> str:
        """The suite digest, once every case was added.

        From the validated-case cache, the digest kept with it, if the body is
        the one it was made with (else ``validated.Miss``: the file loads in full).
        """
        try:
            text = canonical(body)
        except ValueError:  # a suite-level value JCS cannot write: name its key
            for key, value in body.items():
                try:
                    canonical(value)
                except ValueError as exc:
                    raise SuiteError(str(self._path), _key_line(self._path, key),
                                     f"{key}: {_UNRECORDABLE} ({exc})") from None
            raise
        self.body = hashlib.sha256(text).hexdigest()
        if self._hit is not None:
            if self.body != self._hit.body:
                raise validated.Miss("the suite body changed")
            return self._hit.suite_digest
        sink = self._public.copy()
        sink.update(b'],"suite":' + text + b"}")
        return "sha256:" + sink.hexdigest()

    def hidden_digest(self) -> str | None:
        """The hidden-set digest (None without hidden cases), once every case was added."""
        if not self._counts["hidden"]:
            return None
        sink = self._hidden.copy()
        sink.update(b"]")
        return "sha256:" + sink.hexdigest()


def _skill_uses(cases: Sequence[Case], default: Path | None, path: Path) -> tuple[SkillUse, ...]:
    """Each case's named skill, found in its workspace (its own, else the suite's); one a
    workspace does not hold is refused at the case's line (SPEC §2)."""
    uses: list[SkillUse] = []
    seen: dict[tuple[Path, str], Found] = {}
    for case in cases:
        invocation = case.invocation
        assert isinstance(invocation, Invocation)  # only such cases are collected
        own = (Path(case.file or path).parent / case.workspace).resolve() \
            if case.workspace is not None else default
        found = find_skill(own, invocation.skill, seen)
        if found.problem is not None:
            hidden = case.split == "hidden"
            raise SuiteError(case.file or str(path), case.line,
                             f"case {case.id!r}: invocation: skill {invocation.skill!r} "
                             f"{found.problem}" if not hidden else
                             "invocation: the skill it names is not usable from the "
                             "case's workspace (details withheld: hidden case)")
        uses.append(SkillUse(case, invocation, found.hosts, found.found))
    return tuple(uses)


#: Why a value is refused that loads as YAML but that no record could hold exactly.
_UNRECORDABLE = ("holds a number the run's record cannot keep exactly (its digests are "
                 "RFC 8785 JSON: no infinity, no NaN, integers within ±2**53)")


def _case_problem(case: Case, path: Path) -> Problem:
    return Problem(case.file or str(path), _no_line, secret=case.split == "hidden")


def _no_line(loc: object) -> None:
    return None


def _line_of(case: Case) -> Callable[[object], int | None]:
    return lambda loc: case.line


_CASE_LIST: TypeAdapter[list[Case]] = TypeAdapter(list[Case])


def _identities(cases: Sequence[Case], fixtures: dict[Path, str]) -> list[dict[str, Any]]:
    """What identifies each case in a digest: its fields as JSON, and its fixture's bytes.

    Fields left at their defaults are the same case whether written or not,
    so they stay out of the digest (which also keeps it quick to compute).
    One dump of the whole list: per case, the call cost more than the dump.
    ``fixtures`` caches each fixture's digest: many cases share one folder.
    """
    identities: list[dict[str, Any]] = _CASE_LIST.dump_python(list(cases), mode="json",
                                                             exclude_defaults=True)
    for case, data in zip(cases, identities, strict=True):
        for name, where in _world(case):
            found = fixtures.get(where)
            if found is None:
                found = fixtures[where] = file_digest(where)
            data[name] = found
    return identities


def _world(case: Case) -> list[tuple[str, Path]]:
    """The files a case's identity holds the digest of, under the name it holds it by."""
    named = []
    if case.fixture is not None and case.file is not None:
        named.append(("fixture_digest", Path(case.file).parent / case.fixture))
    if case.workspace is not None and case.file is not None:
        # A changed workspace folder is a changed case, as a changed fixture is.
        named.append(("workspace_digest", (Path(case.file).parent / case.workspace).resolve()))
    return named


def _check_python_judge(named: str, path: Path) -> None:
    """The suite's ``judge: python:module:function`` imported now, beside the suite file:
    one that cannot be is a mistake at its line, not a run refused later (SPEC §9)."""
    from ..judging.judges import parse_judge
    from ..judging.python_judge import check

    try:
        judge = parse_judge(named)
    except ValueError as exc:
        raise SuiteError(str(path), _key_line(path, "judge"), f"judge: {exc}") from None
    try:
        check(judge, path.parent)
    except ValueError as exc:
        raise SuiteError(str(path), _key_line(path, "judge"), f"judge {judge.uri}: {exc}") \
            from None


def _hidden_line(path: Path) -> int | None:
    return _key_line(path, "hidden")


def _key_line(path: Path, key: str) -> int | None:
    """The line of a top-level key of a YAML suite file (None for a Python suite)."""
    if path.name.endswith(".py"):
        return None
    marked = load_marked(path)
    return marked.key_line([key])


def hidden_fallback(item: LoadedSuite) -> str:
    """What a suite ran instead of the private hidden cases ``--hidden-dir`` did not hold.

    Names folders only, never a case: the user who gave the folder needs to
    know it was not used (a typo, a wrong version), not what the samples hold.
    """
    instead = "it has no hidden cases"
    if item.hidden_source == "samples" and item.suite.hidden is not None:
        instead = f"using its sample hidden cases ({item.path.parent / item.suite.hidden}) instead"
    return (f"--hidden-dir has no folder {item.hidden_missing} for suite {item.suite.id}; "
            f"{instead}")
