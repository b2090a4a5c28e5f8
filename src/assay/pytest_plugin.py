"""The pytest plugin: suites as items, one per case (SPEC §13).

``pytest evals/`` collects every suite (``*.suite.yaml``, ``*_eval.py``)
under the paths named on the command line (a suite run as part of a plain ``pytest`` would call
agents, and models, without being asked: set ``assay_suites = true`` in
the ini file to collect them wherever pytest looks). Each case is an item
named by its id; a hidden case is ``holdout-N`` and nothing else of it is
shown. ``-k``, ``-x`` and xdist work on the items as on any others.

A suite's battery runs once, when its first selected item runs, for the
cases selected in this process; each item then passes only if its case
passed — inconclusive and broken are failures, as in ``assay run``. When
every case of the suite was selected here, the run is recorded and sealed
in the store exactly as ``assay run`` records it (``engine.runs``); a
part of a suite (``-k``, or xdist spreading one file over workers: use
``--dist loadfile``) runs unrecorded, and the summary says so.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .model import CaseResult, Report
    from .suites import LoadedSuite

#: What the terminal summary says of each suite: (suite id, what became of its run).
_RUNS = pytest.StashKey[list[tuple[str, str]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """The plugin's options (settings files and ``$ASSAY_*`` variables apply as for ``assay``)."""
    group = parser.getgroup("assay", "assay: suites of cases as items")
    group.addoption("--assay-db", metavar="URL", default=None,
                    help="The store runs are recorded in (default: $ASSAY_DB, the settings "
                         "file's db, else .assay/assay.db).")
    group.addoption("--assay-no-store", action="store_true",
                    help="Run the suites without recording them.")
    group.addoption("--assay-hidden-dir", metavar="DIR", default=None,
                    help="A private folder of hidden cases (default: $ASSAY_HIDDEN_DIR).")
    group.addoption("--assay-concurrency", metavar="N", type=int, default=None,
                    help="Trials at once (default: the settings file's, else 8).")
    parser.addini("assay_suites", type="bool", default=False,
                  help="Collect suites (*.suite.yaml, *_eval.py) wherever pytest looks, "
                       "not only under the paths named on the command line.")


def pytest_configure(config: pytest.Config) -> None:
    """Start the summary's list of runs."""
    config.stash[_RUNS] = []


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> SuiteFile | None:
    """A suite file under a path named on the command line (or anywhere, if asked)."""
    if not file_path.name.endswith((".suite.yaml", "_eval.py")):
        return None
    config = parent.config
    if not config.getini("assay_suites") and not _named(config, file_path):
        return None
    return SuiteFile.from_parent(parent, path=file_path)


def _named(config: pytest.Config, path: Path) -> bool:
    """Whether ``path`` is one of, or under one of, the paths the user typed."""
    base = Path(config.invocation_params.dir)
    for arg in config.invocation_params.args:
        if arg.startswith("-"):
            continue
        named = (base / arg.split("::", 1)[0]).resolve()
        resolved = path.resolve()
        if resolved == named or named in resolved.parents:
            return True
    return False


class CaseFailed(Exception):
    """A case that did not pass: its outcome and, for a public case, its reason."""


