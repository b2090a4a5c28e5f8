"""``assay config``: the settings a command gets, and where each comes from (SPEC §13)."""

from __future__ import annotations

import json

import click

from ..errors import AssayError
from .common import fail


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the settings as JSON.")
def config(as_json: bool) -> None:
    """Show the effective settings and where each came from.

    Settings live in assay.toml, or in pyproject.toml under [tool.assay], in
    this folder or the closest folder above it that has one: db, judge,
    judge_base_url, user_model, base_url, hidden_dir, concurrency and trials.
    A flag wins over its environment variable ($ASSAY_DB, $ASSAY_JUDGE,
    $ASSAY_JUDGE_BASE_URL, $ASSAY_USER_MODEL, $ASSAY_OPENAI_BASE_URL,
    $ASSAY_HIDDEN_DIR), which wins over the file, which wins over assay's
    default.
    """
    from rich.console import Console
    from rich.table import Table

    from ..reports.safe import print_table, shown
    from ..settings import load

    try:
        settings = load()
    except AssayError as error:
        fail(error)
        return
    found = settings.effective()
    if as_json:
        click.echo(json.dumps({
            "file": None if settings.path is None else str(settings.path),
            "settings": {s.key: {"value": s.value, "source": s.source} for s in found}},
            indent=2))
        return
    out = Console(soft_wrap=True)
    where = "no settings file (assay.toml, or pyproject.toml with [tool.assay])" \
        if settings.path is None else f"settings file: {settings.path}"
    out.print(shown(where))
    table = Table(show_edge=False, pad_edge=False)
    for column in ("setting", "value", "from"):
        table.add_column(column)
    for setting in found:
        value = "(assay's default)" if setting.value is None else str(setting.value)
        table.add_row(setting.key, shown(value, one_line=True), shown(setting.source))
    print_table(out, table)

