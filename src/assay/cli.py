"""The command line: parse, call the rooms, pick an exit code (SPEC §7).

Heavy libraries are imported inside the commands so that ``assay --help``
starts fast.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from . import __version__
from .errors import AssayError

if TYPE_CHECKING:
    from rich.console import Console

    from .engine import RunStart
    from .model import Report
    from .store.database import Store
    from .suites import LoadedSuite

EXIT_PASSED, EXIT_NOT_PASSED, EXIT_USAGE, EXIT_HARNESS = 0, 1, 2, 3


def _fail(error: AssayError) -> None:
    click.echo(f"assay: error: {error}", err=True)
    sys.exit(error.exit_code)


def _load(paths: tuple[Path, ...], hidden_dir: Path | None, suite_ids: tuple[str, ...]
          ) -> list[LoadedSuite]:
    from .errors import UsageError
    from .suites import discover

    roots = list(paths) or [Path("evals")]
    loaded = discover(roots, hidden_dir)
    if suite_ids:
        wanted = set(suite_ids)
        loaded = [item for item in loaded if item.suite.id in wanted]
        missing = wanted - {item.suite.id for item in loaded}
        if missing:
            raise UsageError(f"no suite {', '.join(sorted(missing))} under "
                             f"{', '.join(str(p) for p in roots)}")
    if not loaded:
        raise UsageError(f"no suites (*.suite.yaml, *_eval.py) under "
                         f"{', '.join(str(p) for p in roots)}")
    return loaded


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="assay")
def main() -> None:
    """assay: evaluate AI agents honestly.

    Run suites of cases against an agent, several trials per case; grade what
    the agent did; report public and hidden scores side by side.
    """


DB_OPTION = click.option(
    "--db", metavar="URL", envvar="ASSAY_DB",
    help="The store: a SQLAlchemy URL, e.g. sqlite:///.assay/assay.db or "
         "postgresql+psycopg://host/db (default: $ASSAY_DB; `runs` and `show` fall back "
         "to sqlite:///.assay/assay.db; `run` stores only when a store is named).")


@dataclass(frozen=True)
class RunOptions:
    """What ``assay run`` was asked to do."""

    paths: tuple[Path, ...]
    suite_ids: tuple[str, ...]
    targets: tuple[str, ...]
    trials: int | None
    concurrency: int
    timeout_s: float | None
    seed: int | None
    hidden_dir: Path | None
    json_path: Path | None
    junit_path: Path | None
    markdown_path: Path | None
    base_url: str | None = None
    db: str | None = None


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--suite", "suite_ids", multiple=True, metavar="ID", help="Run only this suite.")
@click.option("--target", "targets", multiple=True, metavar="URI",
              help="The agent (SPEC §4); several give one run each, side by side.")
@click.option("--trials", type=click.IntRange(min=1), help="Trials per case (overrides suites).")
@click.option("--concurrency", type=click.IntRange(min=1), default=8, show_default=True,
              help="Trials running at once.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True),
              help="Seconds per trial (overrides suites).")
@click.option("--seed", type=int, help="Seed for anything random (recorded in the report).")
@click.option("--hidden-dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              envvar="ASSAY_HIDDEN_DIR", help="Private hidden cases: DIR/namespace/name@N/.")
@click.option("--json", "json_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the JSON report.")
@click.option("--junit", "junit_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write JUnit XML.")
@click.option("--markdown", "markdown_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write a Markdown summary.")
@click.option("--base-url", metavar="URL",
              help="The OpenAI-compatible server of openai: targets, e.g. "
                   "http://127.0.0.1:11434/v1 (default: $ASSAY_OPENAI_BASE_URL).")
@DB_OPTION
def run(**kwargs: Any) -> None:
    """Run suites against targets; exit 0 only if every run passed."""
    options = RunOptions(**kwargs)
    try:
        code = _run(options)
    except AssayError as error:
        _fail(error)
        return
    _exit(code)


def _exit(code: int) -> None:
    """Exit; if an agent thread hangs (a timed-out sync agent), do not wait for it."""
    sys.stdout.flush()
    sys.stderr.flush()
    stuck = [t for t in threading.enumerate()
             if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if stuck:
        os._exit(code)
    sys.exit(code)


def _run(options: RunOptions) -> int:
    from rich.console import Console

    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    out = Console(file=sys.stdout, highlight=False)
    err = Console(file=sys.stderr, highlight=False)
    # A battery allocates many small, long-lived objects (cases, traces,
    # verdicts) and frees few: the default GC thresholds rescan them all
    # again and again. Collect less often, and never rescan the loaded suites.
    gc.set_threshold(50_000, 20, 100)
    loaded = _load(options.paths, options.hidden_dir, options.suite_ids)
    gc.freeze()
    plans = [(item, uri) for item in loaded for uri in _targets_for(item, options.targets)]
    return _execute(plans, options, out, err)


def _targets_for(item: LoadedSuite, given: tuple[str, ...]) -> list[str]:
    from .errors import UsageError

    if given:
        return list(given)
    if item.suite.target:
        return [item.suite.target]
    raise UsageError(f"{item.path}: suite {item.suite.id} names no target; give --target URI")


def _execute(plans: list[tuple[LoadedSuite, str]], options: RunOptions, out: Console,
             err: Console) -> int:
    # For now a run is stored only when a store is named (--db or ASSAY_DB):
    # saving costs more than the battery itself on large runs, and recording
    # must not become the bottleneck (issue 4 sets < 15% of throughput). Once
    # it is that cheap, every run is stored by default as SPEC §7 says.
    if options.db is None:
        return _batteries(plans, options, out, err, None)
    from .store.database import open_store

    # Opened before any trial runs: a run that cannot be recorded should not start.
    store = open_store(options.db)
    try:
        return _batteries(plans, options, out, err, store)
    finally:
        store.close()


def _batteries(plans: list[tuple[LoadedSuite, str]], options: RunOptions, out: Console,
               err: Console, store: Store | None) -> int:
    import asyncio

    from .errors import HarnessFailure
    from .grading import redact
    from .reports import write_json, write_junit, write_markdown
    from .reports.terminal import print_report, print_side_by_side

    reports: list[Report] = []
    harness_failed = False
    interrupted = False
    for item, uri in plans:
        try:
            outcome: list[tuple[Report, bool]] = []
            asyncio.run(_battery(item, uri, options, err, outcome, store))
            full, interrupted = outcome[0]
        except HarnessFailure as failure:
            err.print(f"[bold magenta]harness failure[/] ({item.suite.id}): {failure}",
                      markup=True, highlight=False)
            harness_failed = True
            continue
        if store is not None:
            from .store.recording import seal, stored_suite

            # Trial verdicts and run-sealed go to the ledger first; the stored
            # report (the full one: replay needs the hidden cases) carries the seal.
            full = full.model_copy(update={"seal": seal(store.ledger, full)})
            store.save_run(full, stored_suite(item))
        report = redact(full)
        reports.append(report)
        print_report(out, report)
        out.print()
        if interrupted:
            err.print("[yellow]interrupted: the trials that finished are reported[/]")
            break
    if len(reports) > 1:
        print_side_by_side(out, reports)
    if reports:
        if options.json_path:
            write_json(reports, options.json_path)
        if options.junit_path:
            write_junit(reports, options.junit_path)
        if options.markdown_path:
            write_markdown(reports, options.markdown_path)
    if harness_failed:
        return EXIT_HARNESS
    return EXIT_PASSED if all(r.scores.passed for r in reports) else EXIT_NOT_PASSED


async def _battery(item: LoadedSuite, uri: str, options: RunOptions, err: Console,
                   outcome: list[tuple[Report, bool]], store: Store | None = None) -> None:
    # The result goes out through ``outcome``, not as the coroutine's return
    # value: on Python 3.11 asyncio.run formats its main task's repr (result
    # included) when it checks the SIGINT handler, which costs seconds for a
    # large report.
    import asyncio
    import signal

    from .engine import Battery, BatteryOptions
    from .reports.progress import BatteryProgress
    from .targets import TargetOptions, make_target

    # Relative names resolve beside the suite file first, then in the working folder.
    target_options = TargetOptions(base_dir=item.path.parent, concurrency=options.concurrency,
                                   base_url=options.base_url)
    target = make_target(uri, target_options)
    battery_options = BatteryOptions(concurrency=options.concurrency, trials=options.trials,
                                     timeout_s=options.timeout_s, seed=options.seed)
    battery = Battery(item, target, battery_options)
    if store is not None:
        from .store.recording import registration

        ledger = store.ledger
        per_case = options.trials or item.suite.trials

        def register(start: RunStart) -> None:
            # Pre-registration: sealed in the ledger before any trial runs.
            ledger.append("run-registered", registration(start, item, target, per_case))

        battery.on_start = register
    with BatteryProgress(err, f"{item.suite.id}", len(battery.plan())) as progress:
        battery.on_trial = progress.trial_done
        loop = asyncio.get_running_loop()

        def on_sigint() -> None:
            if battery.interrupted:
                os._exit(130)  # a second Ctrl-C: stop now
            battery.interrupt()

        try:
            loop.add_signal_handler(signal.SIGINT, on_sigint)
        except (NotImplementedError, RuntimeError):
            pass
        try:
            report = await battery.run()
        finally:
            loop.remove_signal_handler(signal.SIGINT)
    outcome.append((report, battery.interrupted))


@main.command(name="list")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--hidden-dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              envvar="ASSAY_HIDDEN_DIR", help="Private hidden cases: DIR/namespace/name@N/.")
def list_(paths: tuple[Path, ...], hidden_dir: Path | None) -> None:
    """Suites and their public cases; hidden cases only as a count."""
    from rich.console import Console

    try:
        loaded = _load(paths, hidden_dir, ())
    except AssayError as error:
        _fail(error)
        return
    out = Console(file=sys.stdout, highlight=False)
    for item in loaded:
        suite = item.suite
        hidden = len(suite.hidden_cases())
        source = f", {item.hidden_source}" if item.hidden_source else ""
        out.print(f"[bold]{suite.id}[/]  {suite.title or ''}")
        out.print(f"  file {item.path} · target {suite.target or '(none: give --target)'} · "
                  f"{suite.trials} trial(s) · pass mark {suite.pass_mark:g}")
        out.print(f"  {len(suite.public_cases())} public case(s), {hidden} hidden{source}")
        for case in suite.public_cases():
            tags = f"  [dim]{' '.join(case.tags)}[/]" if case.tags else ""
            out.print(f"    {case.id}  ({len(case.expect)} assertion(s)){tags}")


@main.command()
@DB_OPTION
@click.option("--json", "as_json", is_flag=True, help="One JSON list, for scripts.")
def runs(db: str | None, as_json: bool) -> None:
    """The stored runs, oldest first: id, suite, target, started, scores, passed."""
    import dataclasses
    import json

    from .reports.common import pct
    from .store.database import open_store

    try:
        store = open_store(db)
        summaries = store.runs()
        store.close()
    except AssayError as error:
        _fail(error)
        return
    if as_json:
        click.echo(json.dumps([dataclasses.asdict(s) for s in summaries], indent=2))
        return
    for s in summaries:
        verdict = "passed" if s.passed else "NOT PASSED"
        if s.interrupted:
            verdict += " (interrupted)"
        click.echo(f"{s.run_id}  {s.suite_id}  {s.target_uri}  {s.started_at}  "
                   f"public {pct(s.public)} · hidden {pct(s.hidden)} · "
                   f"overall {pct(s.overall)}  {verdict}")


@main.command()
@click.argument("run_id", metavar="RUN")
@DB_OPTION
@click.option("--json", "as_json", is_flag=True, help="The JSON report (SPEC §6).")
def show(run_id: str, db: str | None, as_json: bool) -> None:
    """One stored run, as its report shows it: hidden cases as holdouts only."""
    import json

    from rich.console import Console

    from .grading import redact
    from .reports.json_report import as_json as report_json
    from .reports.terminal import print_report
    from .store.database import open_store

    try:
        store = open_store(db)
        report = redact(store.load_report(run_id))
        store.close()
    except AssayError as error:
        _fail(error)
        return
    if as_json:
        click.echo(json.dumps(report_json([report]), indent=2, ensure_ascii=False))
        return
    print_report(Console(file=sys.stdout, highlight=False), report)


@main.group()
def ledger() -> None:
    """The tamper-evident ledger of stored runs."""


@ledger.command(name="verify")
@DB_OPTION
def ledger_verify(db: str | None) -> None:
    """Check every entry's chain and hash, and each content still stored; exit 1 if one fails."""
    from .store.database import open_store

    try:
        store = open_store(db)
        result, count = store.ledger.verify()
        store.close()
    except AssayError as error:
        _fail(error)
        return
    if not result.ok:
        click.echo(f"ledger: {result.reason}")
        sys.exit(EXIT_NOT_PASSED)
    erased = f" ({len(result.absent)} with content erased)" if result.absent else ""
    click.echo(f"ledger: {count} entries verify{erased}")


