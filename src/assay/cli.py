"""The command line: parse, call the rooms, pick an exit code (SPEC §7).

Heavy libraries are imported inside the commands so that ``assay --help``
starts fast.
"""

from __future__ import annotations

import errno
import importlib
import os
import sys
from typing import Any

import click

from .commands.common import EXIT_HARNESS, EXIT_NOT_PASSED, EXIT_PASSED, EXIT_USAGE
from .commands.run import run
from .version import __version__

__all__ = ["EXIT_HARNESS", "EXIT_NOT_PASSED", "EXIT_PASSED", "EXIT_USAGE", "main"]


#: Every command but ``run``, imported when it is the one asked for (or ``--help`` lists
#: them): each command's module imports what it needs, and a run needs none of theirs.
_LAZY: dict[str, tuple[str, str]] = {
    "agent": (".commands.agent", "agent"), "compare": (".commands.compare", "compare"),
    "config": (".commands.config", "config"), "drift": (".commands.drift", "drift"),
    "erase": (".commands.erase", "erase"), "gate": (".commands.gate", "gate"),
    "import": (".commands.imports", "import_"), "init": (".commands.init", "init"),
    "judges": (".commands.judges", "judges"), "ledger": (".commands.ledger", "ledger"),
    "list": (".commands.listing", "list_"), "pairwise": (".commands.pairwise", "pairwise"),
    "promote": (".commands.promote", "promote"), "proxy": (".commands.proxy", "proxy"),
    "receipt": (".commands.receipt", "receipt"), "rejudge": (".commands.rejudge", "rejudge"),
    "replay": (".commands.replay", "replay"), "review": (".commands.review", "review"),
    "runs": (".commands.stored", "runs"), "schedule": (".commands.schedule", "schedule"),
    "serve": (".commands.serve", "serve"), "show": (".commands.stored", "show"),
    "synth": (".commands.synth", "synth"), "worker": (".commands.worker", "worker"),
}

#: What a write to a full disk, a closed pipe or a gone terminal fails with.
_WRITE_FAILURES = frozenset({errno.ENOSPC, errno.EPIPE, errno.EIO, errno.EFBIG, errno.EDQUOT,
                             errno.EBADF})


class _Assay(click.Group):
    """The command group, with one last guard: output that cannot be written.

    A command whose output goes to a full disk, a closed pipe or a broken
    terminal (``assay runs > /dev/full``) would end in a traceback; it ends
    in one line on stderr and the harness's exit code instead, as a report
    file that cannot be written does (exit 3).
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *_LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in _LAZY:
            module, attr = _LAZY[cmd_name]
            self.add_command(getattr(importlib.import_module(module, __package__), attr),
                             cmd_name)
        return super().get_command(ctx, cmd_name)

    def load_all(self) -> None:
        """Every command imported (what walks ``commands`` needs them all: the settings)."""
        for name in _LAZY:
            self.get_command(click.Context(self), name)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        if "default_map" not in kwargs and not _asking_for_help():
            kwargs["default_map"] = _file_settings(self)
        try:
            return super().main(*args, **kwargs)
        except OSError as error:
            why = error.strerror or type(error).__name__
            if error.filename is None and error.errno in _WRITE_FAILURES:
                # The output (no file named): Python flushes stdout once more at
                # exit, which would fail the same way; make that a no-op.
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives until exit
                message = f"cannot write the output: {why}"
            else:  # something else no command expected; still one line, not a traceback
                where = f" ({error.filename})" if error.filename else ""
                message = f"{why}{where}"
            try:
                from .reports.safe import inert  # a file name is not ours to print raw

                click.echo(f"assay: error: {inert(message)}", err=True)
            except OSError:
                pass  # stderr is gone too: the exit code still says it
            sys.exit(EXIT_HARNESS)


def _asking_for_help() -> bool:
    return any(arg in ("-h", "--help", "--version") for arg in sys.argv[1:])


def _file_settings(group: click.Group) -> dict[str, Any]:
    """The settings file's values as the commands' defaults (``settings``); exit 2 if it is bad."""
    from .errors import UsageError
    from .settings import default_map, load

    try:
        settings = load()
        if settings.values and isinstance(group, _Assay):
            group.load_all()  # the file's values go to whichever commands take them
        return default_map(settings, group)
    except UsageError as error:
        from .commands.common import fail

        fail(error)
        raise  # fail() exits


@click.group(cls=_Assay, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="assay")
def main() -> None:
    """assay: evaluate AI agents honestly.

    Run suites of cases against an agent, several trials per case; grade what
    the agent did; report public and hidden scores side by side; store every
    run and seal it in a tamper-evident ledger (.assay/assay.db by default).
    `assay COMMAND --help` says what each command does.
    """


main.add_command(run)


if __name__ == "__main__":  # pragma: no cover
    main()
