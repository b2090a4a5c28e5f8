"""``assay init``: write a commented ``evals/`` example that runs green at once (SPEC §13)."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import UsageError
from ..starter import FRAMEWORKS
from .common import fail


@click.command()
@click.argument("folder", type=click.Path(path_type=Path, file_okay=False), default=".")
@click.option("--target", "kind", type=click.Choice(["python", "mcp"]), default=None,
              help="The kind of agent the example evaluates: a Python function (python, "
                   "the default) or an MCP server over stdio (mcp).")
@click.option("--framework", type=click.Choice(list(FRAMEWORKS)), default=None,
              help="Instead, an agent built with this framework, written as its docs show "
                   "and evaluated as it is: a python: target for the Python ones, exec: "
                   "for node (the openai npm package). It needs the framework installed "
                   "and a model key; the command says how.")
@click.option("--force", is_flag=True, help="Replace files of the example that exist.")
def init(folder: Path, kind: str | None, framework: str | None, force: bool) -> None:
    """Write a commented example suite and agent into FOLDER/evals/.

    FOLDER is this one unless given.

    The plain example runs green at once, offline: `assay run evals`. Its
    comments say what each part does; replace the agent with yours and the
    cases with what it must do. With --framework the agent talks to a real
    model, so it runs once its framework is installed and its key set. Files
    that exist are left alone (the command stops, naming the first) unless
    --force.
    """
    from rich.console import Console

    from ..reports.safe import shown
    from ..starter import write

    if kind is not None and framework is not None:
        fail(UsageError(f"--framework {framework} chooses the target itself (python: or exec:); "
                        "give --target or --framework, not both"))
        return
    try:
        written = write(framework or kind or "python", folder, force=force)
    except FileExistsError as error:
        fail(UsageError(f"{error}: exists already; nothing was written (--force replaces "
                        "the example's files)"))
        return
    out = Console(soft_wrap=True)
    for path in written:
        out.print(shown(f"wrote {path}"))
    where = "" if folder == Path(".") else f" {folder / 'evals'}"
    run = f"assay run{where or ' evals'}"
    edit = "(then edit the agent and the cases: the comments say how)"
    if framework is None:
        out.print(shown(f"next: {run}   {edit}"))
        return
    needs = FRAMEWORKS[framework]
    key = (f"your key in {needs.key}: assay's recording proxy adds it to the program's "
           "model calls; the program holds a stand-in" if needs.proxied else
           f"your key in {needs.key}, where the agent's SDK reads it, as always")
    out.print(shown("next:"))
    out.print(shown(f"  1. {needs.install}   ({needs.where})"))
    out.print(shown(f"  2. {key}"))
    out.print(shown(f"  3. {run}   {edit}"))