class _ReceiptGroup(click.Group):
    """``assay receipt RUN`` builds; ``assay receipt verify FILE`` checks."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["create", *args]
        return super().parse_args(ctx, args)


@main.group(cls=_ReceiptGroup)
def receipt() -> None:
    """A stored run's signed receipt: `assay receipt RUN`, `assay receipt verify FILE`."""


def _ledger_key_path(url: str | None) -> Path:
    from .errors import UsageError

    named = os.environ.get("ASSAY_LEDGER_KEY")
    if named:
        return Path(named)
    if not url:
        return Path(".assay") / "ledger.key"
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database \
            and parsed.database != ":memory:":
        return Path(parsed.database).parent / "ledger.key"
    raise UsageError("receipt: this store keeps no key file beside it; set ASSAY_LEDGER_KEY "
                     "to the path of the Ed25519 signing key (created if missing)")


@receipt.command(name="create", hidden=True)
@click.argument("run_id", metavar="RUN")
@DB_OPTION
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the receipt here (default: standard output).")
def receipt_create(run_id: str, db: str | None, out: Path | None) -> None:
    """Write RUN's receipt: summary, run-sealed entry, inclusion proof, signed tree head."""
    import json

    from .errors import UsageError
    from .grading import redact
    from .store import receipts
    from .store.database import open_store
    from .store.recording import report_digest

    try:
        key_path = _ledger_key_path(db)
        store = open_store(db)
        try:
            full = store.load_report(run_id)
            entries = store.ledger.entries()
        finally:
            store.close()
        index = (full.seal or {}).get("entry")
        if not isinstance(index, int) or not 0 <= index < len(entries) \
                or entries[index].kind != "run-sealed":
            raise UsageError(f"run {run_id} has no run-sealed ledger entry "
                             "(stored before the ledger?): no receipt")
        content = {"run_id": full.run_id, "report_digest": report_digest(full)}
        try:
            key = receipts.load_or_create_key(key_path)
        except (OSError, ValueError, TypeError) as error:
            raise UsageError(f"receipt: cannot use the signing key {key_path} "
                             f"({type(error).__name__})") from None
        built = receipts.build(receipts.summary(redact(full)), entries, index, content, key)
    except AssayError as error:
        _fail(error)
        return
    text = json.dumps(built, indent=2, ensure_ascii=False) + "\n"
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text, encoding="utf-8")
        click.echo(f"receipt: {out} (run {run_id}, entry {index}, "
                   f"signed by key {built['key']['fingerprint']})")


