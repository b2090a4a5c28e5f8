"""Renderers of one Report: terminal, JSON, JUnit, Markdown (they never re-grade)."""

from typing import TYPE_CHECKING, Any

from .json_report import as_json, write_json
from .markdown import markdown, write_markdown

if TYPE_CHECKING:
    from .junit import write_junit

__all__ = ["as_json", "markdown", "write_json", "write_junit", "write_markdown"]


def __getattr__(name: str) -> Any:
    # JUnit's XML libraries are imported by the runs that ask for a JUnit file only.
    if name == "write_junit":
        from .junit import write_junit

        return write_junit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
