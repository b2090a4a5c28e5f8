"""Where ``assay promote`` and ``assay synth`` write a draft: a new file, or stdout."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from ..errors import UsageError
from .common import STDOUT


def write_draft(path: Path, text: str, *, force: bool) -> None:
    """Write ``text`` to ``path``, never over an existing file unless ``force``.

    Without ``force`` the file is created exclusively (``x`` mode): two
    commands racing for one name leave one draft, and the other is told.
    ``UsageError`` (exit 2) for a file that is there or cannot be created; a
    write that fails part-way removes the file and goes up (the command group
    says it in one line, exit 3).
    """
    if path == STDOUT:
        click.echo(text, nl=False)
        return
    if force:
        from ..reports.common import write_file

        write_file(path, text)
        return
    try:
        out = path.open("x", encoding="utf-8", errors="surrogatepass")
    except FileExistsError:
        raise UsageError(f"{path} exists already: give --force to replace it, or --out "
                         "another file") from None
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or type(error).__name__}"
                         ) from None
    try:
        with out:
            out.write(text)
    except BaseException:
        with contextlib.suppress(OSError):
            path.unlink()
        raise
