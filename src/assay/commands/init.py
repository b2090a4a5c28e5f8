"""``assay init``: write a commented ``evals/`` example that runs green at once (SPEC §13)."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import UsageError
from .common import fail


@click.command()
@click.argument("folder", type=click.Path(path_type=Path, file_okay=False), default=".")
@click.option("--target", "kind", type=click.Choice(["python", "mcp"]), default="python",
              show_default=True,
              help="The kind of agent the example evaluates: a Python function (python) "
                   "or an MCP server over stdio (mcp).")
@click.option("--force", is_flag=True, help="Replace files of the example that exist.")
def init(folder: Path, kind: str, force: bool) -> None:
    """Write a commented example suite and agent into FOLDER/evals/.

    FOLDER is this one unless given.

    The example runs green at once, offline: `assay run evals`. Its comments
    say what each part does; replace the agent with yours and the cases
    with what it must do. Files that exist are left alone (the command
    stops, naming the first) unless --force.
    """
    from rich.console import Console

    from ..reports.safe import shown
    from ..starter import write

    try:
        written = write(kind, folder, force=force)
    except FileExistsError as error:
        fail(UsageError(f"{error}: exists already; nothing was written (--force replaces "
                        "the example's files)"))
        return
    out = Console(soft_wrap=True)
    for path in written:
        out.print(shown(f"wrote {path}"))
    where = "" if folder == Path(".") else f" {folder / 'evals'}"
    run = f"assay run{where or ' evals'}"
    out.print(shown(f"next: {run}   (then edit the agent and the cases: the comments say how)"))
