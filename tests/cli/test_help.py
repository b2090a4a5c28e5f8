"""Every command and option says what it does, in the user's words (issue 8, item 11)."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest

from assay.cli import main


def _commands(group: click.Group, prefix: str = "assay") -> Iterator[tuple[str, click.Command]]:
    for name, command in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        yield path, command
        if isinstance(command, click.Group):
            yield from _commands(command, path)


main.load_all()  # commands other than `run` are imported when asked for
COMMANDS = list(_commands(main))


def _help(command: click.Command, name: str) -> str:
    return command.get_help(click.Context(command, info_name=name))


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[name for name, _ in COMMANDS])
def test_each_command_and_option_has_help(name: str, command: click.Command) -> None:
    assert command.help and len(command.help.split()) >= 4, f"{name}: no help"
    # The short line `assay --help` lists is a whole sentence, not a cut one.
    assert not command.get_short_help_str(limit=70).endswith("..."), name
    for param in command.params:
        if isinstance(param, click.Option) and param.name != "help":
            assert param.help and len(param.help.split()) >= 3, f"{name} {param.opts}: no help"


def test_run_help_says_it_stores_and_seals_unless_told_not_to() -> None:
    run = main.commands["run"]
    text = " ".join(_help(run, "run").split())
    assert "store and seal each run" in text and "unless --no-store" in text
    assert "Exit 0 only if every run passed" in text
    # --db no longer says that `run` stores only when a store is named (it always does).
    assert "stores only when" not in text
    assert ".assay/assay.db" in text
    assert "one line per run" in text  # what --json writes


def test_every_command_is_listed_and_only_run_is_imported_with_the_cli() -> None:
    """`assay run` pays for no other command's module; `assay --help` lists them all, and
    each is found by name."""
    import subprocess
    import sys

    code = ("import sys, assay.cli; print(sorted(m for m in sys.modules "
            "if m.startswith('assay.commands.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.split() == ["['assay.commands.common',", "'assay.commands.run']"]
    assert len(COMMANDS) > 30  # groups' subcommands too: all of them, not just `run`
    names = main.list_commands(click.Context(main))
    assert {"run", "list", "runs", "show", "serve", "proxy", "worker", "import"} <= set(names)
    for name in names:
        assert main.get_command(click.Context(main), name) is not None, name
    listed = " ".join(main.get_help(click.Context(main, info_name="assay")).split())
    assert all(f" {name} " in listed for name in names)
