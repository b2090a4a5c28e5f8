"""Load one suite file, YAML or Python, into a Suite with its hidden cases and digests."""

from __future__ import annotations

import gc
import importlib.util
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..canonical import digest, file_digest
from ..errors import SuiteError
from ..model import Case, Suite
from ..model.fixture import ToolFixture
from . import cache
from .build import LineOf, Problem, check_case, check_unique, make_cases, make_suite
from .fixtures import is_tool_fixture, load_tool_fixture
from .hidden import HiddenSource, choose_folder, load_hidden
from .marks import load_marked


@dataclass(frozen=True)
class LoadedSuite:
    """A suite ready to run: its cases (public and hidden) and what identifies them."""

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
    #: What the digests cover, per case id (public and hidden): the case's fields as
    #: JSON and its fixture's digest; ``case_facets`` digests them on demand.
    identities: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    #: Each case's facets, by id: made for every case on first use (``case_facets``).
    _facets: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    #: Each case's position in ``suite.cases``, by id: made on first use (``positions``).
    _positions: dict[str, int] = field(default_factory=dict, repr=False)

    def positions(self) -> dict[str, int]:
        """Each case's position in ``suite.cases``, by id (made once, then shared)."""
        cases = self.suite.cases
        if len(self._positions) != len(cases):
            self._positions.clear()
            self._positions.update((case.id, index) for index, case in enumerate(cases))
        return self._positions

    def case_facets(self, case: Case) -> dict[str, str]:
        """The digests ``assay compare`` aligns this case on (``suites.facets``)."""
        found = self._facets.get(case.id)
        if found is None:
            from .facets import case_facets

            cases = self.suite.cases
            identities = self.identities
            if any(c.id not in identities for c in cases):  # a suite built by hand
                identities = {c.id: i for c, i in zip(cases, _identities(cases, {}),
                                                       strict=True)}
            self._facets.update(case_facets(cases, identities, {}))
            found = self._facets.get(case.id)
            if found is None:  # a case not in the suite
                found = case_facets([case], {case.id: _identities([case], {})[0]}, {})[case.id]
        return found

    def fixture_path(self, case: Case) -> Path | None:
        """The absolute path of a case's fixture (relative to the file that wrote the case)."""
        if case.fixture is None:
            return None
        return (Path(case.file or self.path).parent / case.fixture).resolve()


def load_suite_file(path: Path, hidden_root: Path | None = None) -> LoadedSuite:
    """Load ``*.suite.yaml`` or ``*_eval.py``; raises SuiteError on anything wrong."""
    if path.name.endswith(".py"):
        suite = _load_python(path)  # the user's code runs: the collector stays as it was
        with _collector_paused():
            return _with_hidden(suite, path, hidden_root)
    with _collector_paused():
        return _with_hidden(_load_yaml(path), path, hidden_root)


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


def _load_yaml(path: Path) -> Suite:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        marked = load_marked(path)  # raises the SuiteError that says why
        return _build_yaml(path, marked.data, marked.line, marked.key_line)
    key = cache.key_of(text.encode("utf-8", "surrogatepass"))
    kept = cache.read(path, key)
    if kept is not None:
        data, lines = kept
        try:
            return _build_yaml(path, data, cache.KeptLines(lines), cache.KeptLines(lines))
        except (SuiteError, cache.KeptLines.Unknown):
            pass  # parsed again below, for the error's exact words and line
    marked = load_marked(path, text=text)
    suite = _build_yaml(path, marked.data, marked.line, marked.key_line)
    if cache.keeping():
        cache.write(path, key, marked.data, cache.lines_of(marked.data, marked.line))
    return suite


def _build_yaml(path: Path, data: Any, line_of: LineOf, key_line_of: LineOf) -> Suite:
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
    for case in suite.cases:
        line_problem = Problem(case.file or str(path), _line_of(case), secret=False)
        check_case(case, line_problem, [], base_dir=Path(case.file or path).parent)
    check_unique(suite.cases, lambda case: problem)
    return suite.model_copy(update={"source": str(path)})


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


def _with_hidden(suite: Suite, path: Path, hidden_root: Path | None) -> LoadedSuite:
    samples = None
    if suite.hidden is not None:
        samples = path.parent / suite.hidden
        if not samples.is_dir():
            raise SuiteError(str(path), _hidden_line(path), f"hidden folder {suite.hidden!r} "
                             "does not exist")
    choice = choose_folder(suite.id, samples, hidden_root)
    hidden = load_hidden(choice.folder) if choice.folder is not None else []
    if hidden:
        everything = [*suite.cases, *hidden]
        check_unique(everything, lambda case: _case_problem(case, path))
        suite = suite.model_copy(update={"cases": everything})
    public = [c for c in suite.cases if c.split == "public"]
    secret = [c for c in suite.cases if c.split == "hidden"]
    body = suite.model_dump(mode="json", by_alias=True, exclude={"cases", "source"},
                            exclude_defaults=True)
    fixtures: dict[Path, str] = {}
    public_ids, secret_ids = _identities(public, fixtures), _identities(secret, fixtures)
    suite_digest = digest({"suite": body, "cases": public_ids})
    hidden_digest = digest(secret_ids) if secret else None
    identities = {c.id: i for c, i in zip([*public, *secret], [*public_ids, *secret_ids],
                                          strict=True)}
    loaded = LoadedSuite(suite, path, suite_digest, hidden_digest,
                         choice.source if secret else None, hidden_missing=choice.missing,
                         identities=identities)
    for case in suite.cases:
        where = loaded.fixture_path(case)
        if where is not None and str(where) not in loaded.fixtures and is_tool_fixture(where):
            loaded.fixtures[str(where)] = load_tool_fixture(where, secret=case.split == "hidden")
    return loaded


def _case_problem(case: Case, path: Path) -> Problem:
    return Problem(case.file or str(path), _no_line, secret=case.split == "hidden")


def _no_line(loc: object) -> None:
    return None


def _line_of(case: Case) -> Callable[[object], int | None]:
    return lambda loc: case.line


_CASE_LIST: TypeAdapter[list[Case]] = TypeAdapter(list[Case])


def _identities(cases: list[Case], fixtures: dict[Path, str]) -> list[dict[str, Any]]:
    """What identifies each case in a digest: its fields as JSON, and its fixture's bytes.

    Fields left at their defaults are the same case whether written or not,
    so they stay out of the digest (which also keeps it quick to compute).
    One dump of the whole list: per case, the call cost more than the dump.
    ``fixtures`` caches each fixture's digest: many cases share one folder.
    """
    identities: list[dict[str, Any]] = _CASE_LIST.dump_python(cases, mode="json",
                                                             exclude_defaults=True)
    for case, data in zip(cases, identities, strict=True):
        if case.fixture is not None and case.file is not None:
            where = Path(case.file).parent / case.fixture
            found = fixtures.get(where)
            if found is None:
                found = fixtures[where] = file_digest(where)
            data["fixture_digest"] = found
    return identities


def _hidden_line(path: Path) -> int | None:
    if path.name.endswith(".py"):
        return None
    marked = load_marked(path)
    return marked.key_line(["hidden"])
