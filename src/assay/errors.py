"""The three ways assay stops early, each with its own exit code (SPEC §7)."""

from __future__ import annotations


class AssayError(Exception):
    """Base of the errors assay reports to a user without a traceback."""

    exit_code = 2


class UsageError(AssayError):
    """Bad command-line usage (exit 2)."""

    exit_code = 2


class SuiteError(AssayError):
    """A bad suite file: names the file, the line and what is wrong (exit 2)."""

    exit_code = 2

    def __init__(self, file: str | None, line: int | None, message: str) -> None:
        self.file = file
        self.line = line
        self.message = message
        where = file or "<suite>"
        if line is not None:
            where = f"{where}:{line}"
        super().__init__(f"{where}: {message}")


class HarnessFailure(AssayError):
    """The harness itself could not run: a target that cannot start (exit 3)."""

    exit_code = 3