class SuiteFile(pytest.File):
    """One suite file: an item per case; its battery runs once, for the selected cases."""

    loaded: LoadedSuite | None = None
    _results: dict[int, CaseResult] | None = None

    def collect(self) -> Iterator[CaseItem]:
        """An item per case, hidden ones as ``holdout-N``."""
        from .errors import SuiteError
        from .suites import load_suite_file

        try:
            self.loaded = load_suite_file(self.path, _hidden_dir(self.config))
        except SuiteError as error:
            raise self.CollectError(str(error)) from None
        hidden = 0
        for index, case in enumerate(self.loaded.suite.cases):
            if case.split == "hidden":
                hidden += 1
                name = f"holdout-{hidden}"
            else:
                name = case.id
            yield CaseItem.from_parent(self, name=name, index=index,
                                       line=None if case.split == "hidden" else case.line)

    def results(self) -> dict[int, CaseResult]:
        """Each selected case's result by position: the battery, run on first asking."""
        if self._results is None:
            self._results = self._run()
        return self._results

    def _run(self) -> dict[int, CaseResult]:
        from .engine.runs import RunSettings, run_suites
        from .model import CaseResult

        assert self.loaded is not None
        loaded = self.loaded
        chosen = sorted(item.index for item in self.session.items
                        if isinstance(item, CaseItem) and item.parent is self)
        whole = len(chosen) == len(loaded.suite.cases)
        config = self.config
        store = whole and not config.getoption("assay_no_store")
        suite = loaded if whole else loaded.part_of(chosen)
        settings = RunSettings(concurrency=_concurrency(config), hidden_dir=_hidden_dir(config))
        [result] = run_suites(lambda: [suite], [], settings, db=_db(config), store=store)
        runs = config.stash[_RUNS]
        if result.report is None:
            raise CaseFailed(f"the harness could not run suite {loaded.suite.id}: "
                             f"{result.harness_failure}")
        report: Report = result.report
        if store:
            runs.append((loaded.suite.id, f"recorded as run {report.run_id}"))
        elif config.getoption("assay_no_store"):
            runs.append((loaded.suite.id, "not recorded (--assay-no-store)"))
        else:
            runs.append((loaded.suite.id, f"not recorded: {len(chosen)} of "
                         f"{len(loaded.suite.cases)} cases ran in this process"))
        by_id = {case.id: case for case in report.cases if isinstance(case, CaseResult)}
        ids = [loaded.suite.cases[i].id for i in chosen]
        return {index: by_id[case_id] for index, case_id in zip(chosen, ids, strict=True)
                if case_id in by_id}


class CaseItem(pytest.Item):
    """One case of a suite: passes when the case passed over its trials."""

    def __init__(self, *, index: int, line: int | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.index = index
        self.line = line

    def runtest(self) -> None:
        """Look up the case's result (the suite's battery runs on first asking)."""
        parent = self.parent
        assert isinstance(parent, SuiteFile)
        case = parent.results().get(self.index)
        if case is None:
            raise CaseFailed("the case has no result (the run was interrupted)")
        if case.outcome != "pass":
            if case.split == "hidden":  # a hidden case says nothing but its outcome
                raise CaseFailed(f"{case.outcome}")
            raise CaseFailed(f"{case.outcome}: {case.reason or 'see the report'}"
                             + _conversation(case))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        """The case's outcome and reason, not a traceback of the plugin."""
        if isinstance(excinfo.value, CaseFailed):
            from .reports.safe import inert

            # A reason quotes the agent: shown inert, as every assay surface shows it.
            return inert(f"{self.name}: {excinfo.value}", limit=4000)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        """Where the case is written (a hidden case: its suite only)."""
        return self.path, None if self.line is None else self.line - 1, f"case {self.name}"


def _conversation(case: CaseResult) -> str:
    """A conversation's turns under its failure (SPEC §16): its first trial that did not
    pass, as the terminal shows it under the table; nothing for a single question."""
    from .reports.common import conversation_lines

    trial = next((t for t in case.trials if t.outcome != "pass" and t.turns), None)
    if trial is None:
        return ""
    lines = conversation_lines(trial, "  ")
    return f"\ntrial {trial.n} ({trial.outcome}), the conversation:\n" + "\n".join(lines)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Which suites were recorded, as which run, or why not."""
    runs = config.stash.get(_RUNS, [])
    if runs:
        terminalreporter.section("assay")
        for suite_id, what in runs:
            terminalreporter.write_line(f"{suite_id}: {what}")


def _db(config: pytest.Config) -> str | None:
    given: str | None = config.getoption("assay_db")
    if given or os.environ.get("ASSAY_DB"):
        return given or os.environ["ASSAY_DB"]
    found: str | None = _file_setting("db")
    return found


def _hidden_dir(config: pytest.Config) -> Path | None:
    given = config.getoption("assay_hidden_dir") or os.environ.get("ASSAY_HIDDEN_DIR") \
        or _file_setting("hidden_dir")
    return Path(given) if given else None


def _concurrency(config: pytest.Config) -> int:
    given = config.getoption("assay_concurrency") or _file_setting("concurrency")
    return int(given) if given else 8


def _file_setting(key: str) -> Any:
    from .settings import load

    return load().values.get(key)
