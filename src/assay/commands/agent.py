"""`assay agent publish|start|stop|list`: the registry, where a version is a digest (SPEC §8)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ..errors import AssayError
from .common import DB_OPTION, EXIT_NOT_PASSED, fail

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")


@click.group()
def agent() -> None:
    """The registry of agent versions: publish, start, stop, list.

    A version is the digest of what the agent is (its URI and the files it
    runs). A version starts only on the evidence of a sealed battery of that
    exact digest that passed its pass mark with no structural breach. Every
    publish, start and stop is a ledger entry.
    """


def _now() -> str:
    from ..engine.clock import SystemClock, stamp

    return stamp(SystemClock().now())


def _echo_json(value: Any) -> None:
    from ..reports.safe import json_text

    click.echo(json_text(value))


@agent.command()
@click.argument("uri")
@DB_OPTION
@JSON_OPTION
@click.option("--dir", "base_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where relative names in URI resolve, as a battery resolves them beside "
                   "its suite file: give the suite's folder to publish the version its "
                   "batteries record (default: this folder).")
@click.option("--base-url", metavar="URL",
              help="The OpenAI-compatible server of an openai:MODEL target.")
@click.option("--name", metavar="NAME",
              help="File the version under this agent name: a later version of the same "
                   "name is its successor (assay compare --agent NAME previous current).")
def publish(uri: str, db: str | None, as_json: bool, base_dir: Path | None,
            base_url: str | None, name: str | None) -> None:
    """Start the agent URI names, record its version and print it.

    The version is the digest of its identity, taken after it started, as a
    battery takes it. Publishing a version again records nothing new, unless
    --name files it under a name it did not have. An agent that cannot start
    is exit 3, and nothing is recorded.
    """
    from ..analysis import agents
    from ..analysis.registry import check_name
    from ..engine.version import take_version
    from ..reports.safe import inert
    from ..store.database import open_store
    from ..store.ledger.keys import signing_key

    try:
        if name is not None:
            check_name(name)
        taken = take_version(uri, (base_dir or Path.cwd()).resolve(), base_url)
        key = signing_key(db)
        store = open_store(db)
        try:
            entry = agents.publish(store, taken.uri, taken.identity, taken.digest, _now(), key,
                                   name)
        finally:
            store.close()
    except AssayError as error:
        fail(error)
        return
    if as_json:
        _echo_json({"version": taken.digest, "uri": taken.uri, "identity": taken.identity,
                    "name": name, "recorded": entry is not None,
                    "entry": None if entry is None else entry.index})
        return
    click.echo(taken.digest)
    under = f" as agent {name}" if name is not None else ""
    if entry is None:
        click.echo(inert(f"assay: {taken.uri} is published already as this version{under}: "
                         "nothing new recorded", one_line=True), err=True)
    else:
        click.echo(inert(f"assay: published {taken.uri}{under} (ledger entry {entry.index})",
                         one_line=True), err=True)


@agent.command()
@click.argument("version", metavar="VERSION")
@DB_OPTION
@JSON_OPTION
def start(version: str, db: str | None, as_json: bool) -> None:
    """Start a published version; exit 1, with every reason, when it may not.

    It may start only when the newest sealed battery that ran against exactly
    this version passed its pass mark, was not interrupted and has no
    structural breach. The start is recorded with the run it rests on.
    """
    from ..analysis import agents
    from ..analysis.registry import check_version
    from ..reports.safe import inert
    from ..store.database import open_store
    from ..store.ledger.keys import signing_key

    try:
        check_version(version)
        key = signing_key(db)
        store = open_store(db)
        try:
            entry, decision = agents.start(store, version, _now(), key)
        finally:
            store.close()
    except AssayError as error:
        fail(error)
        return
    run = decision.run
    if as_json:
        _echo_json({"version": version, "decision": "started" if entry else "refused",
                    "reasons": list(decision.reasons),
                    "run_id": None if run is None else run.run_id,
                    "entry": None if entry is None else entry.index})
    elif entry is not None and run is not None:
        click.echo(inert(f"started {version} on run {run.run_id} (suite {run.suite_id}): "
                         f"ledger entry {entry.index}", one_line=True))
    else:
        click.echo(f"refused: {version} may not start")
        for reason in decision.reasons:
            click.echo(inert(f"  - {reason}", one_line=True))
    if entry is None:
        sys.exit(EXIT_NOT_PASSED)


@agent.command()
@click.argument("version", metavar="VERSION")
@DB_OPTION
@JSON_OPTION
def stop(version: str, db: str | None, as_json: bool) -> None:
    """Stop a version: never refused, recorded even if it never started."""
    from ..analysis import agents
    from ..analysis.registry import check_version
    from ..store.database import open_store
    from ..store.ledger.keys import signing_key

    try:
        check_version(version)
        key = signing_key(db)
        store = open_store(db)
        try:
            entry = agents.stop(store, version, _now(), key)
        finally:
            store.close()
    except AssayError as error:
        fail(error)
        return
    if as_json:
        _echo_json({"version": version, "state": "stopped", "entry": entry.index})
    else:
        click.echo(f"stopped {version}: ledger entry {entry.index}")


@agent.command(name="list")
@DB_OPTION
@JSON_OPTION
def list_(db: str | None, as_json: bool) -> None:
    """List the versions the ledger names, with their URI and state.

    State is published, started (with the run the start rests on) or
    stopped. A start entry that does not hold against the batteries sealed
    before it is named after the list.
    """
    from ..analysis.registry import audit, fold
    from ..reports.safe import inert
    from ..store import registry
    from ..store.database import open_store

    try:
        store = open_store(db)
        try:
            entries, runs = registry.load(store)
        finally:
            store.close()
    except AssayError as error:
        fail(error)
        return
    states = fold(entries).values()
    findings = audit(entries, runs)
    if as_json:
        _echo_json({"versions": [s.to_json() for s in states],
                    "findings": [{"entry": f.entry, "version": f.version, "reason": f.reason}
                                 for f in findings]})
        return
    if not states:
        click.echo("no agent versions (assay agent publish URI)")
    for s in states:
        line = f"{s.version}  {s.state}  {s.uri if s.uri is not None else '(not published)'}"
        if s.published_at:
            line += f"  published {s.published_at}"
        if s.state == "started" and s.run_id:
            line += f"  on run {s.run_id}"
        if s.names:
            line += f"  as {', '.join(s.names)}"
        click.echo(inert(line, one_line=True))
    for finding in findings:
        click.echo(inert(f"does not hold: {finding.line}", one_line=True))
