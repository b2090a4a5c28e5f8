"""The command line: parse, call the rooms, pick an exit code (SPEC §7).

Heavy libraries are imported inside the commands so that ``assay --help``
starts fast.
"""

from __future__ import annotations

import click

from . import __version__
from .commands.common import EXIT_HARNESS, EXIT_NOT_PASSED, EXIT_PASSED, EXIT_USAGE
from .commands.erase import erase
from .commands.ledger import ledger
from .commands.listing import list_
from .commands.receipt import receipt
from .commands.replay import replay
from .commands.run import run
from .commands.stored import runs, show

__all__ = ["EXIT_HARNESS", "EXIT_NOT_PASSED", "EXIT_PASSED", "EXIT_USAGE", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="assay")
def main() -> None:
    """assay: evaluate AI agents honestly.

    Run suites of cases against an agent, several trials per case; grade what
    the agent did; report public and hidden scores side by side; store every
    run and seal it in a tamper-evident ledger (.assay/assay.db by default).
    `assay COMMAND --help` says what each command does.
    """


for _command in (run, list_, runs, show, ledger, receipt, replay, erase):
    main.add_command(_command)


if __name__ == "__main__":  # pragma: no cover
    main()
