"""The command line: parse, call the rooms, pick an exit code (SPEC §7).

Heavy libraries are imported inside the commands so that ``assay --help``
starts fast.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any

import click

from .commands.agent import agent
from .commands.common import EXIT_HARNESS, EXIT_NOT_PASSED, EXIT_PASSED, EXIT_USAGE
from .commands.compare import compare
from .commands.config import config
from .commands.drift import drift
from .commands.erase import erase
from .commands.gate import gate
from .commands.imports import import_
from .commands.init import init
from .commands.judges import judges
from .commands.ledger import ledger
from .commands.listing import list_
from .commands.pairwise import pairwise
from .commands.promote import promote
from .commands.proxy import proxy
from .commands.receipt import receipt
from .commands.rejudge import rejudge
from .commands.replay import replay
from .commands.review import review
from .commands.run import run
from .commands.schedule import schedule
from .commands.serve import serve
from .commands.stored import runs, show
from .commands.synth import synth
from .commands.worker import worker
from .version import __version__

__all__ = ["EXIT_HARNESS", "EXIT_NOT_PASSED", "EXIT_PASSED", "EXIT_USAGE", "main"]


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
        return default_map(load(), group)
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


for _command in (run, list_, runs, show, compare, gate, ledger, receipt, replay, erase,
                 agent):
    main.add_command(_command)
main.add_command(drift)
main.add_command(pairwise)
main.add_command(rejudge)
main.add_command(review)
main.add_command(judges)
main.add_command(promote)
main.add_command(synth)
main.add_command(proxy)
main.add_command(serve)
main.add_command(worker)
main.add_command(schedule)
main.add_command(config)
main.add_command(init)
main.add_command(import_)


if __name__ == "__main__":  # pragma: no cover
    main()
