"""The framework tests run ``assay`` in a project folder of their own, as the CLI tests do."""

from __future__ import annotations

from ..cli.conftest import Done, Project, project

__all__ = ["Done", "Project", "project"]
