"""`assay proxy`: stand between an MCP host and an MCP server, and sample the calls (SPEC §10).

The proxy is an MCP server on stdio: a host launches it as its server
command. Nothing but MCP goes to stdout; the one-line summary and any error
go to stderr. The work is ``sampling.proxy``'s; this module reads the flags,
refuses what would do nothing useful (with the reason), and picks the exit
code: 0 when the host ended the session, 2 for bad usage, 3 when the
upstream server cannot start or goes away.
"""

from __future__ import annotations

import asyncio
import gc
import os
import secrets
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..errors import AssayError, HarnessFailure, UsageError
from .common import DB_OPTION, EXIT_HARNESS, EXIT_PASSED, fail

if TYPE_CHECKING:
    from ..sampling.proxy import ProxyOptions
    from ..sampling.proxy_calls import ProxyChecks

#: Samples that may wait for the grader before new ones are dropped.
DEFAULT_BUFFER = 1000


@click.command()
@click.option("--upstream", required=True, metavar="URI",
              help="The MCP server to stand in front of: mcp+stdio:COMMAND ARGS…")
@click.option("--sample", required=True, type=click.FloatRange(0, 100), metavar="K",
              help="Percentage of tool calls to record and grade (0 to 100).")
@click.option("--suite", "suite_path", type=click.Path(path_type=Path, dir_okay=False,
                                                       exists=True),
              metavar="PATH", help="The suite file whose reference-free checks grade the "
                                   "sampled calls (needed when K > 0).")
@click.option("--seed", type=int, metavar="S",
              help="Seed of the sampling draws (default: a random one, printed at exit).")
@click.option("--buffer", type=click.IntRange(min=1), default=DEFAULT_BUFFER, show_default=True,
              metavar="N", help="Samples that may wait for the grader; more are dropped "
                                "(and counted), never waited for.")
@DB_OPTION
def proxy(upstream: str, sample: float, suite_path: Path | None, seed: int | None,
          buffer: int, db: str | None) -> None:
    """Proxy an MCP server and grade a sample of its tool calls.

    Start it where the host expects a server command. Results go back
    unchanged; K% of tool calls (drawn from --seed) are recorded and graded,
    off the call's path, with the suite's reference-free checks, and the
    failing ones are queued for review (`assay review --list`, source proxy).
    When the host closes the session the proxy grades what it sampled and
    prints one line to stderr: calls, sampled, graded, failed, queued, dropped.
    """
    try:
        options = _options(upstream, sample, suite_path, seed, buffer, db)
        code = _serve(options)
    except AssayError as error:
        fail(error)
    except KeyboardInterrupt:  # before the proxy took the signal over: nothing was served
        sys.exit(130)
    sys.exit(code)


def _options(upstream: str, sample: float, suite_path: Path | None, seed: int | None,
             buffer: int, db: str | None) -> ProxyOptions:
    from ..mcp_uri import parse_mcp_uri, resolve_command
    from ..sampling.proxy import ProxyOptions

    try:
        address = parse_mcp_uri(upstream)
    except ValueError as exc:
        raise UsageError(f"--upstream {upstream}: {exc}") from None
    if not address.stdio:
        raise UsageError(f"--upstream {upstream}: the proxy starts its upstream server itself; "
                         "give mcp+stdio:COMMAND ARGS… (an HTTP upstream is not supported)")
    if sample > 0 and suite_path is None:
        raise UsageError(f"--sample {sample:g} grades the sampled calls with a suite's "
                         "reference-free checks: give --suite PATH (or --sample 0 to forward "
                         "without sampling)")
    checks = _checks(suite_path) if suite_path is not None else None
    cwd = Path.cwd()
    try:
        command = resolve_command(address.argv, cwd)
    except ValueError as exc:
        raise HarnessFailure(f"--upstream {upstream}: {exc}") from None
    store = None
    if sample > 0:
        from ..store.database import open_store

        store = open_store(db)
    return ProxyOptions(upstream=upstream, command=tuple(command), cwd=cwd, sample=sample,
                        seed=secrets.randbelow(2**32) if seed is None else seed, buffer=buffer,
                        checks=checks, store=store, session=secrets.token_hex(6))


def _checks(path: Path) -> ProxyChecks:
    """The suite's reference-free checks; a suite with none is refused, saying what it has."""
    from ..sampling.proxy_calls import ProxyChecks
    from ..sampling.reference_free import REFERENCE_FREE, left_out, reference_free
    from ..suites import is_suite_file, load_suite_file

    if not is_suite_file(path):
        raise UsageError(f"--suite {path}: a suite file is *.suite.yaml or *_eval.py")
    suite = load_suite_file(path).suite
    assertions = reference_free(suite)
    if not assertions:
        others = left_out(suite)
        has = f"its public cases check only {', '.join(others)}" if others else \
            "its public cases check nothing"
        raise UsageError(f"--suite {path}: suite {suite.id} has no check that can grade a call "
                         f"no case was written for ({has}); add one of "
                         f"{', '.join(sorted(REFERENCE_FREE))}")
    tool = (suite.call or {}).get("tool")
    return ProxyChecks(suite_id=suite.id, assertions=tuple(assertions),
                       tool=tool if isinstance(tool, str) and tool else None)


def _serve(options: ProxyOptions) -> int:
    """Run the proxy until the host leaves; print the summary; the exit code."""
    return asyncio.run(_session(options))


async def _session(options: ProxyOptions) -> int:
    from ..reports.safe import inert
    from ..sampling.proxy import Proxy

    proxy = Proxy(options)
    await proxy.start()
    try:
        summary = await proxy.serve()
        click.echo(inert(summary.line()), err=True)
    finally:
        await proxy.close()
        if options.store is not None:
            options.store.close()
    # A host gives a server about two seconds between closing its input and
    # killing it; tearing down the SDK's objects one by one at exit can take
    # longer than that on a busy machine. Frozen, the collector leaves them be.
    gc.freeze()
    code = EXIT_PASSED if summary.stopped is None or summary.stopped.startswith("signal") \
        else EXIT_HARNESS
    if summary.stuck:
        # The host's input is still open and a thread is blocked reading it: the
        # interpreter would wait for that read at exit. Everything is said; end here.
        sys.stderr.flush()
        os._exit(code)
    return code
