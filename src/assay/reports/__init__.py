"""Renderers of one Report: terminal, JSON, JUnit, Markdown (they never re-grade)."""

from .json_report import as_json, write_json
from .junit import write_junit
from .markdown import markdown, write_markdown

__all__ = ["as_json", "markdown", "write_json", "write_junit", "write_markdown"]
