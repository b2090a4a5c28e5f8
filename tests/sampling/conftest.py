"""The online-sampling tests run the real ``assay`` in a folder of their own (tests/cli)."""

from __future__ import annotations

from ..cli.conftest import Done, Project, project

__all__ = ["Done", "Project", "project"]
