"""Tool fixtures: YAML files of tools and answers, checked when the suite loads."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from ..documents import read_document
from ..importing import resolve_function
from ..model.fixture import ToolFixture
from .build import Problem
from .marks import load_marked

#: A ``state:`` that ends so names a file of the document, relative to the fixture.
STATE_FILES = (".json", ".yaml", ".yml")


def is_tool_fixture(path: Path) -> bool:
    """A fixture file in YAML is a tool fixture; a folder or other file is given as is."""
    return path.is_file() and path.suffix in (".yaml", ".yml")


def load_tool_fixture(path: Path, *, secret: bool = False) -> ToolFixture:
    """Parse and validate a tool fixture; handlers must import."""
    marked = load_marked(path, secret=secret)
    problem = Problem(str(path), marked.line, secret=secret, key_line_of=marked.key_line)
    if not isinstance(marked.data, dict):
        raise problem([], "a tool fixture is a mapping with tools: and answers:")
    try:
        fixture = ToolFixture.model_validate(marked.data)
    except ValidationError as exc:
        raise problem.from_validation(exc) from None
    if fixture.has_state and isinstance(fixture.state, str) and \
            fixture.state.endswith(STATE_FILES):
        where = path.parent / fixture.state
        try:
            document = read_document(where)
        except ValueError as exc:
            raise problem(["state"], f"state: {exc}", "state file cannot be read") from None
        fixture = fixture.model_copy(update={"state": document})
    for i, tool in enumerate(fixture.tools):
        if tool.handler is not None:
            try:
                resolve_function(tool.handler, path.parent)
            except ValueError as exc:
                raise problem(["tools", i, "handler"], f"handler {exc}",
                              "handler cannot be imported") from None
    return fixture