@receipt.command(name="verify")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--key", "pin", metavar="KEY",
              help="The signer to require: its raw public key (base64) or SHA-256 fingerprint.")
def receipt_verify(file: Path, pin: str | None) -> None:
    """Check a receipt offline, with no store; exit 1 naming the first check that fails."""
    import json

    from .store import receipts

    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        click.echo("receipt: not readable JSON")
        sys.exit(EXIT_NOT_PASSED)
    result = receipts.verify(data, pin)
    if not result.ok:
        click.echo(f"receipt: {result.reason}")
        sys.exit(EXIT_NOT_PASSED)
    pinned = "pinned" if result.pinned else "not pinned"
    click.echo(f"receipt verifies: signed by key {result.fingerprint} ({pinned})")


@main.command()
@click.argument("run_id", metavar="RUN")
@DB_OPTION
@click.option("--json", "as_json", is_flag=True, help="The differences as JSON, for scripts.")
def replay(run_id: str, db: str | None, as_json: bool) -> None:
    """Re-grade a stored run's traces with its stored suite; exit 1 if any verdict differs.

    Hidden cases are named holdout-N and their assertions by position only.
    """
    import dataclasses
    import json

    from .analysis.replay import replay as regrade
    from .store.database import open_store

    try:
        store = open_store(db)
        try:
            stored = store.load_replay(run_id)
        finally:
            store.close()
        result = regrade(stored)
    except AssayError as error:
        _fail(error)
        return
    if as_json:
        click.echo(json.dumps({
            "run_id": result.run_id, "trials": result.trials, "verdicts": result.verdicts,
            "ok": result.ok,
            "differences": [dataclasses.asdict(d) for d in result.differences],
            "not_replayable": [dataclasses.asdict(u) for u in result.unreplayable],
        }, indent=2, ensure_ascii=False))
    else:
        for d in result.differences:
            where = f"case {d.case} trial {d.trial}"
            if d.position is not None:
                where += f" assertion {d.position}" + (f" ({d.assertion})" if d.assertion else "")
            click.echo(f"{where}: {d.field} stored {d.stored}, recomputed {d.recomputed}")
        for u in result.unreplayable:
            click.echo(f"case {u.case} trial {u.trial}: not replayable ({u.reason})")
        summary = f"replay: {result.verdicts} verdicts re-graded"
        if result.ok:
            click.echo(f"{summary}, all match")
        else:
            parts = [f"{len(result.differences)} difference(s)"] if result.differences else []
            if result.unreplayable:
                parts.append(f"{len(result.unreplayable)} trial(s) not replayable")
            click.echo(f"{summary}, {', '.join(parts)}")
    if not result.ok:
        sys.exit(EXIT_NOT_PASSED)


if __name__ == "__main__":  # pragma: no cover
    main()
